/**
 * Coalesced reads: requests of one kind that arrive while the reads before
 * them are in flight wait, and go to the database together as one statement,
 * as soon as a lane is free. Nothing waits on a timer: a lone request goes at
 * once; under load, batches grow to what arrived during one round trip.
 *
 * Why: on this machine the round trip itself, not the statement, is what a
 * short read costs the process (the socket write that wakes a PostgreSQL
 * backend was 30 % of an API process's time at 64 connections of checks,
 * docs/benchmarks.md "Coalesced check reads"); one statement for 30 requests
 * pays it once.
 *
 * A batch runs on any connection of the pool, where it could not see a
 * transaction's own writes or locks: a read made inside a transaction goes
 * alone, on the transaction's connection.
 */
import { SqlClient } from "@effect/sql"
import { Deferred, Effect, Exit, FiberId, Option, Queue } from "effect"
import type { Scope } from "effect"

export interface CoalesceOptions<I, O, E> {
  /** Reads the batch, answering each input at the same position. */
  readonly run: (batch: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>
  /** The most inputs in one statement. */
  readonly maxBatch: number
  /** Batches in flight at once, each on its own connection. */
  readonly lanes: number
}

/**
 * A function that reads one input through the coalescer. Its lanes run in
 * `Scope`: they stop, and inputs not yet taken are interrupted, when it closes.
 */
export const makeCoalescer = <I, O, E>(
  options: CoalesceOptions<I, O, E>
): Effect.Effect<(input: I) => Effect.Effect<O, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const waiting = yield* Queue.unbounded<readonly [I, Deferred.Deferred<O, E>]>()
    yield* Effect.addFinalizer(() => Queue.shutdown(waiting))

    const lane = Effect.gen(function*() {
      const batch = yield* Queue.takeBetween(waiting, 1, options.maxBatch)
      const entries = Array.from(batch)
      const exit = yield* Effect.exit(options.run(entries.map(([input]) => input))).pipe(
        Effect.onInterrupt(() =>
          Effect.sync(() => entries.forEach(([, answer]) => Deferred.unsafeDone(answer, Exit.interrupt(FiberId.none))))
        )
      )
      if (Exit.isSuccess(exit)) {
        entries.forEach(([, answer], index) => Deferred.unsafeDone(answer, Exit.succeed(exit.value[index]!)))
      } else {
        for (const [, answer] of entries) Deferred.unsafeDone(answer, Exit.failCause(exit.cause))
      }
    }).pipe(Effect.forever)
    for (let index = 0; index < options.lanes; index++) yield* Effect.forkScoped(lane)

    const alone = (input: I) => Effect.map(options.run([input]), (answers) => answers[0]!)
    const coalesced = (input: I) =>
      Effect.flatMap(Deferred.make<O, E>(), (answer) =>
        Effect.zipRight(Queue.offer(waiting, [input, answer] as const), Deferred.await(answer)))
    return (input: I) =>
      Effect.flatMap(
        Effect.serviceOption(SqlClient.TransactionConnection),
        (transaction) => Option.isSome(transaction) ? alone(input) : coalesced(input)
      )
  })
