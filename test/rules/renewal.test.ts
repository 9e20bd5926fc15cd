/**
 * One step of a purchase's life in memory (src/billing/Renewal.ts): a first
 * cycle, a renewal (the ended cycle's USAGE invoice, late lines, the grants
 * with rollover and a composite's debt, the PLAN invoice), a change at the
 * cycle end, a cancellation, and settling the wallet steps.
 */
import type { BigDecimal } from "effect"
import { describe, expect, it } from "vitest"
import {
  cancellation,
  type LateBalance,
  lateLines,
  needsWallet,
  planLines,
  renewal,
  type CycleStep,
  type RenewalBalance,
  settleWallet,
  type WalletStep
} from "../../src/billing/Renewal.ts"
import type { BalanceValues } from "../../src/ledger/Ledger.ts"
import { at, balance, component, d, ids, plan, purchase, state, text } from "./fixtures.ts"

/** A balance row's decimals as text. */
const row = (r: BalanceValues | RenewalBalance) => [
  r.componentId,
  text(r.granted),
  text(r.used),
  text(r.remaining),
  text(r.originalGranted),
  text(r.cycleQuantity),
  text(r.arrearAmount)
]

const lineText = (step: CycleStep, index: number) =>
  step.invoices[index]!.lines.map((line) => [line.description, line.componentId, text(line.quantity), text(line.unitPrice), text(line.amount)])

const stepText = (steps: ReadonlyArray<WalletStep>) =>
  steps.map((step) => {
    switch (step._tag) {
      case "Grant":
        return [step._tag, step.type, text(step.amount), step.at.toISOString()]
      case "RecurringGrant":
        return [step._tag, step.at.toISOString()]
      case "AutoPay":
        return [step._tag, step.invoice.id]
      case "Post":
        return [step._tag, step.type, text(step.amount), step.invoiceId, step.notes]
    }
  })

const credit = component("c1", { quantity: "500", unitPrice: "0.05", charge: "25" })
const unit = component("u1", { type: "UNIT", quantity: "10", unitPrice: "0.5", charge: "5" })
const outcome = component("o1", { type: "OUTCOME", billingMode: "ARREAR", unitPrice: "2" })
const wallet = component("w1", { type: "WALLET", targetId: null, amount: "50", charge: "50" })
const emptyWallet = component("w0", { type: "WALLET", targetId: null, amount: "0" })
const arrearWallet = component("w2", { type: "WALLET", targetId: null, billingMode: "ARREAR", amount: "70" })
const starter = plan("a", [credit, unit, outcome, wallet, emptyWallet, arrearWallet], { cost: "75", priceAdjustment: "-5" })

describe("renewal: the first cycle", () => {
  // Steps are computed in each test, not when the file loads: Stryker then knows which tests cover a mutant.
  const bought = purchase(starter, {
    status: "SCHEDULED",
    billingDate: at("2026-01-31T10:00:00Z"),
    periodStart: null,
    periodEnd: null,
    autoPayment: true
  })
  const stepOf = () => renewal(state(bought), ids())

  it("starts cycle 0 at the billing date", () => {
    const step = stepOf()
    expect(step.cycle).toEqual({ index: 0, start: at("2026-01-31T10:00:00Z"), end: at("2026-02-28T10:00:00Z"), at: at("2026-01-31T10:00:00Z") })
    expect(step.endedCycle).toBeNull()
    expect(step.lateBilled).toEqual([])
    expect(step.replaceBalances).toBeUndefined()
  })

  it("creates a row per metered component: ADVANCE granted its quantity, ARREAR nothing", () => {
    const step = stepOf()
    expect(step.setBalances).toEqual([])
    expect(step.createBalances.map(row)).toEqual([
      ["c1", "500", "0", "500", "500", "0", "0"],
      ["u1", "10", "0", "10", "10", "0", "0"],
      ["o1", "0", "0", "0", null, "0", "0"]
    ])
    expect(step.createBalances[0]).toMatchObject({
      organizationId: "org_1",
      purchaseId: "pur_1",
      customerId: "cus_1",
      type: "CREDIT",
      billingMode: "ADVANCE",
      targetId: "target-c1"
    })
  })

  it("issues the PLAN invoice: a line per ADVANCE component and the price adjustment", () => {
    const step = stepOf()
    expect(step.invoices).toHaveLength(1)
    expect(step.invoices[0]).toMatchObject({
      id: "inv_1",
      kind: "PLAN",
      periodStart: at("2026-01-31T10:00:00Z"),
      periodEnd: at("2026-02-28T10:00:00Z"),
      cycleIndex: 0,
      at: at("2026-01-31T10:00:00Z")
    })
    expect(lineText(step, 0)).toEqual([
      ["Target c1 (prepaid)", "c1", "500", "0.05", "25"],
      ["Target u1 (prepaid)", "u1", "10", null, "5"],
      ["Target w1 (wallet credit)", "w1", null, null, "50"],
      ["Target w0 (wallet credit)", "w0", null, null, "0"],
      ["Price adjustment", null, null, null, "-5"]
    ])
    expect(text(step.invoices[0]!.totals.total)).toBe("75")
  })

  it("grants the plan's wallet amount (PURCHASE_GRANT), then the recurring grant, then pays the invoice", () => {
    const step = stepOf()
    expect(stepText(step.walletSteps)).toEqual([
      ["Grant", "PURCHASE_GRANT", "50", "2026-01-31T10:00:00.000Z"],
      ["RecurringGrant", "2026-01-31T10:00:00.000Z"],
      ["AutoPay", "inv_1"]
    ])
  })
})

describe("planLines", () => {
  it("bills a plan with nothing to charge as one line at zero", () => {
    expect(planLines(plan("z", [outcome], { name: "Free" })).map((line) => [line.description, text(line.amount)])).toEqual([["Free", "0"]])
  })

  it("bills a price adjustment alone when no component is prepaid", () => {
    expect(planLines(plan("z", [outcome], { priceAdjustment: "12" })).map((line) => [line.description, text(line.amount)]))
      .toEqual([["Price adjustment", "12"]])
  })
})

const rolling = component("c2", { quantity: "100", rollover: true })
const pool = component("p1", { type: "PRICING_METRIC", quantity: "50", unitPrice: "1" })
const units = component("u2", { type: "UNIT", billingMode: "ARREAR" })
const renewing = plan("b", [credit, rolling, pool, outcome, units, wallet], { cost: "75" })
const march = { cycleIndex: 2, periodStart: at("2026-03-01T00:00:00Z"), periodEnd: at("2026-04-01T00:00:00Z") }
// A row whose component the snapshot no longer lists
const orphan = balance(component("x9", { billingMode: "ARREAR", quantity: "3" }), { granted: "3", used: "1", remaining: "2", arrearAmount: "4" })
const endOfMarch = [
  balance(credit, { granted: "500", used: "380", remaining: "120" }),
  balance(rolling, { granted: "100", used: "60", remaining: "40" }),
  balance(pool, { granted: "50", used: "57", remaining: "-7" }),
  balance(outcome, { used: "3", cycleQuantity: "3", arrearAmount: "6" }),
  balance(units, { used: "0", cycleQuantity: "0", arrearAmount: "0" }),
  orphan
]

describe("renewal: a cycle ends and the next one starts", () => {
  const before = state(purchase(renewing, { ...march, autoPayment: true }), endOfMarch, { taxes: [{ id: "t", name: "VAT", ratePercent: d("10") }] })
  const stepOf = () => renewal(before, ids())

  it("invoices the ended cycle's ARREAR charges (USAGE), then the new cycle's plan (PLAN)", () => {
    const step = stepOf()
    expect(step.invoices.map((invoice) => [invoice.id, invoice.kind, invoice.periodStart.toISOString(), invoice.periodEnd.toISOString(), invoice.cycleIndex, invoice.at.toISOString()]))
      .toEqual([
        ["inv_1", "USAGE", "2026-03-01T00:00:00.000Z", "2026-04-01T00:00:00.000Z", 2, "2026-04-01T00:00:00.000Z"],
        ["inv_2", "PLAN", "2026-04-01T00:00:00.000Z", "2026-05-01T00:00:00.000Z", 3, "2026-04-01T00:00:00.000Z"]
      ])
    expect(lineText(step, 0)).toEqual([
      ["Target o1 (usage)", "o1", "3", "2", "6"],
      ["x9 (usage)", "x9", "0", null, "4"]
    ])
    expect(step.invoices[0]!.draft).toBe(false)
    expect([text(step.invoices[0]!.totals.subtotal), text(step.invoices[0]!.totals.total)]).toEqual(["10", "11"])
  })

  it("grants each prepaid row its quantity, plus its remainder under rollover, less a composite's debt", () => {
    const step = stepOf()
    expect(step.createBalances).toEqual([])
    expect(step.setBalances.map(row)).toEqual([
      ["c1", "500", "0", "500", "500", "0", "0"],
      ["c2", "140", "0", "140", "100", "0", "0"],
      ["p1", "43", "0", "43", "50", "0", "0"],
      ["o1", "0", "0", "0", null, "0", "0"],
      ["u2", "0", "0", "0", null, "0", "0"],
      // Not a component of the snapshot: left as it was, but for the arrears the USAGE invoice took
      ["x9", "3", "1", "2", "3", "0", "0"]
    ])
    expect(step.setBalances[0]).toMatchObject({ organizationId: "org_1", purchaseId: "pur_1", customerId: "cus_1", type: "CREDIT" })
  })

  it("records the ended cycle: FINAL at once, what expired, the arrears invoiced", () => {
    const step = stepOf()
    const ended = step.endedCycle!
    expect(ended).toMatchObject({
      organizationId: "org_1",
      purchaseId: "pur_1",
      customerId: "cus_1",
      cycleIndex: 2,
      periodStart: at("2026-03-01T00:00:00Z"),
      periodEnd: at("2026-04-01T00:00:00Z"),
      status: "FINAL",
      finalizeAt: at("2026-04-01T00:00:00Z"),
      usageInvoiceId: "inv_1"
    })
    expect(ended.snapshot).toBeUndefined()
    expect(ended.balances.map((b) => [b.componentId, text(b.remaining), text(b.arrearAmount), text(b.invoicedArrear)])).toEqual([
      ["c1", "120", "0", "0"],
      ["c2", "0", "0", "0"],
      ["p1", "0", "0", "0"],
      ["o1", "0", "6", "6"],
      ["u2", "0", "0", "0"],
      ["x9", "0", "4", "4"]
    ])
  })

  it("enters the next cycle with a CYCLE_GRANT, paying the USAGE invoice first and the PLAN invoice last", () => {
    const step = stepOf()
    expect(step.cycle).toEqual({ index: 3, start: at("2026-04-01T00:00:00Z"), end: at("2026-05-01T00:00:00Z"), at: at("2026-04-01T00:00:00Z") })
    expect(stepText(step.walletSteps)).toEqual([
      ["AutoPay", "inv_1"],
      ["Grant", "CYCLE_GRANT", "50", "2026-04-01T00:00:00.000Z"],
      ["RecurringGrant", "2026-04-01T00:00:00.000Z"],
      ["AutoPay", "inv_2"]
    ])
  })

  it("issues the USAGE invoice DRAFT while the organisation has a grace period, unpaid, its cycle DRAFT", () => {
    const draft = renewal({ ...before, graceHours: 48 }, ids())
    expect(draft.invoices[0]!.draft).toBe(true)
    expect(draft.endedCycle).toMatchObject({ status: "DRAFT", finalizeAt: at("2026-04-03T00:00:00Z"), usageInvoiceId: "inv_1" })
    expect(draft.endedCycle!.balances.map((b) => text(b.invoicedArrear))).toEqual(["0", "0", "0", "0", "0", "0"])
    expect(stepText(draft.walletSteps).map((s) => s[0])).toEqual(["Grant", "RecurringGrant", "AutoPay"])
  })

  it("issues no USAGE invoice when nothing was charged, and leaves the rows' arrears alone", () => {
    // A prepaid row's arrear amount bills nothing; only an invoice clears it
    const prepaidOrphan = balance(component("x9", { quantity: "3" }), { granted: "3", used: "1", remaining: "2", arrearAmount: "4" })
    const quiet = [balance(outcome, { used: "0", arrearAmount: "0" }), prepaidOrphan]
    const step = renewal(state(purchase(renewing, { ...march, autoPayment: true }), quiet), ids())
    expect(step.invoices.map((invoice) => invoice.kind)).toEqual(["PLAN"])
    expect(step.endedCycle!.usageInvoiceId).toBeNull()
    expect(step.setBalances.map(row)).toEqual([
      ["o1", "0", "0", "0", null, "0", "0"],
      ["x9", "3", "1", "2", "3", "0", "4"]
    ])
    expect(stepText(step.walletSteps).map((s) => s[0])).toEqual(["Grant", "RecurringGrant", "AutoPay"])
  })

  it("pays nothing from the wallet with auto-payment off, and bills a free PLAN invoice without paying it", () => {
    const off = renewal(state(purchase(renewing, { ...march, autoPayment: false }), endOfMarch), ids())
    expect(stepText(off.walletSteps).map((s) => s[0])).toEqual(["Grant", "RecurringGrant"])
    const free = renewal(state(purchase(plan("f", [outcome]), { ...march, autoPayment: true }), []), ids())
    expect(free.invoices[0]!.totals.free).toBe(true)
    expect(stepText(free.walletSteps)).toEqual([["RecurringGrant", "2026-04-01T00:00:00.000Z"]])
  })

  it("counts a purchase with no period start from its billing date", () => {
    const step = renewal(state(purchase(renewing, { ...march, periodStart: null, billingDate: at("2026-01-01T00:00:00Z") }), endOfMarch), ids())
    expect(step.invoices[0]!.periodStart).toEqual(at("2026-01-01T00:00:00Z"))
    expect(step.endedCycle!.periodStart).toEqual(at("2026-01-01T00:00:00Z"))
  })
})

const late = (fields: Partial<LateBalance> & Pick<LateBalance, "componentId" | "arrearAmount" | "invoicedArrear">): LateBalance => ({
  organizationId: "org_1",
  purchaseId: "pur_0",
  cycleIndex: 1,
  customerId: "cus_1",
  targetName: `Target ${fields.componentId}`,
  periodStart: at("2026-02-01T00:00:00Z"),
  periodEnd: at("2026-03-01T00:00:00Z"),
  ...fields
})

describe("arrear lines", () => {
  it("bill a unit's usage without a unit price (its tiers priced it), other kinds at theirs", () => {
    const pricedUnit = component("u9", { type: "UNIT", billingMode: "ARREAR", unitPrice: "0.5" })
    const withWallet = plan("w", [pricedUnit, outcome, component("w9", { type: "WALLET", targetId: null, amount: null })])
    const rows = [balance(pricedUnit, { cycleQuantity: "4", arrearAmount: "3" }), balance(outcome, { cycleQuantity: "1", arrearAmount: "2" })]
    const step = renewal(state(purchase(withWallet, march), rows), ids())
    expect(lineText(step, 0)).toEqual([
      ["Target u9 (usage)", "u9", "4", null, "3"],
      ["Target o1 (usage)", "o1", "1", "2", "2"]
    ])
    // a wallet component without an amount grants nothing
    expect(step.walletSteps.map((s) => s._tag)).toEqual(["RecurringGrant"])
  })
})

describe("late lines", () => {
  const owed = late({ componentId: "o1", arrearAmount: d("5"), invoicedArrear: d("3") })
  const credited = late({ componentId: "o2", targetName: null, arrearAmount: d("1"), invoicedArrear: d("4"), cycleIndex: 0 })
  const settled = late({ componentId: "o3", arrearAmount: d("2"), invoicedArrear: d("2") })

  it("bills each FINAL row's difference with its own cycle's period, a credit when invoices hold more", () => {
    const { billed, lines } = lateLines([owed, credited, settled], d("1"))
    expect(billed).toEqual([owed, credited])
    expect(lines.map((line) => [line.description, line.componentId, line.quantity, line.unitPrice, text(line.amount), line.periodStart, line.periodEnd, line.cycleIndex]))
      .toEqual([
        ["Target o1 (late usage, 2026-02-01 to 2026-03-01)", "o1", null, null, "2", owed.periodStart, owed.periodEnd, 1],
        ["o2 (late usage credit, 2026-02-01 to 2026-03-01)", "o2", null, null, "-3", credited.periodStart, credited.periodEnd, 0]
      ])
  })

  it("keeps the credits for a later invoice when they would take this one below zero", () => {
    expect(lateLines([owed, credited], d("0.99")).billed).toEqual([owed])
    expect(lateLines([owed, credited], d("1")).billed).toEqual([owed, credited])
    expect(lateLines([credited], d("3")).billed).toEqual([credited])
  })

  it("go on the renewal's USAGE invoice after the cycle's own lines, and are reported billed", () => {
    const step = renewal(state(purchase(renewing, march), [balance(outcome, { cycleQuantity: "1", arrearAmount: "2" })], { lateBalances: [owed, credited] }), ids())
    expect(lineText(step, 0).map((line) => line[4])).toEqual(["2", "2", "-3"])
    expect(step.lateBilled).toEqual([owed, credited])
    const onlyLate = renewal(state(purchase(renewing, march), [], { lateBalances: [owed] }), ids())
    expect(onlyLate.invoices.map((invoice) => invoice.kind)).toEqual(["USAGE", "PLAN"])
    const withheld = renewal(state(purchase(renewing, march), [balance(outcome, { arrearAmount: "2" })], { lateBalances: [credited] }), ids())
    expect(lineText(withheld, 0).map((line) => line[4])).toEqual(["2"])
    expect(withheld.lateBilled).toEqual([])
  })
})

describe("renewal: a change scheduled for the cycle end", () => {
  const carrying = component("c1", { quantity: "500", rollover: true })
  const keeping = component("c2", { quantity: "100", rollover: false })
  const from = plan("a", [carrying, keeping, pool, outcome, wallet], { cost: "10" })
  const toCarrying = component("n1", { targetId: carrying.targetId, quantity: "200", rollover: false })
  const toKeeping = component("n2", { targetId: keeping.targetId, quantity: "100", rollover: true })
  const toPool = component("n3", { type: "PRICING_METRIC", targetId: pool.targetId, quantity: "50" })
  const fresh = component("n4", { type: "OUTCOME", quantity: "7" })
  const toOutcome = component("n5", { type: "OUTCOME", billingMode: "ARREAR", targetId: outcome.targetId, unitPrice: "3" })
  const to = plan("b", [toCarrying, toKeeping, toPool, fresh, toOutcome], { cost: "20" })
  const rows = [
    balance(carrying, { granted: "500", used: "470", remaining: "30" }),
    balance(keeping, { granted: "100", used: "70", remaining: "30" }),
    balance(pool, { granted: "50", used: "55", remaining: "-5" }),
    balance(outcome, { used: "4", cycleQuantity: "4", arrearAmount: "8" })
  ]
  const stepOf = () => renewal(state(purchase(from, { ...march, scheduledSnapshot: to, autoPayment: true }), rows), ids())

  it("carries a remainder by the old component's rollover, a composite's debt whatever it says", () => {
    const step = stepOf()
    expect(step.replaceBalances).toBe(true)
    expect(step.setBalances).toEqual([])
    expect(step.createBalances.map(row)).toEqual([
      // the old c1 rolled over: 200 + 30
      ["n1", "230", "0", "230", "200", "0", "0"],
      // the old c2 did not: the new one's rollover is for the cycles it runs
      ["n2", "100", "0", "100", "100", "0", "0"],
      ["n3", "45", "0", "45", "50", "0", "0"],
      ["n4", "7", "0", "7", "7", "0", "0"],
      ["n5", "0", "0", "0", null, "0", "0"]
    ])
    expect(step.carried).toEqual([{ from: "c1", to: "n1" }, { from: "c2", to: "n2" }, { from: "p1", to: "n3" }, { from: "o1", to: "n5" }])
  })

  it("invoices the ended cycle under the old plan and the new cycle under the new one", () => {
    const step = stepOf()
    expect(lineText(step, 0)).toEqual([["Target o1 (usage)", "o1", "4", "2", "8"]])
    expect(step.invoices[1]!.kind).toBe("PLAN")
    expect(lineText(step, 1).map((line) => line[0])).toEqual(["Target n1 (prepaid)", "Target n2 (prepaid)", "Target n3 (prepaid)", "Target n4 (prepaid)"])
    expect(step.endedCycle!.snapshot).toBe(from)
    expect(step.changedTo).toBe(to)
    expect(step.changedFrom).toBe(from)
    // the new plan has no wallet: no grant
    expect(stepText(step.walletSteps).map((s) => s[0])).toEqual(["AutoPay", "RecurringGrant"])
  })

  it("does not carry a positive remainder the old component's own row left when it did not roll over, nor a negative one", () => {
    const overdrawn = [balance(carrying, { granted: "500", used: "510", remaining: "-10" })]
    const [first] = renewal(state(purchase(from, { ...march, scheduledSnapshot: to }), overdrawn), ids()).createBalances
    // a CREDIT's negative remainder is a debt too
    expect(row(first!)).toEqual(["n1", "190", "0", "190", "200", "0", "0"])
  })

  it("pairs each row with the new component of its kind, target and billing mode, whatever order the plans list them in", () => {
    // The old plan sells a credit prepaid (rolling over) and in arrears; the new one lists its ARREAR component
    // first, then a credit the old plan did not sell, then the prepaid one.
    const prepaid = component("a1", { quantity: "100", rollover: true })
    const overflow = component("a2", { targetId: prepaid.targetId, billingMode: "ARREAR", unitPrice: "0.1" })
    const toOverflow = component("m1", { targetId: prepaid.targetId, billingMode: "ARREAR", unitPrice: "0.2" })
    const newCredit = component("m2", { quantity: "10" })
    const toPrepaid = component("m3", { targetId: prepaid.targetId, quantity: "50" })
    const old = plan("o", [prepaid, overflow])
    const changed = plan("n", [toOverflow, newCredit, toPrepaid])
    const rowsOfOld = [balance(prepaid, { granted: "100", used: "70", remaining: "30" }), balance(overflow)]
    const step = renewal(state(purchase(old, { ...march, scheduledSnapshot: changed }), rowsOfOld), ids())
    expect(step.carried).toEqual([{ from: "a2", to: "m1" }, { from: "a1", to: "m3" }])
    expect(step.createBalances.map(row)).toEqual([
      ["m1", "0", "0", "0", null, "0", "0"],
      // nothing of the old plan's to carry
      ["m2", "10", "0", "10", "10", "0", "0"],
      // 50 + the 30 the old prepaid component rolls over
      ["m3", "80", "0", "80", "50", "0", "0"]
    ])
  })

  it("carries only the debt of a row whose component the old plan does not list (no rollover to read)", () => {
    const gone = component("g1", { quantity: "20", rollover: true })
    const toGone = component("m4", { targetId: gone.targetId, quantity: "10" })
    const grantedAfter = (remaining: string) =>
      renewal(state(purchase(plan("o", []), { ...march, scheduledSnapshot: plan("n", [toGone]) }), [balance(gone, { granted: "20", remaining })]), ids())
        .createBalances.map(row)
    expect(grantedAfter("5")).toEqual([["m4", "10", "0", "10", "10", "0", "0"]])
    expect(grantedAfter("-3")).toEqual([["m4", "7", "0", "7", "10", "0", "0"]])
  })

  it("applies only to an ACTIVE purchase", () => {
    const scheduled = renewal(state(purchase(from, { ...march, status: "SCHEDULED", scheduledSnapshot: to }), rows), ids())
    expect(scheduled.replaceBalances).toBeUndefined()
    expect(scheduled.changedTo).toBeUndefined()
    expect(scheduled.setBalances.map((r) => r.componentId)).toEqual(["c1", "c2", "p1", "o1"])
  })
})

describe("cancellation", () => {
  const cancelledAt = at("2026-03-20T12:00:00Z")

  it("invoices an ACTIVE purchase's ARREAR usage so far, to the cycle's end, and clears the arrears", () => {
    const step = cancellation(state(purchase(renewing, { ...march, autoPayment: true }), endOfMarch), cancelledAt, ids())
    expect(step).toMatchObject({ organizationId: "org_1", purchaseId: "pur_1", customerId: "cus_1", cycle: null, createBalances: [] })
    expect(step.invoices.map((invoice) => [invoice.kind, invoice.periodStart, invoice.periodEnd, invoice.at])).toEqual([
      ["USAGE", march.periodStart, march.periodEnd, cancelledAt]
    ])
    expect(step.setBalances.map((r) => [r.componentId, text(r.arrearAmount)])).toEqual([
      ["c1", "0"], ["c2", "0"], ["p1", "0"], ["o1", "0"], ["u2", "0"], ["x9", "0"]
    ])
    expect(stepText(step.walletSteps)).toEqual([["AutoPay", "inv_1"]])
    expect(step.endedCycle).toMatchObject({ periodEnd: cancelledAt, status: "FINAL", usageInvoiceId: "inv_1" })
  })

  it("ends the cycle with no invoice when nothing was charged", () => {
    const step = cancellation(state(purchase(renewing, march), [balance(credit, { remaining: "3" })]), cancelledAt, ids())
    expect(step.invoices).toEqual([])
    expect(step.setBalances).toEqual([])
    expect(step.walletSteps).toEqual([])
    expect(step.endedCycle).toMatchObject({ periodEnd: cancelledAt, usageInvoiceId: null })
  })

  it("does nothing for a purchase that never started", () => {
    const step = cancellation(state(purchase(renewing, { ...march, status: "SCHEDULED" }), endOfMarch), cancelledAt, ids())
    expect(step).toEqual({
      organizationId: "org_1",
      purchaseId: "pur_1",
      customerId: "cus_1",
      cycle: null,
      createBalances: [],
      setBalances: [],
      invoices: [],
      walletSteps: [],
      endedCycle: null,
      lateBilled: []
    })
  })

  it("leaves the rows as they are when the invoice bills only late lines", () => {
    const owed = late({ componentId: "o1", arrearAmount: d("5"), invoicedArrear: d("3") })
    const step = cancellation(state(purchase(renewing, march), [balance(credit, { remaining: "3" })], { lateBalances: [owed] }), cancelledAt, ids())
    expect(lineText(step, 0).map((line) => line[4])).toEqual(["2"])
    expect(step.lateBilled).toEqual([owed])
    expect(step.setBalances).toEqual([])
  })

  it("uses the cancellation instant as the period's end when the purchase has none", () => {
    const step = cancellation(state(purchase(renewing, { ...march, periodEnd: null }), endOfMarch), cancelledAt, ids())
    expect(step.invoices[0]!.periodEnd).toEqual(cancelledAt)
  })
})

describe("settling the wallet", () => {
  const baseOf = () => renewal(state(purchase(renewing, { ...march, autoPayment: true }), endOfMarch), ids())
  const money = (value: BigDecimal.BigDecimal) => text(value)

  it("needs the wallet for a grant or a payment, for the recurring grant only when the customer has one", () => {
    const base = baseOf()
    expect(needsWallet(base, false)).toBe(true)
    const onlyRecurring = { ...base, walletSteps: [{ _tag: "RecurringGrant", at: march.periodEnd } as const] }
    expect(needsWallet(onlyRecurring, false)).toBe(false)
    expect(needsWallet(onlyRecurring, true)).toBe(true)
    expect(needsWallet({ ...base, walletSteps: [] }, true)).toBe(false)
  })

  it("applies the steps in order: a payment only when the balance covers the whole total at that point", () => {
    const base = baseOf()
    // USAGE total 10 (no tax); PLAN total 75. 5 + 50 + 20 = 75 covers the PLAN invoice exactly.
    const settled = settleWallet(base, { balance: d("5"), recurringGrantUsd: d("20") }, ids())
    expect(settled.postings.map((p) => [p.type, money(p.delta), p.invoiceId ?? null, p.purchaseId, p.customerId, p.organizationId])).toEqual([
      ["CYCLE_GRANT", "50", null, "pur_1", "cus_1", "org_1"],
      ["RECURRING_GRANT", "20", null, "pur_1", "cus_1", "org_1"],
      ["INVOICE_PAYMENT", "-75", "inv_2", "pur_1", "cus_1", "org_1"]
    ])
    expect(settled.payments.map((p) => [p.id, p.invoiceId, money(p.amount), p.at, p.customerId, p.organizationId])).toEqual([
      ["pay_1", "inv_2", "75", base.invoices[1]!.at, "cus_1", "org_1"]
    ])
    expect(money(settled.balance)).toBe("0")
  })

  it("pays the USAGE invoice first when the balance covers it, and skips a zero or missing recurring grant", () => {
    const base = baseOf()
    const settled = settleWallet(base, { balance: d("10"), recurringGrantUsd: d("0") }, ids())
    expect(settled.postings.map((p) => [p.type, money(p.delta)])).toEqual([
      ["INVOICE_PAYMENT", "-10"],
      ["CYCLE_GRANT", "50"]
    ])
    expect(money(settled.balance)).toBe("50")
    expect(settleWallet(base, { balance: d("0"), recurringGrantUsd: null }, ids()).postings.map((p) => p.type)).toEqual(["CYCLE_GRANT"])
  })

  it("posts a plan change's moves with their notes", () => {
    const base = baseOf()
    const step: CycleStep = {
      ...base,
      walletSteps: [{ _tag: "Post", type: "PLAN_CHANGE", amount: d("-4.5"), at: march.periodEnd, invoiceId: "inv_9", notes: "why" }]
    }
    const settled = settleWallet(step, { balance: d("1"), recurringGrantUsd: null }, ids())
    expect(settled.postings).toEqual([{
      organizationId: "org_1",
      customerId: "cus_1",
      purchaseId: "pur_1",
      delta: d("-4.5"),
      type: "PLAN_CHANGE",
      at: march.periodEnd,
      invoiceId: "inv_9",
      notes: "why"
    }])
    expect(money(settled.balance)).toBe("-3.5")
  })

  it("refuses to settle without the wallet a step needs, and settles nothing without one it does not", () => {
    const base = baseOf()
    expect(() => settleWallet(base, undefined, ids())).toThrow("wallet of cus_1 was not locked for its renewal")
    const none = settleWallet({ ...base, walletSteps: [{ _tag: "RecurringGrant", at: march.periodEnd }] }, undefined, ids())
    expect(none.postings).toEqual([])
    expect(none.payments).toEqual([])
    expect(money(none.balance)).toBe("0")
  })
})
