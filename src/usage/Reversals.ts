/**
 * Corrections (docs/signals.md "Corrections"): a priced usage row is taken back
 * by a reversing row, never edited or deleted, so the usage log stays the audit
 * trail of what was billed.
 *
 * `reverse` writes, in one transaction, through the ledger (the rows with
 * src/ledger/UsageRows.ts `reverseUsageRow`, the money with `Ledger`):
 * - the reversing row: a new `usg_` id, the original's customer, meter,
 *   entitlement, agentKey, model, purchase, cycle_index and occurred_at, the
 *   quantity, costs and split (advance/arrear quantity, arrear charge)
 *   negated, `reverses` = the original's id and the caller's `reason`; tokens
 *   are null (they stay described on the original, and token totals are not
 *   counted twice);
 * - the original's `reversed_by`;
 * - what the original drew, given back to the cycle that billed it: its
 *   purchase's balance rows while that cycle is the purchase's current one,
 *   else the ended cycle's `cycle_balances` (then its DRAFT usage invoice is
 *   rebuilt; a FINAL cycle's credit goes on the customer's next usage invoice
 *   because its arrear_amount drops below invoiced_arrear). ADVANCE part:
 *   remaining += advance_quantity, used and cycle_quantity -= it. ARREAR part:
 *   arrear_amount -= arrear_charge (walletFundedArrear: the wallet is credited
 *   the charge instead), used and cycle_quantity -= arrear_quantity. A WALLET
 *   row: the wallet is credited its customer_cost. Wallet credits are ledger
 *   rows of type USAGE_LOG naming the reversing row, with the webhook events
 *   every wallet change sends;
 * - the current cycle's spent_this_cycle drops by what the row added to it
 *   (its ARREAR charge and its wallet debit), only when the row is of the
 *   current cycle.
 *
 * Refusals write nothing: unknown row or another organisation's (404), a row
 * reversed already or itself a reversal (409), an archived customer (409), a
 * MIXED row written before rows recorded their split (409: it cannot be taken
 * back exactly), a row of an ended cycle with no record of that cycle (409).
 * A row that drew nothing (an outcome step, usage billed by a composite) is
 * reversed like any other: the reversing row is written and nothing moves.
 *
 * Exactly once: the original row is locked FOR UPDATE before anything is
 * read (usage_log is partitioned by created_at, so no unique index can hold
 * `reverses`); of two concurrent reversals the second sees `reversed_by` and
 * is refused. An idempotency key is written first, in the same transaction,
 * into `usage_reversal_keys`: a twin with the same key waits on its primary
 * key, then replays the first answer; a failed reversal leaves no key behind.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option, Schema } from "effect"
import { PurchaseRow } from "../billing/Purchase.ts"
import { refreshDrafts } from "../billing/DraftInvoices.ts"
import { archivedRefusal } from "../customers/Customer.ts"
import { dieOnSqlError, findAll, findOne } from "../db/Sql.ts"
import {
  IdempotencyKeyReused,
  UsageAlreadyReversed,
  UsageNotReversible,
  UsageRowIsReversal,
  UsageRowNotFound
} from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { type BalanceMove, Ledger } from "../ledger/Ledger.ts"
import { reverseUsageRow } from "../ledger/UsageRows.ts"
import { type Decimal, ZERO } from "../money.ts"
import { IdempotencyKey, Money, strict, Timestamp } from "../schema.ts"
import { UsageLog } from "./UsageLog.ts"

export const ReverseRequest = Schema.Struct({
  idempotencyKey: Schema.optional(IdempotencyKey),
  reason: Schema.optional(
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "must not be empty" }),
      Schema.maxLength(500, { message: () => "must be at most 500 characters" })
    ).annotations({ description: "Why the row is taken back, for people reading the usage log; at most 500 characters." })
  )
}).annotations(strict)

export interface ReverseInput {
  readonly idempotencyKey?: string | undefined
  readonly reason?: string | undefined
}

/** The row to take back, with what it drew. */
class Original extends Schema.Class<Original>("Original")({
  id: Schema.String,
  customerId: Schema.String,
  meter: Schema.String,
  entitlementId: Schema.NullOr(Schema.String),
  quantity: Money,
  customerCost: Money,
  billingMode: Schema.NullOr(Schema.String),
  purchaseId: Schema.NullOr(Schema.String),
  cycleIndex: Schema.NullOr(Schema.Number),
  advanceQuantity: Schema.NullOr(Money),
  arrearQuantity: Schema.NullOr(Money),
  arrearCharge: Schema.NullOr(Money),
  reverses: Schema.NullOr(Schema.String),
  reversedBy: Schema.NullOr(Schema.String),
  moment: Timestamp,
  archivedAt: Schema.NullOr(Timestamp)
}) {}

const KeyRow = Schema.Struct({ usageLogId: Schema.String, reversalId: Schema.String })

const CycleRow = Schema.Struct({ cycleIndex: Schema.Number, status: Schema.String })

/** A balance row of the purchase or of an ended cycle, as a reversal reads it. */
const Balance = Schema.Struct({
  componentId: Schema.String,
  billingMode: Schema.String,
  remaining: Money
})

/** How the original split between allowance and arrears: recorded, or derived for rows written before the split was. */
interface Split {
  readonly advanceQuantity: Decimal
  readonly arrearQuantity: Decimal
  readonly arrearCharge: Decimal
}

const { negate, sum: add } = BigDecimal
const neg = (value: Decimal) => BigDecimal.normalize(negate(value))

/** The balance rows' component type of a meter; null for meters that draw no balance. */
const componentTypeOf: Record<string, string | null> = {
  CREDIT: "CREDIT",
  OUTCOME: "OUTCOME",
  UNIT: "UNIT",
  COMPOSITE: "PRICING_METRIC",
  OUTCOME_STEP: null,
  WALLET: null
}

export class Reversals extends Effect.Service<Reversals>()("Reversals", {
  dependencies: [Ledger.Default, UsageLog.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const usageLog = yield* UsageLog

    const notFound = (id: string) => new UsageRowNotFound({ message: `Usage-log row ${id} not found` })

    /** A row of the usage log as the log reads it (inside the caller's transaction). */
    const record = (organizationId: OrganizationId, id: string) =>
      Effect.map(usageLog.lookup(organizationId, [id]), ({ rows }) => rows[0]!)

    const splitOf = (row: Original): Effect.Effect<Split, UsageNotReversible> => {
      if (row.advanceQuantity !== null && row.arrearQuantity !== null && row.arrearCharge !== null) {
        return Effect.succeed({
          advanceQuantity: row.advanceQuantity,
          arrearQuantity: row.arrearQuantity,
          arrearCharge: row.arrearCharge
        })
      }
      switch (row.billingMode) {
        case "ADVANCE":
          return Effect.succeed({ advanceQuantity: row.quantity, arrearQuantity: ZERO, arrearCharge: ZERO })
        case "ARREAR":
          return Effect.succeed({ advanceQuantity: ZERO, arrearQuantity: row.quantity, arrearCharge: row.customerCost })
        case "MIXED":
          return Effect.fail(
            new UsageNotReversible({
              message: `Usage-log row ${row.id} was split between allowance and arrears before rows recorded the ` +
                "split; it cannot be reversed exactly"
            })
          )
        default:
          return Effect.succeed({ advanceQuantity: ZERO, arrearQuantity: ZERO, arrearCharge: ZERO })
      }
    }

    const reverse = Effect.fn("Reversals.reverse")(function*(organizationId: OrganizationId, id: string, input: ReverseInput) {
        const reversalId = makeId("usg")
        if (input.idempotencyKey !== undefined) {
          const inserted = yield* sql`INSERT INTO usage_reversal_keys ${
            sql.insert({ organizationId, idempotencyKey: input.idempotencyKey, usageLogId: id, reversalId })
          } ON CONFLICT (organization_id, idempotency_key) DO NOTHING RETURNING reversal_id`
          if (inserted.length === 0) {
            const [known] = yield* findAll(
              KeyRow,
              sql`SELECT usage_log_id, reversal_id FROM usage_reversal_keys
                  WHERE organization_id = ${organizationId} AND idempotency_key = ${input.idempotencyKey}`
            )
            if (known!.usageLogId !== id) {
              return yield* new IdempotencyKeyReused({
                message: `idempotencyKey ${input.idempotencyKey} was already used to reverse another usage-log row`
              })
            }
            return yield* record(organizationId, known!.reversalId)
          }
        }

        // The row's lock decides concurrent reversals: the second one waits here, then sees reversed_by.
        const found = yield* findOne(
          Original,
          sql`SELECT u.id, u.customer_id, u.meter, u.entitlement_id, u.quantity, u.customer_cost, u.billing_mode,
                     u.purchase_id, u.cycle_index, u.advance_quantity, u.arrear_quantity, u.arrear_charge,
                     u.reverses, u.reversed_by, coalesce(u.occurred_at, u.created_at) AS moment,
                     (SELECT archived_at FROM customers c
                      WHERE c.organization_id = u.organization_id AND c.id = u.customer_id) AS archived_at
              FROM usage_log u
              WHERE u.organization_id = ${organizationId} AND u.id = ${id}
              FOR UPDATE OF u`
        )
        if (Option.isNone(found)) return yield* notFound(id)
        const row = found.value
        if (row.reverses !== null) {
          return yield* new UsageRowIsReversal({ message: `Usage-log row ${id} is a reversal of ${row.reverses}; it cannot be reversed` })
        }
        if (row.reversedBy !== null) {
          return yield* new UsageAlreadyReversed({ message: `Usage-log row ${id} was already reversed by ${row.reversedBy}` })
        }
        if (row.archivedAt !== null) return yield* archivedRefusal(row.customerId, "its usage cannot be reversed")
        const split = yield* splitOf(row)

        let walletFunded = false
        let cycleIndex = row.cycleIndex
        let current = true
        if (row.purchaseId !== null) {
          // FOR SHARE: the cycle job (which locks the purchase FOR UPDATE) cannot end the cycle under us.
          const purchase = (yield* findAll(
            PurchaseRow,
            sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND id = ${row.purchaseId} FOR SHARE`
          ))[0]!
          walletFunded = purchase.snapshot.walletFundedArrear
          if (cycleIndex === null) {
            // A row written before rows named their cycle: the current cycle if it began before the row's moment,
            // else the ended cycle whose period holds it.
            if (purchase.status === "ACTIVE" && purchase.periodStart !== null && row.moment >= purchase.periodStart) {
              cycleIndex = purchase.cycleIndex
            } else {
              const [ended] = yield* findAll(
                CycleRow,
                sql`SELECT cycle_index, status FROM purchase_cycles
                    WHERE organization_id = ${organizationId} AND purchase_id = ${row.purchaseId}
                      AND period_start <= ${row.moment} AND ${row.moment} < period_end`
              )
              cycleIndex = ended?.cycleIndex ?? null
            }
          }
          current = purchase.status === "ACTIVE" && purchase.cycleIndex === cycleIndex
          if (!current) {
            const [ended] = cycleIndex === null ? [] : yield* findAll(
              CycleRow,
              sql`SELECT cycle_index, status FROM purchase_cycles
                  WHERE organization_id = ${organizationId} AND purchase_id = ${row.purchaseId}
                    AND cycle_index = ${cycleIndex}
                  FOR UPDATE`
            )
            if (ended === undefined) {
              return yield* new UsageNotReversible({
                message: `Usage-log row ${id} belongs to an ended cycle of purchase ${row.purchaseId} that has no ` +
                  "record; it cannot be reversed"
              })
            }
          }
        }

        // The balance rows the original drew from, locked.
        const type = componentTypeOf[row.meter] ?? null
        const draws = !BigDecimal.isZero(split.advanceQuantity) || !BigDecimal.isZero(split.arrearQuantity)
        const balances = type === null || !draws || row.purchaseId === null || row.entitlementId === null
          ? []
          : current
          ? yield* findAll(
            Balance,
            sql`SELECT component_id, billing_mode, remaining FROM purchase_balances
                WHERE organization_id = ${organizationId} AND purchase_id = ${row.purchaseId}
                  AND type = ${type} AND target_id = ${row.entitlementId}
                ORDER BY component_id FOR UPDATE`
          )
          : yield* findAll(
            Balance,
            sql`SELECT component_id, billing_mode, remaining FROM cycle_balances
                WHERE organization_id = ${organizationId} AND purchase_id = ${row.purchaseId}
                  AND cycle_index = ${cycleIndex} AND type = ${type} AND target_id = ${row.entitlementId}
                ORDER BY component_id FOR UPDATE`
          )
        const closed = current ? {} : { closedCycle: cycleIndex! }
        const moves: Array<BalanceMove> = []
        let remaining: Decimal | null = null
        const advance = balances.find((b) => b.billingMode === "ADVANCE")
        const arrear = balances.find((b) => b.billingMode === "ARREAR")
        if (!BigDecimal.isZero(split.advanceQuantity)) {
          if (advance === undefined) {
            // The purchase changed plan since, to one that does not sell this (docs/billing.md "Changing plans").
            return yield* new UsageNotReversible({
              message: `Usage-log row ${id} drew an ADVANCE balance its purchase no longer has (its plan changed since); ` +
                "it cannot be reversed"
            })
          }
          moves.push({
            organizationId,
            purchaseId: row.purchaseId!,
            componentId: advance.componentId,
            granted: ZERO,
            used: neg(split.advanceQuantity),
            remaining: split.advanceQuantity,
            cycleQuantity: neg(split.advanceQuantity),
            arrearAmount: ZERO,
            ...closed
          })
        }
        if (advance !== undefined) remaining = BigDecimal.normalize(add(advance.remaining, split.advanceQuantity))
        let walletCredit = row.meter === "WALLET" ? row.customerCost : ZERO
        if (!BigDecimal.isZero(split.arrearQuantity)) {
          if (arrear === undefined) {
            // The purchase changed plan since, to one that does not sell this (docs/billing.md "Changing plans").
            return yield* new UsageNotReversible({
              message: `Usage-log row ${id} drew an ARREAR balance its purchase no longer has (its plan changed since); ` +
                "it cannot be reversed"
            })
          }
          moves.push({
            organizationId,
            purchaseId: row.purchaseId!,
            componentId: arrear.componentId,
            granted: ZERO,
            used: neg(split.arrearQuantity),
            remaining: ZERO,
            cycleQuantity: neg(split.arrearQuantity),
            arrearAmount: walletFunded ? ZERO : neg(split.arrearCharge),
            ...closed
          })
          if (walletFunded) walletCredit = add(walletCredit, split.arrearCharge)
        }
        yield* ledger.moveBalances(moves)
        if (!current && row.purchaseId !== null && cycleIndex !== null) {
          // A DRAFT cycle's usage invoice now says less; a FINAL one is left alone (the credit goes on the next).
          // Before the wallet: drafts lock their invoices, then wallets (src/billing/DraftInvoices.ts).
          yield* refreshDrafts(sql, [{ organizationId, purchaseId: row.purchaseId, cycleIndex }])
        }
        if (current && row.purchaseId !== null) {
          // What the row added to spent_this_cycle: its ARREAR charge and its wallet debit.
          const spent = add(split.arrearCharge, row.meter === "WALLET" ? row.customerCost : ZERO)
          yield* ledger.addSpent([{ organizationId, purchaseId: row.purchaseId, amount: neg(spent) }])
        }
        if (!BigDecimal.isZero(walletCredit)) {
          const key = { organizationId, customerId: row.customerId }
          const locked = yield* ledger.lockWallets([key])
          const [posted] = yield* ledger.postToWallets(locked, [{
            ...key,
            delta: BigDecimal.normalize(walletCredit),
            type: "USAGE_LOG",
            usageLogId: reversalId,
            purchaseId: row.purchaseId
          }])
          if (row.meter === "WALLET") remaining = posted!.balance
        }

        yield* reverseUsageRow(sql, {
          organizationId,
          usageLogId: id,
          reversalId,
          balanceRemaining: remaining,
          cycleIndex,
          advanceQuantity: neg(split.advanceQuantity),
          arrearQuantity: neg(split.arrearQuantity),
          arrearCharge: neg(split.arrearCharge),
          reason: input.reason ?? null
        })
        return yield* record(organizationId, reversalId)
      }, sql.withTransaction, dieOnSqlError)

    return { reverse } as const
  })
}) {}
