/**
 * A plan change NOW, in memory (src/billing/PlanChange.ts): the share of the
 * cycle left, proration to the cent (half away from zero), the PRORATION
 * invoice, the new balance rows (a prepaid remainder never below zero, a
 * composite's may be) and the wallet moves.
 */
import { describe, expect, it } from "vitest"
import { planChange, prorate, prorationShare } from "../../src/billing/PlanChange.ts"
import { at, balance, component, d, ids, plan, purchase, state, text } from "./fixtures.ts"

const share = (remaining: bigint, length: bigint) => ({ remaining, length })

describe("prorationShare", () => {
  const start = at("2026-01-01T00:00:00Z")
  const end = at("2026-01-31T00:00:00Z")

  it("counts whole seconds left; the second under way is used", () => {
    expect(prorationShare(start, end, at("2026-01-21T00:00:00Z"))).toEqual(share(864_000n, 2_592_000n))
    expect(prorationShare(start, end, at("2026-01-21T00:00:00.001Z"))).toEqual(share(863_999n, 2_592_000n))
    expect(prorationShare(start, end, at("2026-01-20T23:59:59.999Z"))).toEqual(share(864_000n, 2_592_000n))
  })

  it("rounds the cycle's length to the nearest second", () => {
    expect(prorationShare(start, at("2026-01-01T00:00:01.500Z"), start)).toEqual(share(1n, 2n))
    expect(prorationShare(start, at("2026-01-01T00:00:01.499Z"), start)).toEqual(share(1n, 1n))
  })

  it("keeps the share between none and the whole cycle", () => {
    expect(prorationShare(start, end, at("2025-12-01T00:00:00Z"))).toEqual(share(2_592_000n, 2_592_000n))
    expect(prorationShare(start, end, end)).toEqual(share(0n, 2_592_000n))
    expect(prorationShare(start, end, at("2026-02-05T00:00:00Z"))).toEqual(share(0n, 2_592_000n))
  })

  it("never divides by zero: an empty cycle is one second long", () => {
    expect(prorationShare(start, start, start)).toEqual(share(0n, 1n))
  })
})

describe("prorate", () => {
  it("rounds exactly half a cent away from zero", () => {
    expect(text(prorate(d("0.01"), share(1n, 2n), 2))).toBe("0.01")
    expect(text(prorate(d("-0.01"), share(1n, 2n), 2))).toBe("-0.01")
    expect(text(prorate(d("10.01"), share(1n, 2n), 2))).toBe("5.01")
    expect(text(prorate(d("-10.01"), share(1n, 2n), 2))).toBe("-5.01")
  })

  it("rounds below half down and above half up", () => {
    expect(text(prorate(d("10"), share(1n, 3n), 2))).toBe("3.33")
    expect(text(prorate(d("10"), share(2n, 3n), 2))).toBe("6.67")
    expect(text(prorate(d("-10"), share(2n, 3n), 2))).toBe("-6.67")
    expect(text(prorate(d("0.0149"), share(1n, 1n), 2))).toBe("0.01")
  })

  it("works from an amount with more places than the result", () => {
    expect(text(prorate(d("0.125"), share(1n, 1n), 2))).toBe("0.13")
    expect(text(prorate(d("0.124"), share(1n, 1n), 2))).toBe("0.12")
    expect(text(prorate(d("-0.125"), share(1n, 1n), 2))).toBe("-0.13")
  })

  it("keeps 12 places for allowances", () => {
    expect(text(prorate(d("1000"), share(1n, 3n), 12))).toBe("333.333333333333")
    expect(text(prorate(d("2000"), share(1n, 3n), 12))).toBe("666.666666666667")
    expect(text(prorate(d("7"), share(0n, 3n), 12))).toBe("0")
  })
})

// A 30-day cycle; a change at day 20 leaves a third of it, at day 15 half.
const cycle = { periodStart: at("2026-01-01T00:00:00Z"), periodEnd: at("2026-01-31T00:00:00Z") }
const aThirdLeft = at("2026-01-21T00:00:00Z")
const halfLeft = at("2026-01-16T00:00:00Z")

describe("planChange: an upgrade", () => {
  const credit = component("c1", { quantity: "1000", charge: "10" })
  const usage = component("u1", { type: "UNIT", billingMode: "ARREAR" })
  const wallet = component("w1", { type: "WALLET", targetId: null, amount: "20", charge: "20" })
  const from = plan("a", [credit, usage, wallet], { cost: "30" })
  const bigger = component("c2", { targetId: credit.targetId, quantity: "3000", charge: "30" })
  const outcome = component("o1", { type: "OUTCOME", quantity: "10" })
  const biggerWallet = component("w2", { type: "WALLET", targetId: null, amount: "40", charge: "40" })
  const to = plan("b", [bigger, biggerWallet, outcome], { cost: "70" })
  const balances = [
    balance(credit, { granted: "1000", used: "600", remaining: "400", cycleQuantity: "600" }),
    balance(usage, { cycleQuantity: "9", arrearAmount: "4.5" })
  ]
  const before = state(purchase(from, { ...cycle, cycleIndex: 3, autoPayment: true }), balances, {
    taxes: [{ id: "tax_1", name: "VAT", ratePercent: d("10") }]
  })
  // Computed in each test, not when the file loads: Stryker then knows which tests cover a mutant.
  const step = () => planChange(before, to, aThirdLeft, ids())

  it("issues one PRORATION invoice: the old price's share credited, the new one's charged, usage so far, taxes", () => {
    const { invoices } = step()
    expect(invoices).toHaveLength(1)
    const invoice = invoices[0]!
    expect(invoice).toMatchObject({
      id: "inv_1",
      kind: "PRORATION",
      organizationId: "org_1",
      customerId: "cus_1",
      purchaseId: "pur_1",
      currencyCode: "USD",
      periodStart: aThirdLeft,
      periodEnd: cycle.periodEnd,
      cycleIndex: 3,
      at: aThirdLeft
    })
    expect(invoice.draft).toBeUndefined()
    expect(invoice.lines.map((line) => [line.description, line.componentId, text(line.quantity), text(line.unitPrice), text(line.amount)]))
      .toEqual([
        ["Unused time on Plan a (2026-01-21 to 2026-01-31)", null, null, null, "-10"],
        ["Remaining time on Plan b (2026-01-21 to 2026-01-31)", null, null, null, "23.33"],
        ["Target u1 (usage)", "u1", "9", null, "4.5"]
      ])
    expect(text(invoice.totals.subtotal)).toBe("17.83")
    expect(invoice.totals.taxes.map((t) => [t.tax.id, text(t.amount)])).toEqual([["tax_1", "1.78"]])
    expect(text(invoice.totals.total)).toBe("19.61")
  })

  it("replaces the rows: a carried row moves by the new share less the old, a new one gets its share, the old-only one goes", () => {
    const change = step()
    expect(change.replaceBalances).toBe(true)
    expect(change.setBalances).toEqual([])
    expect(change.carried).toEqual([{ from: "c1", to: "c2" }])
    expect(change.createBalances.map((row) => ({
      ...row,
      granted: text(row.granted),
      used: text(row.used),
      remaining: text(row.remaining),
      originalGranted: text(row.originalGranted),
      cycleQuantity: text(row.cycleQuantity),
      arrearAmount: text(row.arrearAmount)
    }))).toEqual([
      {
        organizationId: "org_1",
        purchaseId: "pur_1",
        componentId: "c2",
        customerId: "cus_1",
        type: "CREDIT",
        billingMode: "ADVANCE",
        targetId: "target-c1",
        // 400 left + (3000 - 1000) / 3
        granted: "1666.666666666667",
        used: "600",
        remaining: "1066.666666666667",
        originalGranted: "3000",
        cycleQuantity: "600",
        arrearAmount: "0"
      },
      {
        organizationId: "org_1",
        purchaseId: "pur_1",
        componentId: "o1",
        customerId: "cus_1",
        type: "OUTCOME",
        billingMode: "ADVANCE",
        targetId: "target-o1",
        granted: "3.333333333333",
        used: "0",
        remaining: "3.333333333333",
        originalGranted: "10",
        cycleQuantity: "0",
        arrearAmount: "0"
      }
    ])
  })

  it("posts the wallet amounts' difference for the rest of the cycle, then pays the invoice from the wallet", () => {
    const change = step()
    expect(change.walletSteps).toEqual([
      {
        _tag: "Post",
        type: "PLAN_CHANGE",
        amount: expect.anything(),
        at: aThirdLeft,
        invoiceId: "inv_1",
        notes: "Wallet amount of Plan b for the rest of the cycle, less Plan a's"
      },
      { _tag: "AutoPay", invoice: change.invoices[0] }
    ])
    // 40 / 3 = 13.33 less 20 / 3 = 6.67
    expect(text((change.walletSteps[0] as { amount: ReturnType<typeof d> }).amount)).toBe("6.66")
  })

  it("keeps the purchase in its cycle and records both plans", () => {
    const change = step()
    expect(change).toMatchObject({ organizationId: "org_1", purchaseId: "pur_1", customerId: "cus_1", cycle: null, endedCycle: null })
    expect(change.lateBilled).toEqual([])
    expect(change.changedTo).toBe(to)
    expect(change.changedFrom).toBe(from)
  })

  it("does not pay from the wallet when auto-payment is off", () => {
    const off = planChange({ ...before, purchase: { ...before.purchase, autoPayment: false } }, to, aThirdLeft, ids())
    expect(off.walletSteps.map((s) => s._tag)).toEqual(["Post"])
  })
})

describe("planChange: a downgrade after heavy use", () => {
  const big = component("c1", { quantity: "1000", charge: "100" })
  const small = component("c2", { targetId: big.targetId, quantity: "100", charge: "10" })
  const from = plan("a", [big], { cost: "100" })
  const to = plan("b", [small], { cost: "10" })
  const used = [balance(big, { granted: "1000", used: "900", remaining: "100" })]
  const before = state(purchase(from, { ...cycle, autoPayment: true }), used)

  it("floors the prepaid remainder at zero: what was used stays used", () => {
    // 100 left + (100 - 1000) / 2 = -350, floored at 0
    const [row] = planChange(before, to, halfLeft, ids()).createBalances
    expect([text(row!.granted), text(row!.used), text(row!.remaining)]).toEqual(["900", "900", "0"])
  })

  it("credits the net difference to the wallet and asks no payment of a negative total", () => {
    const step = planChange(before, to, halfLeft, ids())
    const invoice = step.invoices[0]!
    expect(invoice.lines.map((line) => text(line.amount))).toEqual(["-50", "5"])
    expect(text(invoice.totals.total)).toBe("-45")
    expect(invoice.totals.free).toBe(true)
    expect(step.walletSteps).toHaveLength(1)
    expect(step.walletSteps[0]).toMatchObject({
      _tag: "Post",
      type: "PLAN_CHANGE",
      at: halfLeft,
      invoiceId: invoice.id,
      notes: "Net credit of the change from Plan a to Plan b"
    })
    expect(text((step.walletSteps[0] as { amount: ReturnType<typeof d> }).amount)).toBe("45")
  })

  it("asks for no wallet move when the total is zero and neither plan has a wallet", () => {
    const same = planChange(state(purchase(from, { ...cycle, autoPayment: true }), used), from, halfLeft, ids())
    expect(text(same.invoices[0]!.totals.total)).toBe("0")
    expect(same.walletSteps).toEqual([])
  })

  it("lets a composite's pool go below zero (its debt)", () => {
    const pool = component("p1", { type: "PRICING_METRIC", quantity: "1000", unitPrice: "0.5" })
    const smaller = component("p2", { type: "PRICING_METRIC", targetId: pool.targetId, quantity: "100" })
    const step = planChange(
      state(purchase(plan("a", [pool]), cycle), [balance(pool, { granted: "1000", used: "900", remaining: "100" })]),
      plan("b", [smaller]),
      halfLeft,
      ids()
    )
    const [row] = step.createBalances
    expect([text(row!.granted), text(row!.used), text(row!.remaining)]).toEqual(["550", "900", "-350"])
  })
})

describe("planChange: lines and rows at the edges", () => {
  it("bills a composite's occurrences beyond the pool at the old price when the new plan does not sell it", () => {
    const pool = component("p1", { type: "PRICING_METRIC", quantity: "100", unitPrice: "0.25" })
    const arrearPool = component("p2", { type: "PRICING_METRIC", billingMode: "ARREAR", unitPrice: "9" })
    const from = plan("a", [pool, arrearPool])
    const rows = [balance(pool, { granted: "100", used: "112", remaining: "-12" }), balance(arrearPool, { remaining: "-3" })]
    const step = planChange(state(purchase(from, cycle), rows), plan("b", []), halfLeft, ids())
    expect(step.invoices[0]!.lines.slice(2).map((line) => [line.description, line.componentId, text(line.quantity), text(line.unitPrice), text(line.amount)]))
      .toEqual([["Target p1 (occurrences beyond the pool)", "p1", "12", "0.25", "3"]])
    expect(step.createBalances).toEqual([])
    expect(step.carried).toEqual([])
  })

  it("bills no debt line when the new plan sells the composite (the debt carries), nor for a pool in credit", () => {
    const pool = component("p1", { type: "PRICING_METRIC", quantity: "100", unitPrice: "0.25" })
    const other = component("p3", { type: "PRICING_METRIC", quantity: "100", unitPrice: "0.25" })
    const rows = [balance(pool, { remaining: "-12" }), balance(other, { remaining: "5" })]
    const step = planChange(state(purchase(plan("a", [pool, other]), cycle), rows), plan("b", [pool]), halfLeft, ids())
    expect(step.invoices[0]!.lines).toHaveLength(2)
  })

  it("bills no debt line for a prepaid row below zero that is not a composite's", () => {
    const credit = component("c1", { quantity: "100", unitPrice: "0.25" })
    const step = planChange(state(purchase(plan("a", [credit]), cycle), [balance(credit, { remaining: "-4" })]), plan("b", []), halfLeft, ids())
    expect(step.invoices[0]!.lines).toHaveLength(2)
  })

  it("carries a row only to a component selling the same target", () => {
    const credit = component("c1", { quantity: "100" })
    const otherCredit = component("c2", { quantity: "100" })
    const step = planChange(
      state(purchase(plan("a", [credit]), cycle), [balance(credit, { used: "30", remaining: "70" })]),
      plan("b", [otherCredit]),
      halfLeft,
      ids()
    )
    expect(step.carried).toEqual([])
    expect(step.createBalances.map((row) => [row.componentId, text(row.granted), text(row.used), text(row.remaining)])).toEqual([["c2", "50", "0", "50"]])
  })

  it("names the component by its id when the old plan no longer lists it", () => {
    const pool = component("p1", { type: "PRICING_METRIC", quantity: "100", unitPrice: "0.25" })
    const step = planChange(state(purchase(plan("a", []), cycle), [balance(pool, { remaining: "-2" })]), plan("b", []), halfLeft, ids())
    expect(step.invoices[0]!.lines.slice(2).map((line) => [line.description, text(line.unitPrice), text(line.amount)]))
      .toEqual([["p1 (occurrences beyond the pool)", "0", "0"]])
  })

  it("carries an ARREAR row's usage and tiers, grants it nothing, and matches rows by kind, target and billing mode", () => {
    const unit = component("u1", { type: "UNIT", billingMode: "ARREAR" })
    const sameTargetAdvance = component("u2", { type: "UNIT", billingMode: "ADVANCE", targetId: unit.targetId, quantity: "8" })
    const otherKind = component("u3", { type: "OUTCOME", billingMode: "ARREAR", targetId: unit.targetId })
    const unitAgain = component("u4", { type: "UNIT", billingMode: "ARREAR", targetId: unit.targetId })
    const rows = [balance(unit, { used: "7", cycleQuantity: "7", arrearAmount: "3.5" })]
    const step = planChange(
      state(purchase(plan("a", [unit]), cycle), rows),
      plan("b", [sameTargetAdvance, otherKind, unitAgain]),
      halfLeft,
      ids()
    )
    expect(step.carried).toEqual([{ from: "u1", to: "u4" }])
    expect(step.createBalances.map((row) => [row.componentId, text(row.granted), text(row.used), text(row.remaining), text(row.originalGranted), text(row.cycleQuantity)]))
      .toEqual([
        ["u2", "4", "0", "4", "8", "0"],
        ["u3", "0", "0", "0", null, "0"],
        ["u4", "0", "7", "0", null, "7"]
      ])
  })

  it("carries a prepaid row whose old component is gone from the old snapshot as if its quantity were zero", () => {
    const credit = component("c1", { quantity: "100" })
    const step = planChange(
      state(purchase(plan("a", []), cycle), [balance(credit, { used: "10", remaining: "90" })]),
      plan("b", [credit]),
      halfLeft,
      ids()
    )
    const [row] = step.createBalances
    expect([text(row!.granted), text(row!.used), text(row!.remaining)]).toEqual(["150", "10", "140"])
  })

  it("grants a component without a quantity nothing", () => {
    const credit = component("c1", { quantity: null })
    const [row] = planChange(state(purchase(plan("a", []), cycle)), plan("b", [credit]), halfLeft, ids()).createBalances
    expect([text(row!.granted), text(row!.remaining), text(row!.originalGranted)]).toEqual(["0", "0", "0"])
  })

  it("sums every ADVANCE wallet component of a plan, and only those", () => {
    const w1 = component("w1", { type: "WALLET", targetId: null, amount: "10" })
    const w2 = component("w2", { type: "WALLET", targetId: null, amount: "30" })
    const arrear = component("w3", { type: "WALLET", targetId: null, billingMode: "ARREAR", amount: "1000" })
    const none = component("w4", { type: "WALLET", targetId: null, amount: null })
    // an amount on a component that is not the wallet is no wallet amount
    const credit = component("c9", { amount: "1000" })
    const step = planChange(state(purchase(plan("a", []), cycle)), plan("b", [w1, w2, arrear, none, credit]), halfLeft, ids())
    expect(step.createBalances.map((row) => row.componentId)).toEqual(["c9"])
    expect(step.walletSteps).toHaveLength(1)
    expect(text((step.walletSteps[0] as { amount: ReturnType<typeof d> }).amount)).toBe("20")
  })

  it("dates the invoice from the change, or from the cycle's end when the change comes after it", () => {
    const from = plan("a", [])
    const late = planChange(state(purchase(from, cycle)), from, at("2026-02-03T00:00:00Z"), ids()).invoices[0]!
    expect([late.periodStart, late.periodEnd]).toEqual([cycle.periodEnd, cycle.periodEnd])
    expect(late.lines[0]!.description).toBe("Unused time on Plan a (2026-02-03 to 2026-01-31)")
    const onTheEnd = planChange(state(purchase(from, cycle)), from, cycle.periodEnd, ids()).invoices[0]!
    expect(onTheEnd.periodStart).toEqual(cycle.periodEnd)
  })

  it("counts a purchase with no period yet from its billing date to the change", () => {
    const from = plan("a", [], { cost: "10" })
    const fresh = purchase(from, { billingDate: at("2026-01-01T00:00:00Z"), periodStart: null, periodEnd: null })
    const step = planChange(state(fresh), from, halfLeft, ids())
    const invoice = step.invoices[0]!
    expect([invoice.periodStart, invoice.periodEnd]).toEqual([halfLeft, halfLeft])
    expect(invoice.lines.map((line) => text(line.amount))).toEqual(["0", "0"])
    const started = purchase(from, { billingDate: at("2025-12-01T00:00:00Z"), periodStart: null, periodEnd: cycle.periodEnd })
    expect(planChange(state(started), plan("b", [], { cost: "62" }), halfLeft, ids()).invoices[0]!.lines.map((line) => text(line.amount)))
      // 15 of the 61 days since the billing date are left
      .toEqual(["-2.46", "15.25"])
  })
})
