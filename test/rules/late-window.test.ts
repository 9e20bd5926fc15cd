/**
 * A signal's moment and its windows alone (src/signals/LateWindow.ts,
 * docs/signals.md "Usage in its own time"): at most 5 minutes ahead of the
 * clock (400), not older than the workspace's late-usage window (422), `late`
 * more than an hour before intake. The clock's reading is an argument; each
 * boundary is tried on both sides, to the millisecond.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { beyondLateWindow, type Moment, momentAt, momentOf, tooOldRefusal } from "../../src/signals/LateWindow.ts"

const NOW_ISO = "2026-11-27T08:40:12.345Z"
const NOW = Date.parse(NOW_ISO)
const SECOND = 1_000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

const iso = (ms: number) => new Date(ms).toISOString()
const moment = (timestamp: string | undefined): Moment => {
  const result = momentOf(timestamp === undefined ? {} : { timestamp }, NOW)
  if (Either.isLeft(result)) throw new Error(`refused: ${result.left.message}`)
  return result.right
}
const refusal = (timestamp: string) => {
  const result = momentOf({ timestamp }, NOW)
  return Either.isLeft(result) ? { tag: result.left._tag, message: result.left.message } : "accepted"
}

describe("the moment of a request", () => {
  it("is its intake when it has no timestamp: nothing stored, never late", () => {
    expect(moment(undefined)).toEqual({ occurredAt: null, late: false, intakeAt: undefined, occurredMs: undefined })
  })

  it("is its timestamp, as a UTC instant, with the service's clock at intake beside it", () => {
    expect(moment("2026-11-27T10:10:00.5+02:00")).toEqual({
      occurredAt: "2026-11-27T08:10:00.500Z",
      late: false,
      intakeAt: NOW_ISO,
      occurredMs: Date.parse("2026-11-27T08:10:00.500Z")
    })
  })

  it("may be up to 5 minutes ahead of the service's clock, not a millisecond more (400 naming the clock)", () => {
    expect(moment(iso(NOW + 5 * MINUTE))).toMatchObject({ occurredAt: iso(NOW + 5 * MINUTE), late: false })
    expect(moment(iso(NOW + MINUTE)).late).toBe(false)
    expect(refusal(iso(NOW + 5 * MINUTE + 1))).toEqual({
      tag: "ValidationFailed",
      message: `Invalid request: timestamp: must not be more than 5 minutes ahead of the service's clock (${NOW_ISO})`
    })
  })

  it("is late (the backfill lane) when more than an hour before intake", () => {
    expect(moment(NOW_ISO).late).toBe(false)
    expect(moment(iso(NOW - HOUR)).late).toBe(false)
    expect(moment(iso(NOW - HOUR - 1)).late).toBe(true)
    expect(moment(iso(NOW - 40 * DAY)).late).toBe(true)
  })

  it("refuses text that names no instant, as the schema would", () => {
    const bad = { tag: "ValidationFailed", message: "Invalid request: timestamp: must be an ISO 8601 date-time with a zone offset" }
    expect(refusal("2026-11-27T08:40:12")).toEqual(bad)
    expect(refusal("2026-02-30T00:00:00Z")).toEqual(bad)
    expect(refusal("yesterday")).toEqual(bad)
  })
})

describe("the moment of a signal the service makes itself", () => {
  it("is the instant given, late when more than an hour before the clock, with no intake of its own", () => {
    expect(momentAt(new Date(NOW - HOUR), NOW)).toEqual({
      occurredAt: iso(NOW - HOUR),
      late: false,
      intakeAt: undefined,
      occurredMs: NOW - HOUR
    })
    expect(momentAt(new Date(NOW - HOUR - 1), NOW).late).toBe(true)
    expect(momentAt(new Date(NOW), NOW).late).toBe(false)
  })
})

describe("the late-usage window", () => {
  it("takes a moment back to now - late_usage_days, the first instant included, and refuses one a millisecond older", () => {
    expect(beyondLateWindow(NOW - 35 * DAY, NOW, 35)).toBe(false)
    expect(beyondLateWindow(NOW - 35 * DAY - 1, NOW, 35)).toBe(true)
    expect(beyondLateWindow(NOW - 1 * DAY, NOW, 1)).toBe(false)
    expect(beyondLateWindow(NOW - 1 * DAY - 1, NOW, 1)).toBe(true)
    expect(beyondLateWindow(NOW - 365 * DAY, NOW, 365)).toBe(false)
    expect(beyondLateWindow(NOW - 365 * DAY - 1, NOW, 365)).toBe(true)
  })

  it("follows the workspace's setting: the same moment is in a window of 10 days and beyond one of 2", () => {
    expect(beyondLateWindow(NOW - 5 * DAY, NOW, 10)).toBe(false)
    expect(beyondLateWindow(NOW - 5 * DAY, NOW, 2)).toBe(true)
  })

  it("of 0 days refuses every moment in the past and takes now and the lead ahead", () => {
    expect(beyondLateWindow(NOW - 1, NOW, 0)).toBe(true)
    expect(beyondLateWindow(NOW, NOW, 0)).toBe(false)
    expect(beyondLateWindow(NOW + 5 * MINUTE, NOW, 0)).toBe(false)
  })

  it("refuses with a 422 naming the window in days", () => {
    expect(tooOldRefusal(35)._tag).toBe("TimestampTooOld")
    expect(tooOldRefusal(35).message).toBe("timestamp is older than this workspace's late-usage window of 35 days")
    expect(tooOldRefusal(1).message).toBe("timestamp is older than this workspace's late-usage window of 1 day")
    expect(tooOldRefusal(0).message).toBe("timestamp is older than this workspace's late-usage window of 0 days")
  })
})
