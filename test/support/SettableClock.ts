/**
 * A clock a test sets: while set, every instant the services read is the one
 * it was set to (`set`, `advance`); unset, it is the system's. Sleeping always
 * takes real time, so the app's background fibers (the inbox writer, pools,
 * caches) keep running as they do on the system clock. For tests that drive
 * the whole app over HTTP at chosen instants (TestApp's `clock` option);
 * a test on services alone uses Effect's TestClock.
 */
import { Clock, Effect } from "effect"

export interface SettableClock extends Clock.Clock {
  /** Freezes the clock at `at` (a Date, or milliseconds since the epoch). */
  readonly set: (at: Date | number) => void
  /** Moves a frozen clock by `millis`. */
  readonly advance: (millis: number) => void
  /** Back to the system clock. */
  readonly unset: () => void
}

export const makeSettableClock = (): SettableClock => {
  const system = Clock.make()
  let frozen: number | undefined
  const millis = () => frozen ?? system.unsafeCurrentTimeMillis()
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: () => BigInt(millis()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    sleep: (duration) => system.sleep(duration),
    set: (at) => {
      frozen = typeof at === "number" ? at : at.getTime()
    },
    advance: (by) => {
      if (frozen === undefined) throw new Error("advance: the clock is not set")
      frozen += by
    },
    unset: () => {
      frozen = undefined
    }
  }
}
