/**
 * Spend control (issue 26, parts 2 and 3) end to end over HTTP: the check
 * before spending for each meter, with queued signals not yet priced (the
 * worker runs only when a test drains), its refusals, the entitlements list;
 * holds: made, seen by later checks, settled once by a signal, released,
 * expired (time moved with TestClock), raced on real PostgreSQL; and a check
 * that writes nothing (every table's rows hashed before and after).
 */
import { Effect, TestClock, TestContext } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Entitlements } from "../src/entitlements/Entitlements.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { client, drain as drainIn, expectError, gpt4oBundle, query, sendMany } from "./signals-fixtures.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
const ids: Record<string, string> = {}

const api = () => client(app, acme)
const post = (path: string, body?: unknown) => api().post(path, body)
const get = (path: string) => api().get(path)
const drain = () => drainIn(app)

/** One gpt-4o call of 1,000 input and 500 output tokens: provider cost 0.0075 USD, 1.2 credits of "chat". */
const call = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

/** Row count and digest of every organisation table, for `organizationId`. */
const rowsOf = async (organizationId: string) => {
  const tables = await query<{ tableName: string }>(
    app,
    `SELECT table_name FROM information_schema.columns
     WHERE column_name = 'organization_id' AND table_schema = current_schema()
       AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')
     ORDER BY table_name`
  )
  const digests: Record<string, string> = {}
  for (const { tableName } of tables) {
    const [row] = await query<{ count: string; digest: string | null }>(
      app,
      `SELECT count(*) AS count, md5(string_agg(t::text, ',' ORDER BY t::text)) AS digest
       FROM "${tableName}" t WHERE organization_id = $1`,
      [organizationId]
    )
    digests[tableName] = `${row!.count} ${row!.digest}`
  }
  return digests
}

let seq = 0
/** A customer on the plan (10 chat credits, 5 reports, 10 pages, 10 USD wallet), unless `plan` is false. */
const newCustomer = async (plan = true) => {
  const externalId = `ent-${++seq}`
  const customerId = await api().created("/customers", { name: "Jo", email: `${externalId}@example.com`, externalId }, "customer")
  if (plan) expect((await post("/purchases", { customerId, planId: ids.plan })).status).toBe(201)
  return {
    customerId,
    externalId,
    check: async (body: Record<string, unknown>) => {
      const response = await post("/entitlements/check", { customerId, ...body })
      expect(response.status, JSON.stringify(response.body)).toBe(200)
      return response.body.result
    },
    signal: async (path: string, body: Record<string, unknown>) => {
      const response = await post(path, { customerId, ...body })
      // 202 queued; an outcome completion answers 200 (its billing is queued the same way).
      expect([200, 202], JSON.stringify(response.body)).toContain(response.status)
      return response.body.result.rawId as string
    },
    entitlements: async () => {
      const response = await get(`/customers/${customerId}/entitlements`)
      expect(response.status).toBe(200)
      return response.body.result
    }
  }
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  ids.chat = await api().created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  ids.unsold = await api().created("/credits", { name: "Unsold", agentKey: "unsold", marginPercent: 0, modelBundle: gpt4oBundle }, "credit")
  ids.report = await api().created("/outcomes", {
    name: "Report",
    agentKey: "report",
    marginPercent: 50,
    steps: [{ name: "Draft", agentKey: "draft", modelBundle: gpt4oBundle }]
  }, "outcome")
  ids.pages = await api().created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
  ids.plan = await api().created("/plans", {
    name: "Spend",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: ids.chat, quantity: 10 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: ids.report, quantity: 5 },
      { type: "UNIT", billingMode: "ADVANCE", unitId: ids.pages, quantity: 10 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
    ]
  }, "plan")
})
afterAll(() => app.close())

const none = { reason: null, reservationId: null, expiresAt: null, held: 0 }

describe("POST /entitlements/check", () => {
  it("CREDIT: remaining, the queued signals' pending credits, and the cost, exactly; refused past the allowance", async () => {
    const jo = await newCustomer()
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toEqual({
      customerId: jo.customerId,
      meter: "CREDIT",
      allowed: true,
      remaining: 10,
      pending: 0,
      estimatedCost: 1.2,
      ...none
    })
    await jo.signal("/signal/credit", { agentKey: "chat", usage: call })
    await jo.signal("/signal/credit", { externalId: jo.externalId, customerId: undefined, agentKey: "chat", usage: call })
    // Queued, not priced: remaining is the committed 10, pending the 2.4 they will take.
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({
      allowed: true,
      remaining: 10,
      pending: 2.4,
      estimatedCost: 1.2
    })
    // 7.6 left after the queue: 7 calls (8.4 credits) do not fit, 6 (7.2) do.
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: { ...call, inputTokens: 7000, outputTokens: 3500 } }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", remaining: 10, pending: 2.4, estimatedCost: 8.4 })
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: { ...call, inputTokens: 6000, outputTokens: 3000 } }))
      .toMatchObject({ allowed: true, estimatedCost: 7.2 })
    await drain()
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({
      allowed: true,
      remaining: 7.6,
      pending: 0
    })
  })

  it("OUTCOME (by a step's key) and UNIT count queued completions and units", async () => {
    const jo = await newCustomer()
    await jo.signal("/signal/outcome", { agentKey: "draft", runId: "r1", usage: call })
    await jo.signal("/signal/outcome/complete", { runId: "r1" })
    expect(await jo.check({ meter: "OUTCOME", agentKey: "draft", quantity: 4 })).toMatchObject({
      allowed: true,
      remaining: 5,
      pending: 1,
      estimatedCost: 4,
      reason: null
    })
    expect(await jo.check({ meter: "OUTCOME", agentKey: "draft", quantity: 5 })).toMatchObject({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE"
    })
    await jo.signal("/signal/unit", { agentKey: "pages", quantity: 4 })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 6 })).toMatchObject({
      allowed: true,
      remaining: 10,
      pending: 4,
      estimatedCost: 6
    })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 6.5 })).toMatchObject({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE"
    })
    // One unit when quantity is left out.
    expect(await jo.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ allowed: true, estimatedCost: 1 })
  })

  it("counts queued usage billed in arrears in pending, beside the prepaid part", async () => {
    const lines = await api().created("/units", { name: "Lines", agentKey: "lines", pricingType: "FLAT", flatPrice: 0.25 }, "unit")
    // Pages: 2 prepaid, the overflow in arrears. Lines: in arrears only.
    const plan = await api().created("/plans", {
      name: "Arrears",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "UNIT", billingMode: "ADVANCE", unitId: ids.pages, quantity: 2 },
        { type: "UNIT", billingMode: "ARREAR", unitId: ids.pages },
        { type: "UNIT", billingMode: "ARREAR", unitId: lines }
      ]
    }, "plan")
    const jo = await newCustomer(false)
    expect((await post("/purchases", { customerId: jo.customerId, planId: plan })).status).toBe(201)
    await jo.signal("/signal/unit", { agentKey: "pages", quantity: 5 })
    await jo.signal("/signal/unit", { agentKey: "lines", quantity: 3 })
    // Queued, not priced: 5 pages take the 2 prepaid and 3 in arrears; the 3 lines are all arrears.
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 1 })).toMatchObject({
      allowed: true,
      remaining: 2,
      pending: 5,
      estimatedCost: 1,
      reason: null
    })
    expect(await jo.check({ meter: "UNIT", agentKey: "lines", quantity: 1 })).toMatchObject({
      allowed: true,
      remaining: null,
      pending: 3,
      estimatedCost: 1
    })
    await drain()
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 1 })).toMatchObject({ remaining: 0, pending: 0 })
  })

  it("WALLET: USD at provider cost, queued wallet signals pending, never refused for funds", async () => {
    const jo = await newCustomer()
    await jo.signal("/signal/wallet", { usage: call })
    expect(await jo.check({ meter: "WALLET", usage: call })).toEqual({
      customerId: jo.customerId,
      meter: "WALLET",
      allowed: true,
      remaining: 10,
      pending: 0.0075,
      estimatedCost: 0.0075,
      ...none
    })
    const huge = await jo.check({ meter: "WALLET", usage: { model: "gpt-4o", inputTokens: 10_000_000_000 } })
    expect(huge).toMatchObject({ allowed: true, reason: null, estimatedCost: 25000 })
  })

  it("checks sent together (read in shared statements) are each answered for their own customer and organisation", async () => {
    // Customers 0..3 have used 0..3 calls (1.2 credits each) of their 10; the queue is empty.
    const customers = [await newCustomer(), await newCustomer(), await newCustomer(), await newCustomer()]
    for (const [index, customer] of customers.entries()) {
      for (let n = 0; n < index; n++) await customer.signal("/signal/credit", { agentKey: "chat", usage: call })
    }
    await drain()
    // Another organisation holds the first customer's externalId, and has no credit "chat".
    const globex = await app.tenant("Globex")
    expect((await client(app, globex).post("/customers", {
      name: "Jo",
      email: "jo@globex.example",
      externalId: customers[0]!.externalId
    })).status).toBe(201)
    const asks = Array.from({ length: 48 }, (_, index) => {
      const customer = customers[index % 4]!
      switch (Math.floor(index / 4) % 4) {
        case 0:
          return { who: index % 4, via: api(), body: { customerId: customer.customerId } }
        case 1:
          return { who: index % 4, via: api(), body: { externalId: customer.externalId } }
        case 2:
          return { who: "globex" as const, via: client(app, globex), body: { externalId: customers[0]!.externalId } }
        default:
          return { who: "nobody" as const, via: api(), body: { customerId: "cus_nobody" } }
      }
    })
    const answers = await sendMany(asks.length, asks.length, (index) =>
      asks[index]!.via.post("/entitlements/check", { ...asks[index]!.body, meter: "CREDIT", agentKey: "chat", usage: call }))
    answers.forEach((answer, index) => {
      const { who } = asks[index]!
      if (who === "nobody") return expect(answer.status).toBe(404)
      if (who === "globex") {
        return expect([answer.status, answer.body.statusDetail.message]).toEqual([422, "agentKey chat is not a live credit of this workspace"])
      }
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      expect(answer.body.result).toMatchObject({
        customerId: customers[who]!.customerId,
        allowed: true,
        remaining: [10, 8.8, 7.6, 6.4][who],
        pending: 0
      })
    })
  })

  it("refuses with the signal refusals' names, and answers 404 and 422 as the routes do", async () => {
    const jo = await newCustomer()
    expect(await jo.check({ meter: "CREDIT", agentKey: "unsold", usage: call })).toMatchObject({
      allowed: false,
      reason: "NOT_ON_PLAN",
      remaining: null,
      estimatedCost: null
    })
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: { model: "no-such-model" } })).toMatchObject({
      allowed: false,
      reason: "MODEL_NOT_ENABLED"
    })
    const planless = await newCustomer(false)
    expect(await planless.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ allowed: false, reason: "NO_ACTIVE_PLAN" })
    expect(await planless.check({ meter: "WALLET", usage: call })).toMatchObject({ allowed: false, reason: "NO_ACTIVE_PLAN" })
    const gone = await newCustomer()
    expect((await api().del(`/customers/${gone.customerId}`)).status).toBe(200)
    expect(await gone.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({
      allowed: false,
      reason: "CUSTOMER_ARCHIVED"
    })
    expectError(await post("/entitlements/check", { customerId: "cus_nobody", meter: "WALLET", usage: call }), 404, "customer_not_found")
    expectError(await post("/entitlements/check", { externalId: "nobody", meter: "WALLET", usage: call }), 404, "customer_not_found")
    expectError(await post("/entitlements/check", { customerId: jo.customerId, meter: "UNIT", agentKey: "nope" }), 422, "unknown_target", "nope")
  })

  it("answers 400 naming the field for what the meter does not take, writing nothing", async () => {
    const jo = await newCustomer()
    const before = await rowsOf(acme.organizationId)
    const bad = async (body: Record<string, unknown>, text: string) =>
      expectError(await post("/entitlements/check", { customerId: jo.customerId, ...body }), 400, "validation_failed", text)
    await bad({ meter: "CREDIT", usage: call }, "agentKey")
    await bad({ meter: "CREDIT", agentKey: "chat" }, "usage")
    await bad({ meter: "CREDIT", agentKey: "chat", usage: call, quantity: 1 }, "quantity")
    await bad({ meter: "WALLET", usage: call, agentKey: "chat" }, "agentKey")
    await bad({ meter: "UNIT", agentKey: "pages", usage: call }, "usage")
    await bad({ meter: "OUTCOME", agentKey: "draft", quantity: 1.5 }, "quantity")
    await bad({ meter: "DISK", agentKey: "pages" }, "meter")
    await bad({ meter: "UNIT", agentKey: "pages", price: 1 }, "price")
    await bad({ meter: "UNIT", agentKey: "pages", reserve: { ttlSeconds: 0 } }, "ttlSeconds")
    await bad({ meter: "UNIT", agentKey: "pages", reserve: { ttlSeconds: 3601 } }, "ttlSeconds")
    await bad({ meter: "UNIT", agentKey: "pages", reserve: { ttlSeconds: 60, amount: 1 } }, "amount")
    await bad({ meter: "WALLET", usage: call, reserve: { ttlSeconds: 60, amount: 1, usage: call } }, "reserve")
    expectError(await post("/entitlements/check", { meter: "WALLET", usage: call }), 400, "customer_ref_missing", "customerId or externalId")
    expect(await rowsOf(acme.organizationId)).toEqual(before)
  })

  it("writes nothing: every table's rows hash the same before and after checks of every meter", async () => {
    const jo = await newCustomer()
    await jo.signal("/signal/credit", { agentKey: "chat", usage: call })
    await jo.signal("/signal/wallet", { usage: call })
    const before = await rowsOf(acme.organizationId)
    await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })
    await jo.check({ meter: "OUTCOME", agentKey: "draft" })
    await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 100 })
    await jo.check({ meter: "WALLET", usage: call })
    await jo.entitlements()
    expect(await rowsOf(acme.organizationId)).toEqual(before)
  })
})

describe("GET /customers/{id}/entitlements", () => {
  it("lists every entitlement of the plan with granted, used, remaining, pending and held", async () => {
    const jo = await newCustomer()
    await jo.signal("/signal/credit", { agentKey: "chat", usage: call })
    await drain()
    await jo.signal("/signal/credit", { agentKey: "chat", usage: call })
    await jo.signal("/signal/unit", { agentKey: "pages", quantity: 2 })
    const view = await jo.entitlements()
    expect(view).toMatchObject({ customerId: jo.customerId, hasPlan: true, holds: [] })
    expect(view.entitlements).toEqual([
      { type: "CREDIT", id: ids.chat, name: "Chat", agentKey: "chat", granted: 10, used: 1.2, remaining: 8.8, pending: 1.2, held: 0 },
      { type: "OUTCOME", id: ids.report, name: "Report", agentKey: "report", granted: 5, used: 0, remaining: 5, pending: 0, held: 0 },
      { type: "UNIT", id: ids.pages, name: "Pages", agentKey: "pages", granted: 10, used: 0, remaining: 10, pending: 2, held: 0 },
      { type: "WALLET", id: null, name: "Wallet", agentKey: null, granted: null, used: null, remaining: 10, pending: 0, held: 0 }
    ])
    expectError(await get("/customers/cus_nobody/entitlements"), 404, "customer_not_found")
  })
})

/** A hold's row as the API shows it. */
const holdById = async (id: string) => {
  const response = await get(`/reservations/${id}`)
  expect(response.status).toBe(200)
  return response.body.result
}

describe("holds (reserve)", () => {
  it("an allowed reserving check holds the cost; later checks and the entitlements list see it", async () => {
    const jo = await newCustomer()
    const held = await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call, reserve: { ttlSeconds: 60 } })
    expect(held).toMatchObject({ allowed: true, reason: null, remaining: 10, pending: 0, held: 0, estimatedCost: 1.2 })
    expect(held.reservationId).toMatch(/^rsv_/)
    expect(Date.parse(held.expiresAt)).toBeGreaterThan(Date.now())
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({
      allowed: true,
      remaining: 10,
      held: 1.2
    })
    // 10 - 1.2 held: 8.8 left, so 8 calls (9.6 credits) do not fit.
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: { ...call, inputTokens: 8000, outputTokens: 4000 } }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE" })
    const view = await jo.entitlements()
    expect(view.entitlements[0]).toMatchObject({ type: "CREDIT", remaining: 10, held: 1.2 })
    expect(view.holds).toEqual([expect.objectContaining({
      id: held.reservationId,
      customerId: jo.customerId,
      meter: "CREDIT",
      targetId: ids.chat,
      amount: 1.2,
      status: "HELD"
    })])
    // A quantity of its own, and the wallet's amount.
    const units = await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 9, ttlSeconds: 60 } })
    expect(units).toMatchObject({ allowed: true, estimatedCost: 1 })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 2 })).toMatchObject({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE",
      held: 9
    })
    const wallet = await jo.check({ meter: "WALLET", usage: call, reserve: { amount: 25, ttlSeconds: 60 } })
    expect(wallet).toMatchObject({ allowed: true, remaining: 10 })
    expect(wallet.reservationId).toMatch(/^rsv_/)
    expect(await jo.check({ meter: "WALLET", usage: call })).toMatchObject({ allowed: true, held: 25 })
  })

  it("billing balance show lists the active holds", async () => {
    const jo = await newCustomer()
    const { reservationId } = await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 2.5, ttlSeconds: 600 } })
    const json = await app.cli(["balance", "show", jo.customerId, "--json", "--org", acme.organizationId])
    expect(json.code, json.stderr).toBe(0)
    expect(json.json).toMatchObject({
      customerId: jo.customerId,
      holds: [{ id: reservationId, meter: "UNIT", targetId: ids.pages, amount: 2.5, status: "HELD" }]
    })
    const text = await app.cli(["balance", "show", jo.customerId, "--org", acme.organizationId])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain("Active holds")
    expect(text.stdout).toContain(reservationId)
  })

  it("a refused reserving check holds nothing and answers reservationId null", async () => {
    const jo = await newCustomer()
    const before = await rowsOf(acme.organizationId)
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", quantity: 11, reserve: { ttlSeconds: 60 } })).toMatchObject({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE",
      reservationId: null,
      expiresAt: null
    })
    // The request fits but the amount to hold does not.
    expect(await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 10.5, ttlSeconds: 60 } })).toMatchObject({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE",
      reservationId: null
    })
    expect(await jo.check({ meter: "CREDIT", agentKey: "unsold", usage: call, reserve: { ttlSeconds: 60 } })).toMatchObject({
      allowed: false,
      reason: "NOT_ON_PLAN",
      reservationId: null
    })
    expect(await rowsOf(acme.organizationId)).toEqual(before)
  })

  it("a signal carrying the reservationId settles it once: the real cost charged, the hold released", async () => {
    const jo = await newCustomer()
    const { reservationId } = await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call, reserve: { quantity: 5, ttlSeconds: 600 } })
    // The real call was twice the estimate: 2.4 credits, charged as usual.
    const big = { ...call, inputTokens: 2000, outputTokens: 1000 }
    const first = await jo.signal("/signal/credit", { agentKey: "chat", usage: big, reservationId, idempotencyKey: "call-1" })
    // Queued: its cost is pending and its hold no longer counts (not both).
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({ pending: 2.4, held: 0 })
    // The same signal again (its idempotencyKey): nothing new is queued.
    expect(await jo.signal("/signal/credit", { agentKey: "chat", usage: big, reservationId, idempotencyKey: "call-1" })).toBe(first)
    await drain()
    expect(await holdById(reservationId)).toMatchObject({ status: "SETTLED", signalId: first, usageLogId: expect.stringMatching(/^usg_/) })
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({ remaining: 7.6, pending: 0, held: 0 })
    // Another signal naming the settled hold is priced as usual and settles nothing.
    const second = await jo.signal("/signal/credit", { agentKey: "chat", usage: call, reservationId })
    await drain()
    expect(await holdById(reservationId)).toMatchObject({ status: "SETTLED", signalId: first })
    const [row] = await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      second
    ])
    expect(row!.status).toBe("PROCESSED")
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({ remaining: 6.4 })
    const usage = await get(`/signal/usage-log?customerId=${jo.customerId}`)
    expect(usage.body.result.usageLogs).toHaveLength(2)
  })

  it("a signal the worker refuses leaves the hold it names in place", async () => {
    const jo = await newCustomer()
    const { reservationId } = await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call, reserve: { quantity: 2, ttlSeconds: 600 } })
    // A credit the plan does not sell: accepted at intake, refused by the worker (NOT_ON_PLAN).
    const refused = await jo.signal("/signal/credit", { agentKey: "unsold", usage: call, reservationId })
    await drain()
    const [row] = await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      refused
    ])
    expect(row!.status).toBe("FAILED")
    expect(await holdById(reservationId)).toMatchObject({ status: "HELD", signalId: null })
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: call })).toMatchObject({ remaining: 10, held: 2 })
  })

  it("a hold of another customer, or a malformed reservationId, settles nothing", async () => {
    const jo = await newCustomer()
    const al = await newCustomer()
    const { reservationId } = await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 3, ttlSeconds: 600 } })
    await al.signal("/signal/unit", { agentKey: "pages", reservationId })
    await drain()
    expect(await holdById(reservationId)).toMatchObject({ status: "HELD" })
    expect(await al.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ remaining: 9, held: 0 })
    expectError(await post("/signal/unit", { customerId: al.customerId, agentKey: "pages", reservationId: "nope" }), 400, "validation_failed", "reservationId")
  })

  it("POST /reservations/{id}/release releases early, once; an unknown id is 404", async () => {
    const jo = await newCustomer()
    const { reservationId } = await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 10, ttlSeconds: 600 } })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ allowed: false, held: 10 })
    const released = await post(`/reservations/${reservationId}/release`)
    expect(released.status).toBe(200)
    expect(released.body.result).toMatchObject({ released: true, reservation: { id: reservationId, status: "RELEASED" } })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ allowed: true, held: 0 })
    expect((await post(`/reservations/${reservationId}/release`)).body.result).toMatchObject({
      released: false,
      reservation: { status: "RELEASED" }
    })
    expectError(await post("/reservations/rsv_nothing/release"), 404, "reservation_not_found")
    expectError(await get("/reservations/rsv_nothing"), 404, "reservation_not_found")
  })

  it("an expired hold releases itself (time moved with TestClock)", async () => {
    const jo = await newCustomer()
    const { reservationId, expiresAt } = await jo.check({
      meter: "UNIT",
      agentKey: "pages",
      reserve: { quantity: 10, ttlSeconds: 30 }
    })
    const expiry = Date.parse(expiresAt)
    const at = (millis: number) =>
      app.run(
        Effect.gen(function*() {
          yield* TestClock.setTime(millis)
          const entitlements = yield* Entitlements
          return {
            check: yield* entitlements.check(acme.organizationId, { customerId: jo.customerId, meter: "UNIT", agentKey: "pages" }),
            hold: yield* entitlements.hold(acme.organizationId, reservationId),
            release: yield* entitlements.release(acme.organizationId, reservationId).pipe(Effect.when(() => millis >= expiry))
          }
        }).pipe(Effect.provide(TestContext.TestContext))
      )
    const before = await at(expiry - 1)
    expect(before.check).toMatchObject({ allowed: false, held: expect.anything() })
    expect(before.hold.status).toBe("HELD")
    const after = await at(expiry)
    expect(after.check.allowed).toBe(true)
    expect(after.hold.status).toBe("EXPIRED")
    // Releasing an expired hold changes nothing.
    expect(after.release).toMatchObject({ _tag: "Some", value: { released: false, reservation: { status: "EXPIRED" } } })
  })

  it("a signal priced once its hold has expired settles nothing; one priced a millisecond before settles it", async () => {
    /** The worker prices what is queued with its clock set to `millis` (the hold's expiry is read against it). */
    const drainAt = (millis: number) => {
      const clock = makeSettableClock()
      clock.set(millis)
      return app.run(Effect.flatMap(SignalProcessor, (processor) =>
        Effect.iterate(-1, { while: (handled) => handled !== 0, body: () => processor.runOnce })).pipe(Effect.withClock(clock)))
    }
    const signalStatus = async (id: string) =>
      (await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [acme.organizationId, id]))[0]!.status
    const jo = await newCustomer()
    const late = await jo.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 3, ttlSeconds: 600 } })
    const lateSignal = await jo.signal("/signal/unit", { agentKey: "pages", quantity: 2, reservationId: late.reservationId })
    await drainAt(Date.parse(late.expiresAt))
    // Priced as any signal (2 of the 10 pages); the hold is left as it was, to expire.
    expect(await signalStatus(lateSignal)).toBe("PROCESSED")
    expect(await holdById(late.reservationId)).toMatchObject({ status: "HELD", signalId: null, usageLogId: null })
    expect(await jo.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ remaining: 8, held: 3 })

    const al = await newCustomer()
    const inTime = await al.check({ meter: "UNIT", agentKey: "pages", reserve: { quantity: 3, ttlSeconds: 600 } })
    const inTimeSignal = await al.signal("/signal/unit", { agentKey: "pages", quantity: 2, reservationId: inTime.reservationId })
    await drainAt(Date.parse(inTime.expiresAt) - 1)
    expect(await holdById(inTime.reservationId)).toMatchObject({ status: "SETTLED", signalId: inTimeSignal })
    expect(await al.check({ meter: "UNIT", agentKey: "pages" })).toMatchObject({ remaining: 8, held: 0 })
  })
})

describe.skipIf(!usesRealPostgres)("racing reserving checks (needs real PostgreSQL)", () => {
  it("20 concurrent reserving checks for 10 credits' worth allow exactly 10", async () => {
    const jo = await newCustomer()
    // Each holds 1 credit of the 10.
    const answers = await sendMany(20, 20, () =>
      post("/entitlements/check", {
        customerId: jo.customerId,
        meter: "CREDIT",
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 1000 },
        reserve: { quantity: 1, ttlSeconds: 60 }
      }))
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200))
    const allowed = answers.filter((answer) => answer.body.result.allowed)
    expect(allowed).toHaveLength(10)
    expect(new Set(allowed.map((answer) => answer.body.result.reservationId)).size).toBe(10)
    expect(answers.filter((answer) => !answer.body.result.allowed).every((answer) =>
      answer.body.result.reason === "OUT_OF_ALLOWANCE" && answer.body.result.reservationId === null
    )).toBe(true)
    expect(await jo.check({ meter: "CREDIT", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1 } })).toMatchObject({
      allowed: false,
      held: 10
    })
  })
})
