/** Purchases and their per-component balance counters: rows, API shapes and requests. */
import { Schema } from "effect"
import { CustomerId, PurchaseId } from "../ids.ts"
import { ZERO } from "../money.ts"
import { ExternalId, IdempotencyKey, Money, namesCustomer, strict, Timestamp } from "../schema.ts"
import { BillingMode, ComponentType, PlanSnapshot } from "../pricing/PlanSnapshot.ts"
import { cycleStart } from "./Cycle.ts"

export const PurchaseStatus = Schema.Literal("SCHEDULED", "ACTIVE", "CANCELLED")
export type PurchaseStatus = typeof PurchaseStatus.Type

/** The snapshot column: jsonb arrives parsed; decimals inside it are strings. */
const SnapshotColumn = Schema.Union(PlanSnapshot, Schema.parseJson(PlanSnapshot))

export class PurchaseRow extends Schema.Class<PurchaseRow>("PurchaseRow")({
  id: PurchaseId,
  customerId: CustomerId,
  planId: Schema.String,
  status: PurchaseStatus,
  billingDate: Timestamp,
  cycleIndex: Schema.Number,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  autoPayment: Schema.Boolean,
  spentThisCycle: Money,
  snapshot: SnapshotColumn,
  cancelledAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  /** The plan a change at the cycle end puts the purchase on at its next renewal (its snapshot is kept apart). */
  scheduledPlanId: Schema.NullOr(Schema.String)
}) {}

export class BalanceRow extends Schema.Class<BalanceRow>("BalanceRow")({
  purchaseId: Schema.String,
  componentId: Schema.String,
  customerId: Schema.String,
  type: ComponentType,
  billingMode: BillingMode,
  targetId: Schema.NullOr(Schema.String),
  granted: Money,
  used: Money,
  remaining: Money,
  originalGranted: Schema.NullOr(Money),
  cycleQuantity: Money,
  arrearAmount: Money
}) {}

/** A change at the cycle end: the plan, and the renewal instant it takes effect at. */
export const ScheduledChange = Schema.Struct({
  planId: Schema.String,
  at: Timestamp.annotations({ description: "The end of the current cycle (ISO 8601), when the cycle job applies it." })
})

/** The instant a scheduled change takes effect: the current cycle's end (the first one's for a SCHEDULED purchase). */
export const scheduledChangeAt = (row: Pick<PurchaseRow, "periodEnd" | "billingDate">): Date =>
  row.periodEnd ?? cycleStart(row.billingDate, 1)

/** A purchase on the wire: the frozen plan with its prices, the current cycle and the settings. */
export const PurchaseComponentJson = Schema.Struct({
  id: Schema.String,
  type: ComponentType,
  billingMode: BillingMode,
  targetId: Schema.NullOr(Schema.String),
  targetName: Schema.String,
  /** 0 where it does not apply, as on plan components. */
  quantity: Money,
  amount: Money,
  rollover: Schema.Boolean,
  unitPrice: Schema.NullOr(Money),
  charge: Money
})

export const PurchaseJson = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  planId: Schema.String,
  planName: Schema.String,
  status: PurchaseStatus,
  billingCycle: Schema.String,
  billingDate: Timestamp,
  currentPeriodStart: Schema.NullOr(Timestamp),
  currentPeriodEnd: Schema.NullOr(Timestamp),
  cost: Money,
  priceAdjustment: Money,
  walletFundedArrear: Schema.Boolean,
  currencyCode: Schema.String,
  autoPayment: Schema.Boolean,
  components: Schema.Array(PurchaseComponentJson),
  cancelledAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  scheduledChange: Schema.NullOr(ScheduledChange).annotations({
    description: "A plan change waiting for the cycle end (`POST /purchases/{id}/change` with `when: CYCLE_END`), " +
      "or null."
  })
})
export type PurchaseJson = typeof PurchaseJson.Type

export const toPurchaseJson = (row: PurchaseRow): PurchaseJson => ({
  id: row.id,
  customerId: row.customerId,
  planId: row.planId,
  planName: row.snapshot.name,
  status: row.status,
  billingCycle: row.snapshot.billingCycle,
  billingDate: row.billingDate,
  currentPeriodStart: row.periodStart,
  currentPeriodEnd: row.periodEnd,
  cost: row.snapshot.cost,
  priceAdjustment: row.snapshot.priceAdjustment,
  walletFundedArrear: row.snapshot.walletFundedArrear,
  currencyCode: row.snapshot.currencyCode,
  autoPayment: row.autoPayment,
  components: row.snapshot.components.map((c) => ({
    id: c.id,
    type: c.type,
    billingMode: c.billingMode,
    targetId: c.targetId,
    targetName: c.targetName,
    quantity: c.quantity ?? ZERO,
    amount: c.amount ?? ZERO,
    rollover: c.rollover,
    unitPrice: c.unitPrice,
    charge: c.charge
  })),
  cancelledAt: row.cancelledAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
  scheduledChange: row.scheduledPlanId === null || row.status === "CANCELLED"
    ? null
    : { planId: row.scheduledPlanId, at: scheduledChangeAt(row) }
})

export const PurchaseCreate = Schema.Struct({
  customerId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "The service's customer id. Required unless `externalId` is sent; wins when both are."
  }),
  externalId: Schema.optional(ExternalId).annotations({
    description: "Your own id of an active customer, used when `customerId` is not sent."
  }),
  planId: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "An active plan of the workspace."
  }),
  billingDate: Schema.optional(Timestamp).annotations({
    description: "When the first cycle starts: today or later (ISO 8601); now when left out. A future date schedules the purchase."
  })
}).annotations({ ...strict, ...namesCustomer })
export type PurchaseCreate = typeof PurchaseCreate.Type

export const PurchaseUpdate = Schema.Struct({
  autoPayment: Schema.Boolean.annotations({ description: "Whether the purchase's invoices are paid automatically." })
}).annotations(strict)
export type PurchaseUpdate = typeof PurchaseUpdate.Type


export const ChangeTiming = Schema.Literal("NOW", "CYCLE_END")
export type ChangeTiming = typeof ChangeTiming.Type

export const PurchaseChange = Schema.Struct({
  planId: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "An active plan of the workspace to move the purchase to."
  }),
  when: ChangeTiming.annotations({
    description: "`NOW`: at once, prorated to the second on a PRORATION invoice (an upgrade, usually). " +
      "`CYCLE_END`: scheduled for the current cycle's end, applied by the renewal without proration (a downgrade, usually)."
  }),
  idempotencyKey: Schema.optional(IdempotencyKey).annotations({
    description: "1 to 255 characters. The same key with the same request changes nothing again and answers the " +
      "first change (`replayed: true`); with another request it is 422."
  })
}).annotations(strict)
export type PurchaseChange = typeof PurchaseChange.Type
