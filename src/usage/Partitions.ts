/**
 * The usage log's months (docs/operations.md, "History: retention of the inbox
 * and partitions of the usage log"; docs/scaling.md, "The usage log's months").
 * `usage_log` is partitioned by the UTC month of `created_at`
 * (migrations/0007_signals.sql). The history job (src/history/HistoryJob.ts)
 * keeps it so on a schedule:
 *
 * - months ahead: this month's partition and the next two exist before a row
 *   needs them (the signal worker also makes sure of this month and the next,
 *   once a process and month);
 * - old months detached: a month that ended more than the months kept ago
 *   leaves `usage_log` (`ALTER TABLE ... DETACH PARTITION`) and stays in the
 *   database as a table of its own, with its name (`usage_log_2024_01`), for an
 *   operator to read, archive or drop.
 *
 * Months follow the database's clock, as `created_at` does (its default is
 * `now()`), never the job's `--now`: a worker told a far-off instant must not
 * detach the month that rows are being written to.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { orDie, sqlState } from "../db/Sql.ts"

/** A month partition's name: `usage_log_YYYY_MM`. */
const MONTH_NAME = /^usage_log_(\d{4})_(\d{2})$/

/** The first instant (UTC) of the month a partition named `name` holds, or undefined for another name. */
export const monthOfPartition = (name: string): Date | undefined => {
  const match = MONTH_NAME.exec(name)
  if (match === null) return undefined
  const month = Number(match[2])
  return month >= 1 && month <= 12 ? new Date(Date.UTC(Number(match[1]), month - 1, 1)) : undefined
}

/**
 * The partitions to detach at `now`: those of a month before the current UTC
 * month less `monthsKept` (kept: the current month and the `monthsKept` before
 * it). None when `monthsKept` is 0 (detaching is off). Oldest first.
 */
export const monthsToDetach = (names: ReadonlyArray<string>, now: Date, monthsKept: number): ReadonlyArray<string> => {
  if (monthsKept <= 0) return []
  const oldestKept = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - monthsKept, 1)
  return names
    .flatMap((name) => {
      const month = monthOfPartition(name)
      return month !== undefined && month.getTime() < oldestKept ? [[name, month.getTime()] as const] : []
    })
    .sort((a, b) => a[1] - b[1])
    .map(([name]) => name)
}

/** How long a detach waits for the table's lock before it gives up until the next pass. */
export const DETACH_LOCK_TIMEOUT = "2s"

/** What one upkeep did. */
export interface Upkeep {
  readonly detached: ReadonlyArray<string>
  /** Months whose detach waited too long for the lock: tried again next pass. */
  readonly busy: ReadonlyArray<string>
}

/**
 * One upkeep: the months ahead created, then every month older than the months
 * kept detached, each in a transaction of its own. A detach takes an exclusive
 * lock on `usage_log` for an instant, but waits for the transactions writing
 * to it first, and every new writer queues behind it while it waits: so it
 * waits at most DETACH_LOCK_TIMEOUT (the drain pauses no longer), and a month
 * it could not take is tried again on the next pass. `CONCURRENTLY` is not
 * allowed while the table has a DEFAULT partition.
 */
export const keepUsageLogMonths = (sql: SqlClient.SqlClient, monthsKept: number): Effect.Effect<Upkeep> =>
  Effect.gen(function*() {
    yield* orDie(sql`SELECT ensure_usage_log_month(now()), ensure_usage_log_month(now() + interval '1 month'),
                            ensure_usage_log_month(now() + interval '2 months')`)
    if (monthsKept <= 0) return { detached: [], busy: [] }
    const [clock] = yield* orDie(sql<{ readonly now: Date }>`SELECT now() AS now`)
    const attached = yield* orDie(sql<{ readonly name: string }>`SELECT c.relname AS name
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'usage_log'::regclass`)
    const due = monthsToDetach(attached.map((row) => row.name), new Date(clock!.now), monthsKept)
    const detached: Array<string> = []
    const busy: Array<string> = []
    for (const name of due) {
      const done = yield* Effect.gen(function*() {
        yield* sql`SET LOCAL lock_timeout = ${sql.literal(`'${DETACH_LOCK_TIMEOUT}'`)}`
        // The lock ensure_usage_log_month takes: a month is never created and detached at once.
        yield* sql`SELECT pg_advisory_xact_lock(hashtext('usage_log_partitions'))`
        yield* sql`ALTER TABLE usage_log DETACH PARTITION ${sql(name)}`
      }).pipe(
        sql.withTransaction,
        Effect.as(true),
        // 55P03: the lock was not granted in time.
        Effect.catchIf((error) => sqlState(error) === "55P03", () => Effect.succeed(false)),
        orDie
      )
      ;(done ? detached : busy).push(name)
    }
    if (detached.length > 0) yield* Effect.logInfo(`usage log months detached: ${detached.join(", ")}`)
    if (busy.length > 0) yield* Effect.logWarning(`usage log months not detached (the table was busy), tried again next pass: ${busy.join(", ")}`)
    return { detached, busy }
  })
