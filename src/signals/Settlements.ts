/**
 * Settling spend holds (issue 26): a priced signal that names a hold of its
 * customer (`reservationId`) ends it as SETTLED in the batch's transaction,
 * with the signal and its usage-log row, so the hold stops counting exactly
 * when the real charge is committed. The hold's amount plays no part in the
 * charge: the signal is priced as any other (an overrun beyond the hold
 * follows the usual rules). Only a HELD, unexpired hold of the same
 * organisation and customer settles, once: a second signal naming it, or one
 * naming an unknown, foreign, released or expired hold, is priced as usual
 * and settles nothing.
 */
import type { SqlClient } from "@effect/sql"

export interface Settlement {
  readonly organizationId: string
  readonly reservationId: string
  readonly customerId: string
  readonly signalId: string
  readonly usageLogId: string
}

/** One statement for the batch, for `writeTogether`; undefined when no signal names a hold. */
export const settleReservationsStatement = (sql: SqlClient.SqlClient, settlements: ReadonlyArray<Settlement>, at: Date) =>
  settlements.length === 0 ? undefined : sql`UPDATE reservations AS r SET
        status = 'SETTLED', ended_at = ${at}, signal_id = v.signal_id, usage_log_id = v.usage_log_id
      FROM (SELECT DISTINCT ON (organization_id, id) * FROM unnest(
        ${settlements.map((s) => s.organizationId)}::text[], ${settlements.map((s) => s.reservationId)}::text[],
        ${settlements.map((s) => s.customerId)}::text[], ${settlements.map((s) => s.signalId)}::text[],
        ${settlements.map((s) => s.usageLogId)}::text[]
      ) AS u(organization_id, id, customer_id, signal_id, usage_log_id) ORDER BY organization_id, id, signal_id) AS v
      WHERE r.organization_id = v.organization_id AND r.id = v.id AND r.customer_id = v.customer_id
        AND r.status = 'HELD' AND r.expires_at > ${at}`
