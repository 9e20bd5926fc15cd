/**
 * Usage-log rows in their two formats: `UsageLogEntry` for a customer's log
 * (`GET /signal/usage-log`) and the flatter `UsageLogLookupEntry` of the
 * organisation-wide lookup, which also names the customer's externalId.
 */
import { Schema } from "effect"
import { AnyJson, Money, Timestamp } from "../schema.ts"

export const Meter = Schema.Literal("CREDIT", "OUTCOME_STEP", "OUTCOME", "UNIT", "WALLET", "COMPOSITE")
export type Meter = typeof Meter.Type

/** A usage_log row as stored (with its customer's current externalId). */
export class UsageRecord extends Schema.Class<UsageRecord>("UsageRecord")({
  id: Schema.String,
  customerId: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  meter: Meter,
  entitlementId: Schema.NullOr(Schema.String),
  entitlementName: Schema.NullOr(Schema.String),
  agentKey: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  inputTokens: Schema.NullOr(Schema.NumberFromString),
  outputTokens: Schema.NullOr(Schema.NumberFromString),
  cacheTokens: Schema.NullOr(Schema.NumberFromString),
  cacheWriteTokens: Schema.NullOr(Schema.NumberFromString),
  quantity: Money,
  providerCost: Money,
  customerCost: Money,
  billingMode: Schema.NullOr(Schema.String),
  balanceRemaining: Schema.NullOr(Money),
  purchaseId: Schema.NullOr(Schema.String),
  signalId: Schema.String,
  messageId: Schema.String,
  runId: Schema.NullOr(Schema.String),
  compositeId: Schema.NullOr(Schema.String),
  compositeRef: Schema.NullOr(Schema.String),
  compositeValue: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String),
  /**
   * The row's `custom` as stored, read from its JSON text (`custom_json`): read as JSON, the SQL client
   * camelCases its keys as it does column names, and `order_id` came back `orderId`.
   */
  custom: Schema.propertySignature(Schema.NullOr(Schema.parseJson())).pipe(Schema.fromKey("customJson")),
  /** When the usage happened: `occurred_at`, or `created_at` for rows written before it existed. */
  moment: Timestamp,
  /** On a reversing row, the id of the row it takes back. */
  reverses: Schema.NullOr(Schema.String),
  createdAt: Timestamp
}) {}

const TimestampField = Schema.propertySignature(Timestamp).annotations({
  description: "When the usage happened: the signal's `timestamp`, or its moment of intake when it had none. " +
    "`from` and `to` filter on it."
})
const CreatedAtField = Schema.propertySignature(Timestamp).annotations({
  description: "When the row was written (the signal was priced)."
})
const ReversesField = Schema.NullOr(Schema.String).annotations({
  description: "On a reversing row (negative quantity and costs), the id of the row it takes back; null otherwise."
})

const Tokens = Schema.Struct({
  input: Schema.Number,
  output: Schema.Number,
  cache: Schema.Number,
  cacheWrite: Schema.Number,
  total: Schema.Number
})

export const UsageLogEntry = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  meter: Meter,
  agentKey: Schema.NullOr(Schema.String),
  entitlement: Schema.NullOr(Schema.Struct({ id: Schema.NullOr(Schema.String), name: Schema.String })),
  model: Schema.NullOr(Schema.String),
  tokens: Schema.NullOr(Tokens),
  quantity: Money,
  providerCost: Money,
  customerCost: Money,
  billingMode: Schema.NullOr(Schema.String),
  balance: Schema.Struct({ remaining: Schema.NullOr(Money) }),
  purchaseId: Schema.NullOr(Schema.String),
  messageId: Schema.String,
  rawId: Schema.String,
  runId: Schema.NullOr(Schema.String),
  composite: Schema.NullOr(Schema.Struct({ id: Schema.String, refId: Schema.String, value: Schema.String })),
  member: Schema.NullOr(Schema.String),
  custom: Schema.NullOr(AnyJson),
  timestamp: TimestampField,
  reverses: ReversesField,
  createdAt: CreatedAtField
})
export type UsageLogEntry = typeof UsageLogEntry.Type

export const UsageLogLookupEntry = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  meter: Meter,
  agentKey: Schema.NullOr(Schema.String),
  entitlementId: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  totalTokens: Schema.NullOr(Schema.Number),
  quantity: Money,
  providerCost: Money,
  customerCost: Money,
  billingMode: Schema.NullOr(Schema.String),
  balanceRemaining: Schema.NullOr(Money),
  rawId: Schema.String,
  messageId: Schema.String,
  runId: Schema.NullOr(Schema.String),
  compositeRefId: Schema.NullOr(Schema.String),
  compositeValue: Schema.NullOr(Schema.String),
  timestamp: TimestampField,
  reverses: ReversesField,
  createdAt: CreatedAtField
})
export type UsageLogLookupEntry = typeof UsageLogLookupEntry.Type

export const toEntry = (row: UsageRecord): UsageLogEntry => ({
  id: row.id,
  customerId: row.customerId,
  meter: row.meter,
  agentKey: row.agentKey,
  entitlement: row.entitlementName === null ? null : { id: row.entitlementId, name: row.entitlementName },
  model: row.model,
  tokens: row.inputTokens === null
    ? null
    : {
      input: row.inputTokens,
      output: row.outputTokens ?? 0,
      cache: row.cacheTokens ?? 0,
      cacheWrite: row.cacheWriteTokens ?? 0,
      total: row.inputTokens + (row.outputTokens ?? 0) + (row.cacheTokens ?? 0) + (row.cacheWriteTokens ?? 0)
    },
  quantity: row.quantity,
  providerCost: row.providerCost,
  customerCost: row.customerCost,
  billingMode: row.billingMode,
  balance: { remaining: row.balanceRemaining },
  purchaseId: row.purchaseId,
  messageId: row.messageId,
  rawId: row.signalId,
  runId: row.runId,
  composite: row.compositeId === null || row.compositeRef === null || row.compositeValue === null
    ? null
    : { id: row.compositeId, refId: row.compositeRef, value: row.compositeValue },
  member: row.member,
  custom: row.custom,
  timestamp: row.moment,
  reverses: row.reverses,
  createdAt: row.createdAt
})

export const toLookupEntry = (row: UsageRecord): UsageLogLookupEntry => ({
  id: row.id,
  customerId: row.customerId,
  externalId: row.externalId,
  meter: row.meter,
  agentKey: row.agentKey,
  entitlementId: row.entitlementId,
  model: row.model,
  totalTokens: row.inputTokens === null
    ? null
    : row.inputTokens + (row.outputTokens ?? 0) + (row.cacheTokens ?? 0) + (row.cacheWriteTokens ?? 0),
  quantity: row.quantity,
  providerCost: row.providerCost,
  customerCost: row.customerCost,
  billingMode: row.billingMode,
  balanceRemaining: row.balanceRemaining,
  rawId: row.signalId,
  messageId: row.messageId,
  runId: row.runId,
  compositeRefId: row.compositeRef,
  compositeValue: row.compositeValue,
  timestamp: row.moment,
  reverses: row.reverses,
  createdAt: row.createdAt
})
