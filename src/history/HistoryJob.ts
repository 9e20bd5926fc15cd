/**
 * The worker's history job (docs/operations.md, "History: retention of the
 * inbox and partitions of the usage log"): what keeps history from slowing the
 * present. Once a pass is due (every PASS_EVERY_MS of the job's clock, and at a
 * worker's start), it
 *  1. keeps the usage log's months: three months ahead created, months older
 *     than `BILLING_USAGE_LOG_MONTHS` detached (src/usage/Partitions.ts);
 *  2. moves ended signals older than `BILLING_SIGNAL_RETENTION_DAYS` from the
 *     inbox to the archive, organisation by organisation, in batches of
 *     RETENTION_BATCH, each its own transaction: a row without a copy is
 *     copied, a row whose copy has settled (made by an earlier pass) leaves
 *     the inbox (src/signals/Retention.ts);
 *  3. deletes the records of `Idempotency-Key` headers first used 24 hours
 *     or more before `now` (src/idempotency/KeyedRequests.ts; a request reads
 *     an older one as expired anyway, so this only keeps the table small).
 * Each call of the job does one batch and says how many signals it went
 * through, so `worker --once` runs a whole pass and a looping worker lets its
 * other jobs run between batches. Between passes a call costs nothing (no
 * statement).
 *
 * The clock is the job's `now` (a test's or an operator's `--now`, else the
 * service's Clock): the retention window counts back from it. The usage log's
 * months follow the database's clock (Partitions.ts says why).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import { moveBatch, passBounds, type PassBounds } from "../signals/Retention.ts"
import { inboxColumns } from "../signals/SignalArchive.ts"
import { keepUsageLogMonths } from "../usage/Partitions.ts"
import { purgeExpiredKeys } from "../idempotency/KeyedRequests.ts"
import { tally } from "../worker/Stats.ts"
import type { WorkerJob } from "../worker/Worker.ts"

export const historyJobName = "history"

/** How often a pass runs: the window moves by a day a day, so a pass every ten minutes keeps up. */
export const PASS_EVERY_MS = 10 * 60_000

/** What the history job keeps, from the environment (docs/operations.md; README "Configuration"). */
export interface HistorySettings {
  /** Days an ended signal stays in the inbox before it moves to the archive; 0: it never moves. */
  readonly signalRetentionDays: number
  /** Months of the usage log kept attached before the current one; 0: none is detached. */
  readonly usageLogMonths: number
}

export const DEFAULT_SIGNAL_RETENTION_DAYS = 35
export const DEFAULT_USAGE_LOG_MONTHS = 24

const wholeNumber = (
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  valid: (n: number) => boolean,
  expected: string
): Either.Either<number, string> => {
  const text = env[name]?.trim()
  if (text === undefined || text === "") return Either.right(fallback)
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(value) && valid(value)
    ? Either.right(value)
    : Either.left(`${name} must be ${expected}; got ${JSON.stringify(env[name])}`)
}

/**
 * The settings, or why they are refused (the job then does nothing, and logs
 * why at every pass). The retention window is at least a day, so that a signal is
 * never moved while a client may still be waiting on it; the usage log keeps at
 * least the month before the current one, so that last month's usage (late
 * signals, reversals, the draft invoices of a grace period) stays in the API.
 */
export const historySettingsOf = (env: Readonly<Record<string, string | undefined>>): Either.Either<HistorySettings, string> =>
  Either.all({
    signalRetentionDays: wholeNumber(
      env,
      "BILLING_SIGNAL_RETENTION_DAYS",
      DEFAULT_SIGNAL_RETENTION_DAYS,
      (n) => n === 0 || (n >= 1 && n <= 36_500),
      "a whole number of days from 1 to 36500, or 0 to keep every signal in the inbox"
    ),
    usageLogMonths: wholeNumber(
      env,
      "BILLING_USAGE_LOG_MONTHS",
      DEFAULT_USAGE_LOG_MONTHS,
      (n) => n === 0 || (n >= 1 && n <= 1_200),
      "a whole number of months from 1 to 1200, or 0 to detach none"
    )
  })

/** Where a pass is: the organisations left, the one under way and where it is in its inbox. */
interface Pass {
  readonly bounds: PassBounds
  readonly organizations: ReadonlyArray<string>
  index: number
  after: string
}

/** The history job, with the settings of the environment it starts in. */
export const historyJob: Effect.Effect<WorkerJob, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const settings = historySettingsOf(process.env)
  let dueAt = Number.NEGATIVE_INFINITY
  if (Either.isLeft(settings)) {
    // Never a reason to stop pricing signals (serve's worker runs every job together): the job alone
    // stays idle, and says why at every pass it skips (the first at the worker's start).
    const refused = Effect.logError(`the history job does nothing: ${settings.left}`)
    const idle = (now: Date) =>
      Effect.suspend(() => {
        if (now.getTime() < dueAt) return Effect.succeed(0)
        dueAt = now.getTime() + PASS_EVERY_MS
        return Effect.as(refused, 0)
      })
    return { name: historyJobName, runOnce: idle } satisfies WorkerJob
  }
  const { signalRetentionDays, usageLogMonths } = settings.right
  let pass: Pass | undefined
  let columns: ReadonlyArray<string> | undefined

  const startPass = (now: Date) =>
    Effect.gen(function*() {
      // A month that cannot be created or detached is logged and tried next pass; it never holds the inbox's retention up.
      yield* keepUsageLogMonths(sql, usageLogMonths).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("the usage log's months could not be kept; tried again next pass", cause))
      )
      yield* purgeExpiredKeys(sql, now).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("expired idempotency keys could not be deleted; tried again next pass", cause))
      )
      if (signalRetentionDays === 0) return undefined
      columns ??= yield* inboxColumns(sql)
      const organizations = yield* sql<{ readonly id: string }>`SELECT id FROM organizations ORDER BY id`.pipe(Effect.orDie)
      const started: Pass = {
        bounds: passBounds(now, signalRetentionDays),
        organizations: organizations.map((row) => row.id),
        index: 0,
        after: ""
      }
      return started
    })

  /** One batch of the pass; 0 once every organisation is done. */
  const nextBatch = (current: Pass): Effect.Effect<number> =>
    Effect.gen(function*() {
      while (current.index < current.organizations.length) {
        const organizationId = current.organizations[current.index]!
        const step = yield* moveBatch(sql, columns!, organizationId, current.bounds, current.after)
        if (step.count > 0 && step.last !== null) {
          current.after = step.last
          if (step.dropped > 0) yield* tally(Array.from({ length: step.dropped }, () => [organizationId, "archived"] as const))
          return step.count
        }
        // This organisation is done: the next one.
        current.after = ""
        current.index++
      }
      return 0
    })

  const runOnce = (now: Date): Effect.Effect<number> =>
    Effect.gen(function*() {
      if (pass === undefined) {
        if (now.getTime() < dueAt) return 0
        dueAt = now.getTime() + PASS_EVERY_MS
        pass = yield* startPass(now)
        if (pass === undefined) return 0
      }
      const handled = yield* nextBatch(pass)
      if (handled === 0) pass = undefined
      return handled
    })

  return { name: historyJobName, runOnce }
})
