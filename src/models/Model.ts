/**
 * A model of the organisation's catalogue and the model bundle that credits and
 * outcome steps are priced from (docs/catalogue-credits-outcomes.md). Rates are USD per million tokens.
 */
import { BigDecimal, Schema } from "effect"
import { Money, MoneyInput, strict, Timestamp } from "../schema.ts"

/**
 * A model of the workspace. Its four rate fields make it a `ModelRates` of
 * src/pricing/Pricing.ts, so a Model can be handed to the pricing functions as is.
 */
export class Model extends Schema.Class<Model>("Model")({
  id: Schema.String,
  name: Schema.String,
  input: Money,
  output: Money,
  cacheRead: Schema.NullOr(Money),
  cacheWrite: Schema.NullOr(Money),
  enabled: Schema.Boolean,
  builtIn: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

/** Provider model ids such as `gpt-4o`, `claude-3-5-haiku` or `openrouter/llama-3:70b`. */
export const ModelId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,79}$/, {
    message: () => "must be 1 to 80 characters from letters, digits and . _ : / -, starting with a letter or digit"
  })
)

const Rate = MoneyInput.pipe(
  Schema.filter((rate) => BigDecimal.isNegative(rate) ? "must be 0 or more" : undefined)
)

/**
 * `billing model set`: a new model needs a name and its input and output rates;
 * for an existing one only the fields given change. A cache rate of null
 * removes it (the model then has no such price).
 */
export const ModelSet = Schema.Struct({
  id: ModelId,
  name: Schema.optional(
    Schema.String.pipe(
      Schema.filter((s) => s.trim().length > 0 || "must not be empty"),
      Schema.maxLength(120, { message: () => "must be at most 120 characters" })
    )
  ),
  input: Schema.optional(Rate),
  output: Schema.optional(Rate),
  cacheRead: Schema.optional(Schema.NullOr(Rate)),
  cacheWrite: Schema.optional(Schema.NullOr(Rate))
}).annotations(strict)
export type ModelSet = typeof ModelSet.Type

// ---------------------------------------------------------------------------
// Model bundles and margins

/** marginPercent of credits and outcomes: at least -100, so a price never goes below zero. */
export const MarginPercent = MoneyInput.pipe(
  Schema.filter((margin) => BigDecimal.lessThan(margin, BigDecimal.fromBigInt(-100n)) ? "must be at least -100" : undefined, {
    jsonSchema: {
      type: "number",
      minimum: -100,
      description: "Percent added to the base price (negative gives a discount); at least -100, so a price never goes below zero."
    }
  })
)

// Checked when the bundle is priced (src/pricing/Pricing.ts); the document states the same rule.
const Weight = MoneyInput.annotations({
  jsonSchema: {
    type: "integer",
    minimum: 0,
    maximum: 100,
    description: "Whole percentage of the call's tokens in this class, 0 to 100."
  }
})

/** A bundle item as a client sends it; `modelName` is never accepted. */
export const BundleItemInput = Schema.Struct({
  modelId: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "A model enabled in the workspace, such as `gpt-4o`."
  }),
  averageTokensPerLLMCall: MoneyInput.annotations({
    jsonSchema: { type: "number", exclusiveMinimum: 0, description: "Tokens of one model call, on average; above 0." }
  }),
  input: Weight,
  output: Weight,
  cache: Schema.optionalWith(Weight, { default: () => BigDecimal.fromBigInt(0n) }),
  cacheWrite: Schema.optionalWith(Weight, { default: () => BigDecimal.fromBigInt(0n) })
}).annotations(strict)
export type BundleItemInput = typeof BundleItemInput.Type

const MAX_BUNDLE_ITEMS = 50

/** A model bundle on create: 1 to 50 items. */
export const ModelBundleInput = Schema.Array(BundleItemInput).pipe(
  Schema.minItems(1, { message: () => "must hold at least 1 item" }),
  Schema.maxItems(MAX_BUNDLE_ITEMS, { message: () => `must hold at most ${MAX_BUNDLE_ITEMS} items` })
).annotations({
  description: `The models a call uses and how its tokens split between their classes: 1 to ${MAX_BUNDLE_ITEMS} ` +
    "items; the price is computed from them."
})

/**
 * A priced bundle item, as stored (jsonb, decimals as strings) and returned
 * (JSON numbers). `modelName` is the model's name when the bundle was priced.
 */
export const BundleItem = Schema.Struct({
  modelId: Schema.String,
  modelName: Schema.String,
  averageTokensPerLLMCall: Money,
  input: Money,
  output: Money,
  cache: Money,
  cacheWrite: Money
})
export type BundleItem = typeof BundleItem.Type

/** The jsonb form of a bundle: every decimal as its exact string. */
export const BundleJson = Schema.Array(
  Schema.Struct({
    ...BundleItem.fields,
    averageTokensPerLLMCall: Schema.BigDecimal,
    input: Schema.BigDecimal,
    output: Schema.BigDecimal,
    cache: Schema.BigDecimal,
    cacheWrite: Schema.BigDecimal
  })
)
