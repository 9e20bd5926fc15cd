/**
 * What a failed database call says about trying it again (docs/signals.md,
 * "When a batch fails").
 *
 * - Transient: the database could not answer, or asked to be asked again. A
 *   lost or refused connection (SQLSTATE class 08, the server shutting down
 *   or starting up, 57P01-57P03, too many connections 53300, or a driver error
 *   with no SQLSTATE: ECONNRESET, ECONNREFUSED, "Connection terminated"), a
 *   serialisation failure (40001) or a deadlock (40P01). The same work, tried
 *   again once the database answers, succeeds: retry it whole.
 * - Data: anything else, above all the database refusing a row (classes 22
 *   and 23). Trying the same work again fails the same way; only leaving the
 *   refused row out helps.
 *
 * Pure: it reads errors and causes, nothing else.
 */
import { Cause, Duration, Schedule } from "effect"

export type Fault = "Transient" | "Data"

/**
 * SQLSTATEs of a database that could not answer or asks to be asked again;
 * 25006 (read_only_sql_transaction) is a write that reached a server demoted
 * to standby by a failover: the next connection finds the new primary.
 */
const transientStates = new Set(["57P01", "57P02", "57P03", "53300", "25006", "40001", "40P01"])

/** Of those, the ones that say two transactions collided, not that the database is away. */
const collisionStates = new Set(["40001", "40P01"])

/** Node's socket errors: the connection was refused, reset or could not be reached. */
const socketCodes = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN"
])

/** What node-postgres (and our pool) say, without a code, when a connection is gone or cannot be had. */
const lostConnection =
  /connection terminated|connection error|not queryable|timeout exceeded when trying to connect|connection timed out|server closed the connection/i

const isSqlState = (code: string) => /^[0-9A-Z]{5}$/.test(code)

/** Whether one error (a SqlError, or the driver's error it carries in `cause`) is transient. */
export const isTransientError = (error: unknown, depth = 0): boolean => {
  if (typeof error !== "object" || error === null || depth > 4) return false
  const { _tag, cause, code, message, errors } = error as {
    _tag?: unknown
    cause?: unknown
    code?: unknown
    message?: unknown
    errors?: unknown
  }
  // @effect/sql's SqlError: what happened is its cause, the driver's error.
  if (_tag === "SqlError") return isTransientError(cause, depth + 1)
  if (typeof code === "string") {
    if (socketCodes.has(code)) return true
    if (isSqlState(code)) return transientStates.has(code) || code.startsWith("08")
  }
  // Connecting to every address of a host failed: node reports each one.
  if (Array.isArray(errors) && errors.some((inner) => isTransientError(inner, depth + 1))) return true
  if (typeof message === "string" && lostConnection.test(message)) return true
  return cause !== undefined && isTransientError(cause, depth + 1)
}

/**
 * Whether one error says the database is away (unreachable, restarting, no
 * primary, a demoted server): transient, and not two transactions colliding.
 */
export const isUnavailableError = (error: unknown): boolean =>
  isTransientError(error) && !collisionStates.has(sqlStateOf(error) ?? "")

/** Whether a failed effect failed because the database is away (any of its errors says so). */
export const isUnavailableCause = (cause: Cause.Cause<unknown>): boolean =>
  [...Cause.failures(cause), ...Cause.defects(cause)].some(isUnavailableError)

const sqlStateOf = (error: unknown, depth = 0): string | undefined => {
  if (typeof error !== "object" || error === null || depth > 4) return undefined
  const { code, cause } = error as { code?: unknown; cause?: unknown }
  if (typeof code === "string" && isSqlState(code)) return code
  return sqlStateOf(cause, depth + 1)
}

/**
 * The fault behind a failed effect: Transient when any error in it is (a
 * statement refused for a lost connection is often followed by a ROLLBACK that
 * fails too; trying again tells the rest), Data otherwise.
 */
export const faultOf = (cause: Cause.Cause<unknown>): Fault =>
  [...Cause.failures(cause), ...Cause.defects(cause)].some((error) => isTransientError(error)) ? "Transient" : "Data"

/**
 * How long work failing transiently is tried again before its failure is
 * reported: a database restart takes seconds; an outage longer than this is
 * logged, and the worker's loop tries again after its idle sleep.
 */
export const TRANSIENT_RETRY_WINDOW = Duration.seconds(20)

/**
 * The pause before each new try of work that failed transiently: 50 ms,
 * doubling, at most 500 ms, so a database that answers again is noticed
 * within half a second, and a deadlock (two batches colliding) is retried at
 * once. Stops after TRANSIENT_RETRY_WINDOW.
 */
export const transientBackoff = Schedule.exponential("50 millis").pipe(
  Schedule.union(Schedule.spaced("500 millis")),
  Schedule.upTo(TRANSIENT_RETRY_WINDOW)
)
