import { BigDecimal, Effect } from "effect"
import { writeFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Organizations } from "../src/organizations/Organizations.ts"
import { Plans } from "../src/plans/Plans.ts"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
let acme: Tenant
let other: Tenant

const as = (tenant: Tenant) => {
  const client = clientOf(app, tenant)
  return { ...client, patch: (path: string, body: unknown) => client.patch(path, withIds(body)) }
}

let counter = 0
const fresh = (prefix: string) => `${prefix}-${++counter}`

const created = async (response: Promise<{ status: number; body: any }>, field: string) => {
  const answer = await response
  expect(answer.status, JSON.stringify(answer.body)).toBe(201)
  return answer.body.result[field]
}

// gpt-4o at 2.5 / 10 USD per million: 1000 * (50 * 2.5 + 50 * 10) / 100 / 1e6 = 0.00625 per call.
const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
const tiers = [{ upTo: 100, price: 0.5 }, { upTo: 1000, price: 0.25 }, { upTo: null, price: 0.1 }]

interface Catalogue {
  readonly credit: any
  readonly outcome: any
  readonly flat: any
  readonly slab: any
  readonly volume: any
  readonly composite: any
}

const catalogueOf = async (tenant: Tenant): Promise<Catalogue> => {
  const post = as(tenant).post
  const unit = (pricing: Record<string, unknown>) =>
    created(post("/units", { name: fresh("Unit"), agentKey: fresh("unit"), ...pricing }), "unit")
  const credit = await created(
    post("/credits", { name: "Chat", agentKey: fresh("chat"), marginPercent: 20, modelBundle: bundle }),
    "credit"
  )
  const outcome = await created(
    post("/outcomes", {
      name: "Report",
      agentKey: fresh("report"),
      marginPercent: 50,
      steps: [{ name: "Draft", agentKey: fresh("draft"), modelBundle: bundle }]
    }),
    "outcome"
  )
  const flat = await unit({ pricingType: "FLAT", flatPrice: 0.0125 })
  const slab = await unit({ pricingType: "SLAB", tiers })
  const volume = await unit({ pricingType: "VOLUME", tiers })
  const composite = await created(
    post("/composites", { name: "Task", refId: fresh("task"), price: 2.75, entitlements: { unitIds: [flat.id] } }),
    "composite"
  )
  return { credit, outcome, flat, slab, volume, composite }
}

let cat: Catalogue
let otherCat: Catalogue

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  cat = await catalogueOf(acme)
  otherCat = await catalogueOf(other)
})
afterAll(() => app.close())

const wallet = (amount = 20.5) => ({ type: "WALLET", billingMode: "ADVANCE", amount })
// Tables of cases are built before the catalogue exists: "$credit" stands for its credit's id.
const creditAdvance = (quantity: number = 1000) => ({ type: "CREDIT", billingMode: "ADVANCE", creditId: "$credit", quantity })
const creditArrear = () => ({ type: "CREDIT", billingMode: "ARREAR", creditId: "$credit" })

const withIds = (body: unknown) =>
  JSON.parse(JSON.stringify(body).replaceAll("\"$credit\"", JSON.stringify(cat.credit.id)))

const planBody = (overrides: Record<string, unknown> = {}) =>
  withIds({ name: "Pro", description: "for teams", billingCycle: "MONTHLY", entitlements: [creditAdvance()], ...overrides })

const createPlan = (tenant: Tenant, overrides: Record<string, unknown> = {}) =>
  created(as(tenant).post("/plans", planBody(overrides)), "plan")

const costOf = async (...entitlements: Array<Record<string, unknown>>) =>
  (await createPlan(acme, { entitlements })).cost

describe("POST /plans", () => {
  it("creates a plan with every component shape the spec lists", async () => {
    const response = await as(acme).post("/plans", planBody({
      priceAdjustment: -0.25,
      walletFundedArrear: true,
      entitlements: [
        { ...creditAdvance(), rollover: true },
        creditArrear(),
        wallet(),
        { type: "UNIT", billingMode: "ADVANCE", unitId: cat.slab.id, quantity: 1500 },
        { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: cat.outcome.id, quantity: 3 },
        { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: cat.composite.id, quantity: 4 },
        { type: "UNIT", billingMode: "ADVANCE", unitId: cat.flat.id, quantity: 1000 }
      ]
    }))
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Plan created" })
    expect(response.body.result.created).toBe(true)
    const plan = response.body.result.plan
    expect(plan).toMatchObject({
      id: expect.stringMatching(/^plan_/),
      name: "Pro",
      description: "for teams",
      billingCycle: "MONTHLY",
      // 7.5 + 0 + 20.5 + 325 + 0.028125 + 11 + 12.5 - 0.25
      cost: 376.278125,
      priceAdjustment: -0.25,
      walletFundedArrear: true,
      currencyCode: "USD",
      isActive: true
    })
    expect(new Date(plan.createdAt).toISOString()).toBe(plan.createdAt)
    expect(plan.entitlements[0]).toEqual({
      id: expect.any(String),
      type: "CREDIT",
      billingMode: "ADVANCE",
      creditId: cat.credit.id,
      outcomeId: "",
      unitId: "",
      compositeId: "",
      targetName: "Chat",
      quantity: 1000,
      amount: 0,
      rollover: true
    })
    expect(plan.entitlements.map((c: any) => [c.type, c.billingMode, c.targetName, c.quantity, c.amount, c.rollover]))
      .toEqual([
        ["CREDIT", "ADVANCE", "Chat", 1000, 0, true],
        ["CREDIT", "ARREAR", "Chat", 0, 0, false],
        ["WALLET", "ADVANCE", "Wallet", 0, 20.5, false],
        ["UNIT", "ADVANCE", cat.slab.name, 1500, 0, false],
        ["OUTCOME", "ADVANCE", "Report", 3, 0, false],
        ["PRICING_METRIC", "ADVANCE", "Task", 4, 0, false],
        ["UNIT", "ADVANCE", cat.flat.name, 1000, 0, false]
      ])
    // Numbers where the spec says number: 0 where they do not apply, and sent back as they are, they create the same plan.
    const copy = await as(acme).post("/plans", {
      name: "Pro copy",
      billingCycle: "MONTHLY",
      entitlements: plan.entitlements.map(({ id: _, targetName: __, ...component }: any) => component)
    })
    expect(copy.status, JSON.stringify(copy.body)).toBe(201)
    expect(copy.body.result.plan.entitlements.map((c: any) => [c.type, c.billingMode, c.quantity, c.amount]))
      .toEqual(plan.entitlements.map((c: any) => [c.type, c.billingMode, c.quantity, c.amount]))
    const wallets = plan.entitlements.filter((c: any) => c.type === "WALLET")
    expect(wallets[0]).toMatchObject({ creditId: "", outcomeId: "", unitId: "", compositeId: "" })
    const composite = plan.entitlements.find((c: any) => c.type === "PRICING_METRIC")
    expect(composite).toMatchObject({ compositeId: cat.composite.id, creditId: "", unitId: "", outcomeId: "" })
    expect(plan.entitlements.find((c: any) => c.type === "OUTCOME").outcomeId).toBe(cat.outcome.id)
  })

  it("prices each component type to the exact decimal", async () => {
    expect(cat.credit.pricePerCredit).toBe(0.0075)
    expect(cat.outcome.pricePerOutcome).toBe(0.009375)
    expect(await costOf(creditAdvance(1000))).toBe(7.5)
    expect(await costOf(creditAdvance(0.5))).toBe(0.00375)
    expect(await costOf({ type: "OUTCOME", billingMode: "ADVANCE", outcomeId: cat.outcome.id, quantity: 3 })).toBe(0.028125)
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.flat.id, quantity: 1000 })).toBe(12.5)
    // SLAB: 100 * 0.5 + 900 * 0.25 + 500 * 0.1
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.slab.id, quantity: 1500 })).toBe(325)
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.slab.id, quantity: 100 })).toBe(50)
    // VOLUME: every unit at the price of the tier holding the quantity
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.volume.id, quantity: 1500 })).toBe(150)
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.volume.id, quantity: 1000 })).toBe(250)
    expect(await costOf({ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: cat.composite.id, quantity: 4 })).toBe(11)
    expect(await costOf(wallet(20.5))).toBe(20.5)
    expect(await costOf(wallet(0))).toBe(0)
    expect(await costOf(creditArrear(), { type: "UNIT", billingMode: "ARREAR", unitId: cat.slab.id })).toBe(0)
    expect((await createPlan(acme, { priceAdjustment: 0.1, entitlements: [wallet(0.2)] })).cost).toBe(0.3)
  })

  it("computes cost from the catalogue's current prices when the plan is read", async () => {
    const unit = await created(
      as(acme).post("/units", { name: "Live", agentKey: fresh("live"), pricingType: "FLAT", flatPrice: 2 }),
      "unit"
    )
    const plan = await createPlan(acme, { entitlements: [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 }] })
    expect(plan.cost).toBe(20)
    await as(acme).patch(`/units/${unit.id}`, { flatPrice: 2.5, name: "Live renamed" })
    const read = (await as(acme).get(`/plans/${plan.id}`)).body.result.plan
    expect(read.cost).toBe(25)
    expect(read.entitlements[0].targetName).toBe("Live renamed")
  })

  it("creates the plan in the workspace's currency and defaults billingCycle to MONTHLY", async () => {
    const { apiKey } = await app.run(
      Effect.flatMap(Organizations, (orgs) => orgs.create({ name: "Euro", currencyCode: "EUR" }))
    )
    const response = await app.request("POST", "/plans", {
      key: apiKey,
      body: { name: "Euro plan", entitlements: [wallet(5)] }
    })
    expect(response.status).toBe(201)
    expect(response.body.result.plan).toMatchObject({ currencyCode: "EUR", billingCycle: "MONTHLY", description: "", priceAdjustment: 0, walletFundedArrear: false })
  })

  it.each([
    [{ name: undefined }, "name", "validation_failed"],
    [{ name: "" }, "name", "validation_failed"],
    [{ name: "n".repeat(81) }, "name", "validation_failed"],
    [{ description: "d".repeat(401) }, "description", "validation_failed"],
    [{ billingCycle: "YEARLY" }, "billingCycle", "validation_failed"],
    [{ priceAdjustment: "1" }, "priceAdjustment", "validation_failed"],
    [{ walletFundedArrear: "yes" }, "walletFundedArrear", "validation_failed"],
    [{ entitlements: undefined }, "entitlements", "validation_failed"],
    [{ entitlements: [] }, "entitlements", "validation_failed"],
    [{ entitlements: [{ type: "SEAT", billingMode: "ADVANCE" }] }, "type", "validation_failed"],
    [{ entitlements: [{ type: "WALLET", billingMode: "MONTHLY", amount: 1 }] }, "billingMode", "validation_failed"],
    [{ entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", quantity: 1 }] }, "creditId", "invalid_plan_component"],
    [{ entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: "", quantity: 1 }] }, "creditId", "invalid_plan_component"],
    [{ entitlements: [{ type: "UNIT", billingMode: "ADVANCE", quantity: 1 }] }, "unitId", "invalid_plan_component"],
    [{ entitlements: [{ type: "OUTCOME", billingMode: "ARREAR" }] }, "outcomeId", "invalid_plan_component"],
    [{ entitlements: [{ type: "PRICING_METRIC", billingMode: "ARREAR" }] }, "compositeId", "invalid_plan_component"],
    [{ entitlements: [{ ...creditAdvance(), unitId: "unit_x" }] }, "unitId", "invalid_plan_component"],
    [{ entitlements: [{ ...wallet(), creditId: "cred_x" }] }, "creditId", "invalid_plan_component"],
    [{ entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: "cred_x" }] }, "quantity", "invalid_plan_component"],
    [{ entitlements: [creditAdvance(0)] }, "quantity", "invalid_plan_component"],
    [{ entitlements: [creditAdvance(-1)] }, "quantity", "invalid_plan_component"],
    [{ entitlements: [{ ...creditArrear(), quantity: 5 }] }, "quantity", "invalid_plan_component"],
    [{ entitlements: [{ ...creditAdvance(), amount: 5 }] }, "amount", "invalid_plan_component"],
    [{ entitlements: [{ ...creditArrear(), rollover: true }] }, "rollover", "invalid_plan_component"],
    [{ entitlements: [{ type: "WALLET", billingMode: "ADVANCE" }] }, "amount", "invalid_plan_component"],
    [{ entitlements: [wallet(-1)] }, "amount", "invalid_plan_component"],
    [{ entitlements: [{ ...wallet(), quantity: 1 }] }, "quantity", "invalid_plan_component"],
    [{ entitlements: [{ type: "WALLET", billingMode: "ARREAR", amount: 5 }] }, "amount", "invalid_plan_component"],
    [{ entitlements: [wallet(), wallet(3)] }, "WALLET", "invalid_plan_component"],
    [{ entitlements: [wallet(), { type: "WALLET", billingMode: "ARREAR" }] }, "WALLET", "invalid_plan_component"],
    [{ entitlements: [creditAdvance(), creditAdvance(5)] }, "twice", "invalid_plan_component"],
    [{ walletFundedArrear: true, entitlements: [creditAdvance(), creditArrear()] }, "walletFundedArrear", "invalid_wallet_funding"],
    [{ walletFundedArrear: true, entitlements: [wallet(), creditAdvance()] }, "walletFundedArrear", "invalid_wallet_funding"],
    [{ walletFundedArrear: true, entitlements: [{ type: "WALLET", billingMode: "ARREAR" }, creditArrear()] }, "walletFundedArrear", "invalid_wallet_funding"],
    [{ priceAdjustment: -20.51, entitlements: [wallet(20.5)] }, "negative", "negative_plan_cost"],
    [{ entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: "cred_missing", quantity: 1 }] }, "cred_missing", "unknown_catalogue_item"],
    [{ entitlements: [{ type: "UNIT", billingMode: "ARREAR", unitId: "unit_missing" }] }, "unit_missing", "unknown_catalogue_item"],
    [{ entitlements: [{ type: "OUTCOME", billingMode: "ARREAR", outcomeId: "out_missing" }] }, "out_missing", "unknown_catalogue_item"],
    [{ entitlements: [{ type: "PRICING_METRIC", billingMode: "ARREAR", compositeId: "comp_missing" }] }, "comp_missing", "unknown_catalogue_item"]
  ])("rejects %j with 400 naming %s (%s) and writes nothing", async (overrides, field, code) => {
    const before = await as(acme).get("/plans?limit=200")
    const response = await as(acme).post("/plans", planBody(overrides))
    expectError(response, 400, code as ErrorCode)
    expect(response.body.statusDetail.message).toContain(field)
    const after = await as(acme).get("/plans?limit=200")
    expect(after.body.result.plans.length).toBe(before.body.result.plans.length)
  })

  it("needs whole quantities for outcomes and composites; credits and units may be fractional", async () => {
    expectError(await as(acme).post("/plans", planBody({
      entitlements: [{ type: "OUTCOME", billingMode: "ADVANCE", outcomeId: cat.outcome.id, quantity: 1.5 }]
    })), 400, "invalid_plan_component")
    expectError(await as(acme).post("/plans", planBody({
      entitlements: [{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: cat.composite.id, quantity: 0.5 }]
    })), 400, "invalid_plan_component")
    expect(await costOf({ type: "UNIT", billingMode: "ADVANCE", unitId: cat.flat.id, quantity: 2.5 })).toBe(0.03125)
  })

  it("rejects every kind of reference to another organisation's records with 400", async () => {
    const foreign = [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: otherCat.credit.id, quantity: 1 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: otherCat.outcome.id, quantity: 1 },
      { type: "UNIT", billingMode: "ADVANCE", unitId: otherCat.flat.id, quantity: 1 },
      { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: otherCat.composite.id, quantity: 1 }
    ]
    for (const component of foreign) {
      const response = await as(acme).post("/plans", planBody({ entitlements: [component] }))
      expectError(response, 400, "unknown_catalogue_item")
      expect(response.body.statusDetail.message).toMatch(/not found/)
    }
  })

  it("refuses an archived record with 409", async () => {
    const unit = await created(
      as(acme).post("/units", { name: "Old", agentKey: fresh("old"), pricingType: "FLAT", flatPrice: 1 }),
      "unit"
    )
    await as(acme).post(`/units/${unit.id}/archive`)
    expectError(
      await as(acme).post("/plans", planBody({ entitlements: [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }] })),
      409, "catalogue_item_archived"
    )
  })

  it("accepts a component read back from the API, empty ids and all", async () => {
    const plan = await createPlan(acme, { entitlements: [creditAdvance(), wallet()] })
    const again = await createPlan(acme, { entitlements: plan.entitlements })
    expect(again.cost).toBe(plan.cost)
  })

  it("answers invalid JSON and a missing key in the envelope", async () => {
    expectError(await app.request("POST", "/plans", { key: acme.apiKey, rawBody: "[" }), 400, "invalid_json")
    expectError(await app.request("POST", "/plans", { body: planBody() }), 401, "api_key_refused")
    expectError(await app.request("GET", "/plans", { key: "sk_unknown" }), 401, "api_key_refused")
  })
})

describe("authentication on every /plans route", () => {
  it.each([
    ["GET", "/plans"],
    ["POST", "/plans"],
    ["GET", "/plans/x"],
    ["PATCH", "/plans/x"],
    ["POST", "/plans/x/archive"],
    ["POST", "/plans/x/unarchive"]
  ])("%s %s without a valid key is 401 in the envelope", async (method, path) => {
    const body = method === "GET" ? {} : { body: {} }
    expectError(await app.request(method, path, body), 401, "api_key_refused")
    expectError(await app.request(method, path, { key: "sk_revoked_or_unknown", ...body }), 401, "api_key_refused")
  })
})

describe("GET /plans", () => {
  it("lists oldest first with cursor pages; active=true leaves archived plans out", async () => {
    const tenant = await app.tenant("Lister")
    const ids: Array<string> = []
    for (let i = 0; i < 4; i++) ids.push((await createPlan(tenant, { name: `P${i}`, entitlements: [wallet(i)] })).id)
    await app.request("POST", `/plans/${ids[2]}/archive`, { key: tenant.apiKey })
    const list = async (query: string) => {
      const response = await app.request("GET", `/plans${query}`, { key: tenant.apiKey })
      expect(response.status).toBe(200)
      expect(response.body.statusDetail.status).toBe("SUCCESS")
      return response.body.result.plans
    }
    const all = await list("")
    expect(all.map((p: any) => p.id)).toEqual(ids)
    expect(all.map((p: any) => p.cost)).toEqual([0, 1, 2, 3])
    expect((await list("?active=true")).map((p: any) => p.id)).toEqual([ids[0], ids[1], ids[3]])
    expect((await list("?active=false")).map((p: any) => p.id)).toEqual([ids[2]])
    expect((await list("?limit=2")).map((p: any) => p.id)).toEqual(ids.slice(0, 2))
    expect((await list(`?limit=2&cursor=${ids[1]}`)).map((p: any) => p.id)).toEqual(ids.slice(2))
    expectError(await app.request("GET", "/plans?limit=-1", { key: tenant.apiKey }), 400, "validation_failed")
    expect((await as(acme).get("/plans?limit=200")).body.result.plans.map((p: any) => p.id)).not.toContain(ids[0])
  })
})

describe("GET, PATCH /plans/{id}, archive and unarchive", () => {
  it("404s when missing or another organisation's, on every route", async () => {
    const plan = await createPlan(acme)
    expect((await as(acme).get(`/plans/${plan.id}`)).body).toEqual({
      statusCode: 200,
      statusDetail: { status: "SUCCESS", message: "Plan" },
      result: { plan }
    })
    for (const [tenant, id] of [[other, plan.id], [acme, "plan_missing"]] as const) {
      expectError(await as(tenant).get(`/plans/${id}`), 404, "plan_not_found")
      expectError(await as(tenant).patch(`/plans/${id}`, { name: "x" }), 404, "plan_not_found")
      expectError(await as(tenant).post(`/plans/${id}/archive`), 404, "plan_not_found")
      expectError(await as(tenant).post(`/plans/${id}/unarchive`), 404, "plan_not_found")
    }
    expect((await as(acme).get(`/plans/${plan.id}`)).body.result.plan).toEqual(plan)
  })

  it("PATCH changes only the sent fields; entitlements replace the components", async () => {
    const plan = await createPlan(acme, { entitlements: [creditAdvance(), wallet()] })
    const renamed = await as(acme).patch(`/plans/${plan.id}`, { name: "Pro 2", priceAdjustment: 1.5 })
    expect(renamed.status).toBe(200)
    expect(renamed.body.statusDetail).toEqual({ status: "SUCCESS", message: "Plan updated" })
    expect(renamed.body.result.updated).toBe(true)
    expect(renamed.body.result.plan).toMatchObject({
      name: "Pro 2",
      description: "for teams",
      priceAdjustment: 1.5,
      cost: 29.5,
      entitlements: plan.entitlements
    })
    const replaced = (await as(acme).patch(`/plans/${plan.id}`, {
      walletFundedArrear: true,
      entitlements: [wallet(10), creditArrear()]
    })).body.result.plan
    expect(replaced.walletFundedArrear).toBe(true)
    expect(replaced.cost).toBe(11.5)
    expect(replaced.entitlements.map((c: any) => [c.type, c.billingMode])).toEqual([["WALLET", "ADVANCE"], ["CREDIT", "ARREAR"]])
    expect(replaced.entitlements[0].id).not.toBe(plan.entitlements[1].id)
    expect((await as(acme).get(`/plans/${plan.id}`)).body.result.plan).toEqual(replaced)
    const cleared = (await as(acme).patch(`/plans/${plan.id}`, { description: null })).body.result.plan
    expect(cleared.description).toBe("")
  })

  it("PATCH checks the plan as a whole and changes nothing when it fails", async () => {
    const plan = await createPlan(acme, { walletFundedArrear: true, entitlements: [wallet(10), creditArrear()] })
    expectError(await as(acme).patch(`/plans/${plan.id}`, { entitlements: [wallet(10)] }), 400, "invalid_wallet_funding")
    expectError(await as(acme).patch(`/plans/${plan.id}`, { priceAdjustment: -10.01 }), 400, "negative_plan_cost")
    expectError(await as(acme).patch(`/plans/${plan.id}`, { name: "" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/plans/${plan.id}`, { entitlements: [] }), 400, "validation_failed")
    expectError(await as(acme).patch(`/plans/${plan.id}`, {
      entitlements: [wallet(), { type: "UNIT", billingMode: "ARREAR", unitId: otherCat.flat.id }]
    }), 400, "unknown_catalogue_item")
    expect((await as(acme).get(`/plans/${plan.id}`)).body.result.plan).toEqual(plan)
    const unfunded = (await as(acme).patch(`/plans/${plan.id}`, { walletFundedArrear: false, entitlements: [wallet(10)] }))
      .body.result.plan
    expect(unfunded).toMatchObject({ walletFundedArrear: false, cost: 10 })
  })

  it("archives and unarchives, idempotently", async () => {
    const plan = await createPlan(acme)
    const archived = await as(acme).post(`/plans/${plan.id}/archive`)
    expect(archived.status).toBe(200)
    expect(archived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Plan archived" })
    expect(archived.body.result).toMatchObject({ archived: true, plan: { id: plan.id, isActive: false } })
    expect((await as(acme).post(`/plans/${plan.id}/archive`)).body.result.plan.isActive).toBe(false)
    expect((await as(acme).get("/plans?active=true&limit=200")).body.result.plans.map((p: any) => p.id)).not.toContain(plan.id)
    const unarchived = await as(acme).post(`/plans/${plan.id}/unarchive`)
    expect(unarchived.status).toBe(200)
    expect(unarchived.body.result).toMatchObject({ unarchived: true, plan: { id: plan.id, isActive: true } })
    expect((await as(acme).get("/plans?active=true&limit=200")).body.result.plans.map((p: any) => p.id)).toContain(plan.id)
  })
})

describe("Plans.getPriced (the contract purchases rely on)", () => {
  it("gives each component its catalogue price and ADVANCE charge", async () => {
    const plan = await createPlan(acme, {
      entitlements: [
        creditAdvance(1000),
        { type: "UNIT", billingMode: "ADVANCE", unitId: cat.volume.id, quantity: 1500 },
        { type: "UNIT", billingMode: "ARREAR", unitId: cat.slab.id },
        wallet(20.5)
      ]
    })
    const priced = await app.run(Effect.flatMap(Plans, (plans) => plans.getPriced(acme.organizationId, plan.id)))
    expect(priced.plan.id).toBe(plan.id)
    expect(priced.components.map((c) => BigDecimal.format(c.charge))).toEqual(["7.5", "150", "0", "20.5"])
    expect(priced.components.map((c) => c.price.type)).toEqual(["CREDIT", "UNIT", "UNIT", "WALLET"])
    const slabPrice = priced.components[2]!.price
    expect(slabPrice.type === "UNIT" && slabPrice.pricing.pricingType).toBe("SLAB")
    expect(BigDecimal.format(priced.plan.cost)).toBe("178")
    await expect(app.run(Effect.flatMap(Plans, (plans) => plans.get(other.organizationId, plan.id)))).rejects.toThrow(/not found/)
  })
})

describe("billing plan (CLI)", () => {
  it("creates from a file, lists, gets, updates, archives and unarchives with --json", async () => {
    const org = ["--org", acme.organizationId, "--json"]
    const file = `/tmp/plan-cli-${process.pid}.json`
    writeFileSync(file, JSON.stringify(planBody({ name: "From file", entitlements: [creditAdvance(100), wallet(5)] })))
    const made = await app.cli(["plan", "create", ...org, "--file", file, "--price-adjustment", "0.25"])
    expect(made.code, made.stderr).toBe(0)
    expect(made.json.created).toBe(true)
    expect(made.json.plan).toMatchObject({ name: "From file", cost: 6, priceAdjustment: 0.25 })
    const id = made.json.plan.id
    expect((await app.cli(["plan", "list", ...org])).json.plans.map((p: any) => p.id)).toContain(id)
    expect((await app.cli(["plan", "get", id, ...org])).json.plan.entitlements).toHaveLength(2)
    const updated = await app.cli(["plan", "update", id, ...org, "--name", "Renamed"])
    expect(updated.json.plan).toMatchObject({ name: "Renamed", cost: 6 })
    expect((await app.cli(["plan", "archive", id, ...org])).json.plan.isActive).toBe(false)
    expect((await app.cli(["plan", "list", ...org, "--active"])).json.plans.map((p: any) => p.id)).not.toContain(id)
    expect((await app.cli(["plan", "unarchive", id, ...org])).json.plan.isActive).toBe(true)
    const bad = await app.cli(["plan", "create", ...org, "--name", "No components"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("entitlements")
    const foreign = await app.cli(["plan", "get", id, "--org", other.organizationId, "--json"])
    expect(foreign.code).not.toBe(0)
    const human = await app.cli(["plan", "get", id, "--org", acme.organizationId])
    expect(human.code, human.stderr).toBe(0)
    expect(human.stdout).toContain("Renamed")
  })
})
