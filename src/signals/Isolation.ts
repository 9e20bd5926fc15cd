/**
 * Retries and isolation of a batch. A batch that fails for a reason that
 * passes (src/db/Faults.ts) is tried again whole; one the database refused
 * for a signal's data is priced again in halves until the signal at fault
 * fails alone. Each try is a transaction of its own, so neither bills
 * anything twice; what a try does is the processor's (`BatchSteps`).
 */
import { Cause, Data, Effect } from "effect"
import { faultOf, transientBackoff } from "../db/Faults.ts"
import { tally } from "../worker/Stats.ts"
import type { SignalRecord } from "./BatchContext.ts"
import { type Share, wholeHead } from "./Claim.ts"
import type { Ended, Waiting } from "./SignalEnd.ts"

/**
 * What one try of a batch claimed and how its signals ended, kept by that try
 * alone: batches run side by side (`SignalConcurrency`), so none may read
 * another's. When the try fails, `claimed` are the signals to isolate; once it
 * commits, `results` are counted and `waiting` customers sit out the claims.
 */
export interface BatchTry {
  claimed: ReadonlyArray<SignalRecord>
  results: ReadonlyArray<readonly [SignalRecord, Ended]>
  readonly waiting: Array<Waiting>
}

const newTry = (): BatchTry => ({ claimed: [], results: [], waiting: [] })

/** A batch that failed for a reason that passes (src/db/Faults.ts): tried again whole. */
class TransientBatchFailure extends Data.TaggedError("TransientBatchFailure")<{ readonly cause: Cause.Cause<unknown> }> {}

/** What a try of a batch is made of. */
export interface BatchSteps {
  /** Before each try, outside its transaction. */
  readonly prepare: Effect.Effect<void>
  /** One try, one transaction, of `limit` signals (of `only`, when given); it records in `tried` what it claimed and did. */
  readonly batch: (
    limit: number,
    only: ReadonlyArray<string> | undefined,
    share: Share,
    tried: BatchTry
  ) => Effect.Effect<number>
  /** After a try committed. */
  readonly committed: (tried: BatchTry) => Effect.Effect<void>
  /** Marks one signal FAILED in a transaction of its own: it could not be written with its batch. */
  readonly failAlone: (signal: SignalRecord) => Effect.Effect<void>
}

export const makeAttempt = (steps: BatchSteps) => {
  /**
   * One batch (of `only`, when given), tried again whole while it fails for
   * a reason that passes: a lost or refused connection, the server shutting
   * down or starting, a deadlock (src/db/Faults.ts). Each try is one
   * transaction that wrote nothing when it failed, so trying again bills
   * nothing twice; the pause (50 ms doubling to 500 ms) notices a database
   * that answers again within half a second. Once it commits, what it did is
   * counted and its waiting customers sit out the claims.
   */
  const attempt = (limit: number, only?: ReadonlyArray<string>, share: Share = wholeHead) => {
    let failures = 0
    let tried = newTry()
    return Effect.zipRight(steps.prepare, Effect.suspend(() => steps.batch(limit, only, share, tried = newTry()))).pipe(
      Effect.catchAllCause((cause) =>
        !Cause.isInterruptedOnly(cause) && faultOf(cause) === "Transient"
          ? Effect.fail(new TransientBatchFailure({ cause }))
          : Effect.failCause(cause)
      ),
      Effect.tapError((failure) =>
        failures++ === 0
          ? Effect.logWarning("a batch of signals failed for a reason that passes; trying it again whole", failure.cause)
          : Effect.void
      ),
      Effect.retry({ while: (failure) => failure._tag === "TransientBatchFailure", schedule: transientBackoff }),
      Effect.catchTag("TransientBatchFailure", (failure) => Effect.failCause(failure.cause)),
      Effect.tap(() => steps.committed(tried)),
      Effect.catchAllCause((cause) => isolateOnDataFault(cause, tried.claimed))
    )
  }

  /**
   * After a batch failed: when the database refused it for a signal's data
   * (anything not transient), its claimed signals are priced again as two
   * batches of half each, in order, each its own transaction restricted to
   * those ids, and a half that fails is halved again. One refused signal
   * among n thus fails alone (FAILED, 500) in about 2·log2(n) transactions
   * while the others are priced. A transient failure that outlasted its
   * retries, or one before anything was claimed, goes to the worker's loop.
   */
  const isolateOnDataFault = (cause: Cause.Cause<unknown>, failed: ReadonlyArray<SignalRecord>): Effect.Effect<number, unknown> => {
    if (Cause.isInterruptedOnly(cause) || faultOf(cause) === "Transient" || failed.length === 0) {
      return Effect.failCause(cause)
    }
    if (failed.length === 1) {
      const signal = failed[0]!
      return Effect.zipRight(
        Effect.logError(`signal ${signal.id} could not be written; marked FAILED`, cause),
        Effect.as(Effect.zipRight(steps.failAlone(signal), tally([[signal.organizationId, "failed"]])), 1)
      )
    }
    const middle = Math.ceil(failed.length / 2)
    return Effect.zipRight(
      Effect.logWarning(`a batch of ${failed.length} signals could not be written; trying it again in halves`, cause),
      Effect.zipWith(priceHalf(failed.slice(0, middle)), Effect.suspend(() => priceHalf(failed.slice(middle))), (a, b) => a + b)
    )
  }

  const priceHalf = (signals: ReadonlyArray<SignalRecord>): Effect.Effect<number, unknown> =>
    Effect.suspend(() => {
      const ids = signals.map((signal) => signal.id)
      return attempt(ids.length, ids)
    })

  return attempt
}
