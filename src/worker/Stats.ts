/**
 * What the worker's batches did, for whoever watches (the CLI's live view,
 * JSON log lines, `--once`'s summary). Jobs count what they finished, per
 * organisation, with `tally`, after their transaction committed, and may say
 * how long their queue is with `reportQueue`. Both do nothing unless the
 * worker was started with `onBatch`: an unwatched worker (serve's loop, cron)
 * pays nothing, not even the queue probe.
 */
import { Effect, FiberRef } from "effect"

/** The oldest waiting item's age and the number waiting (capped: see `QUEUE_DEPTH_CAP`). */
export interface QueueState {
  readonly depth: number
  /** How long the oldest waiting item has waited, in milliseconds; 0 when none waits. */
  readonly lagMs: number
}

/** Counting a huge queue would cost more than the batch: past this, depth says "at least". */
export const QUEUE_DEPTH_CAP = 100_000

/** What one batch of one job did. */
export interface BatchReport {
  readonly job: string
  readonly at: Date
  readonly durationMs: number
  /** Items handled, as the job counts them (0: an idle poll). */
  readonly handled: number
  /** Counters per organisation: `{org_1: {priced: 480, failed: 2}}`. */
  readonly byOrganization: Readonly<Record<string, Readonly<Record<string, number>>>>
  /** The job's queue after the batch, where the job measures one. */
  readonly queue: QueueState | null
}

interface Tally {
  readonly byOrganization: Record<string, Record<string, number>>
  queue: QueueState | null
}

const currentTally = FiberRef.unsafeMake<Tally | undefined>(undefined)

/** Counts `n` of `counter` (e.g. "priced") for an organisation in the running batch. */
export const tally = (entries: Iterable<readonly [organizationId: string, counter: string]>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentTally), (current) =>
    Effect.sync(() => {
      if (current === undefined) return
      for (const [organizationId, counter] of entries) {
        const counts = (current.byOrganization[organizationId] ??= {})
        counts[counter] = (counts[counter] ?? 0) + 1
      }
    }))

/** Measures the queue (only when someone watches) and records it for the running batch. */
export const reportQueue = <E, R>(measure: Effect.Effect<QueueState, E, R>): Effect.Effect<void, E, R> =>
  Effect.flatMap(FiberRef.get(currentTally), (current) =>
    current === undefined ? Effect.void : Effect.map(measure, (queue) => {
      current.queue = queue
    }))

/** Runs one batch with a fresh tally and hands its report to `onBatch`. */
export const watchBatch = <E, R, E2, R2>(
  job: string,
  batch: Effect.Effect<number, E, R>,
  onBatch: (report: BatchReport) => Effect.Effect<void, E2, R2>
): Effect.Effect<number, E | E2, R | R2> =>
  Effect.suspend(() => {
    const current: Tally = { byOrganization: {}, queue: null }
    // What the operator watches: how long the batch took on this process's system clock.
    const started = Date.now()
    return Effect.tap(Effect.locally(batch, currentTally, current), (handled) =>
      onBatch({
        job,
        at: new Date(),
        durationMs: Date.now() - started,
        handled,
        byOrganization: current.byOrganization,
        queue: current.queue
      }))
  })

/** Sums reports into per-job, per-organisation totals (`worker --once`'s summary). */
export interface JobSummary {
  readonly job: string
  readonly batches: number
  readonly handled: number
  readonly byOrganization: Record<string, Record<string, number>>
}

export const summarize = (jobs: ReadonlyArray<string>, reports: Iterable<BatchReport>): ReadonlyArray<JobSummary> => {
  const summaries = new Map<string, { job: string; batches: number; handled: number; byOrganization: Record<string, Record<string, number>> }>(
    jobs.map((job) => [job, { job, batches: 0, handled: 0, byOrganization: {} }])
  )
  for (const report of reports) {
    const summary = summaries.get(report.job)
    if (summary === undefined || report.handled === 0) continue
    summary.batches += 1
    summary.handled += report.handled
    for (const [organizationId, counts] of Object.entries(report.byOrganization)) {
      const into = (summary.byOrganization[organizationId] ??= {})
      for (const [counter, n] of Object.entries(counts)) into[counter] = (into[counter] ?? 0) + n
    }
  }
  return [...summaries.values()]
}
