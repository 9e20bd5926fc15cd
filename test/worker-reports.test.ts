/**
 * A watched worker's reports (src/worker/Stats.ts, src/worker/Worker.ts): the
 * queue is measured once a batch is done, beside the job's next batch, and
 * the reports are told in the order of the batches, every one before
 * `worker --once` returns. Pure: a job of our own, a queue measure that takes
 * the time we give it (TestClock), no database.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import { reportQueue, tally } from "../src/worker/Stats.ts"
import type { BatchReport } from "../src/worker/Stats.ts"
import { runWorker, type WorkerJob } from "../src/worker/Worker.ts"

/** A `signals` job whose batch `index` (0, 1, ...) is `body(index)`. */
const jobOfBatches = (body: (index: number) => Effect.Effect<number>): WorkerJob => {
  let batch = 0
  return { name: "signals", runOnce: () => Effect.suspend(() => body(batch++)) }
}

describe("a watched worker's reports", () => {
  it.effect("are told in batch order, after slow queue measures, and all before --once returns", () =>
    Effect.gen(function*() {
      const told: Array<BatchReport> = []
      const batchesStarted: Array<number> = []
      // Three batches that do work, then an idle one; the first batch's queue takes longest to measure.
      const handled = [5, 3, 2, 0]
      const measureMs = [300, 100, 10, 0]
      const job = jobOfBatches((index) =>
        Effect.gen(function*() {
          batchesStarted.push(index)
          yield* tally(Array.from({ length: handled[index]! }, () => ["org_a", "priced"] as const))
          yield* reportQueue(Effect.as(Effect.sleep(measureMs[index]!), { depth: 10 - index, lagMs: index }))
          return handled[index]!
        })
      )
      const run = yield* Effect.fork(runWorker([job], {
        once: true,
        idle: "1 second",
        onBatch: (report) => Effect.sync(() => told.push(report))
      }))
      // Every batch ran at once: none waited for the measure of the one before.
      yield* TestClock.adjust("1 millis")
      expect(batchesStarted).toEqual([0, 1, 2, 3])
      expect(told).toEqual([])
      // --once has not returned: the first batch's measure is still running.
      expect(yield* Fiber.poll(run)).toMatchObject({ _tag: "None" })
      yield* TestClock.adjust("300 millis")
      const total = yield* Fiber.join(run)
      expect(total).toBe(10)
      expect(told.map((report) => [report.handled, report.queue])).toEqual([
        [5, { depth: 10, lagMs: 0 }],
        [3, { depth: 9, lagMs: 1 }],
        [2, { depth: 8, lagMs: 2 }],
        [0, { depth: 7, lagMs: 3 }]
      ])
      expect(told[0]!.byOrganization).toEqual({ org_a: { priced: 5 } })
    }))

  it.effect("a measure that fails reports no queue and stops nothing", () =>
    Effect.gen(function*() {
      const told: Array<BatchReport> = []
      const job = jobOfBatches((index) =>
        Effect.as(
          reportQueue(index === 0 ? Effect.fail("the database went away") : Effect.succeed({ depth: 0, lagMs: 0 })),
          index === 0 ? 1 : 0
        )
      )
      const done = yield* Deferred.make<number>()
      yield* Effect.fork(Effect.flatMap(
        runWorker([job], { once: true, idle: "1 second", onBatch: (report) => Effect.sync(() => told.push(report)) }),
        (total) => Deferred.succeed(done, total)
      ))
      expect(yield* Deferred.await(done)).toBe(1)
      expect(told.map((report) => report.queue)).toEqual([null, { depth: 0, lagMs: 0 }])
    }))
})
