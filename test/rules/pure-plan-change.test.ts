/**
 * A plan change NOW, in memory (src/billing/PlanChange.ts), at the instants
 * where the rules have edges, the instant of the change read from the
 * TestClock (src/time.ts `currentTime`), as the service reads it:
 *  - the share of the cycle left: whole seconds, the second under way used
 *    (docs/billing.md "Changing plans" > "NOW", "The share of the cycle left");
 *  - the PRORATION invoice's two money lines, `round(cost x left / length)` to
 *    the cent, half away from zero, exactly ("One PRORATION invoice");
 *  - the allowance moved by the same share to 12 places, the wallet by the
 *    wallet amounts' shares ("Balances"); a net credit to the wallet
 *    ("A net credit goes to the wallet");
 *  - at the cycle's first instant, its last second, after its end, over month
 *    ends (Jan 31 -> Feb 28/29) and in a leap year;
 *  - properties: complementary shares add up to the whole, each share is within
 *    half a cent of the exact one, a change to the same plan moves nothing,
 *    an upgrade's net charge only falls as the cycle goes on.
 * test/rules/plan-change.test.ts holds the step's other rules (which rows
 * carry, composites' debt, line contents).
 */
import { describe, expect, it } from "@effect/vitest"
import { BigDecimal, Effect, TestClock } from "effect"
import { cyclePeriod } from "../../src/billing/Cycle.ts"
import { planChange, prorate, prorationShare } from "../../src/billing/PlanChange.ts"
import type { CycleStep, RenewalState, WalletStep } from "../../src/billing/Renewal.ts"
import { currentTime } from "../../src/time.ts"
import { at, balance, component, d, ids, plan, purchase, state, text } from "./fixtures.ts"

const share = (remaining: bigint, length: bigint) => ({ remaining, length })
const setClock = (date: Date) => TestClock.setTime(date.getTime())
const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS

const lines = (step: CycleStep) => step.invoices[0]!.lines.map((line) => [line.description, text(line.amount)])
const totals = (step: CycleStep) => {
  const t = step.invoices[0]!.totals
  return { subtotal: text(t.subtotal), taxes: t.taxes.map((x) => text(x.amount)), total: text(t.total), free: t.free }
}
const rows = (step: CycleStep) =>
  step.createBalances.map((r) => [r.componentId, text(r.granted), text(r.used), text(r.remaining), text(r.originalGranted)])
const wallet = (steps: ReadonlyArray<WalletStep>) =>
  steps.map((s) => (s._tag === "Post" ? [s._tag, text(s.amount), s.notes] : s._tag === "AutoPay" ? [s._tag, s.invoice.id] : [s._tag]))

// April 2025 as cycle 3 of a purchase anchored on Jan 1: 30 days, 2,592,000 seconds.
const april = cyclePeriod(at("2025-01-01T00:00:00Z"), 3)
const APRIL_SECONDS = 2_592_000n

describe("the share of the cycle left, as the TestClock moves (docs/billing.md \"The share of the cycle left\")", () => {
  const shareNow = Effect.map(currentTime, (now) => prorationShare(april.start, april.end, now))

  it.effect("is the whole cycle at its first instant (and before it); the second under way counts as used", () =>
    Effect.gen(function*() {
      expect([april.start, april.end]).toEqual([at("2025-04-01T00:00:00Z"), at("2025-05-01T00:00:00Z")])
      yield* setClock(april.start)
      expect(yield* shareNow).toEqual(share(APRIL_SECONDS, APRIL_SECONDS))
      yield* TestClock.adjust(1)
      expect(yield* shareNow).toEqual(share(APRIL_SECONDS - 1n, APRIL_SECONDS))
      yield* TestClock.adjust(999)
      expect(yield* shareNow).toEqual(share(APRIL_SECONDS - 1n, APRIL_SECONDS))
      yield* TestClock.adjust(1)
      expect(yield* shareNow).toEqual(share(APRIL_SECONDS - 2n, APRIL_SECONDS))
      // an instant before the cycle's start is never more than the whole cycle
      yield* setClock(new Date(april.start.getTime() - DAY_MS))
      expect(yield* shareNow).toEqual(share(APRIL_SECONDS, APRIL_SECONDS))
    }))

  it.effect("is one second a second before the end, nothing less than a second before it, nothing once the cycle is over", () =>
    Effect.gen(function*() {
      yield* setClock(new Date(april.end.getTime() - 1000))
      expect(yield* shareNow).toEqual(share(1n, APRIL_SECONDS))
      yield* TestClock.adjust(1)
      expect(yield* shareNow).toEqual(share(0n, APRIL_SECONDS))
      yield* TestClock.adjust(998)
      expect(yield* shareNow).toEqual(share(0n, APRIL_SECONDS))
      yield* TestClock.adjust(1)
      expect(yield* shareNow).toEqual(share(0n, APRIL_SECONDS))
      yield* TestClock.adjust(3 * DAY_MS)
      expect(yield* shareNow).toEqual(share(0n, APRIL_SECONDS))
    }))

  it.effect("falls by exactly 86,400 a day, from the whole cycle to nothing, over a 31-day January", () =>
    Effect.gen(function*() {
      const january = cyclePeriod(at("2025-01-01T00:00:00Z"), 0)
      yield* setClock(january.start)
      const seen: Array<bigint> = []
      for (let day = 0; day <= 31; day++) {
        const now = yield* currentTime
        const s = prorationShare(january.start, january.end, now)
        expect(s.length).toBe(2_678_400n)
        seen.push(s.remaining)
        yield* TestClock.adjust(DAY_MS)
      }
      expect(seen).toEqual(Array.from({ length: 32 }, (_, day) => 2_678_400n - BigInt(day) * 86_400n))
    }))

  it("counts the cycles of a Jan 31 anchor by their own lengths: 28 days to Feb 28, 29 to Feb 29 in a leap year", () => {
    const feb2025 = cyclePeriod(at("2025-01-31T10:00:00Z"), 0)
    const feb2024 = cyclePeriod(at("2024-01-31T10:00:00Z"), 0)
    // a fortnight before the end
    expect(prorationShare(feb2025.start, feb2025.end, at("2025-02-14T10:00:00Z"))).toEqual(share(1_209_600n, 2_419_200n))
    expect(prorationShare(feb2024.start, feb2024.end, at("2024-02-15T10:00:00Z"))).toEqual(share(1_209_600n, 2_505_600n))
    // the next cycle of the leap year, Feb 29 -> Mar 31, is 31 days
    const march2024 = cyclePeriod(at("2024-01-31T10:00:00Z"), 1)
    expect(prorationShare(march2024.start, march2024.end, march2024.start)).toEqual(share(2_678_400n, 2_678_400n))
  })
})

/** `a x r / L` in units of 10^-scale, as an exact fraction's floor and remainder: the test's own arithmetic. */
const exact = (amount: string, r: bigint, length: bigint, scale: number) => {
  const a = BigDecimal.normalize(d(amount))
  // a = a.value x 10^-a.scale (a.scale is negative for "50", normalised to 5 x 10^1)
  const shift = BigInt(scale - a.scale)
  return shift >= 0n
    ? { numerator: a.value * r * 10n ** shift, denominator: length }
    : { numerator: a.value * r, denominator: length * 10n ** -shift }
}
/** A decimal in units of 10^-scale, exactly. */
const units = (value: BigDecimal.BigDecimal, scale: number) => BigDecimal.scale(value, scale).value

describe("prorate: round(amount x left / length), half away from zero, exactly (docs/billing.md \"One PRORATION invoice\")", () => {
  const amounts = ["0.01", "0.03", "0.05", "10.01", "99.99", "1234.57", "-10.01", "-0.01"]
  const lengths = [2n, 3n, 8n, 30n, 1000n]

  it("complementary shares (time used, time left) add up to the whole amount, but for both being exactly half a cent", () => {
    let halves = 0
    let whole = 0
    for (const amount of amounts) {
      for (const length of lengths) {
        for (let r = 0n; r <= length; r++) {
          const left = prorate(d(amount), share(r, length), 2)
          const used = prorate(d(amount), share(length - r, length), 2)
          const { numerator, denominator } = exact(amount, r, length, 2)
          const half = (numerator < 0n ? -numerator : numerator) % denominator * 2n === denominator
          const sign = amount.startsWith("-") ? -1n : 1n
          const expected = units(d(amount), 2) + (half ? sign : 0n)
          if (units(BigDecimal.sum(left, used), 2) !== expected) {
            throw new Error(`${amount} at ${r}/${length}: ${text(left)} + ${text(used)}, expected ${expected} cents`)
          }
          if (half) halves++
          else whole++
        }
      }
    }
    // both kinds of case were met: exact halves (each side rounded away from zero) and the rest
    expect([halves, whole]).toEqual([44, 8340])
  })

  it("is within half a cent of the exact share, never further, and grows with the time left", () => {
    for (const amount of amounts) {
      for (const length of [...lengths, APRIL_SECONDS]) {
        const step = length > 1000n ? 3600n : 1n
        let previous: bigint | undefined
        for (let r = 0n; r <= length; r += step) {
          const cents = units(prorate(d(amount), share(r, length), 2), 2)
          const { numerator, denominator } = exact(amount, r, length, 2)
          // |cents - numerator / denominator| <= 1/2
          const distance = cents * denominator - numerator
          if ((distance < 0n ? -distance : distance) * 2n > denominator) throw new Error(`${amount} at ${r}/${length}: ${cents} cents`)
          if (previous !== undefined && (amount.startsWith("-") ? cents > previous : cents < previous)) {
            throw new Error(`${amount}: ${cents} cents at ${r}/${length} after ${previous}`)
          }
          previous = cents
        }
      }
    }
    expect(text(prorate(d("99.99"), share(APRIL_SECONDS / 2n, APRIL_SECONDS), 2))).toBe("50")
  })

  it("gives a negative amount the negative of the positive amount's share", () => {
    for (const length of lengths) {
      for (let r = 0n; r <= length; r++) {
        for (const amount of ["0.01", "0.05", "10.01", "1234.57"]) {
          const plus = prorate(d(amount), share(r, length), 2)
          const minus = prorate(d(`-${amount}`), share(r, length), 2)
          expect(text(minus)).toBe(text(BigDecimal.negate(plus)))
        }
      }
    }
  })

  it("prorates the whole at a whole share and a clean zero (no negative zero) at none", () => {
    expect(text(prorate(d("49.995"), share(APRIL_SECONDS, APRIL_SECONDS), 2))).toBe("50")
    expect(text(prorate(d("-49.995"), share(APRIL_SECONDS, APRIL_SECONDS), 2))).toBe("-50")
    const none = prorate(d("-10"), share(0n, APRIL_SECONDS), 2)
    expect(text(none)).toBe("0")
    expect(BigDecimal.isNegative(none)).toBe(false)
    expect(text(prorate(d("1000"), share(1n, 1n), 12))).toBe("1000")
  })
})

describe("planChange at the cycle's edges, at the TestClock's now", () => {
  const credit = component("c1", { quantity: "3000", charge: "30" })
  const wallet20 = component("w1", { type: "WALLET", targetId: null, amount: "20", charge: "20" })
  const from = plan("a", [credit, wallet20], { cost: "50" })
  const bigger = component("c2", { targetId: credit.targetId, quantity: "9000", charge: "90" })
  const wallet40 = component("w2", { type: "WALLET", targetId: null, amount: "40", charge: "40" })
  const outcome = component("o1", { type: "OUTCOME", quantity: "300" })
  const to = plan("b", [bigger, wallet40, outcome], { cost: "130" })
  const before = () =>
    state(
      purchase(from, { billingDate: at("2025-01-01T00:00:00Z"), cycleIndex: 3, periodStart: april.start, periodEnd: april.end, autoPayment: true }),
      [balance(credit, { granted: "3000", used: "1200", remaining: "1800" })]
    )
  const changeNow = (s: RenewalState, plan = to) => Effect.map(currentTime, (now) => planChange(s, plan, now, ids()))

  it.effect("on the cycle's first instant: the whole old cost credited, the whole new one charged, the whole allowance and wallet difference", () =>
    Effect.gen(function*() {
      yield* setClock(april.start)
      const step = yield* changeNow(before())
      expect(lines(step)).toEqual([
        ["Unused time on Plan a (2025-04-01 to 2025-05-01)", "-50"],
        ["Remaining time on Plan b (2025-04-01 to 2025-05-01)", "130"]
      ])
      expect(totals(step)).toEqual({ subtotal: "80", taxes: [], total: "80", free: false })
      expect([step.invoices[0]!.periodStart, step.invoices[0]!.periodEnd, step.invoices[0]!.at]).toEqual([april.start, april.end, april.start])
      expect(rows(step)).toEqual([
        // 1800 left + (9000 - 3000): used stays used
        ["c2", "9000", "1200", "7800", "9000"],
        ["o1", "300", "0", "300", "300"]
      ])
      expect(wallet(step.walletSteps)).toEqual([
        ["Post", "20", "Wallet amount of Plan b for the rest of the cycle, less Plan a's"],
        ["AutoPay", "inv_1"]
      ])
    }))

  it.effect("one millisecond in, the second under way is used: 2,591,999 of 2,592,000, allowances to 12 places", () =>
    Effect.gen(function*() {
      yield* setClock(new Date(april.start.getTime() + 1))
      const step = yield* changeNow(before())
      // 50 x 2591999/2592000 = 49.99998..., 130 x ... = 129.99994...: the cent hides the second
      expect(lines(step).map((l) => l[1])).toEqual(["-50", "130"])
      expect(rows(step)).toEqual([
        // round12(9000 x s) = 8999.996527777778, round12(3000 x s) = 2999.998842592593
        ["c2", "8999.997685185185", "1200", "7799.997685185185", "9000"],
        ["o1", "299.999884259259", "0", "299.999884259259", "300"]
      ])
    }))

  it.effect("one second before the end: a second's worth, cents of nothing, allowance of a second (docs: \"an upgrade at the last second costs cents and gives cents' worth\")", () =>
    Effect.gen(function*() {
      yield* setClock(new Date(april.end.getTime() - 1000))
      const step = yield* changeNow(before())
      expect(lines(step)).toEqual([
        ["Unused time on Plan a (2025-04-30 to 2025-05-01)", "0"],
        ["Remaining time on Plan b (2025-04-30 to 2025-05-01)", "0"]
      ])
      expect(rows(step)).toEqual([
        // 9000/2592000 = 0.003472222222 less 3000/2592000 = 0.001157407407
        ["c2", "3000.002314814815", "1200", "1800.002314814815", "9000"],
        ["o1", "0.000115740741", "0", "0.000115740741", "300"]
      ])
      // nothing to pay, no wallet difference: no wallet move at all
      expect(totals(step)).toEqual({ subtotal: "0", taxes: [], total: "0", free: true })
      expect(step.walletSteps).toEqual([])
    }))

  it.effect("less than a second before the end (the cycle's last day): nothing is prorated, nothing granted", () =>
    Effect.gen(function*() {
      yield* setClock(new Date(april.end.getTime() - 999))
      const step = yield* changeNow(before())
      expect(lines(step).map((l) => l[1])).toEqual(["0", "0"])
      expect(rows(step)).toEqual([
        ["c2", "3000", "1200", "1800", "9000"],
        ["o1", "0", "0", "0", "300"]
      ])
      expect(step.walletSteps).toEqual([])
      expect(step.invoices[0]!.periodStart.getTime()).toBe(april.end.getTime() - 999)
    }))

  it.effect("after the cycle's end, not yet renewed: nothing is prorated, the invoice's period is the empty one at the end", () =>
    Effect.gen(function*() {
      yield* setClock(new Date(april.end.getTime() + 2 * DAY_MS))
      const step = yield* changeNow(before())
      expect(lines(step).map((l) => l[1])).toEqual(["0", "0"])
      expect([step.invoices[0]!.periodStart, step.invoices[0]!.periodEnd]).toEqual([april.end, april.end])
      expect(rows(step)[0]).toEqual(["c2", "3000", "1200", "1800", "9000"])
    }))

  it.effect("a change to the same plan at the same prices moves nothing, at 31 instants through the cycle and in its last seconds", () =>
    Effect.gen(function*() {
      yield* setClock(april.start)
      const same = state(
        purchase(from, { cycleIndex: 3, periodStart: april.start, periodEnd: april.end, autoPayment: true }),
        [balance(credit, { granted: "3000", used: "1200", remaining: "1800" })]
      )
      const check = (step: CycleStep, when: string) => {
        const [credited, charged] = step.invoices[0]!.lines
        const moved = [text(BigDecimal.sum(credited!.amount, charged!.amount)), text(step.invoices[0]!.totals.total), rows(step), step.walletSteps]
        expect(moved, when).toEqual(["0", "0", [["c1", "3000", "1200", "1800", "3000"]], []])
      }
      // 23 h 0 min 1.5 s apart: every hour of the day comes up, off the whole second
      for (let k = 0; k <= 30; k++) {
        check(yield* changeNow(same, from), `step ${k}`)
        yield* TestClock.adjust(23 * HOUR_MS + 1500)
      }
      yield* setClock(new Date(april.end.getTime() - 1500))
      check(yield* changeNow(same, from), "1.5 s before the end")
    }))

  it.effect("an upgrade's net charge only falls as the cycle goes on (day by day), from the whole difference to nothing, each line within half a cent", () =>
    Effect.gen(function*() {
      yield* setClock(april.start)
      const nets: Array<string> = []
      for (let day = 0; day <= 30; day++) {
        const step = yield* changeNow(before())
        const [credited, charged] = step.invoices[0]!.lines
        const left = BigInt(30 - day) * 86_400n
        for (const [line, cost] of [[credited!, "-50"], [charged!, "130"]] as const) {
          const { numerator, denominator } = exact(cost, left, APRIL_SECONDS, 2)
          const distance = units(line.amount, 2) * denominator - numerator
          if ((distance < 0n ? -distance : distance) * 2n > denominator) throw new Error(`day ${day}: ${text(line.amount)}`)
        }
        nets.push(text(step.invoices[0]!.totals.total)!)
        yield* TestClock.adjust(DAY_MS)
      }
      expect(nets).toHaveLength(31)
      expect(nets[0]).toBe("80")
      expect(nets[1]).toBe("77.34") // -48.33 + 125.67
      expect(nets[15]).toBe("40") // half way: -25 + 65
      expect(nets[29]).toBe("2.66") // -1.67 + 4.33
      expect(nets[30]).toBe("0")
      nets.reduce((previous, net) => {
        if (BigDecimal.greaterThan(d(net), d(previous))) throw new Error(`the net charge rose from ${previous} to ${net}`)
        return net
      })
    }))
})

describe("planChange: half a cent, taxes and a net credit", () => {
  const halfWay = new Date(april.start.getTime() + 15 * DAY_MS)
  const vat = { id: "tax_1", name: "VAT", ratePercent: d("10") }
  const onPlan = (cost: string) =>
    state(purchase(plan("a", [], { cost }), { periodStart: april.start, periodEnd: april.end, autoPayment: true }), [], { taxes: [vat] })
  const changeNow = (s: RenewalState, to: ReturnType<typeof plan>) => Effect.map(currentTime, (now) => planChange(s, to, now, ids()))

  it.effect("rounds an exact half cent away from zero on both lines, then taxes the subtotal to the cent", () =>
    Effect.gen(function*() {
      yield* setClock(halfWay)
      const step = yield* changeNow(onPlan("10.01"), plan("b", [], { cost: "20.03" }))
      // -5.005 -> -5.01; 10.015 -> 10.02; 10 % of 5.01 = 0.501 -> 0.5
      expect(lines(step).map((l) => l[1])).toEqual(["-5.01", "10.02"])
      expect(totals(step)).toEqual({ subtotal: "5.01", taxes: ["0.5"], total: "5.51", free: false })
      expect(wallet(step.walletSteps)).toEqual([["AutoPay", "inv_1"]])
    }))

  it.effect("a downgrade NOW: a negative subtotal is taxed negative, and the net credit goes to the wallet (docs: \"A net credit goes to the wallet\")", () =>
    Effect.gen(function*() {
      yield* setClock(halfWay)
      const step = yield* changeNow(onPlan("20.03"), plan("b", [], { cost: "10.01" }))
      expect(lines(step).map((l) => l[1])).toEqual(["-10.02", "5.01"])
      expect(totals(step)).toEqual({ subtotal: "-5.01", taxes: ["-0.5"], total: "-5.51", free: true })
      expect(wallet(step.walletSteps)).toEqual([["Post", "5.51", "Net credit of the change from Plan a to Plan b"]])
    }))

})

describe("planChange over month ends and a leap year", () => {
  const changeAt = (anchor: string, when: string, fromCost: string, toCost: string) => {
    const { start, end } = cyclePeriod(at(anchor), 0)
    const p = purchase(plan("a", [], { cost: fromCost }), { billingDate: at(anchor), cycleIndex: 0, periodStart: start, periodEnd: end })
    return Effect.map(
      Effect.zipRight(setClock(at(when)), currentTime),
      (now) => planChange(state(p), plan("b", [], { cost: toCost }), now, ids())
    )
  }

  it.effect("anchored Jan 31 2025: the cycle ends Feb 28, a change on Feb 14 is half of it", () =>
    Effect.gen(function*() {
      const step = yield* changeAt("2025-01-31T10:00:00Z", "2025-02-14T10:00:00Z", "30.01", "45")
      expect(lines(step)).toEqual([
        ["Unused time on Plan a (2025-02-14 to 2025-02-28)", "-15.01"],
        ["Remaining time on Plan b (2025-02-14 to 2025-02-28)", "22.5"]
      ])
      expect(step.invoices[0]!.periodEnd).toEqual(at("2025-02-28T10:00:00Z"))
    }))

  it.effect("anchored Jan 31 2024: the cycle ends Feb 29, so a fortnight before the end is 14/29 of it", () =>
    Effect.gen(function*() {
      const step = yield* changeAt("2024-01-31T10:00:00Z", "2024-02-15T10:00:00Z", "10", "29")
      // 10 x 14/29 = 4.8275... -> 4.83; 29 x 14/29 = 14
      expect(lines(step)).toEqual([
        ["Unused time on Plan a (2024-02-15 to 2024-02-29)", "-4.83"],
        ["Remaining time on Plan b (2024-02-15 to 2024-02-29)", "14"]
      ])
      expect(totals(step).total).toBe("9.17")
    }))

  it.effect("on the last day of a leap February, an hour before the cycle's end: 3,600 of 2,505,600 seconds", () =>
    Effect.gen(function*() {
      const step = yield* changeAt("2024-01-31T10:00:00Z", "2024-02-29T09:00:00Z", "2505.6", "5011.2")
      // 2505.6 x 3600/2505600 = 3.6 exactly
      expect(lines(step)).toEqual([
        ["Unused time on Plan a (2024-02-29 to 2024-02-29)", "-3.6"],
        ["Remaining time on Plan b (2024-02-29 to 2024-02-29)", "7.2"]
      ])
    }))
})
