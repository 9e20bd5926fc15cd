/**
 * The archive of ended signals (`signals_archive`, migrations/0021): where the
 * history job (Retention.ts) moves PROCESSED and FAILED signals once they are
 * older than the retention window. What the rest of the service asks of it:
 *
 * - a rawId is answered from here when the inbox no longer holds it
 *   (`GET /signals/{rawId}`, `billing signal show`: InboxView.get);
 * - an idempotency key is answered by its first signal wherever it is (the
 *   intake's insert and its look-up of taken keys, InboxInsert.ts; a
 *   completion's replay, Completions.ts);
 * - a FAILED signal replayed by an operator goes back to the inbox, QUEUED
 *   (`restoreFailed`).
 *
 * Rows are copied between the two tables column by column, by name, with the
 * inbox's columns as the catalogue lists them: a column a later migration adds
 * to both is carried without a change here.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, type Option } from "effect"
import { findOne, orDie } from "../db/Sql.ts"
import { SignalRecord } from "./Signal.ts"

/** The inbox's columns, in the catalogue's order, each as a quoted identifier. */
export const inboxColumns = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(
    orDie(sql<{ readonly columnName: string }>`SELECT column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'signals' ORDER BY ordinal_position`),
    (rows) => rows.map((row) => `"${row.columnName.replaceAll("\"", "\"\"")}"`)
  )

/** A signal of the archive, by rawId, within its organisation. */
export const archivedSignal = (sql: SqlClient.SqlClient, organizationId: string, id: string): Effect.Effect<Option.Option<SignalRecord>> =>
  findOne(SignalRecord, sql`SELECT * FROM signals_archive WHERE organization_id = ${organizationId} AND id = ${id}`)

/**
 * A FAILED signal of the archive back into the inbox, as it was (the caller
 * then queues it again, in the same transaction). The archive's row goes once
 * the inbox holds it, so the signal is in one table or the other at every
 * commit. False when the archive holds no FAILED signal by that id, or the
 * inbox holds the signal still (copied, not yet removed: that row is the one).
 */
export const restoreFailed = (sql: SqlClient.SqlClient, organizationId: string, id: string): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const columns = (yield* inboxColumns(sql)).join(", ")
    const restored = yield* orDie(sql`INSERT INTO signals (${sql.literal(columns)})
      SELECT ${sql.literal(columns)} FROM signals_archive
      WHERE organization_id = ${organizationId} AND id = ${id} AND status = 'FAILED'
        AND NOT EXISTS (SELECT 1 FROM signals WHERE organization_id = ${organizationId} AND id = ${id})
      RETURNING id`)
    if (restored.length === 0) return false
    yield* forgetArchived(sql, organizationId, id)
    return true
  })

/**
 * Removes the archive's copy of a signal the inbox still holds: a signal
 * replayed between the job's copy and its removal from the inbox is live again,
 * and its copy would be out of date. Run after the inbox row's update, in its
 * transaction: that update waited for the job's copy to commit (the copy locks
 * the rows it copies), so this statement sees the copy.
 */
export const forgetArchived = (sql: SqlClient.SqlClient, organizationId: string, id: string): Effect.Effect<void> =>
  Effect.asVoid(orDie(sql`DELETE FROM signals_archive WHERE organization_id = ${organizationId} AND id = ${id}`))
