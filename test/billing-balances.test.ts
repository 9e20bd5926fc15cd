import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Organizations } from "../src/organizations/Organizations.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import {
  buy,
  type Client,
  clientOf,
  expectError,
  makeComposite,
  makeCredit,
  makeCustomer,
  makeOutcome,
  makePlan,
  makeUnit,
  ok
} from "./billing-support.ts"

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

describe("balances and current plan", () => {
  it("shows empty collections and a zero wallet without a plan", async () => {
    const customer = await makeCustomer(api, { externalId: "no-plan" })
    const expected = {
      customerId: customer.id,
      currency: { code: "USD", rateUsd: 1 },
      hasPlan: false,
      wallet: { balance: 0 },
      credits: [],
      outcomes: [],
      units: [],
      composites: []
    }
    const response = await api.get(`/customers/${customer.id}/balances`)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Customer balances" })
    expect(ok(response)).toEqual(expected)
    expect(ok(await api.get("/customers/ext/no-plan/balances"))).toEqual(expected)
    expect(ok(await api.get(`/customers/${customer.id}/plan`))).toEqual({
      customerId: customer.id,
      currency: { code: "USD", rateUsd: 1 },
      plan: null
    })
    expect(ok(await api.get("/customers/ext/no-plan/plan")).plan).toBeNull()
  })

  it("shows every kind of balance and the current plan at once after a purchase", async () => {
    const credit = await makeCredit(api)
    const outcome = await makeOutcome(api)
    const unit = await makeUnit(api, { flatPrice: 1 })
    const composite = await makeComposite(api, 4, [credit.id])
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 200 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 3 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }
    ], { priceAdjustment: -0.5 })
    const customer = await makeCustomer(api, { externalId: "full-plan" })
    const purchase = await buy(api, customer.id, plan.id)

    const balances = ok(await api.get("/customers/ext/full-plan/balances"))
    expect(balances).toEqual({
      customerId: customer.id,
      currency: { code: "USD", rateUsd: 1 },
      hasPlan: true,
      wallet: { balance: 0 },
      credits: [{ creditId: credit.id, agentKey: credit.agentKey, creditName: credit.name, granted: 200, used: 0, remaining: 200 }],
      outcomes: [{
        outcomeId: outcome.id,
        outcomeName: outcome.name,
        granted: 3,
        used: 0,
        remaining: 3,
        steps: [{ id: expect.any(String), name: "draft", agentKey: `${outcome.agentKey}-step` }]
      }],
      units: [{ unitId: unit.id, agentKey: unit.agentKey, unitName: unit.name, granted: 0, used: 0, remaining: 0 }],
      composites: [{ compositeId: composite.id, refId: composite.refId, name: composite.name, granted: 2, used: 0, remaining: 2, originalGranted: 2 }]
    })

    const current = ok(await api.get(`/customers/${customer.id}/plan`))
    expect(current).toEqual({
      customerId: customer.id,
      currency: { code: "USD", rateUsd: 1 },
      plan: {
        purchaseId: purchase.id,
        planId: plan.id,
        planName: plan.name,
        planType: "BUNDLE",
        planKind: "FLAT_PRICE",
        seatScope: "CUSTOMER",
        billingCycle: "MONTHLY",
        // 200 * 0.0125 + 3 * 0.0125 + 2 * 4 - 0.5
        cost: 10.0375,
        status: "ACTIVE",
        billingDate: purchase.currentPeriodStart,
        spendingLimit: 0,
        spentThisCycle: 0,
        meters: { wallet: false, credit: true, outcome: true, unit: true }
      }
    })
  })

  it("shows reservedBalance only where the workspace enabled the Reserved Wallet", async () => {
    const tenant = await app.tenant("Reserved")
    const client = clientOf(app, tenant)
    const customer = await makeCustomer(client)
    expect(ok(await client.get(`/customers/${customer.id}/balances`)).wallet).toEqual({ balance: 0 })
    await app.run(Effect.flatMap(Organizations, (orgs) => orgs.updateSettings(tenant.organizationId, { reservedWalletEnabled: true })))
    expect(ok(await client.get(`/customers/${customer.id}/balances`)).wallet).toEqual({ balance: 0, reservedBalance: 0 })
  })

  it("answers 404 for unknown and other organisations' customers, 400 for a malformed externalId", async () => {
    const customer = await makeCustomer(api, { externalId: "mine-only" })
    for (const path of ["balances", "plan"]) {
      expectError(await otherApi.get(`/customers/${customer.id}/${path}`), 404, "customer_not_found")
      expectError(await otherApi.get(`/customers/ext/mine-only/${path}`), 404, "customer_not_found")
      expectError(await api.get(`/customers/cus_nope/${path}`), 404, "customer_not_found")
      expectError(await api.get(`/customers/ext/bad_id/${path}`), 400, "validation_failed")
      expectError(await app.request("GET", `/customers/${customer.id}/${path}`), 401, "api_key_refused")
    }
  })
})

describe("wallet alert, ledger and recurring grant", () => {
  it("sets and clears the low-balance alert, shown on the ledger", async () => {
    const customer = await makeCustomer(api, { externalId: "alerted" })
    const set = await api.put(`/customers/${customer.id}/wallet/alert`, { threshold: 12.75 })
    expect(set.body.statusDetail.message).toBe("Low balance alert set.")
    expect(ok(set)).toEqual({ lowBalanceAlertUsd: 12.75 })
    expect(ok(await api.get(`/customers/${customer.id}/wallet/ledger`))).toEqual({
      customerId: customer.id,
      balance: 0,
      lowBalanceAlertUsd: 12.75,
      entries: []
    })
    expect(ok(await api.put("/customers/ext/alerted/wallet/alert", { threshold: 0 }))).toEqual({ lowBalanceAlertUsd: 0 })
    expect(ok(await api.put(`/customers/${customer.id}/wallet/alert`, { threshold: null }))).toEqual({ lowBalanceAlertUsd: null })
  })

  it.each([[{ threshold: -0.01 }], [{}], [{ threshold: "5" }], [{ threshold: 5, extra: true }]])(
    "refuses alert body %j with 400",
    async (body) => {
      const customer = await makeCustomer(api)
      expectError(await api.put(`/customers/${customer.id}/wallet/alert`, body), 400, "validation_failed")
    }
  )

  it("refuses the alert for archived (409), unknown and foreign (404) customers", async () => {
    const customer = await makeCustomer(api)
    expectError(await otherApi.put(`/customers/${customer.id}/wallet/alert`, { threshold: 1 }), 404, "customer_not_found")
    expectError(await api.put("/customers/cus_nope/wallet/alert", { threshold: 1 }), 404, "customer_not_found")
    ok(await api.del(`/customers/${customer.id}`))
    expectError(await api.put(`/customers/${customer.id}/wallet/alert`, { threshold: 1 }), 409, "customer_archived")
    expectError(await otherApi.get(`/customers/${customer.id}/wallet/ledger`), 404, "customer_not_found")
  })

  it("pages through the ledger oldest first", async () => {
    const customer = await makeCustomer(api)
    for (const delta of [1, 2, 3]) ok(await api.post(`/customers/${customer.id}/wallet/adjust`, { delta }))
    const page = ok(await api.get(`/customers/${customer.id}/wallet/ledger?limit=2`))
    expect(page.balance).toBe(6)
    expect(page.entries.map((e: any) => e.delta)).toEqual([1, 2])
    const next = ok(await api.get(`/customers/${customer.id}/wallet/ledger?cursor=${page.entries[1].id}`))
    expect(next.entries.map((e: any) => [e.delta, e.balanceAfter, e.usageLogId])).toEqual([[3, 6, null]])
  })

  it("validates the recurring grant and answers its twin by externalId", async () => {
    const customer = await makeCustomer(api, { externalId: "granted" })
    expectError(await api.put(`/customers/${customer.id}/recurring-grant`, { kind: "credit", quantity: 1 }), 400, "validation_failed")
    expectError(await api.put(`/customers/${customer.id}/recurring-grant`, { kind: "wallet", quantity: -1 }), 400, "validation_failed")
    expectError(await api.put(`/customers/${customer.id}/recurring-grant`, { kind: "wallet" }), 400, "validation_failed")
    expectError(await otherApi.put(`/customers/${customer.id}/recurring-grant`, { kind: "wallet", quantity: 1 }), 404, "customer_not_found")
    expect(ok(await api.put("/customers/ext/granted/recurring-grant", { kind: "wallet", quantity: 3 }))).toEqual({
      customerId: customer.id,
      recurringGrant: { kind: "wallet", quantity: 3 }
    })
  })

  it("shows balances from the CLI", async () => {
    const customer = await makeCustomer(api)
    const shown = await app.cli(["balance", "show", customer.id, "--json", "--org", acme.organizationId])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.json).toMatchObject({ customerId: customer.id, hasPlan: false, wallet: { balance: 0 } })
  })
})

describe("wallet changes and webhook events", () => {
  it("writes a wallet.balance.update for every wallet move, and a drop when the alert level is crossed", async () => {
    const tenant = await app.tenant("Hooks")
    const client = clientOf(app, tenant)
    await app.run(Effect.flatMap(WebhookEndpoints, (endpoints) =>
      endpoints.add(tenant.organizationId, { url: "https://example.com/hook" })))
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 5 }])
    const customer = await makeCustomer(client)
    ok(await client.put(`/customers/${customer.id}/wallet/alert`, { threshold: 3 }))
    await buy(client, customer.id, plan.id)
    ok(await client.post(`/customers/${customer.id}/wallet/adjust`, { delta: -4 }))
    expectError(await client.post(`/customers/${customer.id}/credits/adjust`, { agentKey: "none", delta: 1 }), 422, "not_on_plan")

    const events = await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ body: string }>`SELECT body FROM webhook_events
        WHERE organization_id = ${tenant.organizationId} ORDER BY id`).pipe(Effect.orDie))
    const bodies = events.map((row) => (typeof row.body === "string" ? JSON.parse(row.body) : row.body))
    expect(bodies.map((b: any) => [b.event_type, b.data.source, b.data.delta, b.data.current_balance])).toEqual([
      ["wallet.balance.update", "PURCHASE", 5, 5],
      ["wallet.balance.update", "ADJUSTMENT", -4, 1],
      ["wallet.balance.drop", "ADJUSTMENT", -4, 1]
    ])
    expect(bodies[0].data).toMatchObject({ customer_id: customer.id, previous_balance: 0, usage_log_id: null })
  })

  it("moves the Reserved Wallet only where enabled, floored at zero, with no ledger row and no webhook event", async () => {
    const tenant = await app.tenant("Reserve")
    const client = clientOf(app, tenant)
    await app.run(Effect.flatMap(WebhookEndpoints, (endpoints) =>
      endpoints.add(tenant.organizationId, { url: "https://example.com/hook" })))
    const customer = await makeCustomer(client)
    const reserve = (delta: number, idempotencyKey?: string) =>
      client.post(`/customers/${customer.id}/wallet/adjust`, { delta, wallet: "RESERVED", ...(idempotencyKey ? { idempotencyKey } : {}) })

    expectError(await reserve(10), 422, "reserved_wallet_disabled")
    await app.run(Effect.flatMap(Organizations, (orgs) => orgs.updateSettings(tenant.organizationId, { reservedWalletEnabled: true })))
    expect(ok(await reserve(10, "reserve-1")).remaining).toBe(10)
    const replay = ok(await reserve(10, "reserve-1"))
    expect(replay).toMatchObject({ replayed: true, remaining: 10 })
    expect(ok(await reserve(-25)).remaining).toBe(0)
    expect(ok(await reserve(2.5)).remaining).toBe(2.5)
    expectError(await client.post(`/customers/${customer.id}/wallet/adjust`, { delta: 1, wallet: "SAVINGS" }), 400, "validation_failed")

    expect(ok(await client.get(`/customers/${customer.id}/balances`)).wallet).toEqual({ balance: 0, reservedBalance: 2.5 })
    expect(ok(await client.get(`/customers/${customer.id}/wallet/ledger`)).entries ?? []).toEqual([])
    const events = await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`SELECT id FROM webhook_events WHERE organization_id = ${tenant.organizationId}`).pipe(Effect.orDie))
    expect(events).toEqual([])
  })
})
