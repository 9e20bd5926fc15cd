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
    expect(invoices.map((i: any) => [i.kind, i.periodStart, i.total])).toEqual([
      ["PLAN", "2025-04-01T00:00:00.000Z", 40],
      ["PRORATION", "2025-04-11T00:00:00.000Z", 72],
      ["PLAN", "2025-05-01T00:00:00.000Z", 130]
    ])
    expect((await balancesOf(api, customer.id)).units).toEqual([
      expect.objectContaining({ unitId: u.id, granted: 45, remaining: 45 })
    ])
    // 30 + the large plan's wallet amount, 40.
    expect((await balancesOf(api, customer.id)).wallet.balance).toBe(70)
  })
})
