/**
 * An archived customer is read-only on every write route (409 in the
 * envelope, nothing written), through the one check every write path shares
 * (`ensureActive` in src/customers/Customer.ts). The deliberate exceptions,
 * balance adjustments and cancelling a purchase, still work.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"

let app: TestApp
let acme: Tenant
let api: Client
let customer: any
let member: any
let purchase: any
let unit: any

let plan: any

/** A customer with a member and a purchase of `plan`, then archived. */
const archivedCustomer = async (externalId: string) => {
  const customer = await makeCustomer(api, { externalId })
  const member = ok(await api.post(`/customers/${customer.id}/members`, { email: "ann@example.com", name: "Ann" }), 201).member
  const purchase = await buy(api, customer.id, plan.id)
  ok(await api.del(`/customers/${customer.id}`))
  return { customer, member, purchase }
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
  unit = await makeUnit(api, { flatPrice: 1 })
  plan = await makePlan(app, acme, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 5 },
    { type: "WALLET", billingMode: "ADVANCE", amount: 3 }
  ])
  ;({ customer, member, purchase } = await archivedCustomer("gone-1"))
})
afterAll(() => app.close())

describe("an archived customer", () => {
  const writes: Array<[string, (api: Client) => Promise<any>]> = [
    ["PATCH /customers/{id}", (api) => api.patch(`/customers/${customer.id}`, { name: "Renamed" })],
    ["POST /customers/{id}/members", (api) => api.post(`/customers/${customer.id}/members`, { email: "bob@example.com" })],
    ["PATCH /customers/{id}/members/{memberId}", (api) => api.patch(`/customers/${customer.id}/members/${member.id}`, { role: "ADMIN" })],
    ["DELETE /customers/{id}/members/{memberId}", (api) => api.del(`/customers/${customer.id}/members/${member.id}`)],
    ["POST /purchases", (api) => api.post("/purchases", { customerId: customer.id, planId: purchase.planId })],
    ["PATCH /purchases/{id}", (api) => api.patch(`/purchases/${purchase.id}`, { autoPayment: true })],
    ["PUT /customers/{id}/wallet/alert", (api) => api.put(`/customers/${customer.id}/wallet/alert`, { threshold: 5 })],
    ["PUT /customers/{id}/recurring-grant", (api) => api.put(`/customers/${customer.id}/recurring-grant`, { kind: "wallet", quantity: 2 })],
    ["POST /signal/unit", (api) => api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey })]
  ]

  it.each(writes)("refuses %s with 409", async (_, send) => {
    expectError(await send(api), 409, "customer_archived")
  })

  it("kept everything as it was", async () => {
    expect(ok(await api.get(`/customers/${customer.id}`)).customer).toMatchObject({ name: customer.name })
    expect(ok(await api.get(`/customers/${customer.id}/members`)).members).toEqual([member])
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toMatchObject({ status: "ACTIVE", autoPayment: false })
    const wallet = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(wallet).toMatchObject({ balance: 3, lowBalanceAlertUsd: null })
  })

  it("still takes a balance adjustment (answered customerArchived: true) and a purchase cancel", async () => {
    // A customer of its own: the test above reads the first one as the refused writes left it.
    const { customer, purchase } = await archivedCustomer("gone-2")
    expect(ok(await api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 1 }))).toMatchObject({ customerArchived: true, remaining: 4 })
    expect(ok(await api.post(`/purchases/${purchase.id}/cancel`)).purchase.status).toBe("CANCELLED")
  })
})
