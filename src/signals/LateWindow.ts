/**
 * A signal's moment and the windows around it (docs/signals.md "Usage in its
 * own time"), alone: a `timestamp` more than 5 minutes ahead of the service's
 * clock is a 400, one older than the workspace's late-usage window a 422, and
 * one more than an hour before intake is `late` (the backfill lane). Pure: the
 * clock's reading is an argument. The queued routes check the window in the
 * inbox insert itself, by the same rule in SQL (InboxInsert.ts); the
 * completion routes, which read the setting in their own transaction, here.
 */
import { Either } from "effect"
import { TimestampTooOld, ValidationFailed } from "../errors.ts"
import { maxTimestampLeadMs } from "../time.ts"
import { instantOf, lateAfterMs } from "./Signal.ts"

/** When a signal's usage happened, as the inbox stores it (`signals.occurred_at`, `signals.late`). */
export interface Moment {
  /** The `timestamp` sent, as an instant (ISO 8601, UTC); null when none was sent (the moment of intake). */
  readonly occurredAt: string | null
  /** More than an hour before intake: the backfill lane. */
  readonly late: boolean
  /** The service's clock at intake (only with a timestamp: the window counts back from it). */
  readonly intakeAt: string | undefined
  /** `occurredAt` in epoch milliseconds. */
  readonly occurredMs: number | undefined
}

/** A signal without a timestamp: its moment is its intake (no allocation per request on the intake lane). */
const atIntake: Either.Either<Moment, ValidationFailed> = Either.right({
  occurredAt: null,
  late: false,
  intakeAt: undefined,
  occurredMs: undefined
})

/**
 * A `timestamp` refused: `validation_failed` naming the field, the code of
 * every refusal of the field's value, its form (the schema) or its lead over
 * the clock (here) alike.
 */
const invalidTimestamp = (message: string) =>
  new ValidationFailed({ message: `Invalid request: timestamp: ${message}`, errors: [{ field: "timestamp", message }] })

/**
 * The moment of a decoded request, at intake `now` (epoch milliseconds): a
 * `timestamp` more than 5 minutes ahead of the service's clock is a 400 naming
 * the field. (The late-usage window is the organisation's: `beyondLateWindow`.)
 */
export const momentOf = (input: { readonly timestamp?: string | undefined }, now: number): Either.Either<Moment, ValidationFailed> => {
  if (input.timestamp === undefined) return atIntake
  const intakeAt = new Date(now).toISOString()
  const occurred = instantOf(input.timestamp)
  // The schema has vouched for the text; text it would refuse is refused as it would be. (Its four-digit years
  // are all instants a Date holds.)
  if (occurred === undefined) {
    return Either.left(invalidTimestamp("must be an ISO 8601 date-time with a zone offset"))
  }
  if (occurred > now + maxTimestampLeadMs) {
    return Either.left(invalidTimestamp(`must not be more than 5 minutes ahead of the service's clock (${intakeAt})`))
  }
  return Either.right({ occurredAt: new Date(occurred).toISOString(), late: occurred < now - lateAfterMs, intakeAt, occurredMs: occurred })
}

/** The moment of a signal made by the service itself at `occurred` (the worker completing an occurrence). */
export const momentAt = (occurred: Date, now: number): Moment => ({
  occurredAt: occurred.toISOString(),
  late: occurred.getTime() < now - lateAfterMs,
  intakeAt: undefined,
  occurredMs: occurred.getTime()
})

const DAY_MS = 86_400_000

/**
 * A moment older than `now` − the workspace's `late_usage_days`: refused (422).
 * The window's first instant is in it; 0 days refuses every moment before now.
 */
export const beyondLateWindow = (occurredMs: number, now: number, lateUsageDays: number): boolean =>
  occurredMs < now - lateUsageDays * DAY_MS

/** The 422 of a timestamp older than the workspace's late-usage window. */
export const tooOldRefusal = (lateUsageDays: number) =>
  new TimestampTooOld({
    message: `timestamp is older than this workspace's late-usage window of ${lateUsageDays} ` +
      `${lateUsageDays === 1 ? "day" : "days"}`
  })
