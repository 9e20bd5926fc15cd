/** A unit: a counted event priced FLAT, SLAB or VOLUME (docs/catalogue-units-composites-plans.md "Units"), with no model and no tokens. */
import { Schema } from "effect"
import { AgentKey, Description, Money, MoneyInput, Name, strict, Timestamp } from "../schema.ts"

export const PricingType = Schema.Literal("FLAT", "SLAB", "VOLUME").annotations({
  message: () => "must be FLAT, SLAB or VOLUME",
  description: "FLAT: `flatPrice` per unit; SLAB: each tier prices the units within it; VOLUME: the tier the " +
    "total reaches prices every unit."
})
export type PricingType = typeof PricingType.Type

/** Tiers beyond this many are refused; no real price list needs more. */
export const MAX_TIERS = 100

export class UnitTier extends Schema.Class<UnitTier>("UnitTier")({
  id: Schema.String,
  /** Inclusive upper bound; null on the last, unbounded tier. */
  upTo: Schema.NullOr(Money),
  price: Money,
  order: Schema.Int
}) {}

export class Unit extends Schema.Class<Unit>("Unit")({
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String,
  description: Schema.NullOr(Schema.String),
  pricingType: PricingType,
  /** The price per unit of a FLAT unit; 0 on SLAB and VOLUME units, which are priced by their tiers. */
  flatPrice: Money,
  /** Ascending; empty on FLAT units. */
  tiers: Schema.Array(UnitTier),
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  createdByName: Schema.String
}) {}

export const TierInput = Schema.Struct({
  upTo: Schema.optionalWith(Schema.NullOr(MoneyInput), { default: () => null }).annotations({
    description: "The tier's last unit count; ascending; null (or left out) on the last tier."
  }),
  price: MoneyInput.annotations({
    jsonSchema: { type: "number", minimum: 0, description: "USD per unit in this tier, 0 or more." }
  })
})
export type TierInput = typeof TierInput.Type

const Tiers = Schema.Array(TierInput).pipe(
  Schema.maxItems(MAX_TIERS, { message: () => `must hold at most ${MAX_TIERS} tiers` })
).annotations({ description: `SLAB and VOLUME prices, at most ${MAX_TIERS} tiers in ascending \`upTo\`.` })

export const UnitCreate = Schema.Struct({
  name: Name,
  agentKey: AgentKey,
  description: Schema.optional(Schema.NullOr(Description)),
  pricingType: PricingType,
  flatPrice: Schema.optional(Schema.NullOr(MoneyInput)).annotations({
    description: "USD per unit of a FLAT unit, 0 or more."
  }),
  tiers: Schema.optional(Tiers)
}).annotations(strict)
export type UnitCreate = typeof UnitCreate.Type

/** A PATCH: only the sent fields change; the result is validated as a whole. */
export const UnitUpdate = Schema.Struct({
  ...UnitCreate.fields,
  name: Schema.optional(Name),
  agentKey: Schema.optional(AgentKey),
  pricingType: Schema.optional(PricingType)
}).annotations(strict)
export type UnitUpdate = typeof UnitUpdate.Type
