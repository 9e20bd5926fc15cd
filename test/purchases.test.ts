import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { cycleStart } from "../src/billing/Cycle.ts"
import { buy, type Client, clientOf, expectError, makeCredit, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
let acme: Tenant
let other: Tenant
let api: Client
let otherApi: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  api = clientOf(app, acme)
  otherApi = clientOf(app, other)
})
afterAll(() => app.close())

/** A unit signal over HTTP (at `timestamp` when given), priced by the worker in the test's process. */
const meterUnit = async (customerId: string, agentKey: string, quantity: number, timestamp?: Date) => {
  const sent = await api.post("/signal/unit", { customerId, agentKey, quantity, ...(timestamp ? { timestamp: timestamp.toISOString() } : {}) })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
  const [signal] = await query<{ status: string }>(app, `SELECT status FROM signals WHERE organization_id = $1 AND id = $2`, [
    acme.organizationId,
    sent.body.result.rawId
  ])
  expect(signal).toEqual({ status: "PROCESSED" })
}

describe("POST /purchases", () => {
  it("starts an ACTIVE purchase: grants ADVANCE components, credits the wallet and issues the plan invoice", async () => {
    const credit = await makeCredit(api)
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 1000 },
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 5 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 20 }
    ], { priceAdjustment: 1.5 })
    const customer = await makeCustomer(api, { externalId: "buyer-1" })

    const response = await api.post("/purchases", { externalId: "buyer-1", planId: plan.id })
    const { created, purchase } = ok(response, 201)
    expect(created).toBe(true)
    expect(purchase).toMatchObject({
      customerId: customer.id,
      planId: plan.id,
      planName: plan.name,
      status: "ACTIVE",
      billingCycle: "MONTHLY",
      autoPayment: false,
      // 1000 * 0.0125 + 5 * 2 + 20 + 1.5
      cost: 44
    })
    expect(purchase).not.toHaveProperty("externalId")
    expect(purchase.components.map((c: any) => [c.type, c.charge])).toEqual([["CREDIT", 12.5], ["UNIT", 10], ["WALLET", 20]])

    const balances = ok(await api.get(`/customers/${customer.id}/balances`))
    expect(balances.hasPlan).toBe(true)
    expect(balances.wallet).toEqual({ balance: 20 })
    expect(balances.credits).toEqual([{
      creditId: credit.id,
      agentKey: credit.agentKey,
      creditName: credit.name,
      granted: 1000,
      used: 0,
      remaining: 1000
    }])
    expect(balances.units).toEqual([{ unitId: unit.id, agentKey: unit.agentKey, unitName: unit.name, granted: 5, used: 0, remaining: 5 }])

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices).toHaveLength(1)
    expect(invoices[0]).toMatchObject({ kind: "PLAN", status: "OPEN", purchaseId: purchase.id, subtotal: 44, total: 44, totalCents: 4400 })
    expect(invoices[0].lines.map((l: any) => l.amount)).toEqual([12.5, 10, 20, 1.5])
  })

  it("freezes the plan: a later price change does not touch the purchase", async () => {
    const unit = await makeUnit(api, { flatPrice: 3 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.patch(`/units/${unit.id}`, { flatPrice: 100 }))
    const again = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(again.cost).toBe(6)
    expect(again.components[0].charge).toBe(6)
  })

  it("freezes the plan: a later plan edit changes new purchases only", async () => {
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 2 }])
    const before = await buy(api, (await makeCustomer(api)).id, plan.id)
    ok(await api.patch(`/plans/${plan.id}`, { entitlements: [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 9 }] }))
    const after = await buy(api, (await makeCustomer(api)).id, plan.id)
    expect(ok(await api.get(`/purchases/${before.id}`)).purchase.cost).toBe(2)
    expect(after.cost).toBe(9)
    expect(ok(await api.get(`/customers/${before.customerId}/balances`)).units[0].granted).toBe(2)
  })

  it("schedules a purchase with a future billingDate", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    const billingDate = new Date(Date.now() + 10 * 86_400_000).toISOString()
    const purchase = await buy(api, customer.id, plan.id, { billingDate })
    expect(purchase.status).toBe("SCHEDULED")
    expect(purchase.billingDate).toBe(billingDate)
    expect(purchase.currentPeriodStart).toBeNull()
    const current = ok(await api.get(`/customers/${customer.id}/plan`))
    expect(current.plan).toMatchObject({ purchaseId: purchase.id, status: "SCHEDULED", billingDate })
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).hasPlan).toBe(false)
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices).toEqual([])
  })

  it("refuses a second purchase while one is ACTIVE, and allows one after cancelling", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    const first = await buy(api, customer.id, plan.id)
    expectError(await api.post("/purchases", { customerId: customer.id, planId: plan.id }), 409, "purchase_already_held")
    const { cancelled, purchase } = ok(await api.post(`/purchases/${first.id}/cancel`))
    expect(cancelled).toBe(true)
    expect(purchase.status).toBe("CANCELLED")
    expectError(await api.post(`/purchases/${first.id}/cancel`), 409, "purchase_cancelled")
    // The current cycle's PLAN invoice paid for an allowance granted in advance: it stays owed.
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => [i.kind, i.status])).toEqual([["PLAN", "OPEN"]])
    await buy(api, customer.id, plan.id)
  })

  it.each([
    ["neither customerId nor externalId", (planId: string) => ({ planId }), 400, "customer_ref_missing"],
    ["a malformed externalId", (planId: string) => ({ externalId: "bad_id", planId }), 400, "validation_failed"],
    ["an unknown externalId", (planId: string) => ({ externalId: "nobody", planId }), 404, "customer_not_found"],
    ["an unknown customerId", (planId: string) => ({ customerId: "cus_nope", planId }), 404, "customer_not_found"],
    ["an unknown plan", (_: string, customerId: string) => ({ customerId, planId: "plan_nope" }), 400, "unknown_plan"],
    ["a past billingDate", (planId: string, customerId: string) => ({ customerId, planId, billingDate: "2020-01-01T00:00:00Z" }), 400, "billing_date_in_past"],
    ["a billingDate that is not a date", (planId: string, customerId: string) => ({ customerId, planId, billingDate: "soon" }), 400, "validation_failed"],
    ["an unknown field", (planId: string, customerId: string) => ({ customerId, planId, price: 0 }), 400, "validation_failed"],
    ["no planId", (_: string, customerId: string) => ({ customerId }), 400, "validation_failed"]
  ])("answers %s with the right error and writes nothing", async (_, body, status, code) => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    expectError(await api.post("/purchases", body(plan.id, customer.id)), status, code as ErrorCode)
    expect(ok(await api.get(`/purchases?customerId=${customer.id}`)).purchases).toEqual([])
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).hasPlan).toBe(false)
  })

  it("refuses an archived plan (400) and an archived customer (409)", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    ok(await api.post(`/plans/${plan.id}/archive`))
    expectError(await api.post("/purchases", { customerId: customer.id, planId: plan.id }), 400, "plan_inactive")
    const live = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    ok(await api.del(`/customers/${customer.id}`))
    expectError(await api.post("/purchases", { customerId: customer.id, planId: live.id }), 409, "customer_archived")
  })
})

describe("purchase list, get, update", () => {
  it("refuses a PATCH of a cancelled purchase with 409 and changes nothing", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.post(`/purchases/${purchase.id}/cancel`))
    const cancelled = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expectError(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }), 409, "purchase_cancelled")
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toEqual(cancelled)
  })

  it("lists by customer with pagination and updates auto-payment", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customers = [await makeCustomer(api), await makeCustomer(api), await makeCustomer(api)]
    const purchases = []
    for (const customer of customers) purchases.push(await buy(api, customer.id, plan.id))

    const firstPage = ok(await api.get("/purchases?limit=2")).purchases
    expect(firstPage).toHaveLength(2)
    const rest = ok(await api.get(`/purchases?limit=200&cursor=${firstPage[1].id}`)).purchases
    expect(rest.map((p: any) => p.id)).not.toContain(firstPage[0].id)
    expect(ok(await api.get(`/purchases?customerId=${customers[1]!.id}`)).purchases.map((p: any) => p.id)).toEqual([
      purchases[1].id
    ])

    const updated = ok(await api.patch(`/purchases/${purchases[0].id}`, { autoPayment: true }))
    expect(updated).toMatchObject({ updated: true, purchase: { autoPayment: true } })
    expectError(await api.patch(`/purchases/${purchases[0].id}`, { autoPayment: "yes" }), 400, "validation_failed")
    expectError(await api.patch(`/purchases/${purchases[0].id}`, {}), 400, "validation_failed")
  })

  it("hides another organisation's purchases behind 404", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    expectError(await otherApi.get(`/purchases/${purchase.id}`), 404, "purchase_not_found")
    expectError(await otherApi.patch(`/purchases/${purchase.id}`, { autoPayment: true }), 404, "purchase_not_found")
    expectError(await otherApi.post(`/purchases/${purchase.id}/cancel`), 404, "purchase_not_found")
    expect(ok(await otherApi.get("/purchases")).purchases).toEqual([])
    expectError(await otherApi.post("/purchases", { customerId: customer.id, planId: plan.id }), 404, "customer_not_found")
    expectError(await api.get("/purchases/pur_missing"), 404, "purchase_not_found")
    expectError(await app.request("GET", "/purchases"), 401, "api_key_refused")
  })
})

describe("the purchase CLI", () => {
  it("creates, updates and cancels a purchase", async () => {
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 3 }])
    const customer = await makeCustomer(api, { externalId: "cli-buyer" })
    const org = ["--json", "--org", acme.organizationId]
    const created = await app.cli(["purchase", "create", "--external-id", "cli-buyer", "--plan", plan.id, ...org])
    expect(created.code, created.stderr).toBe(0)
    expect(created.json.purchase).toMatchObject({ customerId: customer.id, planId: plan.id, status: "ACTIVE", cost: 6 })
    const id = created.json.purchase.id
    const updated = await app.cli(["purchase", "update", id, "--auto-payment", "on", ...org])
    expect(updated.json.purchase.autoPayment).toBe(true)
    const cancelled = await app.cli(["purchase", "cancel", id, ...org])
    expect(cancelled.json.purchase.status).toBe("CANCELLED")
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.map((i: any) => i.status)).toEqual(["OPEN"])
  })
})

describe("authentication on every billing route", () => {
  it.each([
    ["POST", "/purchases"],
    ["GET", "/purchases"],
    ["GET", "/purchases/pur_x"],
    ["PATCH", "/purchases/pur_x"],
    ["POST", "/purchases/pur_x/cancel"],
    ["GET", "/customers/cus_x/balances"],
    ["GET", "/customers/ext/x/plan"],
    ["PUT", "/customers/cus_x/wallet/alert"],
    ["GET", "/customers/cus_x/wallet/ledger"],
    ["PUT", "/customers/cus_x/recurring-grant"],
    ["POST", "/customers/cus_x/units/adjust"],
    ["POST", "/customers/ext/x/composites/adjust"],
    ["GET", "/invoices"],
    ["GET", "/invoices/inv_x"],
    ["POST", "/invoices/inv_x/pay-link"],
    ["GET", "/payments"],
    ["GET", "/payments/pay_x"],
    ["GET", "/taxes"],
    ["POST", "/taxes"],
    ["GET", "/taxes/tax_x"],
    ["PATCH", "/taxes/tax_x"],
    ["GET", "/customers/cus_x/members"],
    ["POST", "/customers/cus_x/members"],
    ["PATCH", "/customers/cus_x/members/mem_x"],
    ["DELETE", "/customers/cus_x/members/mem_x"],
    ["POST", "/portal/token"]
  ])("%s %s without a key is 401 in the envelope", async (method, path) => {
    const body = method === "GET" ? {} : { body: {} }
    expectError(await app.request(method, path, body), 401, "api_key_refused")
    expectError(await app.request(method, path, { key: "sk_wrong", ...body }), 401, "api_key_refused")
  })
})

describe("cancel after a renewal", () => {
  it("cancelling keeps every invoice already issued, earlier cycles and the current one, and adds the final USAGE invoice", async () => {
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // A signal is billed in the cycle holding its moment, and no moment may be ahead of the clock, so usage
    // reaches a second cycle only once the first has ended: the purchase is moved 31 days back (a purchase
    // cannot be bought in the past), so its first cycle ends at most now and a signal of now is the second's.
    const start = new Date(new Date(purchase.currentPeriodStart).getTime() - 31 * 86_400_000)
    const end = cycleStart(start, 1)
    await query(app, `UPDATE purchases SET billing_date = $3, period_start = $3, period_end = $4 WHERE organization_id = $1 AND id = $2`, [
      acme.organizationId,
      purchase.id,
      start,
      end
    ])
    await query(app, `UPDATE invoices SET period_start = $3, period_end = $4 WHERE organization_id = $1 AND purchase_id = $2`, [
      acme.organizationId,
      purchase.id,
      start,
      end
    ])
    await meterUnit(customer.id, unit.agentKey, 3, new Date(end.getTime() - 1000)) // 1 prepaid, 2 in arrears at 2 each
    // Renews every purchase of this file's database due by now: only this one.
    expect(await runCycles(app, new Date())).toBe(1)
    await meterUnit(customer.id, unit.agentKey, 2.5) // 1 prepaid, 1.5 in arrears
    const before = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(before.map((i: any) => [i.kind, i.status, i.total])).toEqual([["PLAN", "OPEN", 2], ["USAGE", "OPEN", 4], ["PLAN", "OPEN", 2]])

    ok(await api.post(`/purchases/${purchase.id}/cancel`))

    const after = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(after.map((i: any) => [i.id, i.kind, i.status, i.total])).toEqual([
      ...before.map((i: any) => [i.id, i.kind, "OPEN", i.total]),
      [expect.any(String), "USAGE", "OPEN", 3]
    ])
  })
})
