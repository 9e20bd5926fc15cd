/**
 * Retention of the `signals` inbox (docs/operations.md, "History: retention of
 * the inbox and partitions of the usage log"): signals that ended (PROCESSED or
 * FAILED) longer ago than the retention window leave the inbox for the archive
 * (SignalArchive.ts), in bounded batches, one organisation at a time, each batch
 * its own transaction. The history job (src/history/HistoryJob.ts) runs it.
 *
 * A signal leaves in two steps, a pass of the job apart (`moveBatch`):
 *  1. copied into the archive (the inbox keeps it meanwhile);
 *  2. removed from the inbox once its copy is at least `SETTLE_MS` old.
 * Why two: the intake's insert decides that a key is taken by the inbox's unique
 * index, or by the archive as its statement's snapshot sees it. Had one
 * transaction copied and removed the row, an insert that started just before
 * its commit would see the key in neither place (the archive's row not yet
 * committed for its snapshot, the inbox's gone when its index check ran) and
 * accept a repeated key as new. With the copy committed a minute before the
 * removal, every insert that could meet the removal already sees the copy.
 *
 * What never moves: QUEUED and PENDING signals (waiting work), the steps of an
 * outcome run not completed yet or whose completion is not priced yet (the
 * completion reads them), and tagged signals whose composite occurrence has not
 * completed (its readiness counts them). They move once that is over.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, type Option, Schema } from "effect"
import { findOne, orDie } from "../db/Sql.ts"
import { suffixOf } from "../ids.ts"

/** How long a copy waits in the archive before its inbox row is removed (see above). */
export const SETTLE_MS = 60_000

/** Signals copied, or removed, per transaction. */
export const RETENTION_BATCH = 2_000

const DAY_MS = 86_400_000

/** The instant before which an ended signal leaves the inbox: `now` less the window. */
export const retentionCutoff = (now: Date, days: number): Date => new Date(now.getTime() - days * DAY_MS)

/**
 * Every signal id made before `at` sorts below this one: ids are the time in
 * milliseconds then randomness (src/ids.ts), so the id range bounds the scan of
 * an organisation's inbox by its primary key. Only a bound: the rule itself is
 * on `processed_at`.
 */
export const signalIdBefore = (at: Date): string => `sig_${suffixOf(Math.max(0, at.getTime()), { high: 0, low: 0 })}`

/** What one batch of an organisation did, and where the next one starts. */
export interface Step {
  /** Signals the batch went through: copied, removed, or left for the next pass (a copy not settled yet). */
  readonly count: number
  /** The last id it went through: the next batch starts after it. */
  readonly last: string | null
  /** Copied into the archive. */
  readonly copied: number
  /** Removed from the inbox (their copy had settled): moved. */
  readonly dropped: number
}

const StepRow = Schema.Struct({
  count: Schema.Number,
  last: Schema.NullOr(Schema.String),
  copied: Schema.Number,
  dropped: Schema.Number
})

/**
 * A batch's statement in a transaction of its own, without JIT compilation:
 * estimated over the whole history of an organisation, the statement's cost
 * passes `jit_above_cost`, and compiling it took longer than moving the
 * batch's rows (EXPLAIN ANALYZE; docs/benchmarks.md, "Figures that were in
 * code comments").
 */
const batchStatement = (sql: SqlClient.SqlClient, statement: Effect.Effect<Option.Option<typeof StepRow.Type>>): Effect.Effect<Step> =>
  orDie(sql`SET LOCAL jit = off`).pipe(
    Effect.zipRight(statement),
    Effect.map((found) => (found._tag === "Some" ? found.value : { count: 0, last: null, copied: 0, dropped: 0 })),
    sql.withTransaction,
    orDie
  )

/** The moments and bounds one pass works with. */
export interface PassBounds {
  /** Ended before this: copied. */
  readonly cutoff: Date
  /** `signalIdBefore(cutoff)`. */
  readonly cutoffId: string
  /** The copies' `archived_at`: the job's now. */
  readonly archivedAt: Date
  /** Copies made at or before this leave the inbox: now less SETTLE_MS. */
  readonly settledBefore: Date
}

export const passBounds = (now: Date, days: number): PassBounds => {
  const cutoff = retentionCutoff(now, days)
  return { cutoff, cutoffId: signalIdBefore(cutoff), archivedAt: now, settledBefore: new Date(now.getTime() - SETTLE_MS) }
}

/**
 * One batch of one organisation: its next `limit` ended signals older than the
 * cutoff, after `after` in id order, each either
 *  - copied into the archive, when it has no copy yet (step 1), or
 *  - removed from the inbox, when its copy has settled (step 2),
 * in one statement, one transaction. A row whose copy is younger waits for the
 * next pass. The inbox's rows are locked while the batch runs (`FOR UPDATE
 * SKIP LOCKED`): a replay of one of them waits for the batch's commit, then
 * drops the copy (InboxView.replay); two jobs side by side take different rows.
 * Only a row still ended as its copy says is removed.
 *
 * The statement is driven by the inbox's primary key from `after`: each row's
 * copy is found by the archive's primary key (a lateral probe, whatever the
 * statistics say of the archive's size), and the rules of what stays are
 * probes per row too (`OFFSET 0` keeps PostgreSQL from hashing every outcome
 * run and occurrence of the database for each batch).
 * `columns`: the inbox's columns (SignalArchive.inboxColumns).
 */
export const moveBatch = (
  sql: SqlClient.SqlClient,
  columns: ReadonlyArray<string>,
  organizationId: string,
  bounds: PassBounds,
  after: string,
  limit: number = RETENTION_BATCH
): Effect.Effect<Step> => {
  const list = sql.literal(columns.join(", "))
  const fromInbox = sql.literal(columns.map((column) => `s.${column}`).join(", "))
  return batchStatement(
    sql,
    findOne(
      StepRow,
      sql`WITH candidates AS MATERIALIZED (
            SELECT s.organization_id, s.id, s.status, s.processed_at FROM signals s
            WHERE s.organization_id = ${organizationId} AND s.id > ${after} AND s.id < ${bounds.cutoffId}
              AND s.status IN ('PROCESSED', 'FAILED') AND s.processed_at < ${bounds.cutoff}
              -- A step stays while its run is open, and while the run's completion waits to be priced.
              AND (s.route <> 'OUTCOME' OR EXISTS (
                SELECT 1 FROM outcome_runs r
                WHERE r.organization_id = s.organization_id AND r.run_id = s.run_id
                  AND NOT EXISTS (
                    SELECT 1 FROM signals c
                    WHERE c.organization_id = r.organization_id AND c.id = r.signal_id AND c.status IN ('QUEUED', 'PENDING'))
                OFFSET 0))
              -- A tagged signal stays until its occurrence has completed (a failed one never counted).
              AND (s.composite_ref IS NULL OR s.status = 'FAILED' OR EXISTS (
                SELECT 1 FROM composite_occurrences o
                JOIN composites k ON k.organization_id = o.organization_id AND k.id = o.composite_id
                WHERE o.organization_id = s.organization_id AND k.ref_id = s.composite_ref
                  AND o.value = s.composite_value AND o.status = 'COMPLETED'
                OFFSET 0))
            ORDER BY s.id
            LIMIT ${limit}
            FOR UPDATE OF s SKIP LOCKED
          ),
          copies AS MATERIALIZED (
            SELECT c.id, c.status AS inbox_status, c.processed_at AS inbox_processed_at,
                   a.archived_at, a.status, a.processed_at
            FROM candidates c
            LEFT JOIN LATERAL (
              SELECT a.archived_at, a.status, a.processed_at FROM signals_archive a
              WHERE a.organization_id = c.organization_id AND a.id = c.id
              LIMIT 1
            ) a ON true
          ),
          copied AS (
            INSERT INTO signals_archive (${list}, archived_at)
            SELECT ${fromInbox}, ${bounds.archivedAt}::timestamptz
            FROM copies k JOIN signals s ON s.organization_id = ${organizationId} AND s.id = k.id
            WHERE k.archived_at IS NULL
            ON CONFLICT DO NOTHING
            RETURNING 1
          ),
          dropped AS (
            DELETE FROM signals s USING copies k
            WHERE s.organization_id = ${organizationId} AND s.id = k.id AND s.status IN ('PROCESSED', 'FAILED')
              AND k.archived_at <= ${bounds.settledBefore}::timestamptz
              AND k.status = k.inbox_status AND k.processed_at IS NOT DISTINCT FROM k.inbox_processed_at
            RETURNING 1
          )
          SELECT (SELECT count(*) FROM candidates)::int AS count, (SELECT max(id) FROM candidates) AS last,
                 (SELECT count(*) FROM copied)::int AS copied, (SELECT count(*) FROM dropped)::int AS dropped`
    )
  )
}
