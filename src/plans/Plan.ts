/**
 * A plan: components (entitlements) billed in advance or in arrears, sold by
 * purchases. `cost` is computed on read from the current catalogue prices.
 */
import { Schema } from "effect"
import { Description, Money, MoneyInput, Name, strict, Timestamp } from "../schema.ts"

export const ComponentType = Schema.Literal("WALLET", "CREDIT", "OUTCOME", "UNIT", "PRICING_METRIC").annotations({
  message: () => "must be WALLET, CREDIT, OUTCOME, UNIT or PRICING_METRIC",
  description: "What the component sells: USD in the wallet, a credit, an outcome, a unit, or a composite (PRICING_METRIC)."
})
export type ComponentType = typeof ComponentType.Type

export const BillingMode = Schema.Literal("ADVANCE", "ARREAR").annotations({
  message: () => "must be ADVANCE or ARREAR",
  description: "ADVANCE: prepaid, granted and charged at the start of each cycle; ARREAR: billed on usage."
})
export type BillingMode = typeof BillingMode.Type

export const BillingCycle = Schema.Literal("MONTHLY").annotations({
  message: () => "must be MONTHLY",
  description: "How often the plan renews: MONTHLY, the only cycle."
})

/** Components beyond this many are refused; no real plan needs more. */
export const MAX_COMPONENTS = 100

/** The id field that names a component's target; a WALLET component has none. */
export const targetField = {
  WALLET: undefined,
  CREDIT: "creditId",
  OUTCOME: "outcomeId",
  UNIT: "unitId",
  PRICING_METRIC: "compositeId"
} as const satisfies Record<ComponentType, string | undefined>

export const idFields = ["creditId", "outcomeId", "unitId", "compositeId"] as const
export type IdField = typeof idFields[number]

export class PlanComponent extends Schema.Class<PlanComponent>("PlanComponent")({
  id: Schema.String,
  type: ComponentType,
  billingMode: BillingMode,
  /** The id matching `type` is set; the others are "" (the spec's "empty"). */
  creditId: Schema.String,
  outcomeId: Schema.String,
  unitId: Schema.String,
  compositeId: Schema.String,
  targetName: Schema.String,
  /** ADVANCE credit, outcome, unit and composite components; 0 where it does not apply (a number, as the spec types it). */
  quantity: Money,
  /** The ADVANCE wallet's grant per cycle; 0 where it does not apply. */
  amount: Money,
  rollover: Schema.Boolean
}) {}

export class Plan extends Schema.Class<Plan>("Plan")({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  billingCycle: BillingCycle,
  cost: Money,
  priceAdjustment: Money,
  walletFundedArrear: Schema.Boolean,
  currencyCode: Schema.String,
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  entitlements: Schema.Array(PlanComponent)
}) {}

/** A target id as sent: "" and null mean "not sent", so a component read back can be sent again. */
const TargetId = (kind: string) =>
  Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: `The ${kind} sold, on a component of that type; left out, null or "" otherwise.`
  })

const readBack = (field: string) =>
  Schema.optional(Schema.String).annotations({
    description: `Ignored: \`${field}\` is accepted only so that a component read back from the API can be sent again as it is.`
  })

export const PlanComponentInput = Schema.Struct({
  id: readBack("id"),
  targetName: readBack("targetName"),
  type: ComponentType,
  billingMode: BillingMode,
  creditId: TargetId("credit"),
  outcomeId: TargetId("outcome"),
  unitId: TargetId("unit"),
  compositeId: TargetId("composite"),
  quantity: Schema.optional(Schema.NullOr(MoneyInput)).annotations({
    description: "How many of the target a cycle grants (credit, outcome, unit and composite components)."
  }),
  amount: Schema.optional(Schema.NullOr(MoneyInput)).annotations({
    description: "USD a cycle puts in the wallet (WALLET components), 0 or more."
  }),
  rollover: Schema.optional(Schema.Boolean).annotations({
    description: "Whether what is left at the end of a cycle carries over to the next."
  })
})
export type PlanComponentInput = typeof PlanComponentInput.Type

const Components = Schema.Array(PlanComponentInput).pipe(
  Schema.minItems(1, { message: () => "must hold at least one component" }),
  Schema.maxItems(MAX_COMPONENTS, { message: () => `must hold at most ${MAX_COMPONENTS} components` })
).annotations({ description: `The plan's components, 1 to ${MAX_COMPONENTS}; at most one WALLET, each target once.` })

export const PlanCreate = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.NullOr(Description)),
  billingCycle: Schema.optionalWith(BillingCycle, { default: () => "MONTHLY" as const }),
  priceAdjustment: Schema.optional(MoneyInput).annotations({
    description: "USD added to (or, negative, taken off) the plan's computed cost."
  }),
  walletFundedArrear: Schema.optional(Schema.Boolean.annotations({
    description: "Whether ARREAR usage is paid from the customer's wallet as it happens instead of invoiced."
  })),
  entitlements: Components
}).annotations(strict)
export type PlanCreate = typeof PlanCreate.Type

/** A PATCH: only the sent fields change; sending `entitlements` replaces every component. */
export const PlanUpdate = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.NullOr(Description)),
  billingCycle: Schema.optional(BillingCycle),
  priceAdjustment: Schema.optional(MoneyInput).annotations({
    description: "USD added to (or, negative, taken off) the plan's computed cost."
  }),
  walletFundedArrear: Schema.optional(Schema.Boolean.annotations({
    description: "Whether ARREAR usage is paid from the customer's wallet as it happens instead of invoiced."
  })),
  entitlements: Schema.optional(Components)
}).annotations(strict)
export type PlanUpdate = typeof PlanUpdate.Type
