/**
 * What the worker's batches did, for whoever watches (the CLI's live view,
 * JSON log lines, `--once`'s summary). Jobs count what they finished, per
 * organisation, with `tally`, after their transaction committed, and may say
 * how long their queue is with `reportQueue`. Both do nothing unless the
 * worker was started with `onBatch`: an unwatched worker (serve's loop, cron)
 * pays nothing, not even the queue probe.
 */
import { Effect, Fiber, FiberRef } from "effect"

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
  /** How the job measures its queue, run once the batch is done (`reportQueue`). */
  probe: Effect.Effect<QueueState | null> | null
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

/**
 * Says how the running batch's queue is measured (only when someone watches).
 * The measure runs once the batch is done, beside the job's next batch
 * (`Reports`), so watching never adds a round trip between two batches; a
 * measure that fails reports no queue.
 */
export const reportQueue = <E, R>(measure: Effect.Effect<QueueState, E, R>): Effect.Effect<void, never, R> =>
  Effect.flatMap(FiberRef.get(currentTally), (current) =>
    current === undefined ? Effect.void : Effect.map(Effect.context<R>(), (context) => {
      current.probe = measure.pipe(
        Effect.provide(context),
        Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("the queue could not be measured", cause), null))
      )
    }))

/**
 * A job's reports, told in the order of its batches without holding up the
 * next batch: each is told (its queue measured first) in a fiber of its own
 * that waits for the one before. `flush` waits for the last.
 */
export interface Reports {
  readonly tell: (report: Effect.Effect<void>) => Effect.Effect<void>
  readonly flush: Effect.Effect<void>
}

export const makeReports: Effect.Effect<Reports> = Effect.sync(() => {
  let last: Fiber.RuntimeFiber<void> | undefined
  const after = (fiber: Fiber.RuntimeFiber<void> | undefined) => fiber === undefined ? Effect.void : Effect.asVoid(Fiber.await(fiber))
  return {
    tell: (report) =>
      Effect.suspend(() => {
        const before = last
        return Effect.map(Effect.forkDaemon(Effect.zipRight(after(before), report)), (fiber) => {
          last = fiber
        })
      }),
    flush: Effect.suspend(() => after(last))
  }
})

/** Runs one batch with a fresh tally and hands its report to `onBatch`, through `reports`. */
export const watchBatch = <E, R, R2>(
  job: string,
  batch: Effect.Effect<number, E, R>,
  onBatch: (report: BatchReport) => Effect.Effect<void, never, R2>,
  reports: Reports
): Effect.Effect<number, E, R | R2> =>
  Effect.suspend(() => {
    const current: Tally = { byOrganization: {}, probe: null }
    // What the operator watches: how long the batch took on this process's system clock.
    const started = Date.now()
    return Effect.tap(Effect.locally(batch, currentTally, current), (handled) => {
      const at = new Date()
      const durationMs = Date.now() - started
      // The measure starts now, beside the next batch; only the telling waits for the reports before.
      return Effect.flatMap(
        Effect.all([Effect.context<R2>(), Effect.forkDaemon(current.probe ?? Effect.succeed(null))]),
        ([context, measuring]) =>
          reports.tell(
            Effect.flatMap(Fiber.join(measuring), (queue) =>
              onBatch({ job, at, durationMs, handled, byOrganization: current.byOrganization, queue })).pipe(
                Effect.provide(context)
              )
          )
      )
    })
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
