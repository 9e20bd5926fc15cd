/**
 * The worker kit: it runs the jobs it is given (the list is src/app/Jobs.ts:
 * pricing queued signals, delivering webhooks, renewing billing cycles). Each
 * job does one batch of due work and says how much it did; `--once` repeats
 * until every job is idle, for cron; otherwise each job loops until
 * interrupted, sleeping while idle (or until the job is told of new work:
 * `awaitWork`). Jobs claim work with `FOR UPDATE SKIP
 * LOCKED`, so any number of workers may run side by side.
 *
 * The kit knows no service: a job arrives built, its feature's services
 * already provided (a service offers its job, or `jobOf` builds one).
 */
import { type Cause, Duration, Effect, Schedule } from "effect"
import { faultOf, transientBackoff } from "../db/Faults.ts"
import { givenOrCurrentTime } from "../time.ts"
import { type BatchReport, makeReports, type Reports, watchBatch } from "./Stats.ts"

export interface WorkerJob {
  readonly name: string
  /** One batch of work due at `now`; the number of items handled (0 when idle). */
  readonly runOnce: (now: Date) => Effect.Effect<number>
  /**
   * How a looping worker waits while this job is idle: `idle` at most, less
   * when the job learns of new work (the signal processor's wake on queued
   * signals, src/signals/QueueWake.ts). Without it, the job sleeps `idle`.
   */
  readonly awaitWork?: ((idle: Duration.DurationInput) => Effect.Effect<void>) | undefined
}

/** A job whose batch needs services: built where they are provided, it keeps them. */
export const jobOf = <R>(
  name: string,
  runOnce: (now: Date) => Effect.Effect<number, never, R>
): Effect.Effect<WorkerJob, never, R> =>
  Effect.map(Effect.context<R>(), (services) => ({
    name,
    runOnce: (now) => Effect.provide(runOnce(now), services)
  }))

export interface WorkerOptions {
  /** Drain and stop instead of looping. */
  readonly once: boolean
  /** The instant the cycle job treats as now (`--now`); default: the Clock's (src/time.ts). */
  readonly now?: Date | undefined
  /** How long to sleep when every job is idle. */
  readonly idle: Duration.DurationInput
  /**
   * Told what every batch did (idle polls included, with `handled: 0`), for a
   * live view or log lines. Without it, jobs count nothing and probe no queue.
   */
  readonly onBatch?: ((report: BatchReport) => Effect.Effect<void>) | undefined
}

/**
 * When a failed batch is tried again: while its failure is transient (a lost
 * connection, a restarting server: src/db/Faults.ts) at most 500 ms apart for
 * TRANSIENT_RETRY_WINDOW, so the database answering again is noticed at once;
 * any other failure three times, 100 ms doubling.
 */
const retryFailedBatch = Schedule.union(
  Schedule.whileInput(transientBackoff, (cause: Cause.Cause<unknown>) => faultOf(cause) === "Transient"),
  Schedule.intersect(Schedule.exponential("100 millis"), Schedule.recurs(3))
)

/**
 * One batch of a job. A failed batch is retried as a warning
 * (`retryFailedBatch`), so `--once` does not stop with work left; only then is
 * it logged as an error and counted as idle, so one job never stops another.
 * Every batch is one transaction: a failed one wrote nothing.
 */
const batch = (job: WorkerJob, options: WorkerOptions) =>
  Effect.flatMap(givenOrCurrentTime(options.now), job.runOnce).pipe(
    Effect.sandbox,
    Effect.tapError((cause) => Effect.logWarning(`worker job ${job.name} failed; retrying`, cause)),
    Effect.retry(retryFailedBatch),
    Effect.catchAll((cause) => Effect.as(Effect.logError(`worker job ${job.name} failed`, cause), 0))
  )

const watched = (job: WorkerJob, options: WorkerOptions, reports: Reports) =>
  options.onBatch === undefined ? batch(job, options) : watchBatch(job.name, batch(job, options), options.onBatch, reports)

/** Repeats a job's batches until one handles nothing; the total handled, once every report is told. */
const drain = (job: WorkerJob, options: WorkerOptions) =>
  Effect.flatMap(makeReports, (reports) =>
    Effect.iterate({ total: 0, last: -1 }, {
      while: (state) => state.last !== 0,
      body: (state) => Effect.map(watched(job, options, reports), (handled) => ({ total: state.total + handled, last: handled }))
    }).pipe(Effect.zipLeft(reports.flush), Effect.map((state) => state.total)))

/**
 * Runs every job in its own loop, side by side, so a slow one (a webhook
 * receiver timing out) never holds up another (pricing signals). With `once`,
 * returns the total handled when every job is idle.
 */
export const runWorker = (jobs: ReadonlyArray<WorkerJob>, options: WorkerOptions) =>
  options.once
    ? Effect.map(
      Effect.forEach(jobs, (job) => drain(job, options), { concurrency: "unbounded" }),
      (totals) => totals.reduce((a, b) => a + b, 0)
    )
    : Effect.as(
      Effect.forEach(
        jobs,
        (job) =>
          Effect.forever(
            Effect.flatMap(drain(job, options), () => job.awaitWork?.(options.idle) ?? Effect.sleep(options.idle))
          ),
        { concurrency: "unbounded", discard: true }
      ),
      0
    )

export const pollInterval = (): Duration.Duration =>
  Duration.millis(Number(process.env.BILLING_WORKER_POLL_MS ?? 250))
