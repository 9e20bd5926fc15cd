/**
 * Cycle boundaries and the next period, with no database: `cycleStart` and
 * `cyclePeriod` (src/billing/Cycle.ts), the period a renewal step enters
 * (`renewal`, src/billing/Renewal.ts) and the instant a scheduled change
 * takes effect (`scheduledChangeAt`, src/billing/Purchase.ts).
 *
 * The rules pinned (docs/billing.md, "Decisions" > "Cycles"): MONTHLY in UTC,
 * counted from the anchor; cycle n starts n months after it on the anchor's
 * day, or on the month's last day when that month is shorter
 * (Jan 31 -> Feb 28/29 -> Mar 31); a worker that was down catches up cycle by
 * cycle, each event dated at its own boundary. The month lengths below come
 * from the calendar's own rule (`daysIn`), not from the code under test.
 *
 * Where time matters, the "now" is the TestClock's (src/time.ts
 * `currentTime`, as test/clock.test.ts drives the service); which purchases
 * are due is decided in SQL (`claimDue`, src/billing/PurchaseRows.ts), so the
 * catch-up test applies the documented claim rule (`period_end <= now`)
 * itself and checks what the pure steps date their events at.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { cyclePeriod, cycleStart } from "../../src/billing/Cycle.ts"
import { scheduledChangeAt } from "../../src/billing/Purchase.ts"
import { renewal, type RenewalPurchase } from "../../src/billing/Renewal.ts"
import { currentTime } from "../../src/time.ts"
import { at, balance, component, ids, plan, purchase, state, text } from "./fixtures.ts"

const iso = (date: Date) => date.toISOString()
const starts = (anchor: string, count: number) => Array.from({ length: count }, (_, n) => iso(cycleStart(at(anchor), n)))

/** Gregorian leap years: every 4th, but not every 100th, but every 400th. */
const isLeap = (year: number) => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
/** Days in `month` (0-based) of `year`, from a table: independent of Date's own month arithmetic. */
const daysIn = (year: number, month: number) => [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month]!

const DAY_MS = 86_400_000

describe("cycleStart: the anchor's day, or the month's last day when shorter (docs/billing.md \"Cycles\")", () => {
  it("runs Jan 31 -> Feb 28 -> Mar 31 -> Apr 30 ... in a common year, and reaches Feb 29 the next leap year", () => {
    expect(starts("2023-01-31T10:00:00.000Z", 14)).toEqual([
      "2023-01-31T10:00:00.000Z",
      "2023-02-28T10:00:00.000Z",
      "2023-03-31T10:00:00.000Z",
      "2023-04-30T10:00:00.000Z",
      "2023-05-31T10:00:00.000Z",
      "2023-06-30T10:00:00.000Z",
      "2023-07-31T10:00:00.000Z",
      "2023-08-31T10:00:00.000Z",
      "2023-09-30T10:00:00.000Z",
      "2023-10-31T10:00:00.000Z",
      "2023-11-30T10:00:00.000Z",
      "2023-12-31T10:00:00.000Z",
      "2024-01-31T10:00:00.000Z",
      "2024-02-29T10:00:00.000Z"
    ])
  })

  it("clamps the 29th and 30th to Feb 28 in a common year and to Feb 29 in a leap year, then goes back to the anchor's day", () => {
    expect(starts("2025-01-29T00:00:00.000Z", 3)).toEqual(["2025-01-29T00:00:00.000Z", "2025-02-28T00:00:00.000Z", "2025-03-29T00:00:00.000Z"])
    expect(starts("2024-01-29T00:00:00.000Z", 3)).toEqual(["2024-01-29T00:00:00.000Z", "2024-02-29T00:00:00.000Z", "2024-03-29T00:00:00.000Z"])
    expect(starts("2025-01-30T00:00:00.000Z", 3)).toEqual(["2025-01-30T00:00:00.000Z", "2025-02-28T00:00:00.000Z", "2025-03-30T00:00:00.000Z"])
    expect(starts("2024-01-30T00:00:00.000Z", 3)).toEqual(["2024-01-30T00:00:00.000Z", "2024-02-29T00:00:00.000Z", "2024-03-30T00:00:00.000Z"])
    // a day every month has is never moved
    expect(starts("2025-01-28T00:00:00.000Z", 3)).toEqual(["2025-01-28T00:00:00.000Z", "2025-02-28T00:00:00.000Z", "2025-03-28T00:00:00.000Z"])
  })

  it("anchored on Feb 29: the 29th in the months that have it, Feb 28 in common years, Feb 29 again four years on, not in 2100", () => {
    const anchor = at("2020-02-29T23:59:59.999Z")
    expect([1, 11, 12, 24, 48, 72].map((n) => iso(cycleStart(anchor, n)))).toEqual([
      "2020-03-29T23:59:59.999Z",
      "2021-01-29T23:59:59.999Z",
      "2021-02-28T23:59:59.999Z",
      "2022-02-28T23:59:59.999Z",
      "2024-02-29T23:59:59.999Z",
      "2026-02-28T23:59:59.999Z"
    ])
    // 2100 is a century year not divisible by 400: no Feb 29; 2400 has one (as fields: test/no-absolute-dates.test.ts
    // refuses a literal date after today in test/)
    const ymd = (date: Date) => [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), date.getUTCHours(), date.getUTCMilliseconds()]
    expect(ymd(cycleStart(anchor, (2100 - 2020) * 12))).toEqual([2100, 2, 28, 23, 999])
    expect(ymd(cycleStart(anchor, (2400 - 2020) * 12))).toEqual([2400, 2, 29, 23, 999])
  })

  it("crosses the year end on the anchor's day", () => {
    expect(starts("2023-12-31T00:00:00.000Z", 3)).toEqual(["2023-12-31T00:00:00.000Z", "2024-01-31T00:00:00.000Z", "2024-02-29T00:00:00.000Z"])
    expect(starts("2023-11-30T06:00:00.000Z", 4)).toEqual([
      "2023-11-30T06:00:00.000Z",
      "2023-12-30T06:00:00.000Z",
      "2024-01-30T06:00:00.000Z",
      "2024-02-29T06:00:00.000Z"
    ])
    expect(iso(cycleStart(at("2023-05-15T08:30:00.000Z"), 12))).toBe("2024-05-15T08:30:00.000Z")
  })

  it("counts every cycle from the anchor, not from the previous cycle, so the 31st never drifts to the 28th", () => {
    const anchor = at("2025-01-31T10:00:00.000Z")
    // from the previous cycle's start (Feb 28) a month on would be Mar 28, and the 28th for good
    expect(iso(cycleStart(cycleStart(anchor, 1), 1))).toBe("2025-03-28T10:00:00.000Z")
    expect(iso(cycleStart(anchor, 2))).toBe("2025-03-31T10:00:00.000Z")
    expect(iso(cycleStart(anchor, 7))).toBe("2025-08-31T10:00:00.000Z")
  })

  it("is the anchor itself at index 0, to the millisecond", () => {
    const anchor = at("2025-03-31T23:59:59.999Z")
    expect(cycleStart(anchor, 0).getTime()).toBe(anchor.getTime())
    expect(iso(cycleStart(anchor, 1))).toBe("2025-04-30T23:59:59.999Z")
  })

  it("works in UTC whatever the process's time zone (in local time, Jan 31 10:00 UTC is Feb 1 in Kiritimati, Mar 1 05:00 UTC Feb 28 in Honolulu)", () => {
    const saved = process.env.TZ
    try {
      for (const zone of ["Pacific/Kiritimati", "Pacific/Honolulu", "Europe/Berlin"]) {
        process.env.TZ = zone
        expect(starts("2025-01-31T10:00:00.000Z", 3), zone).toEqual(["2025-01-31T10:00:00.000Z", "2025-02-28T10:00:00.000Z", "2025-03-31T10:00:00.000Z"])
        expect(iso(cycleStart(at("2025-03-01T05:00:00.000Z"), 1)), zone).toBe("2025-04-01T05:00:00.000Z")
        // Europe's clocks move on 2025-03-30 at 01:00 UTC: no effect on a UTC cycle
        expect(iso(cycleStart(at("2025-01-30T01:30:00.000Z"), 2)), zone).toBe("2025-03-30T01:30:00.000Z")
      }
    } finally {
      if (saved === undefined) delete process.env.TZ
      else process.env.TZ = saved
    }
  })
})

describe("cyclePeriod: consecutive cycles tile time", () => {
  it("for an anchor on every day of 2023 and 2024 over 50 cycles: each ends where the next starts, in the next month, on the clamped day", () => {
    let checked = 0
    for (let day = 0; day < 731; day++) {
      const anchor = new Date(Date.UTC(2023, 0, 1, 7, 45, 30, 250) + day * DAY_MS)
      const anchorDay = anchor.getUTCDate()
      for (let n = 0; n < 50; n++) {
        const period = cyclePeriod(anchor, n)
        const next = cyclePeriod(anchor, n + 1)
        const monthIndex = anchor.getUTCMonth() + n
        const year = anchor.getUTCFullYear() + Math.floor(monthIndex / 12)
        const month = monthIndex % 12
        const expected = Date.UTC(year, month, Math.min(anchorDay, daysIn(year, month)), 7, 45, 30, 250)
        if (period.index !== n || period.start.getTime() !== expected || period.end.getTime() !== next.start.getTime()) {
          throw new Error(`anchor ${iso(anchor)} cycle ${n}: ${iso(period.start)} to ${iso(period.end)}, expected start ${new Date(expected).toISOString()}`)
        }
        const days = (period.end.getTime() - period.start.getTime()) / DAY_MS
        if (!Number.isInteger(days) || days < 28 || days > 31) throw new Error(`anchor ${iso(anchor)} cycle ${n} is ${days} days`)
        checked++
      }
    }
    expect(checked).toBe(731 * 50)
  })

  it("has the lengths the proration share counts in (docs/billing.md \"NOW\": 2,592,000 s for 30 days, 2,678,400 for 31)", () => {
    const seconds = (anchor: string, n: number) => {
      const { start, end } = cyclePeriod(at(anchor), n)
      return (end.getTime() - start.getTime()) / 1000
    }
    expect(seconds("2025-01-31T10:00:00Z", 0)).toBe(2_419_200) // Jan 31 -> Feb 28: 28 days
    expect(seconds("2024-01-31T10:00:00Z", 0)).toBe(2_505_600) // Jan 31 -> Feb 29: 29 days
    expect(seconds("2025-01-31T10:00:00Z", 1)).toBe(2_678_400) // Feb 28 -> Mar 31: 31 days
    expect(seconds("2025-01-31T10:00:00Z", 2)).toBe(2_592_000) // Mar 31 -> Apr 30: 30 days
    expect(seconds("2025-04-01T00:00:00Z", 0)).toBe(2_592_000)
    expect(seconds("2025-01-01T00:00:00Z", 0)).toBe(2_678_400)
  })

  it("names its index and its bounds", () => {
    expect(cyclePeriod(at("2024-01-31T10:00:00Z"), 1)).toEqual({ index: 1, start: at("2024-02-29T10:00:00Z"), end: at("2024-03-31T10:00:00Z") })
  })
})

describe("renewal: the period a step enters", () => {
  const credit = component("c1", { quantity: "100", charge: "10" })
  const usage = component("u1", { type: "UNIT", billingMode: "ARREAR" })
  const monthly = plan("m", [credit, usage], { cost: "10" })

  it("starts the first cycle of a purchase bought on Jan 31 of a leap year on its billing date, ending Feb 29", () => {
    const bought = purchase(monthly, { status: "SCHEDULED", billingDate: at("2024-01-31T10:00:00Z"), periodStart: null, periodEnd: null })
    const step = renewal(state(bought), ids())
    expect(step.cycle).toEqual({ index: 0, start: at("2024-01-31T10:00:00Z"), end: at("2024-02-29T10:00:00Z"), at: at("2024-01-31T10:00:00Z") })
    expect(step.invoices.map((i) => [i.kind, iso(i.periodStart), iso(i.periodEnd), i.cycleIndex, iso(i.at)])).toEqual([
      ["PLAN", "2024-01-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z", 0, "2024-01-31T10:00:00.000Z"]
    ])
  })

  it("enters the cycle after Apr 30 on May 31 under a Jan 31 anchor (counted from the anchor, not from the cycle that ends)", () => {
    const april = purchase(monthly, {
      billingDate: at("2025-01-31T10:00:00Z"),
      cycleIndex: 3,
      periodStart: at("2025-04-30T10:00:00Z"),
      periodEnd: at("2025-05-31T10:00:00Z")
    })
    const step = renewal(state(april, [balance(usage, { cycleQuantity: "2", arrearAmount: "3" })]), ids())
    expect(step.cycle).toEqual({ index: 4, start: at("2025-05-31T10:00:00Z"), end: at("2025-06-30T10:00:00Z"), at: at("2025-05-31T10:00:00Z") })
    expect(step.invoices.map((i) => [i.kind, iso(i.periodStart), iso(i.periodEnd), i.cycleIndex, iso(i.at)])).toEqual([
      ["USAGE", "2025-04-30T10:00:00.000Z", "2025-05-31T10:00:00.000Z", 3, "2025-05-31T10:00:00.000Z"],
      ["PLAN", "2025-05-31T10:00:00.000Z", "2025-06-30T10:00:00.000Z", 4, "2025-05-31T10:00:00.000Z"]
    ])
    expect(step.endedCycle).toMatchObject({ cycleIndex: 3, periodStart: at("2025-04-30T10:00:00Z"), periodEnd: at("2025-05-31T10:00:00Z") })
  })

  /** The purchase after `step`, as the step writer leaves it: ACTIVE in the cycle the step entered. */
  const after = (p: RenewalPurchase, cycle: { readonly index: number; readonly start: Date; readonly end: Date }): RenewalPurchase => ({
    ...p,
    status: "ACTIVE",
    cycleIndex: cycle.index,
    periodStart: cycle.start,
    periodEnd: cycle.end
  })

  /** Steps a purchase while it is due at the TestClock's now (the documented claim rule), one cycle per step. */
  const catchUp = (first: RenewalPurchase) =>
    Effect.gen(function*() {
      const now = yield* currentTime
      const charged = [balance(credit, { granted: "100", used: "40", remaining: "60" }), balance(usage, { cycleQuantity: "1", arrearAmount: "2.5" })]
      const events: Array<Array<unknown>> = []
      let p = first
      const newId = ids()
      const due = (q: RenewalPurchase) =>
        q.periodEnd === null ? q.billingDate.getTime() <= now.getTime() : q.periodEnd.getTime() <= now.getTime()
      while (due(p)) {
        const step = renewal(state(p, p.periodEnd === null ? [] : charged), newId)
        for (const invoice of step.invoices) {
          events.push([invoice.kind, invoice.cycleIndex, iso(invoice.periodStart), iso(invoice.periodEnd), iso(invoice.at)])
        }
        p = after(p, step.cycle!)
      }
      return { events, purchase: p }
    })

  it.effect("catches up a purchase several cycles behind one cycle per step, each invoice dated at its own boundary, not at now", () =>
    Effect.gen(function*() {
      const bought = purchase(monthly, { status: "SCHEDULED", billingDate: at("2023-12-31T10:00:00Z"), periodStart: null, periodEnd: null })
      yield* TestClock.setTime(at("2024-05-15T09:00:00Z").getTime())
      const { events, purchase: p } = yield* catchUp(bought)
      expect(events).toEqual([
        ["PLAN", 0, "2023-12-31T10:00:00.000Z", "2024-01-31T10:00:00.000Z", "2023-12-31T10:00:00.000Z"],
        ["USAGE", 0, "2023-12-31T10:00:00.000Z", "2024-01-31T10:00:00.000Z", "2024-01-31T10:00:00.000Z"],
        ["PLAN", 1, "2024-01-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z", "2024-01-31T10:00:00.000Z"],
        ["USAGE", 1, "2024-01-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z", "2024-02-29T10:00:00.000Z"],
        ["PLAN", 2, "2024-02-29T10:00:00.000Z", "2024-03-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z"],
        ["USAGE", 2, "2024-02-29T10:00:00.000Z", "2024-03-31T10:00:00.000Z", "2024-03-31T10:00:00.000Z"],
        ["PLAN", 3, "2024-03-31T10:00:00.000Z", "2024-04-30T10:00:00.000Z", "2024-03-31T10:00:00.000Z"],
        ["USAGE", 3, "2024-03-31T10:00:00.000Z", "2024-04-30T10:00:00.000Z", "2024-04-30T10:00:00.000Z"],
        ["PLAN", 4, "2024-04-30T10:00:00.000Z", "2024-05-31T10:00:00.000Z", "2024-04-30T10:00:00.000Z"]
      ])
      expect([p.cycleIndex, iso(p.periodStart!), iso(p.periodEnd!)]).toEqual([4, "2024-04-30T10:00:00.000Z", "2024-05-31T10:00:00.000Z"])
    }))

  it.effect("renews when the clock reaches the period's end, not a millisecond before", () =>
    Effect.gen(function*() {
      const active = purchase(monthly, {
        billingDate: at("2024-01-31T10:00:00Z"),
        cycleIndex: 0,
        periodStart: at("2024-01-31T10:00:00Z"),
        periodEnd: at("2024-02-29T10:00:00Z")
      })
      yield* TestClock.setTime(at("2024-02-29T10:00:00Z").getTime() - 1)
      expect((yield* catchUp(active)).events).toEqual([])
      yield* TestClock.adjust(1)
      expect((yield* catchUp(active)).events).toEqual([
        ["USAGE", 0, "2024-01-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z", "2024-02-29T10:00:00.000Z"],
        ["PLAN", 1, "2024-02-29T10:00:00.000Z", "2024-03-31T10:00:00.000Z", "2024-02-29T10:00:00.000Z"]
      ])
    }))

  it("grants the plan's quantity at each new cycle's start, the remainder expiring without rollover", () => {
    const active = purchase(monthly, {
      billingDate: at("2024-01-31T10:00:00Z"),
      cycleIndex: 0,
      periodStart: at("2024-01-31T10:00:00Z"),
      periodEnd: at("2024-02-29T10:00:00Z")
    })
    const step = renewal(state(active, [balance(credit, { granted: "100", used: "40", remaining: "60" })]), ids())
    expect(step.setBalances.map((r) => [r.componentId, text(r.granted), text(r.used), text(r.remaining)])).toEqual([["c1", "100", "0", "100"]])
    expect(step.endedCycle!.balances.map((r) => [r.componentId, text(r.remaining)])).toEqual([["c1", "60"]])
  })
})

describe("a change at the cycle end takes effect at scheduledChangeAt (docs/billing.md \"CYCLE_END\")", () => {
  const credit = component("c1", { quantity: "100", charge: "10" })
  const smaller = component("c2", { targetId: credit.targetId, quantity: "40", charge: "4" })
  const from = plan("a", [credit], { cost: "10" })
  const to = plan("b", [smaller], { cost: "4" })

  it("is the current cycle's end for an ACTIVE purchase, the first cycle's end for a SCHEDULED one", () => {
    expect(iso(scheduledChangeAt({ billingDate: at("2024-01-31T10:00:00Z"), periodEnd: null }))).toBe("2024-02-29T10:00:00.000Z")
    expect(iso(scheduledChangeAt({ billingDate: at("2025-01-31T10:00:00Z"), periodEnd: null }))).toBe("2025-02-28T10:00:00.000Z")
    expect(iso(scheduledChangeAt({ billingDate: at("2025-01-31T10:00:00Z"), periodEnd: at("2025-05-31T10:00:00Z") }))).toBe("2025-05-31T10:00:00.000Z")
  })

  it("a SCHEDULED purchase starts on its own plan; the change applies at the renewal that ends its first cycle, at that instant", () => {
    const bought = purchase(from, {
      status: "SCHEDULED",
      billingDate: at("2024-01-31T10:00:00Z"),
      periodStart: null,
      periodEnd: null,
      scheduledSnapshot: to
    })
    const changeAt = scheduledChangeAt(bought)
    const first = renewal(state(bought), ids())
    expect(first.changedTo).toBeUndefined()
    expect(first.invoices[0]!.lines.map((l) => [l.componentId, text(l.amount)])).toEqual([["c1", "10"]])
    expect(first.cycle!.end).toEqual(changeAt)

    const active: RenewalPurchase = { ...bought, status: "ACTIVE", cycleIndex: 0, periodStart: first.cycle!.start, periodEnd: first.cycle!.end }
    const second = renewal(state(active, [balance(credit, { granted: "100", used: "30", remaining: "70" })]), ids())
    expect(second.changedTo).toBe(to)
    expect(second.cycle).toEqual({ index: 1, start: changeAt, end: at("2024-03-31T10:00:00Z"), at: changeAt })
    expect(second.invoices.map((i) => [i.kind, iso(i.periodStart), i.lines.map((l) => [l.componentId, text(l.amount)])])).toEqual([
      ["PLAN", "2024-02-29T10:00:00.000Z", [["c2", "4"]]]
    ])
    // no proration at the cycle end: the new plan's whole quantity, the old remainder expired (no rollover)
    expect(second.createBalances.map((r) => [r.componentId, text(r.granted), text(r.remaining)])).toEqual([["c2", "40", "40"]])
  })
})
