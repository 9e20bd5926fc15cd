/**
 * Waiting for something that happens in the background (a request reaching a
 * receiver, a frame on a child's stdout) without an unbounded loop: `check`
 * is retried until it stops throwing or rejecting, and after `timeoutMs` the
 * last failure is thrown, its message prefixed with how long and how often it
 * was tried (an `expect` failure keeps its diff).
 *
 * A check that never settles counts as failing: it is not waited for past the
 * limit.
 *
 * The limit is only a guard against a hang, never a claim about speed: beside
 * other work (load 10 on 2 cores) the suite runs 5 to 10 times slower than on
 * a quiet machine, and a wait must not be what fails there. A test that needs
 * something to happen within a time states that time as the service's
 * (Clock, TestClock), not as this limit.
 */

/** The default limit of a wait, and of the test helpers that wait on a child process or a server. */
export const HANG_GUARD_MS = 120_000

export interface EventuallyOptions {
  /** How long to keep trying, in milliseconds; default HANG_GUARD_MS. */
  readonly timeoutMs?: number
  /** The pause between two tries, in milliseconds. */
  readonly intervalMs?: number
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Resolves with `check`'s value as soon as one try passes. */
export const eventually = async <A>(
  check: () => A | Promise<A>,
  { timeoutMs = HANG_GUARD_MS, intervalMs = 25 }: EventuallyOptions = {}
): Promise<A> => {
  if (!(timeoutMs > 0) || !(intervalMs >= 0)) {
    throw new RangeError(`eventually: timeoutMs must be > 0 and intervalMs >= 0, got ${timeoutMs} and ${intervalMs}`)
  }
  const started = Date.now()
  const deadline = started + timeoutMs
  let tries = 0
  let last: unknown = undefined
  let failed = false
  /** The final try was still running at the limit: `last` is then the failure before it. */
  let unsettled = false
  for (;;) {
    tries++
    let timer: ReturnType<typeof setTimeout> | undefined
    const stuck = Symbol("stuck")
    try {
      const limit = new Promise<typeof stuck>((resolve) => {
        timer = setTimeout(() => resolve(stuck), Math.max(0, deadline - Date.now()))
      })
      const result = await Promise.race([Promise.resolve().then(check), limit])
      if (result !== stuck) return result as A
      unsettled = true
      break
    } catch (error) {
      last = error
      failed = true
    } finally {
      clearTimeout(timer)
    }
    if (Date.now() + intervalMs >= deadline) break
    await pause(intervalMs)
  }
  const prefix = `eventually: still failing after ${Date.now() - started} ms (limit ${timeoutMs} ms, ${tries} ${tries === 1 ? "try" : "tries"}${
    unsettled ? ", the last one still running" : ""
  }). Last failure: `
  if (!failed) throw new Error(`${prefix}none: the first try never settled`)
  if (last instanceof Error) {
    last.message = prefix + last.message
    throw last
  }
  throw new Error(prefix + String(last), { cause: last })
}
