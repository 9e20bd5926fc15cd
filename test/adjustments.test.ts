import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"
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
let credit: any
let arrearCredit: any
let outcome: any
let unit: any
let composite: any
let plan: { id: string }

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  api = clientOf(app, acme)
  otherApi = clientOf(app, other)
  credit = await makeCredit(api)
  arrearCredit = await makeCredit(api)
  outcome = await makeOutcome(api)
  unit = await makeUnit(api, { flatPrice: 1 })
  composite = await makeComposite(api, 3, [credit.id])
  plan = await makePlan(app, acme, [
    { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 },
    { type: "CREDIT", billingMode: "ARREAR", creditId: arrearCredit.id },
    { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 5 },
    { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 },
    { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 3 },
    { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
  ])
})
afterAll(() => app.close())

/** A customer on the plan. */
const customerOnPlan = async (extra: Record<string, unknown> = {}) => {
  const customer = await makeCustomer(api, extra)
  await buy(api, customer.id, plan.id)
  return customer
}

const balancesOf = async (customerId: string) => ok(await api.get(`/customers/${customerId}/balances`))

describe("adjusting prepaid balances", () => {
  it("grants and claws back credits, floored at zero", async () => {
    const customer = await customerOnPlan()
    const granted = await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 50, notes: "goodwill" })
    expect(granted.body.statusDetail.message).toBe("Balance adjusted")
    const result = ok(granted)
    expect(result).toEqual({
      adjusted: true,
      replayed: false,
      adjustedAt: expect.any(String),
      remaining: 150,
      customerArchived: false,
      floored: false,
      appliedDelta: 50
    })
    expect((await balancesOf(customer.id)).credits[0]).toMatchObject({ granted: 150, used: 0, remaining: 150 })
    const clawed = ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: -1000 }))
    expect(clawed).toMatchObject({ remaining: 0, floored: true, appliedDelta: -150 })
    expect((await balancesOf(customer.id)).credits[0]).toMatchObject({ granted: 0, remaining: 0 })
  })

  it("adjusts an outcome by a step's key, never by the outcome's own key", async () => {
    const customer = await customerOnPlan()
    const stepKey = outcome.steps?.[0]?.agentKey ?? `${outcome.agentKey}-step`
    expect(ok(await api.post(`/customers/${customer.id}/outcomes/adjust`, { agentKey: stepKey, delta: 2 })).remaining).toBe(7)
    expectError(await api.post(`/customers/${customer.id}/outcomes/adjust`, { agentKey: outcome.agentKey, delta: 2 }), 422, "not_on_plan")
    expect((await balancesOf(customer.id)).outcomes[0]).toMatchObject({ granted: 7, remaining: 7 })
  })

  it("adjusts units by fractions and composites by refId", async () => {
    const customer = await customerOnPlan()
    expect(ok(await api.post(`/customers/${customer.id}/units/adjust`, { agentKey: unit.agentKey, delta: 2.25 })).remaining).toBe(12.25)
    expect(ok(await api.post(`/customers/${customer.id}/composites/adjust`, { agentKey: composite.refId, delta: -1 })).remaining).toBe(2)
    const balances = await balancesOf(customer.id)
    expect(balances.units[0]).toMatchObject({ granted: 12.25, remaining: 12.25 })
    expect(balances.composites[0]).toMatchObject({
      compositeId: composite.id,
      refId: composite.refId,
      granted: 2,
      used: 0,
      remaining: 2,
      originalGranted: 3
    })
  })

  it("moves the wallet below zero and records it in the ledger", async () => {
    const customer = await customerOnPlan({ externalId: "wallet-adjust" })
    const result = ok(await api.post("/customers/ext/wallet-adjust/wallet/adjust", { delta: -7.5, notes: "refund reversal" }))
    expect(result.remaining).toBe(-2.5)
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.balance).toBe(-2.5)
    expect(ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.notes])).toEqual([
      ["PURCHASE_GRANT", 5, 5, null],
      ["ADJUSTMENT", -7.5, -2.5, "refund reversal"]
    ])
  })

  it("adjusts an archived customer's balance and says so", async () => {
    const customer = await customerOnPlan()
    ok(await api.del(`/customers/${customer.id}`))
    const result = ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 1 }))
    expect(result).toMatchObject({ adjusted: true, customerArchived: true, remaining: 101 })
  })

  it.each([
    ["an ARREAR component", () => ({ agentKey: arrearCredit.agentKey, delta: 5 }), "not_prepaid"],
    ["an unknown agentKey", () => ({ agentKey: "no-such-key", delta: 5 }), "not_on_plan"],
    ["a unit key on the credits route", () => ({ agentKey: unit.agentKey, delta: 5 }), "not_on_plan"]
  ])("refuses %s with 422 and writes nothing", async (_, body, code) => {
    const customer = await customerOnPlan()
    const before = await balancesOf(customer.id)
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, body()), 422, code as ErrorCode)
    expect(await balancesOf(customer.id)).toEqual(before)
  })

  it("refuses a customer without an active plan with 422", async () => {
    const customer = await makeCustomer(api)
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 5 }), 422, "no_active_plan")
  })

  it.each([
    ["credits", { agentKey: "k", delta: 0 }],
    ["credits", { agentKey: "k", delta: 1.5 }],
    ["credits", { agentKey: "k", delta: 10_000_001 }],
    ["units", { agentKey: "k", delta: -10_000_000.5 }],
    ["credits", { agentKey: "k", delta: "5" }],
    ["credits", { agentKey: "", delta: 5 }],
    ["credits", { delta: 5 }],
    ["credits", { agentKey: "k" }],
    ["credits", { agentKey: "k", delta: 5, notes: "n".repeat(201) }],
    ["credits", { agentKey: "k", delta: 5, idempotencyKey: "" }],
    ["credits", { agentKey: "k", delta: 5, idempotencyKey: "k".repeat(256) }],
    ["credits", { agentKey: "k", delta: 5, price: 1 }],
    ["composites", { agentKey: "k", delta: 0.5 }],
    ["wallet", { delta: 0 }],
    ["wallet", {}]
  ])("answers a bad %s body %j with 400", async (endpoint, body) => {
    const customer = await customerOnPlan()
    expectError(await api.post(`/customers/${customer.id}/${endpoint}/adjust`, body), 400, "validation_failed")
  })

  it("answers 404 for unknown customers and other organisations' customers, 400 for a malformed externalId", async () => {
    const customer = await customerOnPlan({ externalId: "adj-ext" })
    expectError(await api.post("/customers/cus_nope/credits/adjust", { agentKey: credit.agentKey, delta: 1 }), 404, "customer_not_found")
    expectError(await otherApi.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 1 }), 404, "customer_not_found")
    expectError(await otherApi.post("/customers/ext/adj-ext/wallet/adjust", { delta: 1 }), 404, "customer_not_found")
    expectError(await api.post("/customers/ext/bad_ext/wallet/adjust", { delta: 1 }), 400, "validation_failed")
    expectError(await app.request("POST", `/customers/${customer.id}/wallet/adjust`, { body: { delta: 1 } }), 401, "api_key_refused")
    expect(ok(await api.post("/customers/ext/adj-ext/credits/adjust", { agentKey: credit.agentKey, delta: 1 })).remaining).toBe(101)
  })
})

describe("idempotency keys", () => {
  it("replays the same request without adjusting again, with the original adjustedAt and the current remaining", async () => {
    const customer = await customerOnPlan()
    const body = { agentKey: credit.agentKey, delta: 10, idempotencyKey: "grant-1" }
    const first = ok(await api.post(`/customers/${customer.id}/credits/adjust`, body))
    expect(first).toMatchObject({ adjusted: true, replayed: false, remaining: 110 })
    ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 5 }))

    const again = await api.post(`/customers/${customer.id}/credits/adjust`, body)
    const replay = ok(again)
    expect(again.body.statusDetail.message).toMatch(/^Already processed/)
    expect(replay).toEqual({
      adjusted: false,
      replayed: true,
      adjustedAt: first.adjustedAt,
      remaining: 115,
      customerArchived: false,
      floored: false,
      appliedDelta: 10
    })
    expect((await balancesOf(customer.id)).credits[0].remaining).toBe(115)
  })

  it("refuses the same key with a different request (amount, customer or entitlement) with 422", async () => {
    const customer = await customerOnPlan()
    const otherCustomer = await customerOnPlan()
    ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 10, idempotencyKey: "k-diff" }))
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 11, idempotencyKey: "k-diff" }), 422, "idempotency_key_reused")
    expectError(await api.post(`/customers/${otherCustomer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 10, idempotencyKey: "k-diff" }), 422, "idempotency_key_reused")
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: arrearCredit.agentKey, delta: 10, idempotencyKey: "k-diff" }), 422, "idempotency_key_reused")
    expect((await balancesOf(customer.id)).credits[0].remaining).toBe(110)
    expect((await balancesOf(otherCustomer.id)).credits[0].remaining).toBe(100)
  })

  it("keeps keys apart per endpoint and per workspace", async () => {
    const customer = await customerOnPlan()
    ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 1, idempotencyKey: "shared" }))
    const units = ok(await api.post(`/customers/${customer.id}/units/adjust`, { agentKey: unit.agentKey, delta: 1, idempotencyKey: "shared" }))
    expect(units).toMatchObject({ adjusted: true, replayed: false, remaining: 11 })
    const wallet = ok(await api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 1, idempotencyKey: "shared" }))
    expect(wallet).toMatchObject({ adjusted: true, replayed: false, remaining: 6 })
  })

  it("never uses up the key of a failed adjustment", async () => {
    const customer = await customerOnPlan()
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: "nope", delta: 3, idempotencyKey: "retry-me" }), 422, "not_on_plan")
    expectError(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 0, idempotencyKey: "retry-me" }), 400, "validation_failed")
    const result = ok(await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta: 3, idempotencyKey: "retry-me" }))
    expect(result).toMatchObject({ adjusted: true, replayed: false, remaining: 103 })
  })

  it("says a claw-back was floored, with the delta applied, on the first answer and on its replays", async () => {
    const customer = await customerOnPlan()
    const body = { agentKey: unit.agentKey, delta: -12.5, idempotencyKey: "claw-floored" }
    const first = ok(await api.post(`/customers/${customer.id}/units/adjust`, body))
    expect(first).toMatchObject({ adjusted: true, remaining: 0, floored: true, appliedDelta: -10 })
    ok(await api.post(`/customers/${customer.id}/units/adjust`, { agentKey: unit.agentKey, delta: 4 }))
    const replay = ok(await api.post(`/customers/${customer.id}/units/adjust`, body))
    expect(replay).toMatchObject({ replayed: true, remaining: 4, floored: true, appliedDelta: -10 })
    const partial = ok(await api.post(`/customers/${customer.id}/units/adjust`, { agentKey: unit.agentKey, delta: -1.5 }))
    expect(partial).toMatchObject({ remaining: 2.5, floored: false, appliedDelta: -1.5 })
    const wallet = ok(await api.post(`/customers/${customer.id}/wallet/adjust`, { delta: -50 }))
    expect(wallet).toMatchObject({ remaining: -45, floored: false, appliedDelta: -50 })
  })

  it("says so from the CLI when a claw-back was floored", async () => {
    const customer = await customerOnPlan()
    const args = ["adjust", "credits", customer.id, "--agent-key", credit.agentKey, "--delta", "-5000", "--org", acme.organizationId]
    const json = await app.cli([...args, "--json"])
    expect(json.code, json.stderr).toBe(0)
    expect(json.json).toMatchObject({ remaining: 0, floored: true, appliedDelta: -100 })
    const text = await app.cli(args)
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/floored\s+yes/)
    expect(text.stdout).toMatch(/applied\s+0/)
  })

  it("adjusts twice without a key", async () => {
    const customer = await customerOnPlan()
    const body = { agentKey: credit.agentKey, delta: 4 }
    ok(await api.post(`/customers/${customer.id}/credits/adjust`, body))
    expect(ok(await api.post(`/customers/${customer.id}/credits/adjust`, body)).remaining).toBe(108)
  })

  it("works from the CLI with --idempotency-key", async () => {
    const customer = await customerOnPlan()
    const args = ["adjust", "credits", customer.id, "--agent-key", credit.agentKey, "--delta", "6", "--idempotency-key", "cli-1", "--json", "--org", acme.organizationId]
    const first = await app.cli(args)
    expect(first.code, first.stderr).toBe(0)
    expect(first.json).toMatchObject({ adjusted: true, replayed: false, remaining: 106 })
    const second = await app.cli(args)
    expect(second.json).toMatchObject({ adjusted: false, replayed: true, remaining: 106 })
    const bad = await app.cli(["adjust", "credits", customer.id, "--agent-key", credit.agentKey, "--delta", "0", "--json", "--org", acme.organizationId])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("delta")
  })
})

describe.skipIf(!usesRealPostgres)("concurrent adjustments (needs real PostgreSQL)", () => {
  it("adjusts exactly once for 50 concurrent identical requests with one key", async () => {
    const customer = await customerOnPlan()
    const body = { agentKey: credit.agentKey, delta: 7, idempotencyKey: "storm" }
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => api.post(`/customers/${customer.id}/credits/adjust`, body))
    )
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200))
    const results = responses.map((r) => r.body.result)
    expect(results.filter((r) => r.adjusted)).toHaveLength(1)
    expect(results.filter((r) => r.replayed)).toHaveLength(49)
    expect(new Set(results.map((r) => r.adjustedAt)).size).toBe(1)
    expect((await balancesOf(customer.id)).credits[0].remaining).toBe(107)
  })

  it("keeps every concurrent keyless adjustment", async () => {
    const customer = await customerOnPlan()
    await Promise.all(
      Array.from({ length: 20 }, () => api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 0.25 }))
    )
    expect((await balancesOf(customer.id)).wallet.balance).toBe(10)
  })
})
