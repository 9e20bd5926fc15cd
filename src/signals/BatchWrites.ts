/**
 * The statements that write how a batch's signals ended: every signal's end
 * state in one statement (sent inside the ledger's, Ledger.recordUsage), the
 * `signal.refused` events of those that failed, and one signal failed alone
 * when its batch could not be written (Isolation.ts). Built once per
 * service, on its connection and outbox.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, orDie } from "../db/Sql.ts"
import { codeOf } from "../errors.ts"
import { Timestamp } from "../schema.ts"
import type { RefusedSignal, WebhookOutbox } from "../webhooks/Outbox.ts"
import type { SignalRecord } from "./BatchContext.ts"
import { type Ended, internalError } from "./SignalEnd.ts"
import { prepared } from "../db/Prepared.ts"

/** A held signal's reason, as the API would answer it: no active customer holds its externalId (404). */
const pendingCode = codeOf("CustomerNotFound")

/** A refused signal's row, as `signal.refused` tells it. */
const RefusedRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  messageId: Schema.String,
  route: Schema.String,
  customerId: Schema.NullOr(Schema.String),
  externalId: Schema.NullOr(Schema.String),
  agentKey: Schema.NullOr(Schema.String),
  idempotencyKey: Schema.NullOr(Schema.String),
  receivedAt: Timestamp,
  occurredAt: Schema.NullOr(Timestamp),
  errorStatus: Schema.NullOr(Schema.Number),
  errorCode: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String)
})

const refusedSignalOf = (row: typeof RefusedRow.Type): RefusedSignal => ({
  organizationId: row.organizationId,
  rawId: row.id,
  messageId: row.messageId,
  route: row.route,
  customerId: row.customerId,
  externalId: row.externalId,
  agentKey: row.agentKey,
  idempotencyKey: row.idempotencyKey,
  receivedAt: row.receivedAt,
  occurredAt: row.occurredAt,
  error: {
    status: row.errorStatus ?? internalError.status,
    code: row.errorCode ?? internalError.code,
    message: row.errorMessage ?? internalError.message
  }
})

export const makeBatchWrites = (sql: SqlClient.SqlClient, outbox: WebhookOutbox) => {
  /** The end state of each signal of the batch, written in one statement (undefined for none). */
  const finishStatement = (results: ReadonlyArray<readonly [SignalRecord, Ended]>) => {
    if (results.length === 0) return undefined
    const column = <A>(pick: (signal: SignalRecord, outcome: Ended) => A) =>
      results.map(([signal, outcome]) => pick(signal, outcome))
    return prepared(sql)`UPDATE signals AS s SET
            status = v.status, error_status = v.error_status, error_code = v.error_code, error_message = v.error_message,
            customer_id = coalesce(v.customer_id, s.customer_id), usage_log_id = v.usage_log_id,
            attempts = s.attempts + 1, processed_at = now()
          FROM unnest(
            ${column((signal) => signal.organizationId)}::text[], ${column((signal) => signal.id)}::text[],
            ${column((_, o) => (o._tag === "Failed" ? "FAILED" : o._tag === "Pending" ? "PENDING" : "PROCESSED"))}::text[],
            ${column((_, o) => (o._tag === "Failed" ? o.status : o._tag === "Pending" ? 404 : null))}::int[],
            ${column((_, o) => (o._tag === "Failed" ? o.code : o._tag === "Pending" ? pendingCode : null))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? null : o.message))}::text[],
            ${column((_, o) => (o._tag === "Processed" || o._tag === "Failed" ? o.customerId : null))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? o.usageLogId : null))}::text[]
          ) AS v(organization_id, id, status, error_status, error_code, error_message, customer_id, usage_log_id)
          -- Each row found by its primary key (a LATERAL probe of its own), then updated by its ctid: joined to v
          -- by key, an inbox of some tens of thousands of rows was read whole and hashed for every batch, as the
          -- planner guesses 100 rows for any unnest (docs/benchmarks.md "Many customers at once"). The ctid
          -- is stable: the claim locked these rows (FOR UPDATE) for this transaction.
          CROSS JOIN LATERAL (SELECT r.ctid AS row_ctid FROM signals r
                              WHERE r.organization_id = v.organization_id AND r.id = v.id OFFSET 0) found
          WHERE s.ctid = found.row_ctid`
  }

  /**
   * `signal.refused` for the signals `ids` of `organizationIds` just ended
   * FAILED, in the transaction that ended them: read back from their rows
   * (what the claim does not carry: received_at, the idempotency key) only
   * when an endpoint subscribes. The customer is the row's when the
   * workspace has it, and so is the externalId: the customer's own, whether
   * the signal named it by its id or by that externalId (else the one the
   * signal was sent with).
   */
  const tellRefused = (organizationIds: ReadonlyArray<string>, ids: ReadonlyArray<string>) =>
    outbox.signalsRefused(
      organizationIds,
      findAll(
        RefusedRow,
        sql`SELECT s.organization_id, s.id, s.message_id, s.route, c.id AS customer_id,
                     coalesce(c.external_id, s.external_id) AS external_id, s.agent_key,
                     s.idempotency_key, s.received_at, s.occurred_at, s.error_status, s.error_code, s.error_message
              FROM signals s
              LEFT JOIN customers c ON c.organization_id = s.organization_id AND c.id = s.customer_id
              WHERE (s.organization_id, s.id) IN (
                SELECT * FROM unnest(${organizationIds}::text[], ${ids}::text[])) AND s.status = 'FAILED'
              ORDER BY s.id`
      ).pipe(Effect.map((rows) => rows.map(refusedSignalOf)))
    )

  /** Marks one signal FAILED in a transaction of its own: it could not be written with its batch. */
  const failAlone = (signal: SignalRecord) =>
    Effect.zipRight(
      orDie(sql`UPDATE signals SET status = 'FAILED', error_status = 500, error_code = ${internalError.code},
                    error_message = ${internalError.message}, attempts = attempts + 1, processed_at = now()
                  WHERE organization_id = ${signal.organizationId} AND id = ${signal.id} AND status = 'QUEUED'`),
      tellRefused([signal.organizationId], [signal.id])
    ).pipe(sql.withTransaction, orDie)

  return { finishStatement, tellRefused, failAlone } as const
}
