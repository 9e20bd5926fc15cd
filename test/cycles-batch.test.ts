/**
 * The set-based billing day: a batch of due purchases renewed in one
 * transaction (Purchases.renewBatch).
 *  - the renewal of one purchase, computed in memory (src/billing/Renewal.ts),
 *    with exact decimals worked out by hand;
 *  - a mixed batch on the service (scheduled, ARREAR usage, walletFundedArrear,
 *    auto-payment, rollover, expiry, composite debt), exact to the cent;
 *  - several cycle runs at once (needs real PostgreSQL): every due purchase
 *    renewed exactly once per cycle, none skipped.
 */
import { describe, expect, it } from "@effect/vitest"
import { BigDecimal, Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { renewDue } from "../src/billing/CycleJob.ts"
import type { IssuedInvoice } from "../src/billing/Invoice.ts"
import { invoiceTotals, type TaxRate } from "../src/billing/InvoiceTotals.ts"
import { Purchases } from "../src/billing/Purchases.ts"
import {
  cancellation,
  needsWallet,
  type CycleStep,
  renewal,
  type RenewalBalance,
  type RenewalPurchase,
  type RenewalState,
  settleWallet
} from "../src/billing/Renewal.ts"
import type { PlanSnapshot, SnapshotComponent } from "../src/pricing/PlanSnapshot.ts"
import type { BalanceValues } from "../src/ledger/Ledger.ts"
import { decimal, ZERO } from "../src/money.ts"
import {
  buy,
  type Client,
  clientOf,
  makeComposite,
  makeCredit,
  makeCustomer,
  makePlan,
  makeUnit,
  ok
} from "./billing-support.ts"
import { drain, query, sendMany } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { snapshotComponent } from "./rules/fixtures.ts"

const d = decimal
const text = (value: BigDecimal.BigDecimal | null | undefined) =>
  value === null || value === undefined ? value : BigDecimal.format(BigDecimal.normalize(value))

// ---------------------------------------------------------------------------
// In memory

/** `snapshotComponent` with a target of its own, named after the component. */
const component = (fields: Partial<SnapshotComponent> & Pick<SnapshotComponent, "id" | "type" | "billingMode">): SnapshotComponent =>
  snapshotComponent({ targetId: `tgt_${fields.id}`, targetName: `Target ${fields.id}`, ...fields })

const snapshotOf = (components: ReadonlyArray<SnapshotComponent>, extra: Partial<PlanSnapshot> = {}): PlanSnapshot => ({
  planId: "pln_1",
  name: "Plan",
  description: "",
  billingCycle: "MONTHLY",
  currencyCode: "USD",
  priceAdjustment: ZERO,
  walletFundedArrear: false,
  cost: ZERO,
  components,
  ...extra
})

/** A balance row of the ended cycle (values as text). */
const balance = (
  componentId: string,
  type: string,
  billingMode: string,
  values: Partial<Record<"granted" | "used" | "remaining" | "cycleQuantity" | "arrearAmount", string>> = {}
): RenewalBalance => ({
  componentId,
  customerId: "cus_1",
  type,
  billingMode,
  targetId: `tgt_${componentId}`,
  granted: d(values.granted ?? "0"),
  used: d(values.used ?? "0"),
  remaining: d(values.remaining ?? "0"),
  originalGranted: billingMode === "ADVANCE" ? d(values.granted ?? "0") : null,
  cycleQuantity: d(values.cycleQuantity ?? "0"),
  arrearAmount: d(values.arrearAmount ?? "0")
})

// Fixed past instants: pure arithmetic, no clock.
const anchor = new Date("2025-01-31T10:00:00.000Z")
const february = new Date("2025-02-28T10:00:00.000Z")
const march = new Date("2025-03-31T10:00:00.000Z")

const purchaseOf = (snapshot: PlanSnapshot, fields: Partial<RenewalPurchase> = {}): RenewalPurchase => ({
  id: "pur_1",
  customerId: "cus_1",
  status: "ACTIVE",
  billingDate: anchor,
  cycleIndex: 0,
  periodStart: anchor,
  periodEnd: february,
  autoPayment: false,
  snapshot,
  ...fields
})

const vatAndCity: ReadonlyArray<TaxRate> = [
  { id: "tax_1", name: "VAT", ratePercent: d("20") },
  { id: "tax_2", name: "City", ratePercent: d("2.5") }
]

const stateOf = (purchase: RenewalPurchase, balances: ReadonlyArray<RenewalBalance>, taxes = vatAndCity): RenewalState => ({
  organizationId: "org_1",
  purchase,
  balances,
  taxes
})

/** Ids in order of creation, so the test can name them. */
const counter = () => {
  let n = 0
  return (prefix: string) => `${prefix}_${++n}`
}

const invoiceView = (invoice: IssuedInvoice) => ({
  id: invoice.id,
  kind: invoice.kind,
  periodStart: invoice.periodStart.toISOString(),
  periodEnd: invoice.periodEnd.toISOString(),
  at: invoice.at.toISOString(),
  lines: invoice.lines.map((l) => [l.description, l.componentId, text(l.quantity), text(l.unitPrice), text(l.amount)]),
  taxes: invoice.totals.taxes.map((t) => [t.tax.name, text(t.amount)]),
  subtotal: text(invoice.totals.subtotal),
  taxTotal: text(invoice.totals.taxTotal),
  total: text(invoice.totals.total),
  free: invoice.totals.free
})

const balanceView = (row: BalanceValues) => [
  row.componentId,
  text(row.granted),
  text(row.used),
  text(row.remaining),
  text(row.originalGranted),
  text(row.cycleQuantity),
  text(row.arrearAmount)
]

const settledView = (renewal: CycleStep, balanceBefore: string, recurring: string | null) => {
  const settled = settleWallet(renewal, { balance: d(balanceBefore), recurringGrantUsd: recurring === null ? null : d(recurring) }, counter())
  return {
    postings: settled.postings.map((p) => [p.type, text(p.delta), p.invoiceId ?? null]),
    payments: settled.payments.map((p) => [p.invoiceId, text(p.amount)]),
    balance: text(settled.balance)
  }
}

describe("the renewal of one purchase, in memory", () => {
  const credit = component({ id: "c1", type: "CREDIT", billingMode: "ADVANCE", quantity: d("100"), rollover: true, unitPrice: d("0.0125"), charge: d("1.25") })
  const units = component({ id: "c2", type: "UNIT", billingMode: "ADVANCE", quantity: d("10"), charge: d("41.15"), targetName: "Pages" })
  const pool = component({ id: "c3", type: "PRICING_METRIC", billingMode: "ADVANCE", quantity: d("2"), unitPrice: d("0.5"), charge: d("1") })
  const pagesArrear = component({ id: "c4", type: "UNIT", billingMode: "ARREAR", targetName: "Pages" })
  const chatArrear = component({ id: "c5", type: "CREDIT", billingMode: "ARREAR", unitPrice: d("0.0125"), targetName: "Chat" })
  const wallet = component({ id: "c6", type: "WALLET", billingMode: "ADVANCE", targetId: null, amount: d("25"), charge: d("25"), targetName: "Wallet" })

  it.effect("an ended cycle: ARREAR invoice, rollover, expiry and composite debt, wallet grants, PLAN invoice with taxes", () =>
    Effect.sync(() => {
      const snapshot = snapshotOf([credit, units, pool, pagesArrear, chatArrear, wallet], { priceAdjustment: d("4.99") })
      const state = stateOf(purchaseOf(snapshot), [
        balance("c1", "CREDIT", "ADVANCE", { granted: "100", used: "30", remaining: "70", cycleQuantity: "30" }),
        balance("c2", "UNIT", "ADVANCE", { granted: "10", used: "4", remaining: "6", cycleQuantity: "4" }),
        balance("c3", "PRICING_METRIC", "ADVANCE", { granted: "2", used: "3", remaining: "-1", cycleQuantity: "3" }),
        balance("c4", "UNIT", "ARREAR", { used: "3.3", cycleQuantity: "3.3", arrearAmount: "8.25" }),
        balance("c5", "CREDIT", "ARREAR", { used: "12.5", cycleQuantity: "12.5", arrearAmount: "0.15625" })
      ])
      const renewed = renewal(state, counter())
      expect(renewed.cycle).toEqual({ index: 1, start: february, end: march, at: february })
      expect(renewed.invoices.map(invoiceView)).toEqual([
        {
          id: "inv_1",
          kind: "USAGE",
          periodStart: anchor.toISOString(),
          periodEnd: february.toISOString(),
          at: february.toISOString(),
          lines: [
            ["Pages (usage)", "c4", "3.3", null, "8.25"],
            ["Chat (usage)", "c5", "12.5", "0.0125", "0.15625"]
          ],
          // 8.40625 -> 8.41; VAT 1.682 -> 1.68; City 0.21025 -> 0.21
          taxes: [["VAT", "1.68"], ["City", "0.21"]],
          subtotal: "8.41",
          taxTotal: "1.89",
          total: "10.3",
          free: false
        },
        {
          id: "inv_2",
          kind: "PLAN",
          periodStart: february.toISOString(),
          periodEnd: march.toISOString(),
          at: february.toISOString(),
          lines: [
            ["Target c1 (prepaid)", "c1", "100", "0.0125", "1.25"],
            ["Pages (prepaid)", "c2", "10", null, "41.15"],
            ["Target c3 (prepaid)", "c3", "2", "0.5", "1"],
            ["Wallet (wallet credit)", "c6", null, null, "25"],
            ["Price adjustment", null, null, null, "4.99"]
          ],
          // 73.39; VAT 14.678 -> 14.68; City 1.83475 -> 1.83
          taxes: [["VAT", "14.68"], ["City", "1.83"]],
          subtotal: "73.39",
          taxTotal: "16.51",
          total: "89.9",
          free: false
        }
      ])
      expect(renewed.createBalances).toEqual([])
      expect(renewed.setBalances.map(balanceView)).toEqual([
        // rollover: 100 + 70 carried
        ["c1", "170", "0", "170", "100", "0", "0"],
        // no rollover: the 6 left expire
        ["c2", "10", "0", "10", "10", "0", "0"],
        // composite debt of 1 deducted from the pool of 2
        ["c3", "1", "0", "1", "2", "0", "0"],
        ["c4", "0", "0", "0", null, "0", "0"],
        ["c5", "0", "0", "0", null, "0", "0"]
      ])
      expect(renewed.walletSteps.map((step) => step._tag)).toEqual(["Grant", "RecurringGrant"])
      expect(needsWallet(renewed, false)).toBe(true)
      // The wallet may be negative: the grant absorbs it, then the recurring grant.
      expect(settledView(renewed, "-3", "2.5")).toEqual({
        postings: [["CYCLE_GRANT", "25", null], ["RECURRING_GRANT", "2.5", null]],
        payments: [],
        balance: "24.5"
      })
    }))

  it.effect("a SCHEDULED purchase starts cycle 0 at its billing date: balances created, PURCHASE_GRANT", () =>
    Effect.sync(() => {
      const prepaid = component({ id: "c2", type: "UNIT", billingMode: "ADVANCE", quantity: d("3"), charge: d("12.345"), targetName: "Pages" })
      const snapshot = snapshotOf([prepaid, pagesArrear, component({ ...wallet, amount: d("10"), charge: d("10") })])
      const state = stateOf(purchaseOf(snapshot, { status: "SCHEDULED", periodStart: null, periodEnd: null }), [])
      const started = renewal(state, counter())
      expect(started.cycle).toEqual({ index: 0, start: anchor, end: february, at: anchor })
      expect(started.createBalances.map(balanceView)).toEqual([
        ["c2", "3", "0", "3", "3", "0", "0"],
        ["c4", "0", "0", "0", null, "0", "0"]
      ])
      expect(started.setBalances).toEqual([])
      // 22.345 -> 22.35; VAT 4.47; City 0.55875 -> 0.56
      expect(started.invoices.map((i) => [i.kind, text(i.totals.subtotal), text(i.totals.taxTotal), text(i.totals.total)]))
        .toEqual([["PLAN", "22.35", "5.03", "27.38"]])
      expect(settledView(started, "0", null)).toEqual({ postings: [["PURCHASE_GRANT", "10", null]], payments: [], balance: "10" })
    }))

  it.effect("auto-payment: the USAGE invoice is paid before the grants, the PLAN invoice after them, each only when covered", () =>
    Effect.sync(() => {
      const snapshot = snapshotOf([pagesArrear, component({ ...wallet, amount: d("100"), charge: d("100") })])
      const state = stateOf(purchaseOf(snapshot, { autoPayment: true }), [
        balance("c4", "UNIT", "ARREAR", { cycleQuantity: "4", arrearAmount: "10" })
      ])
      const renewed = renewal(state, counter())
      // USAGE 10 + 2 + 0.25 = 12.25; PLAN 100 + 20 + 2.5 = 122.5
      expect(renewed.invoices.map((i) => [i.id, i.kind, text(i.totals.total)])).toEqual([["inv_1", "USAGE", "12.25"], ["inv_2", "PLAN", "122.5"]])
      expect(renewed.walletSteps.map((step) => step._tag)).toEqual(["AutoPay", "Grant", "RecurringGrant", "AutoPay"])
      // 20 pays the USAGE invoice (7.75), the grants bring 112.75: short of 122.5, the PLAN invoice stays OPEN.
      expect(settledView(renewed, "20", "5")).toEqual({
        postings: [["INVOICE_PAYMENT", "-12.25", "inv_1"], ["CYCLE_GRANT", "100", null], ["RECURRING_GRANT", "5", null]],
        payments: [["inv_1", "12.25"]],
        balance: "112.75"
      })
      // A larger recurring grant covers the PLAN invoice too.
      expect(settledView(renewed, "20", "15")).toEqual({
        postings: [
          ["INVOICE_PAYMENT", "-12.25", "inv_1"],
          ["CYCLE_GRANT", "100", null],
          ["RECURRING_GRANT", "15", null],
          ["INVOICE_PAYMENT", "-122.5", "inv_2"]
        ],
        payments: [["inv_1", "12.25"], ["inv_2", "122.5"]],
        balance: "0.25"
      })
      // 10 does not cover the USAGE invoice when it is issued, though the grant would: it stays OPEN.
      expect(settledView(renewed, "10", null).payments).toEqual([])
    }))

  it.effect("a free PLAN invoice is issued PAID and never auto-paid; nothing to move needs no wallet", () =>
    Effect.sync(() => {
      const snapshot = snapshotOf([pagesArrear])
      const renewed = renewal(stateOf(purchaseOf(snapshot, { autoPayment: true }), [balance("c4", "UNIT", "ARREAR")]), counter())
      expect(renewed.invoices.map(invoiceView)).toEqual([{
        id: "inv_1",
        kind: "PLAN",
        periodStart: february.toISOString(),
        periodEnd: march.toISOString(),
        at: february.toISOString(),
        lines: [["Plan", null, null, null, "0"]],
        taxes: [["VAT", "0"], ["City", "0"]],
        subtotal: "0",
        taxTotal: "0",
        total: "0",
        free: true
      }])
      expect(renewed.walletSteps.map((step) => step._tag)).toEqual(["RecurringGrant"])
      expect(needsWallet(renewed, false)).toBe(false)
      expect(needsWallet(renewed, true)).toBe(true)
      expect(settleWallet(renewed, undefined).postings).toEqual([])
    }))

  it.effect("a cancellation invoices the ARREAR usage charged so far, only for an ACTIVE purchase", () =>
    Effect.sync(() => {
      const snapshot = snapshotOf([units, pagesArrear])
      const rows = [
        balance("c2", "UNIT", "ADVANCE", { granted: "10", used: "2", remaining: "8", cycleQuantity: "2" }),
        balance("c4", "UNIT", "ARREAR", { cycleQuantity: "1.5", arrearAmount: "3.75" })
      ]
      const now = new Date("2025-02-10T00:00:00.000Z")
      const cancelled = cancellation(stateOf(purchaseOf(snapshot, { autoPayment: true }), rows), now, counter())
      expect(cancelled.cycle).toBeNull()
      // The invoice covers the cycle as it stood; 3.75 + 0.75 + 0.09375 -> 0.09 = 4.59, auto-paid when covered.
      expect(cancelled.invoices.map((i) => [i.kind, i.periodStart.toISOString(), i.periodEnd.toISOString(), i.at.toISOString(), text(i.totals.total)]))
        .toEqual([["USAGE", anchor.toISOString(), february.toISOString(), now.toISOString(), "4.59"]])
      expect(cancelled.setBalances.map(balanceView)).toEqual([
        ["c2", "10", "2", "8", "10", "2", "0"],
        ["c4", "0", "0", "0", null, "1.5", "0"]
      ])
      expect(settledView(cancelled, "5", null).payments).toEqual([["inv_1", "4.59"]])
      const scheduled = cancellation(stateOf(purchaseOf(snapshot, { status: "SCHEDULED", periodStart: null, periodEnd: null }), []), now)
      expect([scheduled.invoices, scheduled.setBalances, scheduled.walletSteps]).toEqual([[], [], []])
    }))

  it.effect("invoice totals round the subtotal and each tax half away from zero", () =>
    Effect.sync(() => {
      const line = (amount: string) => ({ description: "x", componentId: null, quantity: null, unitPrice: null, amount: d(amount) })
      const totals = invoiceTotals([line("0.1"), line("0.025")], [{ id: "t", name: "T", ratePercent: d("10") }])
      // 0.125 -> 0.13; 10% is 0.013 -> 0.01
      expect([text(totals.subtotal), text(totals.taxTotal), text(totals.total), totals.free]).toEqual(["0.13", "0.01", "0.14", false])
      const negative = invoiceTotals([line("5"), line("-5.005")], [])
      expect([text(negative.subtotal), negative.free]).toEqual(["-0.01", true])
    }))
})

// ---------------------------------------------------------------------------
// On the service

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app?.close())

const renewBatch = (now: Date, limit = 500) => app.run(Effect.flatMap(Purchases, (purchases) => purchases.renewBatch(now, limit)))

/** Queues one signal over HTTP (a 202), for the worker to price. */
const send = async (api: Client, route: "credit" | "unit" | "composite/complete", body: Record<string, unknown>) => {
  const sent = await api.post(`/signal/${route}`, body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(route === "composite/complete" ? 200 : 202)
}

/** Every signal of the organisation priced: none refused, none left. */
const expectAllProcessed = async (tenant: Tenant, count: number) => {
  const rows = await query<{ status: string; n: string }>(
    app,
    `SELECT status, count(*)::text AS n FROM signals WHERE organization_id = $1 GROUP BY status`,
    [tenant.organizationId]
  )
  expect(rows).toEqual([{ status: "PROCESSED", n: String(count) }])
}

const invoicesOf = async (api: Client, customerId: string) =>
  ok(await api.get(`/invoices?customerId=${customerId}`)).invoices.map((i: any) => ({
    kind: i.kind,
    status: i.status,
    periodStart: i.periodStart,
    lines: i.lines.map((l: any) => [l.quantity, l.unitPrice, l.amount]),
    taxes: i.taxLines.map((t: any) => [t.name, t.amount]),
    subtotal: i.subtotal,
    taxTotal: i.taxTotal,
    total: i.total,
    id: i.id
  }))

const ledgerOf = async (api: Client, customerId: string) => {
  const ledger = ok(await api.get(`/customers/${customerId}/wallet/ledger`))
  return { balance: ledger.balance, entries: ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.invoiceId]) }
}

describe("a mixed batch, exact to the cent", () => {
  it("renews scheduled, ARREAR, walletFundedArrear, auto-paid, rollover and composite purchases in one batch", async () => {
    const tenant = await app.tenant("Mixed batch")
    const api = clientOf(app, tenant)
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
    ok(await api.post("/taxes", { name: "City", ratePercent: 2.5 }), 201)
    const prepaidUnit = await makeUnit(api, { flatPrice: 4.115 })
    const pages = await makeUnit(api, { flatPrice: 2.5 })
    const chat = await makeCredit(api)
    const pooled = await makeCredit(api)
    const composite = await makeComposite(api, 0.5, [pooled.id])

    const plans = {
      scheduled: await makePlan(app, tenant, [
        { type: "UNIT", billingMode: "ADVANCE", unitId: prepaidUnit.id, quantity: 3 },
        { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
      ]),
      arrear: await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: pages.id }]),
      funded: await makePlan(app, tenant, [
        { type: "UNIT", billingMode: "ARREAR", unitId: pages.id },
        { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
      ], { walletFundedArrear: true }),
      autoPaid: await makePlan(app, tenant, [
        { type: "WALLET", billingMode: "ADVANCE", amount: 100 },
        { type: "UNIT", billingMode: "ARREAR", unitId: pages.id }
      ]),
      unpaid: await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: prepaidUnit.id, quantity: 10 }]),
      rollover: await makePlan(app, tenant, [
        { type: "CREDIT", billingMode: "ADVANCE", creditId: chat.id, quantity: 100, rollover: true },
        { type: "UNIT", billingMode: "ADVANCE", unitId: prepaidUnit.id, quantity: 10, rollover: false },
        { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }
      ])
    }
    // 100 * 0.0125 + 10 * 4.115 + 2 * 0.5
    expect(plans.rollover.cost).toBe(43.4)

    const customers = {
      scheduled: await makeCustomer(api),
      arrear: await makeCustomer(api),
      funded: await makeCustomer(api),
      autoPaid: await makeCustomer(api),
      unpaid: await makeCustomer(api),
      rollover: await makeCustomer(api)
    }
    ok(await api.put(`/customers/${customers.scheduled.id}/recurring-grant`, { kind: "wallet", quantity: 2.5 }))
    const billingDate = new Date(Date.now() + 3_600_000)
    const scheduled = await buy(api, customers.scheduled.id, plans.scheduled.id, { billingDate: billingDate.toISOString() })
    expect(scheduled.status).toBe("SCHEDULED")
    const bought = {
      arrear: await buy(api, customers.arrear.id, plans.arrear.id),
      funded: await buy(api, customers.funded.id, plans.funded.id),
      autoPaid: await buy(api, customers.autoPaid.id, plans.autoPaid.id),
      unpaid: await buy(api, customers.unpaid.id, plans.unpaid.id),
      rollover: await buy(api, customers.rollover.id, plans.rollover.id)
    }
    ok(await api.patch(`/purchases/${bought.autoPaid.id}`, { autoPayment: true }))
    ok(await api.patch(`/purchases/${bought.unpaid.id}`, { autoPayment: true }))

    // Usage as production meters it: signals over HTTP, priced by the worker.
    await send(api, "unit", { customerId: customers.arrear.id, agentKey: pages.agentKey, quantity: 3.3 }) // 8.25 in arrears
    await send(api, "unit", { customerId: customers.funded.id, agentKey: pages.agentKey, quantity: 2 }) // 5 off the wallet at once
    await send(api, "unit", { customerId: customers.autoPaid.id, agentKey: pages.agentKey, quantity: 4 }) // 10 in arrears
    // 18,750 output tokens on gpt-4o: 0.1875 USD = 30 credits (basePrice 0.00625).
    await send(api, "credit", { customerId: customers.rollover.id, agentKey: chat.agentKey, usage: { model: "gpt-4o", outputTokens: 18_750 } })
    await send(api, "unit", { customerId: customers.rollover.id, agentKey: prepaidUnit.agentKey, quantity: 4 })
    // Three occurrences of the composite (one beyond its pool of 2), each ready once its tagged credit signal is in.
    for (const value of ["a", "b", "c"]) {
      const tag = { [composite.refId]: value }
      await send(api, "credit", { customerId: customers.rollover.id, agentKey: pooled.agentKey, usage: { model: "gpt-4o", outputTokens: 625 }, composite: tag })
      await send(api, "composite/complete", { customerId: customers.rollover.id, composite: tag })
    }
    await drain(app)
    // 5 signals, 3 tagged ones and the 3 occurrences' billing.
    await expectAllProcessed(tenant, 11)
    const before = ok(await api.get(`/customers/${customers.rollover.id}/balances`))
    expect(before.credits[0]).toMatchObject({ granted: 100, used: 30, remaining: 70 })
    expect(before.units[0]).toMatchObject({ granted: 10, remaining: 6 })
    expect(before.composites[0]).toMatchObject({ granted: 2, used: 3, remaining: -1 })
    expect(ok(await api.get(`/customers/${customers.funded.id}/balances`)).wallet.balance).toBe(0)

    // One instant at which every cycle above has ended and the scheduled date has come.
    const ends = Object.values(bought).map((p) => new Date(p.currentPeriodEnd).getTime())
    const now = new Date(Math.max(...ends) + 60_000)
    expect(billingDate.getTime()).toBeLessThan(now.getTime())
    expect(await renewBatch(now)).toBe(6)
    expect(await renewBatch(now)).toBe(0)

    // Scheduled: activated at its billing date, PURCHASE_GRANT then the recurring grant; 22.345 -> 22.35 + 4.47 + 0.56.
    expect(ok(await api.get(`/purchases/${scheduled.id}`)).purchase).toMatchObject({
      status: "ACTIVE",
      currentPeriodStart: billingDate.toISOString(),
      currentPeriodEnd: cycleStart(billingDate, 1).toISOString()
    })
    expect((await invoicesOf(api, customers.scheduled.id)).map(({ id: _, ...i }: any) => i)).toEqual([{
      kind: "PLAN",
      status: "OPEN",
      periodStart: billingDate.toISOString(),
      lines: [[3, null, 12.345], [null, null, 10]],
      taxes: [["VAT", 4.47], ["City", 0.56]],
      subtotal: 22.35,
      taxTotal: 5.03,
      total: 27.38
    }])
    expect(await ledgerOf(api, customers.scheduled.id)).toEqual({
      balance: 12.5,
      entries: [["PURCHASE_GRANT", 10, 10, null], ["RECURRING_GRANT", 2.5, 12.5, null]]
    })
    expect(ok(await api.get(`/customers/${customers.scheduled.id}/balances`)).units[0]).toMatchObject({ granted: 3, remaining: 3 })

    // ARREAR: the ended cycle's usage on a USAGE invoice (8.25 + 1.65 + 0.20625 -> 0.21), a free PLAN invoice each cycle.
    const arrearEnd = bought.arrear.currentPeriodEnd
    expect((await invoicesOf(api, customers.arrear.id)).map((i: any) => [i.kind, i.status, i.periodStart, i.lines, i.taxes, i.subtotal, i.total]))
      .toEqual([
        ["PLAN", "PAID", bought.arrear.currentPeriodStart, [[null, null, 0]], [["VAT", 0], ["City", 0]], 0, 0],
        ["USAGE", "OPEN", bought.arrear.currentPeriodStart, [[3.3, null, 8.25]], [["VAT", 1.65], ["City", 0.21]], 8.25, 10.11],
        ["PLAN", "PAID", arrearEnd, [[null, null, 0]], [["VAT", 0], ["City", 0]], 0, 0]
      ])
    expect(ok(await api.get(`/customers/${customers.arrear.id}/balances`)).units[0]).toMatchObject({ granted: 0, remaining: 0 })

    // walletFundedArrear: the wallet paid the usage when it happened, so no USAGE invoice; 5 + 1 + 0.125 -> 0.13.
    expect((await invoicesOf(api, customers.funded.id)).map((i: any) => [i.kind, i.status, i.total])).toEqual([
      ["PLAN", "OPEN", 6.13],
      ["PLAN", "OPEN", 6.13]
    ])
    expect(await ledgerOf(api, customers.funded.id)).toEqual({
      balance: 5,
      entries: [["PURCHASE_GRANT", 5, 5, null], ["USAGE_LOG", -5, 0, null], ["CYCLE_GRANT", 5, 5, null]]
    })
    expect(ok(await api.get(`/customers/${customers.funded.id}/plan`)).plan.spentThisCycle).toBe(0)

    // Auto-payment: the USAGE invoice (10 + 2 + 0.25) paid from the wallet before the grant, the PLAN one (122.5) after it.
    const autoInvoices = await invoicesOf(api, customers.autoPaid.id)
    expect(autoInvoices.map((i: any) => [i.kind, i.status, i.total])).toEqual([
      ["PLAN", "OPEN", 122.5],
      ["USAGE", "PAID", 12.25],
      ["PLAN", "PAID", 122.5]
    ])
    expect(await ledgerOf(api, customers.autoPaid.id)).toEqual({
      balance: 65.25,
      entries: [
        ["PURCHASE_GRANT", 100, 100, null],
        ["INVOICE_PAYMENT", -12.25, 87.75, autoInvoices[1].id],
        ["CYCLE_GRANT", 100, 187.75, null],
        ["INVOICE_PAYMENT", -122.5, 65.25, autoInvoices[2].id]
      ]
    })
    expect(ok(await api.get(`/payments?customerId=${customers.autoPaid.id}`)).payments.map((p: any) => [p.invoiceId, p.method, p.amount]))
      .toEqual([[autoInvoices[1].id, "WALLET", 12.25], [autoInvoices[2].id, "WALLET", 122.5]])

    // Auto-payment with an empty wallet: 41.15 + 8.23 + 1.02875 -> 1.03 stays OPEN, nothing moves.
    expect((await invoicesOf(api, customers.unpaid.id)).map((i: any) => [i.kind, i.status, i.total])).toEqual([
      ["PLAN", "OPEN", 50.41],
      ["PLAN", "OPEN", 50.41]
    ])
    expect(await ledgerOf(api, customers.unpaid.id)).toEqual({ balance: 0, entries: [] })
    expect(ok(await api.get(`/payments?customerId=${customers.unpaid.id}`)).payments).toEqual([])

    // Rollover, expiry and composite debt; 43.4 + 8.68 + 1.085 -> 1.09.
    expect((await invoicesOf(api, customers.rollover.id)).map((i: any) => [i.kind, i.status, i.total])).toEqual([
      ["PLAN", "OPEN", 53.17],
      ["PLAN", "OPEN", 53.17]
    ])
    const balances = ok(await api.get(`/customers/${customers.rollover.id}/balances`))
    expect(balances.credits[0]).toMatchObject({ granted: 170, used: 0, remaining: 170 })
    expect(balances.units[0]).toMatchObject({ granted: 10, remaining: 10 })
    expect(balances.composites[0]).toMatchObject({ granted: 1, used: 0, remaining: 1, originalGranted: 2 })
    expect(ok(await api.get(`/purchases/${bought.rollover.id}`)).purchase.currentPeriodStart).toBe(bought.rollover.currentPeriodEnd)
  })
})

// ---------------------------------------------------------------------------
// Several cycle runs at once

const cliPath = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

const startCli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  spawn(process.execPath, [cliPath, ...args], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })

const exited = (child: ChildProcess) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    child.stderr?.on("data", (chunk) => (stderr += chunk))
    child.on("exit", (code) => resolve({ code, stdout, stderr }))
  })

interface PurchaseState {
  readonly id: string
  readonly billingDate: Date
  readonly cycleIndex: number
  readonly status: string
  readonly planInvoices: number
  readonly distinctPlanPeriods: number
  readonly periodStart: string | null
}

/** The purchases of an organisation, or of every organisation of the test database. */
const statesOf = async (organizationId: string | null): Promise<Map<string, PurchaseState>> => {
  const rows = await query<Record<string, any>>(
    app,
    `SELECT p.id, p.billing_date, p.cycle_index, p.status, p.period_start,
            (SELECT count(*) FROM invoices i WHERE i.organization_id = p.organization_id AND i.purchase_id = p.id
               AND i.kind = 'PLAN') AS plan_invoices,
            (SELECT count(DISTINCT period_start) FROM invoices i WHERE i.organization_id = p.organization_id
               AND i.purchase_id = p.id AND i.kind = 'PLAN') AS distinct_plan_periods
     FROM purchases p WHERE $1::text IS NULL OR p.organization_id = $1`,
    [organizationId]
  )
  return new Map(rows.map((row) => [row.id, {
    id: row.id,
    billingDate: new Date(row.billingDate),
    cycleIndex: Number(row.cycleIndex),
    status: row.status,
    planInvoices: Number(row.planInvoices),
    distinctPlanPeriods: Number(row.distinctPlanPeriods),
    periodStart: row.periodStart === null ? null : new Date(row.periodStart).toISOString()
  }]))
}

/** Cycle-job steps between two states: an activation, and each cycle renewed. */
const stepsBetween = (before: Map<string, PurchaseState>, after: Map<string, PurchaseState>) =>
  [...after.values()].reduce((total, state) => {
    const old = before.get(state.id)
    if (old === undefined) return total
    return total + (old.status === "SCHEDULED" && state.status === "ACTIVE" ? 1 : 0) + state.cycleIndex - old.cycleIndex
  }, 0)

/** The cycle a purchase anchored on `anchor` is in at `now`: the last one started by then. */
const cycleAt = (anchor: Date, now: Date) => {
  let index = 0
  while (cycleStart(anchor, index + 1).getTime() <= now.getTime()) index++
  return index
}

/** Every purchase is in the cycle `now` puts it in, with exactly one PLAN invoice per cycle started. */
const expectRenewedExactly = (states: Map<string, PurchaseState>, now: Date) => {
  for (const state of states.values()) {
    const expected = cycleAt(state.billingDate, now)
    expect(state, state.id).toMatchObject({
      status: "ACTIVE",
      cycleIndex: expected,
      planInvoices: expected + 1,
      distinctPlanPeriods: expected + 1,
      periodStart: cycleStart(state.billingDate, expected).toISOString()
    })
  }
}

describe.skipIf(!usesRealPostgres)("several cycle runs at once (needs real PostgreSQL)", () => {
  it("two `billing cycle run` processes, then four worker loops: every purchase renewed once per cycle, none skipped", async () => {
    const tenant = await app.tenant("Parallel cycles")
    const api = clientOf(app, tenant)
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 18.5 }), 201)
    const credit = await makeCredit(api)
    const pages = await makeUnit(api, { flatPrice: 0.25 })
    const plan = await makePlan(app, tenant, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 1000, rollover: true },
      { type: "UNIT", billingMode: "ARREAR", unitId: pages.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 25 }
    ], { priceAdjustment: 4.99 })
    const count = 150
    const scheduledAt = new Date(Date.now() + 2 * 3_600_000)
    const ids = await sendMany(count, 8, async (index) => {
      const customer = await makeCustomer(api)
      // Every fifth purchase is SCHEDULED two hours ahead; every third is auto-paid.
      const purchase = await buy(api, customer.id, plan.id, index % 5 === 0 ? { billingDate: scheduledAt.toISOString() } : {})
      if (index % 3 === 0) ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
      if (index % 4 === 1 && index % 5 !== 0) await send(api, "unit", { customerId: customer.id, agentKey: pages.agentKey, quantity: 12 })
      return purchase.id as string
    })
    expect(new Set(ids).size).toBe(count)
    await drain(app)
    // 150 purchases: indexes 1, 5, 9, ... (38 of them) but not those also a multiple of 5 (5, 25, ...: 8).
    await expectAllProcessed(tenant, 30)
    const before = await statesOf(tenant.organizationId)
    // Other tests' purchases in this database may fall due too: the runs' totals are checked over all of them.
    const everyBefore = await statesOf(null)

    // Every ACTIVE purchase's cycle has ended, the scheduled ones' date has come (their first cycle has not ended).
    const firstEnds = [...before.values()].filter((s) => s.status === "ACTIVE").map((s) => cycleStart(s.billingDate, 1).getTime())
    const first = new Date(Math.max(...firstEnds) + 60_000)
    expect(first.getTime()).toBeLessThan(cycleStart(scheduledAt, 1).getTime())
    const runs = await Promise.all([0, 1].map(() =>
      exited(startCli(["cycle", "run", "--now", first.toISOString(), "--json"], { BILLING_CYCLE_BATCH: "10" }))
    ))
    for (const run of runs) expect(run.code, run.stderr).toBe(0)
    const handled = runs.map((run) => JSON.parse(run.stdout).handled as number)
    console.log(`two cycle runs handled ${handled.join(" + ")}`)
    const everyAfterFirst = await statesOf(null)
    expect(handled[0]! + handled[1]!).toBe(stepsBetween(everyBefore, everyAfterFirst))
    const afterFirst = await statesOf(tenant.organizationId)
    expect(stepsBetween(before, afterFirst)).toBe(count)
    expectRenewedExactly(afterFirst, first)
    for (const state of afterFirst.values()) {
      expect(state.cycleIndex).toBe(before.get(state.id)!.status === "SCHEDULED" ? 0 : 1)
    }

    // Three months on: every purchase is two or three cycles behind, caught up one cycle per batch by
    // four loops at once (small batches, so they interleave and wait for each other's claimed purchases).
    const later = new Date(cycleStart(scheduledAt, 3).getTime() + 60_000)
    const loops = await app.run(Effect.all(
      Array.from({ length: 4 }, () =>
        Effect.iterate({ total: 0, last: -1 }, {
          while: (s) => s.last !== 0,
          body: (s) => Effect.map(renewDue(later, 7), (n) => ({ total: s.total + n, last: n }))
        }).pipe(Effect.map((s) => s.total))),
      { concurrency: "unbounded" }
    ))
    console.log(`four loops handled ${loops.join(" + ")}`)
    const afterLater = await statesOf(tenant.organizationId)
    expect(loops.reduce((a, b) => a + b, 0)).toBe(stepsBetween(everyAfterFirst, await statesOf(null)))
    expect(loops.filter((n) => n > 0).length).toBeGreaterThan(1)
    expectRenewedExactly(afterLater, later)
    expect(await renewBatch(later)).toBe(0)

    // Money: one grant per cycle started and the auto-payments, nothing twice.
    const [totals] = await query<Record<string, string>>(
      app,
      `SELECT (SELECT count(*) FROM wallet_ledger WHERE organization_id = $1 AND type IN ('PURCHASE_GRANT', 'CYCLE_GRANT')) AS grants,
              (SELECT count(*) FROM invoices WHERE organization_id = $1 AND kind = 'PLAN') AS plan_invoices,
              (SELECT count(*) FROM payments WHERE organization_id = $1) AS payments,
              (SELECT count(*) FROM wallet_ledger WHERE organization_id = $1 AND type = 'INVOICE_PAYMENT') AS paid_from_wallet,
              (SELECT count(DISTINCT invoice_id) FROM payments WHERE organization_id = $1) AS paid_invoices`,
      [tenant.organizationId]
    )
    expect(Number(totals!.grants)).toBe(Number(totals!.planInvoices))
    expect(Number(totals!.payments)).toBe(Number(totals!.paidFromWallet))
    expect(Number(totals!.payments)).toBe(Number(totals!.paidInvoices))
    // Invoice numbers (docs/billing.md): two processes and four loops finalised invoices at once, and every
    // invoice has its own number, 1..n without a gap.
    const numbers = await query<{ sequenceNumber: string }>(
      app,
      "SELECT sequence_number FROM invoices WHERE organization_id = $1 AND status <> 'DRAFT' ORDER BY sequence_number",
      [tenant.organizationId]
    )
    expect(numbers.map((row) => Number(row.sequenceNumber))).toEqual(numbers.map((_, index) => index + 1))
  }, 600_000)
})
