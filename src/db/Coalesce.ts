/**
 * Coalesced reads: requests of one kind that arrive while the reads before
 * them are in flight wait, and go to the database together as one statement,
 * as soon as a lane is free. Nothing waits on a timer: a lone request goes at
 * once; under load, batches grow to what arrived during one round trip.
 *
 * Why: on this machine the round trip itself, not the statement, is what a
 * short read costs the process (the socket write that wakes a PostgreSQL
 * backend was a large share of an API process's time under a load of checks,
 * docs/benchmarks.md "Coalesced check reads"); one statement for many requests
 * pays it once.
 *
 * A batch runs on any connection of the pool, where it could not see a
 * transaction's own writes or locks: a read made inside a transaction goes
 * alone, on the transaction's connection.
 *
 * A read is an effect (`read`) or a callback (`unsafeRead`): the check lane
 * answers most checks without a fiber of their own, as the intake lane does
 * (docs/architecture.md, "The check lane").
 */
import { SqlClient } from "@effect/sql"
import { Effect, Exit, FiberId, Option, Queue } from "effect"
import type { Scope } from "effect"

export interface CoalesceOptions<I, O, E> {
  /** Reads the batch, answering each input at the same position. */
  readonly run: (batch: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>
  /** The most inputs in one statement. */
  readonly maxBatch: number
  /** Batches in flight at once, each on its own connection. */
  readonly lanes: number
}

export interface Coalescer<I, O, E> {
  /** One input's read, as an effect. */
  readonly read: (input: I) => Effect.Effect<O, E>
  /**
   * One input's read without a fiber of the caller's (a door that answers
   * from a callback, as the check lane does): `answer` is called once, from a
   * lane, with the read's exit. The returned function withdraws the input
   * (its caller went away): it is then never answered.
   */
  readonly unsafeRead: (input: I, answer: (exit: Exit.Exit<O, E>) => void) => () => void
}

/** An input waiting for a lane; `answer` is cleared when it is withdrawn. */
interface Waiting<I, O, E> {
  readonly input: I
  answer: ((exit: Exit.Exit<O, E>) => void) | undefined
}

/**
 * Reads through the coalescer. Its lanes run in `Scope`: they stop, and
 * inputs not yet taken are interrupted, when it closes.
 */
export const makeCoalescer = <I, O, E>(
  options: CoalesceOptions<I, O, E>
): Effect.Effect<Coalescer<I, O, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const waiting = yield* Queue.unbounded<Waiting<I, O, E>>()

    /**
     * Answers `entry` unless it was withdrawn. An answer that throws is a
     * defect of its caller's: given back to be logged, so that the lane that
     * called it goes on serving the others.
     */
    const tell = (entry: Waiting<I, O, E>, exit: Exit.Exit<O, E>): unknown => {
      const answer = entry.answer
      entry.answer = undefined
      if (answer === undefined) return undefined
      try {
        answer(exit)
        return undefined
      } catch (defect) {
        return defect ?? "an answer threw"
      }
    }
    const tellAll = (entries: Iterable<Waiting<I, O, E>>, exitAt: (index: number) => Exit.Exit<O, E>) =>
      Effect.suspend(() => {
        const defects = Array.from(entries, (entry, index) => tell(entry, exitAt(index))).filter((defect) => defect !== undefined)
        return Effect.forEach(defects, (defect) => Effect.logError("a coalesced read's answer threw", defect), { discard: true })
      })

    // Inputs still waiting when the scope closes are answered (interrupted), then the queue shuts.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(waiting), (left) =>
        Effect.zipRight(tellAll(left, () => Exit.interrupt(FiberId.none)), Queue.shutdown(waiting)))
    )

    const lane = Effect.gen(function*() {
      const entries = Array.from(yield* Queue.takeBetween(waiting, 1, options.maxBatch)).filter((entry) => entry.answer !== undefined)
      if (entries.length === 0) return
      const exit = yield* Effect.exit(options.run(entries.map((entry) => entry.input))).pipe(
        Effect.onInterrupt(() => tellAll(entries, () => Exit.interrupt(FiberId.none)))
      )
      yield* tellAll(entries, (index) => Exit.isSuccess(exit) ? Exit.succeed(exit.value[index]!) : Exit.failCause(exit.cause))
    }).pipe(Effect.forever)
    for (let index = 0; index < options.lanes; index++) yield* Effect.forkScoped(lane)

    const unsafeRead = (input: I, answer: (exit: Exit.Exit<O, E>) => void) => {
      const entry: Waiting<I, O, E> = { input, answer }
      if (!Queue.unsafeOffer(waiting, entry)) tell(entry, Exit.interrupt(FiberId.none))
      return () => {
        entry.answer = undefined
      }
    }
    const alone = (input: I) => Effect.map(options.run([input]), (answers) => answers[0]!)
    const coalesced = (input: I) => Effect.async<O, E>((resume) => Effect.sync(unsafeRead(input, resume)))
    const read = (input: I) =>
      Effect.flatMap(
        Effect.serviceOption(SqlClient.TransactionConnection),
        (transaction) => Option.isSome(transaction) ? alone(input) : coalesced(input)
      )
    return { read, unsafeRead }
  })
