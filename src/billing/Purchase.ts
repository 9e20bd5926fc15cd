/** Purchases and their per-component balance counters: rows, API shapes and requests. */
import { Schema } from "effect"
import { CustomerId, PurchaseId } from "../ids.ts"
import { ZERO } from "../money.ts"
import { ExternalId, Money, namesCustomer, strict, Timestamp } from "../schema.ts"
import { BillingMode, ComponentType, PlanSnapshot } from "../pricing/PlanSnapshot.ts"

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
  updatedAt: Timestamp
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
  updatedAt: Timestamp
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
  updatedAt: row.updatedAt
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

