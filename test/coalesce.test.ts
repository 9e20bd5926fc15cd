/**
 * Coalesced reads (src/db/Coalesce.ts): reads that arrive while a lane is
 * busy go together in its next batch, each answered from its own position; a
 * failed batch fails every read in it, and only those; a read inside a
 * transaction goes alone, on the transaction's connection. A read by callback
 * (`unsafeRead`, the check lane's) joins the same batches, is answered once,
 * and not at all once withdrawn.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { makeCoalescer } from "../src/db/Coalesce.ts"
import { MigratedTestDatabase } from "./support/Layers.ts"

/** A coalescer over a read that waits on `gate` and records each batch it was given. */
const gatedCoalescer = (lanes: number, maxBatch: number) =>
  Effect.gen(function*() {
    const batches: Array<ReadonlyArray<number>> = []
    const gate = yield* Deferred.make<void>()
    const { read, unsafeRead } = yield* makeCoalescer({
      run: (batch: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          batches.push(batch)
          yield* Deferred.await(gate)
          if (batch.includes(13)) return yield* Effect.fail(`batch of ${batch.join(",")} refused` as const)
          return batch.map((n) => n * 10)
        }),
      lanes,
      maxBatch
    })
    return { read, unsafeRead, batches, gate }
  })

layer(MigratedTestDatabase, { timeout: 60_000 })("makeCoalescer", (it) => {
  /** Read 1 holds the one lane; reads 2..6 wait for it. Each is answered from its position; the batches sent. */
  const oneThenFiveWaiting = (maxBatch: number) =>
    Effect.gen(function*() {
      const { batches, gate, read } = yield* gatedCoalescer(1, maxBatch)
      const first = yield* Effect.fork(read(1))
      yield* Effect.yieldNow()
      const rest = yield* Effect.forkAll([2, 3, 4, 5, 6].map(read))
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(10)
      expect(yield* Fiber.join(rest)).toEqual([20, 30, 40, 50, 60])
      return batches
    })

  it.scoped("sends the reads that waited for a busy lane as one batch, each answered from its position", () =>
    Effect.gen(function*() {
      // The one lane holds [1]; the five waiting go together.
      expect(yield* oneThenFiveWaiting(64)).toEqual([[1], [2, 3, 4, 5, 6]])
    }))

  it.scoped("cuts batches at maxBatch", () =>
    Effect.gen(function*() {
      expect(yield* oneThenFiveWaiting(2)).toEqual([[1], [2, 3], [4, 5], [6]])
    }))

  it.scoped("fails every read of a failed batch with its failure, and no other read", () =>
    Effect.gen(function*() {
      const { gate, read } = yield* gatedCoalescer(1, 64)
      const first = yield* Effect.fork(read(1))
      yield* Effect.yieldNow()
      const together = yield* Effect.forkAll([12, 13, 14].map((n) => Effect.exit(read(n))))
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(10)
      const exits = yield* Fiber.join(together)
      expect(exits.map((exit) => Exit.isFailure(exit))).toEqual([true, true, true])
      expect(exits[0]).toStrictEqual(Exit.fail("batch of 12,13,14 refused"))
      expect(yield* read(7)).toBe(70)
    }))

  it.scoped("reads alone inside a transaction, on the transaction's connection", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { read } = yield* makeCoalescer({
        run: (batch: ReadonlyArray<string>) =>
          Effect.map(
            sql<{ seen: string | null }>`SELECT current_setting('coalesce_test.marker', true) AS seen`,
            (rows) => batch.map((input) => `${input}:${rows[0]?.seen ?? ""}`)
          ).pipe(Effect.orDie),
        lanes: 2,
        maxBatch: 64
      })
      const inside = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT set_config('coalesce_test.marker', 'in-transaction', true)`
        return yield* read("a")
      })).pipe(Effect.orDie)
      expect(inside).toBe("a:in-transaction")
      expect(yield* read("b")).toBe("b:")
    }))

  it.scoped("answers a read by callback from the same batches, once; a withdrawn read is left out and never answered", () =>
    Effect.gen(function*() {
      const { batches, gate, read, unsafeRead } = yield* gatedCoalescer(1, 64)
      const first = yield* Effect.fork(read(1))
      yield* Effect.yieldNow()
      const answers: Array<readonly [number, Exit.Exit<number, string>]> = []
      unsafeRead(2, (exit) => answers.push([2, exit]))
      const withdraw = unsafeRead(3, (exit) => answers.push([3, exit]))
      unsafeRead(4, (exit) => answers.push([4, exit]))
      withdraw()
      // A caller whose answer throws does not stop the lane: the reads after it are answered.
      unsafeRead(5, () => {
        throw new Error("the caller's own failure")
      })
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(10)
      expect(yield* read(6)).toBe(60)
      expect(answers).toEqual([[2, Exit.succeed(20)], [4, Exit.succeed(40)]])
      expect(batches).toEqual([[1], [2, 4, 5], [6]])
    }))

  it.effect("answers a read still waiting when the coalescer's scope closes: interrupted, not left hanging", () =>
    Effect.gen(function*() {
      const answers: Array<Exit.Exit<number, never>> = []
      yield* Effect.scoped(Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { read, unsafeRead } = yield* makeCoalescer({
          run: (batch: ReadonlyArray<number>) => Effect.as(Deferred.await(gate), batch),
          lanes: 1,
          maxBatch: 1
        })
        yield* Effect.fork(read(1))
        yield* Effect.yieldNow()
        unsafeRead(2, (exit) => answers.push(exit))
        unsafeRead(3, (exit) => answers.push(exit))
      }))
      expect(answers.map(Exit.isInterrupted)).toEqual([true, true])
    }))
})
