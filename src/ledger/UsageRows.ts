/**
 * The usage log's rows, written by the ledger: what the drain's priced
 * signals log and the spend holds they settle, sent inside the statement of
 * the batch's balance moves (`Ledger.recordUsage`), and a row taken back by
 * its reversing row (`reverseUsageRow`, for src/usage/Reversals.ts). Callers
 * hand over plain rows; the statements that write them are here, so a usage
 * row is written with the money it moves, in the caller's transaction.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { insertRowsStatement, orDie } from "../db/Sql.ts"
import { makeId } from "../ids.ts"
import { type Decimal, toSql } from "../money.ts"

/**
 * A priced signal's usage-log row as the INSERT takes it (src/signals/PriceSignal.ts
 * builds it): decimals and instants as text, its keys the columns, in the order
 * the first row names them (`insertRowsStatement`).
 */
export type UsageRow = {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly meter: string
  readonly entitlementId: string | null
  readonly entitlementName: string | null
  readonly agentKey: string | null
  readonly model: string | null
  readonly inputTokens: number | null
  readonly outputTokens: number | null
  readonly cacheTokens: number | null
  readonly cacheWriteTokens: number | null
  readonly quantity: string
  readonly providerCost: string
  readonly customerCost: string
  readonly billingMode: string | null
  readonly balanceRemaining: string | null
  readonly purchaseId: string | null
  readonly signalId: string
  readonly messageId: string
  readonly runId: string | null
  readonly compositeId: string | null
  readonly compositeRef: string | null
  readonly compositeValue: string | null
  readonly member: string | null
  readonly custom: unknown
  readonly occurredAt: string
  readonly cycleIndex: number | null
  /** How the row split between allowance and arrears: what a reversal gives back (null: nothing drawn). */
  readonly advanceQuantity: string | null
  readonly arrearQuantity: string | null
  readonly arrearCharge: string | null
}

/** The INSERT of a batch's usage rows, for `writeTogether`; undefined when there are none. */
export const usageRowsStatement = (sql: SqlClient.SqlClient, rows: ReadonlyArray<UsageRow>) =>
  insertRowsStatement(sql, "usage_log", rows)

/** A spend hold a priced signal names (its `reservationId`), settled by the usage row the signal wrote. */
export interface HoldSettlement {
  readonly organizationId: string
  readonly reservationId: string
  readonly customerId: string
  readonly signalId: string
  readonly usageLogId: string
}

/**
 * The holds a batch settles (src/signals/Settlements.ts), one statement for
 * `writeTogether`; undefined when no signal names a hold. Only a HELD hold,
 * unexpired at `at`, of the signal's organisation and customer settles, and
 * once: of the batch's signals naming it, the first by id.
 */
export const settleHoldsStatement = (sql: SqlClient.SqlClient, settlements: ReadonlyArray<HoldSettlement>, at: Date) =>
  settlements.length === 0 ? undefined : sql`UPDATE reservations AS r SET
        status = 'SETTLED', ended_at = ${at}, signal_id = v.signal_id, usage_log_id = v.usage_log_id
      FROM (SELECT DISTINCT ON (organization_id, id) * FROM unnest(
        ${settlements.map((s) => s.organizationId)}::text[], ${settlements.map((s) => s.reservationId)}::text[],
        ${settlements.map((s) => s.customerId)}::text[], ${settlements.map((s) => s.signalId)}::text[],
        ${settlements.map((s) => s.usageLogId)}::text[]
      ) AS u(organization_id, id, customer_id, signal_id, usage_log_id) ORDER BY organization_id, id, signal_id) AS v
      WHERE r.organization_id = v.organization_id AND r.id = v.id AND r.customer_id = v.customer_id
        AND r.status = 'HELD' AND r.expires_at > ${at}`

/**
 * A usage row taken back (docs/signals.md "Corrections"): the reversing row
 * copies the original and negates its quantity and costs; the rest is what
 * the reversal decided.
 */
export interface UsageReversal {
  readonly organizationId: string
  /** The row taken back. */
  readonly usageLogId: string
  /** The reversing row's id. */
  readonly reversalId: string
  /** The balance left once the reversal gave back (null when the row drew none). */
  readonly balanceRemaining: Decimal | null
  /** The cycle the original was billed in. */
  readonly cycleIndex: number | null
  /** The reversing row's split: the original's, negated. */
  readonly advanceQuantity: Decimal
  readonly arrearQuantity: Decimal
  readonly arrearCharge: Decimal
  readonly reason: string | null
}

/**
 * Writes the reversing row and marks the original `reversed_by` it: two
 * statements, in the caller's transaction, which holds the original's lock.
 * The balances and the wallet move back through the ledger's other doors.
 */
export const reverseUsageRow = (sql: SqlClient.SqlClient, reversal: UsageReversal): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { cycleIndex, organizationId, reversalId, usageLogId: id } = reversal
    const remaining = reversal.balanceRemaining
    yield* orDie(sql`INSERT INTO usage_log (
              organization_id, id, customer_id, meter, entitlement_id, entitlement_name, agent_key, model,
              quantity, provider_cost, customer_cost, billing_mode, balance_remaining, purchase_id, signal_id,
              message_id, run_id, composite_id, composite_ref, composite_value, member, custom,
              occurred_at, cycle_index, advance_quantity, arrear_quantity, arrear_charge, reverses, reason)
            SELECT organization_id, ${reversalId}, customer_id, meter, entitlement_id, entitlement_name, agent_key,
                   model, -quantity, -provider_cost, -customer_cost, billing_mode,
                   ${remaining === null ? null : toSql(remaining)}::numeric, purchase_id, signal_id,
                   ${makeId("msg")}, run_id, composite_id, composite_ref, composite_value, member, custom,
                   coalesce(occurred_at, created_at), ${cycleIndex}::integer, ${toSql(reversal.advanceQuantity)}::numeric,
                   ${toSql(reversal.arrearQuantity)}::numeric, ${toSql(reversal.arrearCharge)}::numeric,
                   id, ${reversal.reason}
            FROM usage_log
            WHERE organization_id = ${organizationId} AND id = ${id}`)
    yield* orDie(sql`UPDATE usage_log SET reversed_by = ${reversalId}
            WHERE organization_id = ${organizationId} AND id = ${id}`)
  })
