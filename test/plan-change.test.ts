/**
 * Changing a purchase's plan mid-cycle (docs/billing.md "Changing plans") and
 * the upcoming invoice, over HTTP and through the CLI, at instants the test
 * sets (the app's clock is a SettableClock: every service reads it).
 *
 * Every expected figure is a literal worked out by hand in the comment beside
 * it, never computed by the code under test. The share of a cycle left is
 * counted in whole seconds: a 30-day cycle is 2,592,000 s, a 31-day one
 * 2,678,400 s.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Client,
  clientOf,
  expectError,
  makeCredit,
  makeCustomer,
  makePlan,
  makeUnit,
  ok,
  runCycles
} from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const clock = makeSettableClock()
let app: TestApp

beforeAll(async () => {
  // A database of the file's own: the cycle job renews every organisation's due purchases, and these are
  // bought at past instants.
  app = await startTestApp({ ownDatabase: true, clock })
})
afterAll(() => app.close())

/** The app's clock set to an ISO instant. */
const at = (iso: string) => clock.set(Date.parse(iso))

const workspace = async (name: string): Promise<{ tenant: Tenant; api: Client }> => {
  const tenant = await app.tenant(name)
  return { tenant, api: clientOf(app, tenant) }
}

/** The app's clock now, as a signal's `timestamp` (a signal without one happens at the database's own now()). */
const clockNow = () => new Date(clock.unsafeCurrentTimeMillis()).toISOString()

/** Sends a unit signal at the app's clock and prices it; the usage row. */
const units = async (api: Client, customerId: string, agentKey: string, quantity: number) => {
  const sent = await api.post("/signal/unit", { customerId, agentKey, quantity, timestamp: clockNow() })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
  const rows = ok(await api.get(`/signal/usage-log?customerId=${customerId}&limit=200`)).usageLogs
  const row = rows.find((r: any) => r.rawId === sent.body.result.rawId)
  expect(row, "priced").toBeDefined()
  return row
}

const buy = async (api: Client, customerId: string, planId: string) =>
  ok(await api.post("/purchases", { customerId, planId }), 201).purchase

const changeTo = (api: Client, purchaseId: string, planId: string, when: "NOW" | "CYCLE_END", extra: Record<string, unknown> = {}) =>
  api.post(`/purchases/${purchaseId}/change`, { planId, when, ...extra })

/** A unit at 2 a unit and two plans selling `small` and `large` of it in ADVANCE. */
const unitPlans = async (api: Client, tenant: Tenant, small: number, large: number) => {
  const u = await makeUnit(api, { flatPrice: 2 })
  const plan = (quantity: number) => makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity }])
  return { small: await plan(small), large: await plan(large) }
}

const balancesOf = async (api: Client, customerId: string) => ok(await api.get(`/customers/${customerId}/balances`))

const ledgerOf = async (api: Client, customerId: string) =>
  ok(await api.get(`/customers/${customerId}/wallet/ledger`)).entries.map((e: any) => [e.type, e.delta, e.balanceAfter])

describe("a change NOW: proration on a PRORATION invoice", () => {
  it("upgrades at one third of a 30-day cycle: credit, charge, the old plan's usage, allowance and wallet", async () => {
    const { api, tenant } = await workspace("Upgrade")
    const u = await makeUnit(api, { flatPrice: 2 })
    const v = await makeUnit(api, { flatPrice: 3 })
    // Small: 15 units of u at 2 (30) + 10 of wallet = cost 40; u and v in arrears at 3.
    const small = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 },
      { type: "UNIT", billingMode: "ARREAR", unitId: v.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
    ])
    // Large: 45 units of u (90) + 40 of wallet = cost 130; no v.
    const large = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 45 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 40 }
    ])
    expect([small.cost, large.cost]).toEqual([40, 130])
    const customer = await makeCustomer(api)
    // April has 30 days: the cycle is 2025-04-01 .. 2025-05-01, 2,592,000 s.
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, small.id)
    expect(purchase).toMatchObject({ currentPeriodStart: "2025-04-01T00:00:00.000Z", currentPeriodEnd: "2025-05-01T00:00:00.000Z" })

    at("2025-04-06T12:00:00.000Z")
    expect(await units(api, customer.id, u.agentKey, 6)).toMatchObject({ billingMode: "ADVANCE", balance: { remaining: 9 } })
    expect(await units(api, customer.id, v.agentKey, 4)).toMatchObject({ billingMode: "ARREAR", customerCost: 12 })

    // Ten days in: 1,728,000 s of 2,592,000 left, two thirds.
    at("2025-04-11T00:00:00.000Z")
    const answer = ok(await changeTo(api, purchase.id, large.id, "NOW"))
    expect(answer.changed).toBe(true)
    expect(answer.replayed).toBe(false)
    expect(answer.purchase).toMatchObject({
      id: purchase.id,
      planId: large.id,
      planName: large.name,
      status: "ACTIVE",
      cost: 130,
      billingDate: "2025-04-01T00:00:00.000Z",
      currentPeriodStart: "2025-04-01T00:00:00.000Z",
      currentPeriodEnd: "2025-05-01T00:00:00.000Z",
      scheduledChange: null
    })
    expect(answer.invoice).toMatchObject({
      id: expect.stringMatching(/^inv_/),
      // The workspace's next number: the PLAN invoice of the purchase was INV-000001.
      number: "INV-000002",
      customerId: customer.id,
      purchaseId: purchase.id,
      kind: "PRORATION",
      status: "OPEN",
      periodStart: "2025-04-11T00:00:00.000Z",
      periodEnd: "2025-05-01T00:00:00.000Z",
      issuedAt: "2025-04-11T00:00:00.000Z",
      taxLines: [],
      // -26.67 + 86.67 + 12
      subtotal: 72,
      taxTotal: 0,
      total: 72,
      totalCents: 7200
    })
    expect(answer.invoice.lines.map((l: any) => [l.description, l.quantity, l.unitPrice, l.amount])).toEqual([
      // 40 x 2/3 = 26.666.. -> 26.67
      [`Unused time on ${small.name} (2025-04-11 to 2025-05-01)`, null, null, -26.67],
      // 130 x 2/3 = 86.666.. -> 86.67
      [`Remaining time on ${large.name} (2025-04-11 to 2025-05-01)`, null, null, 86.67],
      // v, sold by the small plan only: its usage so far, 4 at 3
      [`${v.name} (usage)`, 4, null, 12]
    ])
    // The invoice is stored as answered.
    const stored = ok(await api.get(`/invoices/${answer.invoice.id}`)).invoice
    expect(stored).toEqual(answer.invoice)

    // u: 9 left; the large plan's two thirds of 45 (30) in, the small plan's two thirds of 15 (10) out: 29.
    const balances = await balancesOf(api, customer.id)
    expect(balances.units).toEqual([
      expect.objectContaining({ unitId: u.id, granted: 35, remaining: 29 })
    ])
    // The wallet: 10 granted at the purchase, then 40 x 2/3 = 26.67 in and 10 x 2/3 = 6.67 out: +20.
    expect(balances.wallet.balance).toBe(30)
    expect(await ledgerOf(api, customer.id)).toEqual([
      ["PURCHASE_GRANT", 10, 10],
      ["PLAN_CHANGE", 20, 30]
    ])

    // v is no longer sold: a v signal is refused now.
    const refused = await api.post("/signal/unit", { customerId: customer.id, agentKey: v.agentKey, quantity: 1, timestamp: clockNow() })
    expect(refused.status).toBe(202)
    await drain(app)

    // The renewal bills the large plan, whole; nothing in arrears is left (v's usage was invoiced at the change).
    at("2025-05-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-05-01T00:00:00.000Z"))
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => [i.kind, i.number, i.periodStart, i.total])).toEqual([
      ["PLAN", "INV-000001", "2025-04-01T00:00:00.000Z", 40],
      ["PRORATION", "INV-000002", "2025-04-11T00:00:00.000Z", 72],
      ["PLAN", "INV-000003", "2025-05-01T00:00:00.000Z", 130]
    ])
    expect((await balancesOf(api, customer.id)).units).toEqual([
      expect.objectContaining({ unitId: u.id, granted: 45, remaining: 45 })
    ])
    // 30 + the large plan's wallet amount, 40.
    expect((await balancesOf(api, customer.id)).wallet.balance).toBe(70)
  })
})

describe("a change NOW: the second, the allowance used, the tax, a net credit", () => {
  it("at a 31-day month's last second: one second of 2,678,400 is prorated, to the cent", async () => {
    const { api, tenant } = await workspace("LastSecond")
    // 50,000 units at 2 = 100,000; 150,000 units = 300,000.
    const { small, large } = await unitPlans(api, tenant, 50_000, 150_000)
    const customer = await makeCustomer(api)
    // January has 31 days: 2025-01-01 .. 2025-02-01, 2,678,400 s.
    at("2025-01-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, small.id)
    at("2025-01-31T23:59:59.000Z")
    const { invoice } = ok(await changeTo(api, purchase.id, large.id, "NOW"))
    expect(invoice.lines.map((l: any) => l.amount)).toEqual([
      // 100,000 / 2,678,400 = 0.0373357.. -> 0.04
      -0.04,
      // 300,000 / 2,678,400 = 0.1120071.. -> 0.11
      0.11
    ])
    expect(invoice).toMatchObject({ subtotal: 0.07, total: 0.07, status: "OPEN", periodStart: "2025-01-31T23:59:59.000Z" })
    // 50,000 + 150,000/2,678,400 (0.056003584229, to 12 places) - 50,000/2,678,400 (0.018667861410)
    expect((await balancesOf(api, customer.id)).units[0]).toMatchObject({ granted: 50000.037335722819, remaining: 50000.037335722819 })
  })

  it("the second under way counts as used: half a second before the end, nothing is left to prorate", async () => {
    const { api, tenant } = await workspace("HalfSecond")
    const { small, large } = await unitPlans(api, tenant, 50_000, 150_000)
    const customer = await makeCustomer(api)
    at("2025-01-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, small.id)
    at("2025-01-31T23:59:59.500Z")
    const { invoice } = ok(await changeTo(api, purchase.id, large.id, "NOW"))
    // 0 whole seconds left: both lines are 0, the invoice is free (PAID at issue).
    expect(invoice.lines.map((l: any) => l.amount)).toEqual([0, 0])
    expect(invoice).toMatchObject({ total: 0, status: "PAID", paidAt: "2025-01-31T23:59:59.500Z" })
    expect((await balancesOf(api, customer.id)).units[0]).toMatchObject({ granted: 50000, remaining: 50000 })
  })

  it("on a plan with ADVANCE credits half used: the credits used stay used, the rest moves by the shares", async () => {
    const { api, tenant } = await workspace("Credits")
    const credit = await makeCredit(api)
    // pricePerCredit 0.0125: 100 credits cost 1.25, 300 cost 3.75.
    const small = await makePlan(app, tenant, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 }])
    const large = await makePlan(app, tenant, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 300 }])
    const customer = await makeCustomer(api)
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, small.id)
    at("2025-04-03T08:00:00.000Z")
    // 31,250 output tokens on gpt-4o: 0.3125 USD of provider cost = 50 credits (basePrice 0.00625).
    const sent = await api.post("/signal/credit", {
      customerId: customer.id,
      agentKey: credit.agentKey,
      usage: { model: "gpt-4o", outputTokens: 31_250 },
      timestamp: clockNow()
    })
    expect(sent.status).toBe(202)
    await drain(app)
    expect((await balancesOf(api, customer.id)).credits[0]).toMatchObject({ granted: 100, used: 50, remaining: 50 })

    at("2025-04-11T00:00:00.000Z")
    const { invoice } = ok(await changeTo(api, purchase.id, large.id, "NOW"))
    expect(invoice.lines.map((l: any) => l.amount)).toEqual([
      // 1.25 x 2/3 = 0.8333.. -> 0.83
      -0.83,
      // 3.75 x 2/3 = 2.50
      2.5
    ])
    expect(invoice).toMatchObject({ subtotal: 1.67, total: 1.67, totalCents: 167 })
    // remaining 50 + 300 x 2/3 (200) - 100 x 2/3 (66.666666666667, to 12 places) = 183.333333333333; used 50.
    expect((await balancesOf(api, customer.id)).credits[0]).toMatchObject({
      creditId: credit.id,
      granted: 233.333333333333,
      used: 50,
      remaining: 183.333333333333
    })
  })

  it("with a tax: the proration's subtotal is taxed like any invoice; a net credit goes to the wallet, with its tax", async () => {
    const { api, tenant } = await workspace("Taxed")
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
    // 15 units = 30, 45 units = 90.
    const { small, large } = await unitPlans(api, tenant, 15, 45)
    const customer = await makeCustomer(api)
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, small.id)
    at("2025-04-11T00:00:00.000Z")
    const up = ok(await changeTo(api, purchase.id, large.id, "NOW")).invoice
    // -20 + 60 = 40; VAT 20 % = 8; 48.
    expect(up.lines.map((l: any) => l.amount)).toEqual([-20, 60])
    expect(up).toMatchObject({ subtotal: 40, taxTotal: 8, total: 48, totalCents: 4800, status: "OPEN" })
    expect(up.taxLines).toEqual([{ taxId: expect.stringMatching(/^tax_/), name: "VAT", ratePercent: 20, amount: 8 }])

    // Back down five days later: 15 days of 30 left, a half. 90 / 2 = 45 credited, 30 / 2 = 15 charged.
    at("2025-04-16T00:00:00.000Z")
    const down = ok(await changeTo(api, purchase.id, small.id, "NOW")).invoice
    expect(down.lines.map((l: any) => l.amount)).toEqual([-45, 15])
    // -30; VAT -6; -36: nothing is owed, the credit goes to the wallet and the invoice is settled at issue.
    expect(down).toMatchObject({ subtotal: -30, taxTotal: -6, total: -36, totalCents: -3600, status: "PAID" })
    expect(await ledgerOf(api, customer.id)).toEqual([["PLAN_CHANGE", 36, 36]])
    const [entry] = ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).entries
    expect(entry).toMatchObject({ invoiceId: down.id, purchaseId: purchase.id })
    // 15 units: 15 + 30 - 10 = 35 after the upgrade; 35 + 7.5 - 22.5 = 20 after the downgrade.
    expect((await balancesOf(api, customer.id)).units[0]).toMatchObject({ granted: 20, remaining: 20 })
  })
})

/** An upcoming invoice as the cycle job issues it: the same, with the id and the number it was given. */
const withoutId = (invoice: any) => ({ ...invoice, id: null, number: null })

describe("a change at the cycle end (CYCLE_END)", () => {
  it("is scheduled, previewed, applied by the cycle job without proration; late usage of the old cycle is priced under the old plan", async () => {
    const { api, tenant } = await workspace("Downgrade")
    const u = await makeUnit(api, { flatPrice: 2 })
    const v = await makeUnit(api, { flatPrice: 3 })
    // Large: 45 units of u (90), v in arrears at 3. Small: 15 units of u (30), no v.
    const large = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 45 },
      { type: "UNIT", billingMode: "ARREAR", unitId: v.id }
    ])
    const small = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 }])
    const customer = await makeCustomer(api, { externalId: `down-${Date.now().toString(36)}` })
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, large.id)
    at("2025-04-10T00:00:00.000Z")
    await units(api, customer.id, u.agentKey, 5)
    await units(api, customer.id, v.agentKey, 2)
    // One unit of u granted by hand: the adjustment names u's balance row, which the change replaces.
    const adjust = { agentKey: u.agentKey, delta: 1, idempotencyKey: `adj-${customer.id}` }
    expect(ok(await api.post(`/customers/${customer.id}/units/adjust`, adjust))).toMatchObject({ remaining: 41 })

    at("2025-04-20T00:00:00.000Z")
    const scheduled = await changeTo(api, purchase.id, small.id, "CYCLE_END")
    expect(scheduled.body.statusDetail.message).toBe("Plan change scheduled")
    const answer = ok(scheduled)
    expect(answer.invoice).toBeNull()
    expect(answer.purchase).toMatchObject({
      planId: large.id,
      cost: 90,
      scheduledChange: { planId: small.id, at: "2025-05-01T00:00:00.000Z" }
    })
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.scheduledChange).toEqual({
      planId: small.id,
      at: "2025-05-01T00:00:00.000Z"
    })
    // Nothing moved: no invoice, the balances as they were.
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.map((i: any) => i.kind)).toEqual(["PLAN"])
    expect((await balancesOf(api, customer.id)).units.find((b: any) => b.unitId === u.id)).toMatchObject({ granted: 46, remaining: 41 })

    // The preview: v's usage of the ending cycle (2 at 3), then the small plan's first PLAN invoice.
    const upcoming = ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices
    expect(ok(await api.get(`/invoices/upcoming?externalId=${customer.externalId}`)).invoices).toEqual(upcoming)
    expect(upcoming.map((i: any) => [i.id, i.kind, i.status, i.periodStart, i.periodEnd, i.total])).toEqual([
      [null, "USAGE", "OPEN", "2025-04-01T00:00:00.000Z", "2025-05-01T00:00:00.000Z", 6],
      [null, "PLAN", "OPEN", "2025-05-01T00:00:00.000Z", "2025-06-01T00:00:00.000Z", 30]
    ])
    expect(upcoming[1].lines).toEqual([{
      description: `${u.name} (prepaid)`,
      componentId: expect.any(String),
      quantity: 15,
      unitPrice: null,
      amount: 30,
      periodStart: "2025-05-01T00:00:00.000Z",
      periodEnd: "2025-06-01T00:00:00.000Z"
    }])

    at("2025-05-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-05-01T00:00:00.000Z"))
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "USAGE", "PLAN"])
    // What the cycle job issued is what the preview said, line for line, to the cent.
    expect(invoices.slice(1).map(withoutId)).toEqual(upcoming)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toMatchObject({
      planId: small.id,
      cost: 30,
      scheduledChange: null,
      currentPeriodStart: "2025-05-01T00:00:00.000Z",
      currentPeriodEnd: "2025-06-01T00:00:00.000Z"
    })
    // No rollover: u starts again at the small plan's 15; v is not on the plan any more.
    expect((await balancesOf(api, customer.id)).units).toEqual([expect.objectContaining({ unitId: u.id, granted: 15, remaining: 15 })])
    // The adjustment follows u to the new plan's row: its replay reads what is left there.
    expect(ok(await api.post(`/customers/${customer.id}/units/adjust`, adjust))).toMatchObject({ replayed: true, remaining: 15 })

    // v usage of April, reported late: billed in April's cycle, under the plan April ran on (3 a unit).
    const late = await api.post("/signal/unit", {
      customerId: customer.id,
      agentKey: v.agentKey,
      quantity: 1,
      timestamp: "2025-04-25T00:00:00.000Z"
    })
    expect(late.status).toBe(202)
    at("2025-05-02T00:00:00.000Z")
    await drain(app)
    const rows = ok(await api.get(`/signal/usage-log?customerId=${customer.id}&limit=200`)).usageLogs
    expect(rows.find((r: any) => r.rawId === late.body.result.rawId)).toMatchObject({ billingMode: "ARREAR", customerCost: 3 })
  })

  it("is removed by DELETE /purchases/{id}/scheduled-change; a NOW change replaces a scheduled one", async () => {
    const { api, tenant } = await workspace("Unschedule")
    const u = await makeUnit(api, { flatPrice: 2 })
    const a = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 }])
    const b = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 30 }])
    const customer = await makeCustomer(api)
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, a.id)
    expectError(await api.del(`/purchases/${purchase.id}/scheduled-change`), 404, "no_scheduled_change")
    ok(await changeTo(api, purchase.id, b.id, "CYCLE_END"))
    const removed = ok(await api.del(`/purchases/${purchase.id}/scheduled-change`))
    expect(removed).toMatchObject({ removed: true, purchase: { planId: a.id, scheduledChange: null } })
    expectError(await api.del(`/purchases/${purchase.id}/scheduled-change`), 404, "no_scheduled_change")
    // The renewal bills the plan it is on.
    expect(ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices.map((i: any) => [i.kind, i.total])).toEqual([
      ["PLAN", 30]
    ])

    ok(await changeTo(api, purchase.id, b.id, "CYCLE_END"))
    at("2025-04-16T00:00:00.000Z")
    // Half the cycle left: 30 / 2 credited, 60 / 2 charged; the scheduled change is gone.
    const now = ok(await changeTo(api, purchase.id, b.id, "NOW"))
    expect(now.invoice.lines.map((l: any) => l.amount)).toEqual([-15, 30])
    expect(now.purchase).toMatchObject({ planId: b.id, scheduledChange: null })
  })
})

describe("the upcoming invoice is what the cycle job issues", () => {
  const setup = async (name: string) => {
    const { api, tenant } = await workspace(name)
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 10 }), 201)
    const u = await makeUnit(api, { flatPrice: 2 })
    const v = await makeUnit(api, { flatPrice: 3 })
    // 10 units of u prepaid (20), v in arrears at 3.
    const plan = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 10 },
      { type: "UNIT", billingMode: "ARREAR", unitId: v.id }
    ])
    const customer = await makeCustomer(api)
    at("2025-06-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, plan.id)
    at("2025-06-10T00:00:00.000Z")
    await units(api, customer.id, v.agentKey, 2)
    const upcoming = ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices
    return { api, customer, purchase, u, v, upcoming }
  }

  it("with no more usage: line for line and to the cent", async () => {
    const { api, customer, upcoming, u, v } = await setup("UpcomingSame")
    expect(upcoming).toEqual([
      expect.objectContaining({
        id: null,
        // Never issued, never numbered.
        number: null,
        kind: "USAGE",
        status: "OPEN",
        // 2 x 3 = 6; VAT 0.60
        lines: [expect.objectContaining({ description: `${v.name} (usage)`, quantity: 2, amount: 6 })],
        subtotal: 6,
        taxTotal: 0.6,
        total: 6.6,
        totalCents: 660,
        issuedAt: "2025-07-01T00:00:00.000Z"
      }),
      expect.objectContaining({
        id: null,
        number: null,
        kind: "PLAN",
        lines: [expect.objectContaining({ description: `${u.name} (prepaid)`, quantity: 10, amount: 20 })],
        subtotal: 20,
        taxTotal: 2,
        total: 22
      })
    ])
    // Never stored.
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.map((i: any) => i.kind)).toEqual(["PLAN"])
    at("2025-07-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-07-01T00:00:00.000Z"))
    const issued = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.slice(1)
    expect(issued.map(withoutId)).toEqual(upcoming)
    // Issued, they took the workspace's next numbers (its first PLAN invoice was INV-000001).
    expect(issued.map((i: any) => i.number)).toEqual(["INV-000002", "INV-000003"])
  })

  it("with more usage in between: the preview plus that usage, added by hand", async () => {
    const { api, customer, upcoming, v } = await setup("UpcomingMore")
    at("2025-06-20T00:00:00.000Z")
    const [usageLine] = upcoming[0].lines
    expect(usageLine).toMatchObject({ quantity: 2, amount: 6 })
    // 5 more v units at 3: the line 2 -> 7 units, 6 -> 21; subtotal 21, VAT 2.10, total 23.10. The PLAN invoice is unchanged.
    await units(api, customer.id, v.agentKey, 5)
    const expected = [
      {
        ...upcoming[0],
        lines: [{ ...usageLine, quantity: 7, amount: 21 }],
        subtotal: 21,
        taxTotal: 2.1,
        taxLines: [{ ...upcoming[0].taxLines[0], amount: 2.1 }],
        total: 23.1,
        totalCents: 2310,
        amountDue: 23.1
      },
      upcoming[1]
    ]
    at("2025-07-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-07-01T00:00:00.000Z"))
    const issued = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.slice(1)
    expect(issued.map(withoutId)).toEqual(expected)
  })

  it("with auto-payment and a wallet that covers it: PAID at the cycle end, as the cycle job pays it", async () => {
    const { api, tenant } = await workspace("UpcomingPaid")
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 10 }), 201)
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 50 }])
    const customer = await makeCustomer(api)
    at("2025-06-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    at("2025-06-10T00:00:00.000Z")
    const upcoming = ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices
    // The renewal grants 50 (the wallet holds 50 + 50 = 100) and pays the PLAN invoice, 50 + 10% VAT = 55, from it.
    expect(upcoming.map((i: any) => [i.kind, i.status, i.total, i.paidAt])).toEqual([
      ["PLAN", "PAID", 55, "2025-07-01T00:00:00.000Z"]
    ])
    at("2025-07-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-07-01T00:00:00.000Z"))
    const issued = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.slice(1)
    expect(issued.map(withoutId)).toEqual(upcoming)
    expect(ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).entries.at(-1))
      .toMatchObject({ type: "INVOICE_PAYMENT", delta: -55, balanceAfter: 45, invoiceId: issued[0].id })
  })
})

describe("refusals, repeats and other purchases", () => {
  it("answers 400, 404, 409 and 422 in the envelope and changes nothing", async () => {
    const { api, tenant } = await workspace("Refusals")
    const u = await makeUnit(api, { flatPrice: 2 })
    const a = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 }])
    const b = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 45 }])
    const archived = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 1 }])
    ok(await api.post(`/plans/${archived.id}/archive`))
    const customer = await makeCustomer(api)
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, a.id)
    at("2025-04-11T00:00:00.000Z")

    expectError(await changeTo(api, purchase.id, "plan_nothing", "NOW"), 400, "unknown_plan")
    expectError(await changeTo(api, purchase.id, archived.id, "NOW"), 400, "plan_inactive")
    expectError(await changeTo(api, purchase.id, archived.id, "CYCLE_END"), 400, "plan_inactive")
    expectError(await changeTo(api, purchase.id, b.id, "LATER" as "NOW"), 400, "validation_failed")
    expectError(await api.post(`/purchases/${purchase.id}/change`, { when: "NOW" }), 400, "validation_failed")
    expectError(await api.post(`/purchases/${purchase.id}/change`, { planId: b.id, when: "NOW", extra: 1 }), 400, "validation_failed")
    expectError(await changeTo(api, "pur_nothing", b.id, "NOW"), 404, "purchase_not_found")
    const other = await workspace("Refusals other")
    expectError(await changeTo(other.api, purchase.id, b.id, "NOW"), 404, "purchase_not_found")
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices).toHaveLength(1)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toMatchObject({ planId: a.id, scheduledChange: null })

    // A keyed change: a repeat answers the first change and changes nothing again; another request under the key is 422.
    const first = ok(await changeTo(api, purchase.id, b.id, "NOW", { idempotencyKey: "upgrade-1" }))
    const again = await changeTo(api, purchase.id, b.id, "NOW", { idempotencyKey: "upgrade-1" })
    expect(again.body.statusDetail.message).toMatch(/^Already processed/)
    expect(ok(again)).toEqual({ ...first, replayed: true })
    expectError(await changeTo(api, purchase.id, a.id, "NOW", { idempotencyKey: "upgrade-1" }), 422, "idempotency_key_reused")
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.map((i: any) => i.kind)).toEqual(["PLAN", "PRORATION"])

    // An archived customer's purchase is read-only.
    const gone = await makeCustomer(api)
    const gonePurchase = await buy(api, gone.id, a.id)
    ok(await api.del(`/customers/${gone.id}`))
    expectError(await changeTo(api, gonePurchase.id, b.id, "NOW"), 409, "customer_archived")
    expectError(await changeTo(api, gonePurchase.id, b.id, "CYCLE_END"), 409, "customer_archived")

    // A cancelled purchase cannot change.
    ok(await api.post(`/purchases/${purchase.id}/cancel`))
    expectError(await changeTo(api, purchase.id, a.id, "NOW"), 409, "purchase_cancelled")
    expectError(await changeTo(api, purchase.id, a.id, "CYCLE_END"), 409, "purchase_cancelled")
    expectError(await api.del(`/purchases/${purchase.id}/scheduled-change`), 409, "purchase_cancelled")
    // ... but a repeat of a change it made still answers that change.
    expect(ok(await changeTo(api, purchase.id, b.id, "NOW", { idempotencyKey: "upgrade-1" })).invoice).toEqual(first.invoice)
  })

  it("a change to the plan the purchase is on re-freezes it, NOW and at the cycle end", async () => {
    const { api, tenant } = await workspace("SamePlan")
    const u = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15, rollover: true }])
    const customer = await makeCustomer(api)
    at("2025-04-01T00:00:00.000Z")
    const purchase = await buy(api, customer.id, plan.id)
    at("2025-04-05T00:00:00.000Z")
    await units(api, customer.id, u.agentKey, 3)
    at("2025-04-11T00:00:00.000Z")
    // 30 x 2/3 = 20 out and in: nothing to pay, PAID at issue; 12 left, 15 x 2/3 out and in.
    const now = ok(await changeTo(api, purchase.id, plan.id, "NOW")).invoice
    expect(now).toMatchObject({ total: 0, status: "PAID" })
    expect(now.lines.map((l: any) => l.amount)).toEqual([-20, 20])
    expect((await balancesOf(api, customer.id)).units[0]).toMatchObject({ granted: 15, remaining: 12 })
    ok(await changeTo(api, purchase.id, plan.id, "CYCLE_END"))
    at("2025-05-01T00:00:00.000Z")
    await runCycles(app, new Date("2025-05-01T00:00:00.000Z"))
    // Rolled over: 15 + 12.
    expect((await balancesOf(api, customer.id)).units[0]).toMatchObject({ granted: 27, remaining: 27 })
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toMatchObject({ planId: plan.id, scheduledChange: null })
  })

  it("upcoming: needs a customer, 404 for an unknown one, none without a live purchase, the first PLAN invoice of a scheduled one", async () => {
    const { api, tenant } = await workspace("Upcoming")
    const u = await makeUnit(api, { flatPrice: 2 })
    const a = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 }])
    const b = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 45 }])
    expectError(await api.get("/invoices/upcoming"), 400, "customer_ref_missing")
    expectError(await api.get("/invoices/upcoming?externalId=not%20valid"), 400, "validation_failed")
    expectError(await api.get("/invoices/upcoming?customerId=cus_nothing"), 404, "customer_not_found")
    expectError(await api.get("/invoices/upcoming?externalId=nobody-here"), 404, "customer_not_found")
    const customer = await makeCustomer(api)
    expect(ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`))).toEqual({ invoices: [] })

    // Scheduled for May 1st: its first PLAN invoice; a change NOW before it starts replaces the plan, uncharged.
    at("2025-04-20T00:00:00.000Z")
    const purchase = ok(await api.post("/purchases", { customerId: customer.id, planId: a.id, billingDate: "2025-05-01T00:00:00.000Z" }), 201).purchase
    expect(purchase.status).toBe("SCHEDULED")
    const changed = ok(await changeTo(api, purchase.id, b.id, "NOW"))
    expect(changed).toMatchObject({ invoice: null, purchase: { status: "SCHEDULED", planId: b.id, cost: 90 } })
    expect(ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices.map((i: any) => [i.kind, i.periodStart, i.total]))
      .toEqual([["PLAN", "2025-05-01T00:00:00.000Z", 90]])
  })
})

describe.skipIf(!usesRealPostgres)("a change racing a signal of the same customer (needs real PostgreSQL)", () => {
  it("prices the signal once, under the old plan or the new one, never both", async () => {
    const { api, tenant } = await workspace("Race")
    const u = await makeUnit(api, { flatPrice: 2 })
    // A sale freezes the unit's price of that moment: the old plan's purchases at 2 a unit in arrears; the
    // change, asked for after the price went to 5, at 5.
    const old = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: u.id }])
    at("2025-04-01T00:00:00.000Z")
    const customers = await Promise.all(Array.from({ length: 8 }, () => makeCustomer(api)))
    const purchases = await Promise.all(customers.map((c) => buy(api, c.id, old.id)))
    ok(await api.patch(`/units/${u.id}`, { flatPrice: 5 }))
    const next = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: u.id }])
    at("2025-04-11T00:00:00.000Z")
    const sent = await Promise.all(customers.map((c) =>
      api.post("/signal/unit", { customerId: c.id, agentKey: u.agentKey, quantity: 3, timestamp: clockNow() })
    ))
    expect(sent.map((s) => s.status)).toEqual(customers.map(() => 202))
    // The worker prices the queue while every purchase changes plan.
    const [changes] = await Promise.all([
      Promise.all(purchases.map((p) => changeTo(api, p.id, next.id, "NOW"))),
      drain(app)
    ])
    await drain(app)
    const under = { old: 0, next: 0 }
    for (const [i, customer] of customers.entries()) {
      const invoice = ok(changes[i]!).invoice
      const [row] = ok(await api.get(`/signal/usage-log?customerId=${customer.id}&limit=200`)).usageLogs
      const upcoming = ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)).invoices
      const usageNow = invoice.lines.filter((l: any) => l.description.endsWith("(usage)")).map((l: any) => l.amount)
      const usageLater = upcoming.filter((i: any) => i.kind === "USAGE").flatMap((i: any) => i.lines.map((l: any) => l.amount))
      if (row.customerCost === 6) {
        // Priced before the change, under the old plan (3 at 2): billed on the PRORATION invoice, not again.
        expect([usageNow, usageLater]).toEqual([[6], []])
        under.old++
      } else {
        // Priced after it, under the new plan (3 at 5): billed at the cycle end only.
        expect(row.customerCost).toBe(15)
        expect([usageNow, usageLater]).toEqual([[], [15]])
        under.next++
      }
    }
    expect(under.old + under.next).toBe(customers.length)
  })
})

describe("through the CLI", () => {
  it("billing purchase change [--at-cycle-end] and billing invoice upcoming", async () => {
    const { api, tenant } = await workspace("Cli")
    const u = await makeUnit(api, { flatPrice: 2 })
    const a = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 15 }])
    const b = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: u.id, quantity: 45 }])
    const customer = await makeCustomer(api)
    // The CLI runs on the system clock: the purchase is bought now, on it too.
    clock.unset()
    const purchase = await buy(api, customer.id, a.id)
    const org = ["--org", tenant.organizationId, "--json"]

    const scheduled = await app.cli(["purchase", "change", purchase.id, "--plan", b.id, "--at-cycle-end", ...org])
    expect(scheduled.code, scheduled.stderr).toBe(0)
    expect(scheduled.json).toMatchObject({
      changed: true,
      replayed: false,
      invoice: null,
      purchase: { planId: a.id, scheduledChange: { planId: b.id, at: purchase.currentPeriodEnd } }
    })
    const upcoming = await app.cli(["invoice", "upcoming", customer.id, ...org])
    expect(upcoming.code, upcoming.stderr).toBe(0)
    expect(upcoming.json).toEqual(ok(await api.get(`/invoices/upcoming?customerId=${customer.id}`)))
    expect(upcoming.json.invoices.map((i: any) => [i.id, i.kind, i.total])).toEqual([[null, "PLAN", 90]])

    // At once, seconds after the purchase: all but a few seconds of the cycle is left, so the whole 30 is credited
    // and the whole 90 charged, to the cent (a second is worth 0.00003 at most).
    const now = await app.cli(["purchase", "change", purchase.id, "--plan", b.id, ...org])
    expect(now.code, now.stderr).toBe(0)
    expect(now.json.purchase).toMatchObject({ planId: b.id, scheduledChange: null })
    expect(now.json.invoice).toMatchObject({ kind: "PRORATION", status: "OPEN", subtotal: 60, total: 60 })
    expect(now.json.invoice.lines.map((l: any) => l.amount)).toEqual([-30, 90])

    const refused = await app.cli(["purchase", "change", purchase.id, "--plan", "plan_nothing", ...org])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/plan_nothing/)
  })
})
