/**
 * A plan: components (entitlements) billed in advance or in arrears, sold by
 * purchases. `cost` is computed on read from the current catalogue prices.
 */
import { Schema } from "effect"
import { Description, Money, MoneyInput, Name, Timestamp } from "../schema.ts"

export const ComponentType = Schema.Literal("WALLET", "CREDIT", "OUTCOME", "UNIT", "PRICING_METRIC").annotations({
  message: () => "must be WALLET, CREDIT, OUTCOME, UNIT or PRICING_METRIC"
})
export type ComponentType = typeof ComponentType.Type

export const BillingMode = Schema.Literal("ADVANCE", "ARREAR").annotations({
  message: () => "must be ADVANCE or ARREAR"
})
export type BillingMode = typeof BillingMode.Type

export const BillingCycle = Schema.Literal("MONTHLY").annotations({ message: () => "must be MONTHLY" })

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
const TargetId = Schema.optional(Schema.NullOr(Schema.String))

export const PlanComponentInput = Schema.Struct({
  type: ComponentType,
  billingMode: BillingMode,
  creditId: TargetId,
  outcomeId: TargetId,
  unitId: TargetId,
  compositeId: TargetId,
  quantity: Schema.optional(Schema.NullOr(MoneyInput)),
  amount: Schema.optional(Schema.NullOr(MoneyInput)),
  rollover: Schema.optional(Schema.Boolean)
})
export type PlanComponentInput = typeof PlanComponentInput.Type

const Components = Schema.Array(PlanComponentInput).pipe(
  Schema.minItems(1, { message: () => "must hold at least one component" }),
  Schema.maxItems(MAX_COMPONENTS, { message: () => `must hold at most ${MAX_COMPONENTS} components` })
)

export const PlanCreate = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.NullOr(Description)),
  billingCycle: Schema.optionalWith(BillingCycle, { default: () => "MONTHLY" as const }),
  priceAdjustment: Schema.optional(MoneyInput),
  walletFundedArrear: Schema.optional(Schema.Boolean),
  entitlements: Components
})
export type PlanCreate = typeof PlanCreate.Type

/** A PATCH: only the sent fields change; sending `entitlements` replaces every component. */
export const PlanUpdate = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.NullOr(Description)),
  billingCycle: Schema.optional(BillingCycle),
  priceAdjustment: Schema.optional(MoneyInput),
  walletFundedArrear: Schema.optional(Schema.Boolean),
  entitlements: Schema.optional(Components)
})
export type PlanUpdate = typeof PlanUpdate.Type
