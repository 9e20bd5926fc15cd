/**
 * Spend control's shapes (issue 26, parts 2 and 3): the check before spending
 * (`POST /entitlements/check`), with or without a hold, its answer, a hold,
 * and a customer's entitlements with what is pending and held.
 *
 * Every amount is in the balance's own unit: credits of a CREDIT, outcomes of
 * an OUTCOME, units of a UNIT, USD of the WALLET (the ordinary Wallet).
 */
import { BigDecimal, Schema } from "effect"
import { ExternalId, Money, MoneyInput, namesCustomer, strict, Timestamp } from "../schema.ts"
import { Quantity, Usage } from "../signals/Signal.ts"

export const CheckMeter = Schema.Literal("CREDIT", "OUTCOME", "UNIT", "WALLET").annotations({
  description: "The balance asked about: a credit, an outcome or a unit (named by `agentKey`), or the WALLET."
})
export type CheckMeter = typeof CheckMeter.Type

/** Why a check is not allowed: the signal refusals' names (WALLET is never refused for lack of funds). */
export const CheckReason = Schema.Literal(
  "NO_ACTIVE_PLAN",
  "NOT_ON_PLAN",
  "OUT_OF_ALLOWANCE",
  "CUSTOMER_ARCHIVED",
  "MODEL_NOT_ENABLED"
)
export type CheckReason = typeof CheckReason.Type

const maxTtlSeconds = 3600

const PositiveAmount = MoneyInput.pipe(
  Schema.filter((amount) => BigDecimal.isPositive(amount) || "must be above 0"),
  Schema.filter((amount) => BigDecimal.lessThanOrEqualTo(amount, BigDecimal.fromBigInt(10_000_000n)) || "must be at most 10,000,000", {
    jsonSchema: { type: "number", exclusiveMinimum: 0, maximum: 10_000_000 }
  })
)

/** What a check's `reserve` asks to hold (the API's word for asking for a hold). */
export const HoldRequest = Schema.Struct({
  amount: Schema.optional(PositiveAmount).annotations({
    description: "WALLET only: the USD to hold."
  }),
  usage: Schema.optional(Usage).annotations({
    description: "CREDIT or WALLET: a model call to hold the price of (credits, or USD at provider cost)."
  }),
  quantity: Schema.optional(Quantity).annotations({
    description: "CREDIT, OUTCOME or UNIT: how many credits, outcomes or units to hold."
  }),
  ttlSeconds: Schema.Int.pipe(
    Schema.between(1, maxTtlSeconds, { message: () => `must be a whole number of seconds from 1 to ${maxTtlSeconds}` })
  ).annotations({ description: `How long the hold lasts unless settled or released first: 1 to ${maxTtlSeconds} seconds.` })
}).annotations({
  ...strict,
  identifier: "CheckReserve",
  description: "Hold part of the balance when the check is allowed. At most one of `amount`, `usage` and `quantity`; " +
    "with none, the check's own `estimatedCost` is held."
})
export type HoldRequest = typeof HoldRequest.Type

type Issue = { readonly path: ReadonlyArray<string>; readonly message: string }

const needs = (field: string, meter: string): Issue => ({ path: [field], message: `is required when meter is ${meter}` })
const refuses = (path: ReadonlyArray<string>, meter: string): Issue => ({
  path,
  message: `is not accepted when meter is ${meter}`
})

/** The fields each meter takes; the answer is the first field that breaks them (a 400 naming it). */
const fieldRules = (check: {
  readonly meter: CheckMeter
  readonly agentKey?: string | undefined
  readonly quantity?: BigDecimal.BigDecimal | undefined
  readonly usage?: unknown
  readonly reserve?: HoldRequest | undefined
}): Issue | true => {
  const { meter, reserve } = check
  if (meter === "WALLET") {
    if (check.agentKey !== undefined) return refuses(["agentKey"], meter)
    if (check.quantity !== undefined) return refuses(["quantity"], meter)
  } else if (check.agentKey === undefined) return needs("agentKey", meter)
  if (meter === "CREDIT" || meter === "WALLET") {
    if (check.usage === undefined) return needs("usage", meter)
  } else if (check.usage !== undefined) return refuses(["usage"], meter)
  if (meter === "CREDIT" && check.quantity !== undefined) return refuses(["quantity"], meter)
  if (meter === "OUTCOME" && check.quantity !== undefined && BigDecimal.normalize(check.quantity).scale > 0) {
    return { path: ["quantity"], message: "must be a whole number of outcomes" }
  }
  if (reserve !== undefined) {
    const given = [reserve.amount, reserve.usage, reserve.quantity].filter((value) => value !== undefined).length
    if (given > 1) return { path: ["reserve"], message: "takes at most one of amount, usage and quantity" }
    if (reserve.amount !== undefined && meter !== "WALLET") return refuses(["reserve", "amount"], meter)
    if (reserve.usage !== undefined && meter !== "CREDIT" && meter !== "WALLET") return refuses(["reserve", "usage"], meter)
    if (reserve.quantity !== undefined && meter === "WALLET") return refuses(["reserve", "quantity"], meter)
    if (meter === "OUTCOME" && reserve.quantity !== undefined && BigDecimal.normalize(reserve.quantity).scale > 0) {
      return { path: ["reserve", "quantity"], message: "must be a whole number of outcomes" }
    }
  }
  return true
}

export const CheckRequest = Schema.Struct({
  customerId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "The service's customer id. Required unless `externalId` is sent; wins when both are."
  }),
  externalId: Schema.optional(ExternalId).annotations({
    description: "Your own id of the customer, used when `customerId` is not sent."
  }),
  meter: CheckMeter,
  agentKey: Schema.optional(Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(80, { message: () => "must be at most 80 characters" })
  )).annotations({
    description: "CREDIT: the credit's key; OUTCOME: a step's key of the outcome (as the outcome adjust route); " +
      "UNIT: the unit's key. Not sent for WALLET."
  }),
  quantity: Schema.optional(Quantity).annotations({
    description: "OUTCOME: outcomes to complete (whole, 1 when left out); UNIT: units (1 when left out)."
  }),
  usage: Schema.optional(Usage).annotations({
    description: "CREDIT and WALLET (required): the model call about to be made, priced as its signal would be."
  }),
  reserve: Schema.optional(HoldRequest)
}).annotations(strict).pipe(
  Schema.filter(fieldRules),
  Schema.annotations({ ...strict, ...namesCustomer, identifier: "EntitlementCheck" })
)
export type CheckRequest = typeof CheckRequest.Type

export const CheckResult = Schema.Struct({
  customerId: Schema.String,
  meter: CheckMeter,
  allowed: Schema.Boolean,
  reason: Schema.NullOr(CheckReason),
  remaining: Schema.NullOr(Money).annotations({
    description: "The committed prepaid (ADVANCE) balance of the target in the current cycle, or the ordinary " +
      "Wallet's balance: neither queued signals nor holds taken off. Null when the plan holds no prepaid balance of it."
  }),
  pending: Money.annotations({
    description: "What this customer's queued, not yet priced signals will take of the target (priced in memory " +
      "by the same meters, in order)."
  }),
  held: Money.annotations({ description: "What the customer's active holds on the target keep back." }),
  estimatedCost: Schema.NullOr(Money).annotations({
    description: "What the request would take, in the target's unit (credits, outcomes, units, or USD). Null when " +
      "the customer's plan cannot price it (no active plan, not on the plan, model not enabled)."
  }),
  reservationId: Schema.NullOr(Schema.String).annotations({
    description: "The hold made by an allowed check with `reserve`; null without `reserve` or when refused (nothing held)."
  }),
  expiresAt: Schema.NullOr(Timestamp).annotations({ description: "When the hold releases itself; null without one." })
}).annotations({ identifier: "EntitlementCheckResult" })
export type CheckResult = typeof CheckResult.Type

export const HoldStatus = Schema.Literal("HELD", "SETTLED", "RELEASED", "EXPIRED")

/** A hold; the API names its schema `Reservation`. */
export const Hold = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  meter: CheckMeter,
  targetId: Schema.NullOr(Schema.String),
  amount: Money,
  status: HoldStatus,
  createdAt: Timestamp,
  expiresAt: Timestamp,
  endedAt: Schema.NullOr(Timestamp),
  signalId: Schema.NullOr(Schema.String),
  usageLogId: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Reservation" })
export type Hold = typeof Hold.Type

export const ReleaseResult = Schema.Struct({
  released: Schema.Boolean.annotations({
    description: "True when this call released the hold; false when it had ended already (settled, released, expired)."
  }),
  reservation: Hold
})
export type ReleaseResult = typeof ReleaseResult.Type

export const EntitlementType = Schema.Literal("CREDIT", "OUTCOME", "UNIT", "COMPOSITE", "WALLET")

export const EntitlementBalance = Schema.Struct({
  type: EntitlementType,
  id: Schema.NullOr(Schema.String).annotations({ description: "The credit, outcome, unit or composite id; null for WALLET." }),
  name: Schema.String,
  agentKey: Schema.NullOr(Schema.String).annotations({ description: "The key (a composite's refId); null for WALLET." }),
  granted: Schema.NullOr(Money).annotations({ description: "Granted this cycle (prepaid); null for WALLET." }),
  used: Schema.NullOr(Money).annotations({ description: "Used this cycle, prepaid and in arrears; null for WALLET." }),
  remaining: Money.annotations({ description: "The committed prepaid balance (0 when none), or the Wallet's balance." }),
  pending: Money,
  held: Money
}).annotations({ identifier: "EntitlementBalance" })

export const CustomerEntitlements = Schema.Struct({
  customerId: Schema.String,
  hasPlan: Schema.Boolean,
  purchaseId: Schema.NullOr(Schema.String),
  entitlements: Schema.Array(EntitlementBalance),
  holds: Schema.Array(Hold).annotations({ description: "The customer's active holds, oldest first." })
}).annotations({ identifier: "CustomerEntitlements" })
export type CustomerEntitlements = typeof CustomerEntitlements.Type
