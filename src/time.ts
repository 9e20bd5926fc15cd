/**
 * The service's time. Every instant that is a business fact (a record's
 * update, a payment, an invoice's date, a cycle's "now", a webhook's next
 * attempt, a token's expiry) is read from the running fiber's Effect `Clock`,
 * never from `new Date()` or `Date.now()`: in production that is the system
 * clock; a test runs the same code under `TestClock` and moves time with
 * `TestClock.adjust`/`setTime` instead of waiting for it.
 *
 * Pure helpers take the instant as an argument; code that measures our own
 * process (benchmarks, log timestamps, heap samples) may read the system clock.
 */
import { Clock, Effect } from "effect"

/** Milliseconds since the epoch, from the fiber's Clock. */
export const currentTimeMillis: Effect.Effect<number> = Clock.currentTimeMillis

/** The current instant, from the fiber's Clock. */
export const currentTime: Effect.Effect<Date> = Effect.map(currentTimeMillis, (millis) => new Date(millis))

/** The instant `millis` from now, from the fiber's Clock. */
export const timeFromNow = (millis: number): Effect.Effect<Date> =>
  Effect.map(currentTimeMillis, (at) => new Date(at + millis))

/** `at` when one is given (a test's or an operator's `--now`), else the current instant. */
export const givenOrCurrentTime = (at: Date | undefined): Effect.Effect<Date> =>
  at === undefined ? currentTime : Effect.succeed(at)

/**
 * How far ahead of the service's clock a signal's `timestamp` may be (clock
 * skew), in milliseconds: the intake refuses one further ahead, so a usage
 * row's `timestamp` is never more than this after its `created_at`.
 */
export const maxTimestampLeadMs = 5 * 60_000
