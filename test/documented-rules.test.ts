/**
 * Documented rules that had no test of their own, each through the doors
 * (HTTP, the worker priced in-process, the cycle job):
 *  - an inactive tax is not applied on a new invoice (docs/billing.md, "Invoices, payments, taxes");
 *  - an adjustment replayed with its idempotency key but new `notes` replays and writes nothing,
 *    and the same key in a second workspace is its own (docs/billing.md, "Adjustments");
 *  - PATCH of a cancelled purchase is 409 (docs/billing.md, "Purchases");
 *  - a credit signal with zero tokens uses no credits and moves nothing (docs/signals.md, "Pricing per meter");
 *  - the usage log's `from`/`to` are `[from, to)` on a row's `timestamp` (docs/signals.md, "The usage log").
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, type Client, clientOf, expectError, makeCredit, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

describe("taxes", () => {
  it("applies only the active taxes on a new invoice: a tax set inactive is left off, and applies again once active", async () => {
    const tenant = await app.tenant("Taxed")
    const taxed = clientOf(app, tenant)
    const vat = ok(await taxed.post("/taxes", { name: "VAT", ratePercent: 20 }), 201).tax
    const city = ok(await taxed.post("/taxes", { name: "City", ratePercent: 5 }), 201).tax
    expect(ok(await taxed.patch(`/taxes/${city.id}`, { active: false })).tax).toMatchObject({ id: city.id, active: false })
    const unit = await makeUnit(taxed, { flatPrice: 12.5 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 2 }])

    // 2 * 12.5 = 25; VAT 20% = 5; City (inactive) not applied.
    const first = await makeCustomer(taxed)
    await buy(taxed, first.id, plan.id)
    const [invoice] = ok(await taxed.get(`/invoices?customerId=${first.id}`)).invoices
    expect(invoice).toMatchObject({ kind: "PLAN", subtotal: 25, taxTotal: 5, total: 30, totalCents: 3000 })
    expect(invoice.taxLines).toEqual([{ taxId: vat.id, name: "VAT", ratePercent: 20, amount: 5 }])

    // Active again: the next invoice carries it (5% of 25 = 1.25); the invoice already issued is unchanged.
    ok(await taxed.patch(`/taxes/${city.id}`, { active: true }))
    const second = await makeCustomer(taxed)
    await buy(taxed, second.id, plan.id)
    const [later] = ok(await taxed.get(`/invoices?customerId=${second.id}`)).invoices
    expect(later).toMatchObject({ subtotal: 25, taxTotal: 6.25, total: 31.25 })
    expect(later.taxLines.map((t: any) => [t.name, t.amount])).toEqual([["VAT", 5], ["City", 1.25]])
    expect(ok(await taxed.get(`/invoices/${invoice.id}`)).invoice).toMatchObject({ taxTotal: 5, total: 30 })
  })
})

describe("adjustment idempotency", () => {
  const ledgerOf = async (client: Client, customerId: string) =>
    ok(await client.get(`/customers/${customerId}/wallet/ledger`)).entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.notes])

  it("replays a key sent again with new notes: nothing written again, the first notes kept", async () => {
    const customer = await makeCustomer(api)
    const first = ok(await api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 7.25, notes: "goodwill", idempotencyKey: "adj-notes" }))
    expect(first).toMatchObject({ adjusted: true, replayed: false, appliedDelta: 7.25 })
    const again = await api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 7.25, notes: "something else", idempotencyKey: "adj-notes" })
    expect(ok(again)).toMatchObject({ adjusted: false, replayed: true, adjustedAt: first.adjustedAt, appliedDelta: 7.25 })
    expect(await ledgerOf(api, customer.id)).toEqual([["ADJUSTMENT", 7.25, 7.25, "goodwill"]])
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).wallet.balance).toBe(7.25)

    // The same on a prepaid balance: notes are not part of the fingerprint (customer, agentKey, delta).
    const credit = await makeCredit(api)
    await buy(api, customer.id, (await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 }])).id)
    const body = { agentKey: credit.agentKey, delta: 10, idempotencyKey: "adj-notes-credit" }
    expect(ok(await api.post(`/customers/${customer.id}/credits/adjust`, { ...body, notes: "one" }))).toMatchObject({ adjusted: true, remaining: 110 })
    expect(ok(await api.post(`/customers/${customer.id}/credits/adjust`, { ...body, notes: "two" }))).toMatchObject({ replayed: true, remaining: 110 })
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).credits[0]).toMatchObject({ granted: 110, remaining: 110 })
  })

  it("keeps keys per workspace: the same key in a second workspace adjusts there, and each replays its own", async () => {
    const other = await app.tenant("Second workspace")
    const otherApi = clientOf(app, other)
    const here = await makeCustomer(api)
    const there = await makeCustomer(otherApi)
    const key = { idempotencyKey: "shared-key" }
    expect(ok(await api.post(`/customers/${here.id}/wallet/adjust`, { delta: 3, ...key }))).toMatchObject({ adjusted: true, appliedDelta: 3 })
    // A different delta under the same key would be 422 in the first workspace; in the second it is a new request.
    expect(ok(await otherApi.post(`/customers/${there.id}/wallet/adjust`, { delta: 4, ...key }))).toMatchObject({ adjusted: true, replayed: false, appliedDelta: 4 })
    expect(ok(await otherApi.post(`/customers/${there.id}/wallet/adjust`, { delta: 4, ...key }))).toMatchObject({ adjusted: false, replayed: true })
    expect(ok(await api.post(`/customers/${here.id}/wallet/adjust`, { delta: 3, ...key }))).toMatchObject({ adjusted: false, replayed: true })
    expect(await ledgerOf(api, here.id)).toEqual([["ADJUSTMENT", 3, 3, null]])
    expect(await ledgerOf(otherApi, there.id)).toEqual([["ADJUSTMENT", 4, 4, null]])
  })
})

describe("a cancelled purchase", () => {
  it("cannot be updated: PATCH is 409 and changes nothing", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 1 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    const cancelled = ok(await api.post(`/purchases/${purchase.id}/cancel`)).purchase
    expect(cancelled).toMatchObject({ status: "CANCELLED", autoPayment: true })
    expectError(await api.patch(`/purchases/${purchase.id}`, { autoPayment: false }), 409, "purchase_cancelled")
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toEqual(cancelled)
  })
})

describe("a credit signal with zero tokens", () => {
  it("uses no credits and moves nothing: a usage row of 0, balances, spent and wallet unchanged", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 },
      { type: "CREDIT", billingMode: "ARREAR", creditId: credit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 2 }
    ], { walletFundedArrear: true })
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const before = ok(await api.get(`/customers/${customer.id}/balances`))
    const ledgerBefore = ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).entries

    const sent = await api.post("/signal/credit", { customerId: customer.id, agentKey: credit.agentKey, usage: { model: "gpt-4o" } })
    expect(sent.status).toBe(202)
    const explicit = await api.post("/signal/credit", {
      customerId: customer.id,
      agentKey: credit.agentKey,
      usage: { model: "gpt-4o", inputTokens: 0, outputTokens: 0, cacheTokens: 0, cacheWriteTokens: 0 }
    })
    expect(explicit.status).toBe(202)
    await drain(app)

    const rows = ok(await api.get(`/signal/usage-log?customerId=${customer.id}`)).usageLogs
    expect(rows.map((r: any) => r.rawId)).toEqual([sent.body.result.rawId, explicit.body.result.rawId])
    for (const row of rows) {
      expect(row).toMatchObject({
        meter: "CREDIT",
        quantity: 0,
        providerCost: 0,
        customerCost: 0,
        tokens: { input: 0, output: 0, cache: 0, cacheWrite: 0, total: 0 },
        // No allowance drawn: no billing mode and no balance on the row.
        billingMode: null,
        balance: { remaining: null }
      })
    }
    expect(ok(await api.get(`/customers/${customer.id}/balances`))).toEqual(before)
    expect(before.credits[0]).toMatchObject({ granted: 10, used: 0, remaining: 10 })
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(0)
    expect(ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).entries).toEqual(ledgerBefore)
  })
})

describe("GET /signal/usage-log from/to", () => {
  it("filters on the row's timestamp over [from, to): a row exactly at `from` is in, one exactly at `to` is out", async () => {
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // Three moments a millisecond apart, from the first millisecond after the cycle started (a moment before
    // the purchase has no cycle to be billed in), so all three are earlier than any row's createdAt.
    const base = new Date(purchase.currentPeriodStart).getTime() + 1
    const at = [base, base + 1, base + 2].map((ms) => new Date(ms).toISOString())
    // Sent in another order than their moments, so `createdAt` order says nothing about `timestamp`.
    for (const [index, timestamp] of [[2, at[2]], [0, at[0]], [1, at[1]]] as const) {
      const sent = await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: index + 1, timestamp })
      expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    }
    await drain(app)
    const all = ok(await api.get(`/signal/usage-log?customerId=${customer.id}`)).usageLogs
    expect(all.map((r: any) => [r.quantity, r.timestamp])).toEqual([[3, at[2]], [1, at[0]], [2, at[1]]])

    const range = async (query: string) =>
      ok(await api.get(`/signal/usage-log?customerId=${customer.id}&${query}`)).usageLogs.map((r: any) => r.timestamp).sort()
    const q = (name: string, index: number) => `${name}=${encodeURIComponent(at[index]!)}`
    expect(await range(`${q("from", 0)}&${q("to", 2)}`)).toEqual([at[0], at[1]])
    expect(await range(`${q("from", 1)}&${q("to", 2)}`)).toEqual([at[1]])
    expect(await range(`${q("from", 1)}&${q("to", 1)}`)).toEqual([])
    expect(await range(q("from", 2))).toEqual([at[2]])
    expect(await range(q("to", 0))).toEqual([])
    expect(await range(q("to", 1))).toEqual([at[0]])
    // A row's createdAt (when it was priced) is later than all three moments: filtering is not on it.
    expect(all.every((r: any) => r.createdAt > at[2]!)).toBe(true)
    const [signals] = await query<{ n: string }>(app, `SELECT count(*)::text AS n FROM signals WHERE organization_id = $1 AND customer_id = $2`, [
      acme.organizationId,
      customer.id
    ])
    expect(signals!.n).toBe("3")
  })
})
