/**
 * The threshold alerts' rule alone (src/ledger/Thresholds.ts, docs/webhooks.md
 * "Threshold alerts"): the level a prepaid balance's used share is at, and which
 * thresholds a set of moves reaches, with the values just after the move that
 * reached each. Exact decimals, no database.
 */
import { BigDecimal } from "effect"
import { describe, expect, it } from "vitest"
import { balanceKindOf, type RaisedRow, thresholdsReached, usedLevel } from "../../src/ledger/Thresholds.ts"
import { decimal, ZERO } from "../../src/money.ts"
import type { BalanceMove } from "../../src/pricing/meters/Context.ts"
import type { ThresholdCrossing } from "../../src/webhooks/ThresholdCrossing.ts"

const d = decimal
const AT = new Date("2025-10-27T08:40:12.345Z")
const PERIOD_START = new Date("2025-10-03T10:00:00.000Z")
const PERIOD_END = new Date("2025-11-03T10:00:00.000Z")

describe("the level a balance is at", () => {
  it("is the highest of 50, 80 and 100 % of the grant that is used, exactly at each boundary", () => {
    const level = (granted: string, used: string) => usedLevel(d(granted), d(used))
    expect(level("100", "0")).toBe(0)
    expect(level("100", "49.999999999999")).toBe(0)
    expect(level("100", "50")).toBe(50)
    expect(level("100", "79.999999999999")).toBe(50)
    expect(level("100", "80")).toBe(80)
    expect(level("100", "99.999999999999")).toBe(80)
    expect(level("100", "100")).toBe(100)
    expect(level("100", "250")).toBe(100)
    // Thirds, no rounding: 1.5 of 3 is 50 %, 2.4 of 3 is 80 %, 2.39 of 3 below it.
    expect(level("3", "1.5")).toBe(50)
    expect(level("3", "2.39")).toBe(50)
    expect(level("3", "2.4")).toBe(80)
    expect(level("0.000000000003", "0.000000000003")).toBe(100)
  })

  it("is 0 when nothing is granted, or less than nothing (a composite's carried debt), whatever is used", () => {
    expect(usedLevel(ZERO, ZERO)).toBe(0)
    expect(usedLevel(ZERO, d("5"))).toBe(0)
    expect(usedLevel(d("-5"), d("10"))).toBe(0)
    expect(usedLevel(d("-5"), ZERO)).toBe(0)
  })
})

describe("the balance kind an alert names", () => {
  it("calls the plan's PRICING_METRIC component a composite and keeps the other kinds", () => {
    expect(balanceKindOf("PRICING_METRIC")).toBe("COMPOSITE")
    expect(balanceKindOf("CREDIT")).toBe("CREDIT")
    expect(balanceKindOf("UNIT")).toBe("UNIT")
  })
})

interface Values {
  readonly granted: string
  readonly used: string
  readonly remaining: string
}

/** A raised row: its values after the moves, and what the moves added in all. */
const raisedRow = (after: Values, moved: Values, fields: Partial<RaisedRow> = {}): RaisedRow => ({
  organizationId: "org_1",
  purchaseId: "pur_1",
  componentId: "cmp_1",
  customerId: "cus_1",
  externalId: "jo-1",
  type: "CREDIT",
  targetId: "crd_1",
  granted: d(after.granted),
  used: d(after.used),
  remaining: d(after.remaining),
  grantedMoved: d(moved.granted),
  usedMoved: d(moved.used),
  remainingMoved: d(moved.remaining),
  cycleIndex: 3,
  periodStart: PERIOD_START,
  periodEnd: PERIOD_END,
  ...fields
})

/** Usage drawing `amount` from the row (used up, remaining down). */
const use = (amount: string, usageLogId: string | null, fields: Partial<BalanceMove> = {}): BalanceMove => ({
  organizationId: "org_1",
  purchaseId: "pur_1",
  componentId: "cmp_1",
  granted: ZERO,
  used: d(amount),
  remaining: BigDecimal.negate(d(amount)),
  cycleQuantity: ZERO,
  arrearAmount: ZERO,
  usageLogId,
  ...fields
})

/** An adjustment of the grant by `amount` (negative: a claw-back): granted and remaining move together. */
const grant = (amount: string, fields: Partial<BalanceMove> = {}): BalanceMove => ({
  organizationId: "org_1",
  purchaseId: "pur_1",
  componentId: "cmp_1",
  granted: d(amount),
  used: ZERO,
  remaining: d(amount),
  cycleQuantity: ZERO,
  arrearAmount: ZERO,
  ...fields
})

/** What a crossing says, decimals as their exact text. */
const said = (crossing: ThresholdCrossing) => ({
  ...crossing,
  granted: BigDecimal.format(crossing.granted),
  used: BigDecimal.format(crossing.used),
  remaining: BigDecimal.format(crossing.remaining)
})

const alert = (threshold: number, values: Values, usageLogId: string | null, fields: Partial<ThresholdCrossing> = {}) => ({
  organizationId: "org_1",
  customerId: "cus_1",
  externalId: "jo-1",
  purchaseId: "pur_1",
  componentId: "cmp_1",
  balanceType: "CREDIT",
  balanceId: "crd_1",
  cycleIndex: 3,
  periodStart: PERIOD_START,
  periodEnd: PERIOD_END,
  threshold,
  ...values,
  usageLogId,
  at: AT,
  ...fields
})

describe("the thresholds a set of moves reaches", () => {
  it("sends one alert for each threshold one move reaches, lowest first, all with the values just after it", () => {
    // 40 used of 100 before; one usage of 60 takes it to 100 %.
    const row = raisedRow({ granted: "100", used: "100", remaining: "0" }, { granted: "0", used: "60", remaining: "-60" })
    const after = { granted: "100", used: "100", remaining: "0" }
    expect(thresholdsReached([row], [use("60", "usg_1")], AT).map(said)).toEqual([
      alert(50, after, "usg_1"),
      alert(80, after, "usg_1"),
      alert(100, after, "usg_1")
    ])
  })

  it("walks the moves in order: each threshold names the move that reached it and the values just after that move", () => {
    // Nothing used of 1000 before; a batch of four usages: 300, 300 (60 %), 212.5 (81.25 %), 100.
    const row = raisedRow({ granted: "1000", used: "912.5", remaining: "87.5" }, { granted: "0", used: "912.5", remaining: "-912.5" })
    const moves = [use("300", "usg_1"), use("300", "usg_2"), use("212.5", "usg_3"), use("100", "usg_4")]
    expect(thresholdsReached([row], moves, AT).map(said)).toEqual([
      alert(50, { granted: "1000", used: "600", remaining: "400" }, "usg_2"),
      alert(80, { granted: "1000", used: "812.5", remaining: "187.5" }, "usg_3")
    ])
  })

  it("does not reach again a threshold the balance was at before the moves", () => {
    // 50 used of 100 before (at 50 %): to 60 reaches nothing, to 85 reaches 80 only.
    const to60 = raisedRow({ granted: "100", used: "60", remaining: "40" }, { granted: "0", used: "10", remaining: "-10" })
    expect(thresholdsReached([to60], [use("10", "usg_1")], AT)).toEqual([])
    const to85 = raisedRow({ granted: "100", used: "85", remaining: "15" }, { granted: "0", used: "35", remaining: "-35" })
    expect(thresholdsReached([to85], [use("35", "usg_1")], AT).map(said)).toEqual([
      alert(80, { granted: "100", used: "85", remaining: "15" }, "usg_1")
    ])
  })

  it("fires on a claw-back, which raises the share by lowering the grant, with no usage-log row", () => {
    // 40 used of 100, clawed back by 30: 40 of 70 = 57 %.
    const row = raisedRow({ granted: "70", used: "40", remaining: "30" }, { granted: "-30", used: "0", remaining: "-30" })
    expect(thresholdsReached([row], [grant("-30")], AT).map(said)).toEqual([
      alert(50, { granted: "70", used: "40", remaining: "30" }, null)
    ])
  })

  it("does not fire a threshold again in the same walk after a grant lowered the share, and fires the next one", () => {
    // 40 of 100: usage 10 (50 %), a grant of 100 (25 %), usage 60 (55 %), usage 50 (80 %).
    const row = raisedRow({ granted: "200", used: "160", remaining: "40" }, { granted: "100", used: "120", remaining: "-20" })
    const moves = [use("10", "usg_1"), grant("100"), use("60", "usg_2"), use("50", "usg_3")]
    expect(thresholdsReached([row], moves, AT).map(said)).toEqual([
      alert(50, { granted: "100", used: "50", remaining: "50" }, "usg_1"),
      alert(80, { granted: "200", used: "160", remaining: "40" }, "usg_3")
    ])
  })

  it("leaves out an ended cycle's move and the moves of rows that did not rise", () => {
    const row = raisedRow({ granted: "100", used: "55", remaining: "45" }, { granted: "0", used: "55", remaining: "-55" })
    const moves = [
      // A late signal of cycle 2: that cycle's closed row, even with the same keys.
      use("90", "usg_late", { closedCycle: 2 }),
      // Another component of the purchase, another purchase, another workspace: not raised.
      use("90", "usg_other_component", { componentId: "cmp_2" }),
      use("90", "usg_other_purchase", { purchaseId: "pur_2" }),
      use("90", "usg_other_workspace", { organizationId: "org_2" }),
      use("55", "usg_1")
    ]
    expect(thresholdsReached([row], moves, AT).map(said)).toEqual([
      alert(50, { granted: "100", used: "55", remaining: "45" }, "usg_1")
    ])
  })

  it("walks each raised row on its own, keyed by workspace, purchase and component", () => {
    const credit = raisedRow({ granted: "10", used: "8", remaining: "2" }, { granted: "0", used: "8", remaining: "-8" })
    const composite = raisedRow({ granted: "4", used: "2", remaining: "2" }, { granted: "0", used: "2", remaining: "-2" }, {
      organizationId: "org_2",
      componentId: "cmp_c",
      customerId: "cus_2",
      externalId: null,
      type: "PRICING_METRIC",
      targetId: "cmp_target",
      cycleIndex: 0
    })
    const moves = [
      use("5", "usg_1"),
      use("1", "usg_2", { organizationId: "org_2", componentId: "cmp_c" }),
      use("3", "usg_3"),
      use("1", "usg_4", { organizationId: "org_2", componentId: "cmp_c" })
    ]
    const compositeFields: Partial<ThresholdCrossing> = {
      organizationId: "org_2",
      componentId: "cmp_c",
      customerId: "cus_2",
      externalId: null,
      balanceType: "COMPOSITE",
      balanceId: "cmp_target",
      cycleIndex: 0
    }
    expect(thresholdsReached([credit, composite], moves, AT).map(said)).toEqual([
      alert(50, { granted: "10", used: "5", remaining: "5" }, "usg_1"),
      alert(80, { granted: "10", used: "8", remaining: "2" }, "usg_3"),
      alert(50, { granted: "4", used: "2", remaining: "2" }, "usg_4", compositeFields)
    ])
  })

  it("reaches nothing without a raised row or a move", () => {
    const row = raisedRow({ granted: "100", used: "60", remaining: "40" }, { granted: "0", used: "60", remaining: "-60" })
    expect(thresholdsReached([], [use("60", "usg_1")], AT)).toEqual([])
    expect(thresholdsReached([row], [], AT)).toEqual([])
  })
})
