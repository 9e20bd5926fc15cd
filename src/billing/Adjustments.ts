/**
 * Balance adjustments (the spec's "Balance adjustments" rules 1-6).
 *
 * Credits, outcomes, units and composites adjust the ADVANCE balance of the
 * current cycle of the ACTIVE purchase, floored at zero; the wallet moves the
 * USD wallet (no floor) and writes a ledger row. With `wallet: "RESERVED"` it
 * moves the Reserved Wallet instead (floored at zero, where the workspace has
 * enabled it), which writes no ledger row and triggers no webhook event.
 *
 * Idempotency: a keyed request first inserts its adjustment row with
 * `ON CONFLICT DO NOTHING` on (organisation, endpoint, key). A concurrent twin
 * waits on that unique index until the first transaction ends: if it
 * committed, the twin finds the row and replays; if it rolled back (a failed
 * adjustment), the twin's insert goes through. So a failure never uses up its
 * key, and any number of identical concurrent requests adjust exactly once.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { dieOnSqlError, findAll, findOne } from "../db/Sql.ts"
import { NoActivePlan, NotOnPlan, NotPrepaid } from "../errors.ts"
import { claimKey, fingerprintOf } from "../idempotency/Idempotency.ts"
import { type CustomerId, makeId, type OrganizationId } from "../ids.ts"
import { type Decimal, toSql, ZERO } from "../money.ts"
import { IdempotencyKey, Money, MoneyInput, strict, Timestamp } from "../schema.ts"
import { BalanceRow, PurchaseRow } from "./Purchase.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { Wallets } from "./Wallets.ts"
import { currentTime } from "../time.ts"

export type AdjustEndpoint = "credits" | "outcomes" | "units" | "composites" | "wallet"

const LIMIT = BigDecimal.fromBigInt(10_000_000n)

const delta = (options: { readonly integer: boolean }) =>
  MoneyInput.pipe(
    Schema.filter((value) => {
      if (BigDecimal.isZero(value)) return "must not be zero"
      if (BigDecimal.greaterThan(BigDecimal.abs(value), LIMIT)) return "absolute value must be at most 10,000,000"
      if (options.integer && !BigDecimal.isInteger(value)) return "must be a whole number"
      return true
    }, {
      jsonSchema: {
        type: options.integer ? "integer" : "number",
        minimum: -10_000_000,
        maximum: 10_000_000,
        not: { const: 0 },
        description: `${options.integer ? "A whole number" : "A number (fractions allowed)"}, not zero, at most ` +
          "10,000,000 either way: positive grants, negative claws back."
      }
    })
  )

const Notes = Schema.String.pipe(Schema.maxLength(200, { message: () => "must be at most 200 characters" })).annotations({
  description: "Why, for people reading the ledger; at most 200 characters."
})

const AgentKeyField = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
  description: "What to adjust: a credit's `agentKey`, an outcome step's `agentKey`, a unit's `agentKey` or a " +
    "composite's `refId`, by route."
})

const targeted = (integer: boolean) =>
  Schema.Struct({
    agentKey: AgentKeyField,
    delta: delta({ integer }),
    notes: Schema.optional(Notes),
    idempotencyKey: Schema.optional(IdempotencyKey)
  }).annotations(strict)

/** Credits, outcomes (a step's key) and composites (the refId): whole numbers. */
export const WholeAdjust = targeted(true)
/** Units: fractions allowed. */
export const FractionAdjust = targeted(false)
export const WalletKind = Schema.Literal("ORDINARY", "RESERVED").annotations({
  description: "Which wallet: the ordinary Wallet (default) or the Reserved Wallet, where the workspace enabled it."
})
export type WalletKind = typeof WalletKind.Type

/** The wallet: USD, fractions allowed; the ordinary Wallet may go below zero. */
export const WalletAdjust = Schema.Struct({
  delta: delta({ integer: false }),
  wallet: Schema.optionalWith(WalletKind, { default: () => "ORDINARY" as const }),
  notes: Schema.optional(Notes),
  idempotencyKey: Schema.optional(IdempotencyKey)
}).annotations(strict)

export interface AdjustInput {
  readonly agentKey?: string | undefined
  /** Which wallet the wallet endpoint moves. */
  readonly wallet?: WalletKind | undefined
  readonly delta: Decimal
  readonly notes?: string | undefined
  readonly idempotencyKey?: string | undefined
}

export const AdjustResult = Schema.Struct({
  adjusted: Schema.Boolean,
  replayed: Schema.Boolean,
  adjustedAt: Timestamp,
  remaining: Money,
  customerArchived: Schema.Boolean,
  /** True when a claw-back took the balance below zero and was clamped there. */
  floored: Schema.Boolean.annotations({
    description: "true when a negative delta was clamped so the balance stops at zero; appliedDelta then says what moved"
  }),
  /** What the balance actually moved: `delta`, or less than it in magnitude when floored. */
  appliedDelta: Money.annotations({ description: "the change actually applied to the balance" })
})
export type AdjustResult = typeof AdjustResult.Type

const KeyedRow = Schema.Struct({
  fingerprint: Schema.String,
  delta: Money,
  appliedDelta: Money,
  purchaseId: Schema.NullOr(Schema.String),
  componentId: Schema.NullOr(Schema.String),
  adjustedAt: Timestamp
})

/** Whether the floor at zero cut the requested delta short. */
const flooring = (requested: Decimal, applied: Decimal) => ({
  floored: !BigDecimal.equals(requested, applied),
  appliedDelta: BigDecimal.normalize(applied)
})

const kindOf: Record<Exclude<AdjustEndpoint, "wallet">, SnapshotComponent["type"]> = {
  credits: "CREDIT",
  outcomes: "OUTCOME",
  units: "UNIT",
  composites: "PRICING_METRIC"
}

const keyNoun: Record<Exclude<AdjustEndpoint, "wallet">, string> = {
  credits: "credit agentKey",
  outcomes: "outcome step agentKey",
  units: "unit agentKey",
  composites: "composite refId"
}

export class Adjustments extends Effect.Service<Adjustments>()("Adjustments", {
  dependencies: [Customers.Default, Wallets.Default, Ledger.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const wallets = yield* Wallets
    const ledger = yield* Ledger

    /** Components of this endpoint's kind that answer to `agentKey`. */
    const matching = (endpoint: Exclude<AdjustEndpoint, "wallet">, components: ReadonlyArray<SnapshotComponent>, key: string) =>
      components.filter((c) =>
        c.type === kindOf[endpoint] &&
        (endpoint === "outcomes" ? c.steps.some((step) => step.agentKey === key) : c.agentKey === key)
      )

    /** The ADVANCE component the request adjusts, or the 422 that says why there is none. */
    const targetOf = (organizationId: OrganizationId, customerId: CustomerId, endpoint: Exclude<AdjustEndpoint, "wallet">, key: string) =>
      Effect.gen(function*() {
        const purchase = yield* findOne(
          PurchaseRow,
          sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                AND status = 'ACTIVE' FOR SHARE`
        )
        if (Option.isNone(purchase)) {
          return yield* new NoActivePlan({ message: `Customer ${customerId} has no active plan to adjust` })
        }
        const { components } = purchase.value.snapshot
        const found = matching(endpoint, components, key)
        if (found.length === 0) {
          const ownOutcomeKey = endpoint === "outcomes" && components.some((c) => c.type === "OUTCOME" && c.agentKey === key)
          return yield* new NotOnPlan({
            message: ownOutcomeKey
              ? `${key} is an outcome's own agentKey; outcome adjustments take one of its steps' agentKey`
              : `Unknown ${keyNoun[endpoint]} ${key} on the customer's plan`
          })
        }
        const advance = found.find((c) => c.billingMode === "ADVANCE")
        if (!advance) {
          return yield* new NotPrepaid({
            message: `${key} is not a prepaid (ADVANCE) part of the customer's plan; only prepaid balances can be adjusted`
          })
        }
        return { purchaseId: purchase.value.id, componentId: advance.id }
      })

    const lockBalance = (organizationId: OrganizationId, purchaseId: string, componentId: string) =>
      Effect.map(
        findAll(
          BalanceRow,
          sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId}
                AND purchase_id = ${purchaseId} AND component_id = ${componentId} FOR UPDATE`
        ),
        (rows) => rows[0]!
      )

    /**
     * What is left now of what a replayed request adjusted. A replay is the same
     * request, so its `wallet` names the wallet the original moved.
     */
    const currentRemaining = (
      organizationId: OrganizationId,
      customerId: CustomerId,
      target: typeof KeyedRow.Type,
      wallet: WalletKind
    ) =>
      // A component the purchase no longer sells (its plan changed): nothing of it is left.
      target.purchaseId !== null && target.componentId === null
        ? Effect.succeed(ZERO)
        : target.purchaseId !== null && target.componentId !== null
        ? Effect.map(
          findOne(
            BalanceRow,
            sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId}
                  AND purchase_id = ${target.purchaseId} AND component_id = ${target.componentId}`
          ),
          Option.match({ onNone: () => ZERO, onSome: (row) => row.remaining })
        )
        : Effect.map(wallets.get(organizationId, customerId), (row) => wallet === "RESERVED" ? row.reservedBalance : row.balance)

    const adjust = Effect.fn("Adjustments.adjust")(function*(organizationId: OrganizationId, customerId: CustomerId, endpoint: AdjustEndpoint, input: AdjustInput) {
        const customer = yield* customers.get(organizationId, customerId)
        const customerArchived = customer.archivedAt !== null
        const walletKind = input.wallet ?? "ORDINARY"
        const fingerprint = fingerprintOf(
          endpoint === "wallet"
            ? [customerId, walletKind, toSql(input.delta)]
            : [customerId, input.agentKey ?? null, toSql(input.delta)]
        )
        const id = makeId("adj")
        const now = yield* currentTime
        if (input.idempotencyKey !== undefined) {
          const first = yield* claimKey(input.idempotencyKey, fingerprint, sql`INSERT INTO balance_adjustments ${
            sql.insert({
              organizationId,
              id,
              endpoint,
              idempotencyKey: input.idempotencyKey,
              fingerprint,
              customerId,
              delta: toSql(input.delta),
              notes: input.notes ?? null,
              adjustedAt: now
            })
          } ON CONFLICT (organization_id, endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
          RETURNING id`, findAll(
            KeyedRow,
            sql`SELECT fingerprint, delta, applied_delta, purchase_id, component_id, adjusted_at FROM balance_adjustments
                WHERE organization_id = ${organizationId} AND endpoint = ${endpoint}
                  AND idempotency_key = ${input.idempotencyKey}`
          ).pipe(Effect.map((rows) => rows[0]!)))
          if (Option.isSome(first)) {
            const existing = first.value
            return {
              adjusted: false,
              replayed: true,
              adjustedAt: existing.adjustedAt,
              remaining: yield* currentRemaining(organizationId, customerId, existing, walletKind),
              customerArchived,
              // The original's answer: a replay says what the first request applied.
              ...flooring(existing.delta, existing.appliedDelta)
            } satisfies AdjustResult
          }
        }

        let remaining: Decimal
        let applied: Decimal
        let target: { readonly purchaseId: string | null; readonly componentId: string | null }
        if (endpoint === "wallet" && walletKind === "RESERVED") {
          const moved = yield* wallets.moveReserved(organizationId, customerId, input.delta)
          remaining = moved.reservedBalance
          applied = moved.applied
          target = { purchaseId: null, componentId: null }
        } else if (endpoint === "wallet") {
          const moved = yield* wallets.move(organizationId, customerId, input.delta, {
            type: "ADJUSTMENT",
            notes: input.notes ?? null,
            at: now
          })
          remaining = moved.balance
          applied = input.delta
          target = { purchaseId: null, componentId: null }
        } else {
          const found = yield* targetOf(organizationId, customerId, endpoint, input.agentKey ?? "")
          const balance = yield* lockBalance(organizationId, found.purchaseId, found.componentId)
          remaining = BigDecimal.normalize(BigDecimal.max(BigDecimal.sum(balance.remaining, input.delta), ZERO))
          applied = BigDecimal.normalize(BigDecimal.subtract(remaining, balance.remaining))
          yield* ledger.moveBalances([{
            organizationId,
            purchaseId: found.purchaseId,
            componentId: found.componentId,
            granted: applied,
            used: ZERO,
            remaining: applied,
            cycleQuantity: ZERO,
            arrearAmount: ZERO
          }])
          target = found
        }

        if (input.idempotencyKey !== undefined) {
          yield* sql`UPDATE balance_adjustments SET purchase_id = ${target.purchaseId}, component_id = ${target.componentId},
                applied_delta = ${toSql(applied)}::numeric
              WHERE organization_id = ${organizationId} AND id = ${id}`
        } else {
          yield* sql`INSERT INTO balance_adjustments ${
            sql.insert({
              organizationId,
              id,
              endpoint,
              idempotencyKey: null,
              fingerprint,
              customerId,
              purchaseId: target.purchaseId,
              componentId: target.componentId,
              delta: toSql(input.delta),
              appliedDelta: toSql(applied),
              notes: input.notes ?? null,
              adjustedAt: now
            })
          }`
        }
        return {
          adjusted: true,
          replayed: false,
          adjustedAt: now,
          remaining,
          customerArchived,
          ...flooring(input.delta, applied)
        } satisfies AdjustResult
      }, sql.withTransaction, dieOnSqlError)

    return { adjust } as const
  })
}) {}
