import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
let acme: Tenant
let other: Tenant

const as = (tenant: Tenant) => clientOf(app, tenant)

let counter = 0
const fresh = (prefix: string) => `${prefix}-${++counter}`

const created = async (response: Promise<{ status: number; body: any }>, field: string) => {
  const answer = await response
  expect(answer.status, JSON.stringify(answer.body)).toBe(201)
  return answer.body.result[field]
}

const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
const createCredit = (tenant: Tenant) =>
  created(as(tenant).post("/credits", { name: "Chat", agentKey: fresh("chat"), marginPercent: 20, modelBundle: bundle }), "credit")
const createOutcome = (tenant: Tenant) =>
  created(
    as(tenant).post("/outcomes", {
      name: "Report",
      agentKey: fresh("report"),
      marginPercent: 50,
      steps: [{ name: "Draft", agentKey: fresh("draft"), modelBundle: bundle }]
    }),
    "outcome"
  )
const createUnit = (tenant: Tenant) =>
  created(as(tenant).post("/units", { name: "Pages", agentKey: fresh("pages"), pricingType: "FLAT", flatPrice: 0.1 }), "unit")

let credit: any
let outcome: any
let unit: any
let otherUnit: any

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  credit = await createCredit(acme)
  outcome = await createOutcome(acme)
  unit = await createUnit(acme)
  otherUnit = await createUnit(other)
})
afterAll(() => app.close())

const body = (overrides: Record<string, unknown> = {}) => ({
  name: "Research task",
  refId: fresh("task"),
  description: "one research task",
  price: 2.75,
  entitlements: { creditIds: [credit.id], outcomeIds: [outcome.id], unitIds: [unit.id] },
  ...overrides
})

const createComposite = (tenant: Tenant, overrides: Record<string, unknown> = {}) =>
  created(as(tenant).post("/composites", body(overrides)), "composite")

describe("POST /composites", () => {
  it("creates a composite naming its credits, outcomes and units", async () => {
    const request = body()
    const response = await as(acme).post("/composites", request)
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Composite created" })
    expect(response.body.result.created).toBe(true)
    expect(response.body.result.composite).toEqual({
      id: expect.stringMatching(/^comp_/),
      name: "Research task",
      refId: request.refId,
      description: "one research task",
      price: 2.75,
      isActive: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      entitlements: {
        credits: [{ id: credit.id, name: "Chat", agentKey: credit.agentKey }],
        outcomes: [{ id: outcome.id, name: "Report", agentKey: outcome.agentKey }],
        units: [{ id: unit.id, name: "Pages", agentKey: unit.agentKey }]
      }
    })
  })

  it("needs only one id in total, and lists repeated ids once", async () => {
    const composite = await createComposite(acme, { description: undefined, entitlements: { unitIds: [unit.id, unit.id] } })
    expect(composite.description).toBeNull()
    expect(composite.entitlements).toEqual({ credits: [], outcomes: [], units: [{ id: unit.id, name: "Pages", agentKey: unit.agentKey }] })
  })

  it("accepts the price limits 0 and 10,000,000", async () => {
    expect((await createComposite(acme, { price: 0 })).price).toBe(0)
    expect((await createComposite(acme, { price: 10_000_000 })).price).toBe(10_000_000)
  })

  it.each([
    [{ name: undefined }, "name", "validation_failed"],
    [{ name: "" }, "name", "validation_failed"],
    [{ name: "n".repeat(81) }, "name", "validation_failed"],
    [{ refId: undefined }, "refId", "validation_failed"],
    [{ refId: "" }, "refId", "validation_failed"],
    [{ refId: "Has Caps" }, "refId", "validation_failed"],
    [{ refId: "r".repeat(81) }, "refId", "validation_failed"],
    [{ description: "d".repeat(401) }, "description", "validation_failed"],
    [{ price: undefined }, "price", "validation_failed"],
    [{ price: -0.01 }, "price", "validation_failed"],
    [{ price: 10_000_000.01 }, "price", "validation_failed"],
    [{ price: "5" }, "price", "validation_failed"],
    [{ entitlements: undefined }, "entitlements", "validation_failed"],
    [{ entitlements: {} }, "entitlements", "empty_composite"],
    [{ entitlements: { creditIds: [], unitIds: [] } }, "entitlements", "empty_composite"],
    [{ entitlements: { unitIds: "unit_x" } }, "unitIds", "validation_failed"],
    [{ entitlements: { unitIds: ["unit_missing"] } }, "unit_missing", "unknown_catalogue_item"],
    [{ entitlements: { creditIds: ["cred_missing"] } }, "cred_missing", "unknown_catalogue_item"],
    [{ entitlements: { outcomeIds: ["out_missing"] } }, "out_missing", "unknown_catalogue_item"]
  ])("rejects %j with 400 naming %s (%s) and writes nothing", async (overrides, field, code) => {
    const before = await as(acme).get("/composites?limit=200")
    const response = await as(acme).post("/composites", body(overrides))
    expectError(response, 400, code as ErrorCode)
    expect(response.body.statusDetail.message).toContain(field)
    const after = await as(acme).get("/composites?limit=200")
    expect(after.body.result.composites.length).toBe(before.body.result.composites.length)
  })

  it("rejects ids of another organisation with 400, exactly like unknown ids", async () => {
    const response = await as(acme).post("/composites", body({ entitlements: { unitIds: [otherUnit.id] } }))
    expectError(response, 400, "unknown_catalogue_item")
    expect(response.body.statusDetail.message).toContain(otherUnit.id)
    const otherCredit = await createCredit(other)
    expectError(await as(acme).post("/composites", body({ entitlements: { creditIds: [otherCredit.id] } })), 400, "unknown_catalogue_item")
  })

  it("refuses an archived member with 409", async () => {
    const archived = await createUnit(acme)
    await as(acme).post(`/units/${archived.id}/archive`)
    expectError(await as(acme).post("/composites", body({ entitlements: { unitIds: [archived.id] } })), 409, "catalogue_item_archived")
  })

  it("refuses a refId held by another active composite with 409; frees it on archive; other orgs are separate", async () => {
    const first = await createComposite(acme, { refId: "shared-ref" })
    expectError(await as(acme).post("/composites", body({ refId: "shared-ref" })), 409, "ref_id_taken")
    expect((await as(other).post("/composites", body({ refId: "shared-ref", entitlements: { unitIds: [otherUnit.id] } }))).status)
      .toBe(201)
    await as(acme).post(`/composites/${first.id}/archive`)
    await createComposite(acme, { refId: "shared-ref" })
    expectError(await as(acme).post(`/composites/${first.id}/unarchive`), 409, "ref_id_taken")
  })

  it("answers invalid JSON and a missing key in the envelope", async () => {
    expectError(await app.request("POST", "/composites", { key: acme.apiKey, rawBody: "{" }), 400, "invalid_json")
    expectError(await app.request("POST", "/composites", { body: body() }), 401, "api_key_refused")
    expectError(await app.request("GET", "/composites"), 401, "api_key_refused")
  })
})

describe("authentication on every /composites route", () => {
  it.each([
    ["GET", "/composites"],
    ["POST", "/composites"],
    ["GET", "/composites/x"],
    ["PATCH", "/composites/x"],
    ["POST", "/composites/x/archive"],
    ["POST", "/composites/x/unarchive"]
  ])("%s %s without a valid key is 401 in the envelope", async (method, path) => {
    const body = method === "GET" ? {} : { body: {} }
    expectError(await app.request(method, path, body), 401, "api_key_refused")
    expectError(await app.request(method, path, { key: "sk_revoked_or_unknown", ...body }), 401, "api_key_refused")
  })
})

describe("GET /composites", () => {
  it("lists by creation with cursor pages and the active filter", async () => {
    const tenant = await app.tenant("Lister")
    const tenantUnit = await createUnit(tenant)
    const ids: Array<string> = []
    for (let i = 0; i < 3; i++) {
      ids.push((await createComposite(tenant, { entitlements: { unitIds: [tenantUnit.id] } })).id)
    }
    await app.request("POST", `/composites/${ids[0]}/archive`, { key: tenant.apiKey })
    const list = async (query: string) => {
      const response = await app.request("GET", `/composites${query}`, { key: tenant.apiKey })
      expect(response.status).toBe(200)
      return response.body.result.composites.map((c: any) => c.id)
    }
    expect(await list("")).toEqual(ids)
    expect(await list("?active=true")).toEqual(ids.slice(1))
    expect(await list("?active=false")).toEqual([ids[0]])
    expect(await list(`?limit=1&cursor=${ids[0]}`)).toEqual([ids[1]])
    const listed = (await app.request("GET", "/composites", { key: tenant.apiKey })).body.result.composites[1]
    expect(listed.entitlements.units).toEqual([{ id: tenantUnit.id, name: "Pages", agentKey: tenantUnit.agentKey }])
    expectError(await app.request("GET", "/composites?active=1", { key: tenant.apiKey }), 400, "validation_failed")
    expect((await as(acme).get("/composites?limit=200")).body.result.composites.map((c: any) => c.id)).not.toContain(ids[1])
  })
})

describe("GET, PATCH /composites/{id}, archive and unarchive", () => {
  it("404s when missing or another organisation's, on every route", async () => {
    const composite = await createComposite(acme)
    expect((await as(acme).get(`/composites/${composite.id}`)).body.result).toEqual({ composite })
    for (const [tenant, id] of [[other, composite.id], [acme, "comp_missing"]] as const) {
      expectError(await as(tenant).get(`/composites/${id}`), 404, "composite_not_found")
      expectError(await as(tenant).patch(`/composites/${id}`, { name: "x" }), 404, "composite_not_found")
      expectError(await as(tenant).post(`/composites/${id}/archive`), 404, "composite_not_found")
      expectError(await as(tenant).post(`/composites/${id}/unarchive`), 404, "composite_not_found")
    }
    expect((await as(acme).get(`/composites/${composite.id}`)).body.result.composite).toEqual(composite)
  })

  it("PATCH changes only the sent fields; entitlements replace the set", async () => {
    const composite = await createComposite(acme)
    const renamed = await as(acme).patch(`/composites/${composite.id}`, { name: "Renamed", price: 3 })
    expect(renamed.status).toBe(200)
    expect(renamed.body.statusDetail).toEqual({ status: "SUCCESS", message: "Composite updated" })
    expect(renamed.body.result.updated).toBe(true)
    expect(renamed.body.result.composite).toMatchObject({
      name: "Renamed",
      price: 3,
      refId: composite.refId,
      description: composite.description,
      entitlements: composite.entitlements
    })
    const replaced = (await as(acme).patch(`/composites/${composite.id}`, { entitlements: { outcomeIds: [outcome.id] } }))
      .body.result.composite
    expect(replaced.entitlements).toEqual({
      credits: [],
      outcomes: [{ id: outcome.id, name: "Report", agentKey: outcome.agentKey }],
      units: []
    })
    expect((await as(acme).get(`/composites/${composite.id}`)).body.result.composite.entitlements).toEqual(replaced.entitlements)
    const cleared = (await as(acme).patch(`/composites/${composite.id}`, { description: null })).body.result.composite
    expect(cleared.description).toBeNull()
  })

  it("PATCH rejects bad input with 400 and a taken refId with 409, changing nothing", async () => {
    const composite = await createComposite(acme)
    const taken = await createComposite(acme)
    expectError(await as(acme).patch(`/composites/${composite.id}`, { price: 10_000_001 }), 400, "validation_failed")
    expectError(await as(acme).patch(`/composites/${composite.id}`, { name: "" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/composites/${composite.id}`, { entitlements: {} }), 400, "empty_composite")
    expectError(await as(acme).patch(`/composites/${composite.id}`, { entitlements: { unitIds: [otherUnit.id] } }), 400, "unknown_catalogue_item")
    expectError(await as(acme).patch(`/composites/${composite.id}`, { refId: taken.refId }), 409, "ref_id_taken")
    expectError(await as(acme).patch(`/composites/${composite.id}`, { refId: taken.refId, entitlements: { unitIds: [unit.id] } }), 409, "ref_id_taken")
    expect((await as(acme).get(`/composites/${composite.id}`)).body.result.composite).toEqual(composite)
  })

  it("archives and unarchives, idempotently", async () => {
    const composite = await createComposite(acme)
    const archived = await as(acme).post(`/composites/${composite.id}/archive`)
    expect(archived.status).toBe(200)
    expect(archived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Composite archived" })
    expect(archived.body.result).toMatchObject({ archived: true, composite: { id: composite.id, isActive: false } })
    expect((await as(acme).post(`/composites/${composite.id}/archive`)).body.result.composite.isActive).toBe(false)
    expect((await as(acme).get("/composites?active=true&limit=200")).body.result.composites.map((c: any) => c.id))
      .not.toContain(composite.id)
    const unarchived = await as(acme).post(`/composites/${composite.id}/unarchive`)
    expect(unarchived.status).toBe(200)
    expect(unarchived.body.result).toMatchObject({ unarchived: true, composite: { id: composite.id, isActive: true } })
  })
})

describe("billing composite (CLI)", () => {
  it("creates from flags, lists, gets, updates, archives and unarchives with --json", async () => {
    const org = ["--org", acme.organizationId, "--json"]
    const made = await app.cli([
      "composite", "create", ...org, "--name", "Cli task", "--ref-id", "cli-task", "--price", "1.5",
      "--unit-ids", unit.id, "--credit-ids", credit.id
    ])
    expect(made.code, made.stderr).toBe(0)
    expect(made.json.created).toBe(true)
    expect(made.json.composite).toMatchObject({ refId: "cli-task", price: 1.5 })
    expect(made.json.composite.entitlements.units.map((u: any) => u.id)).toEqual([unit.id])
    expect(made.json.composite.entitlements.credits.map((c: any) => c.id)).toEqual([credit.id])
    const id = made.json.composite.id
    expect((await app.cli(["composite", "list", ...org])).json.composites.map((c: any) => c.id)).toContain(id)
    expect((await app.cli(["composite", "get", id, ...org])).json.composite.id).toBe(id)
    const updated = await app.cli(["composite", "update", id, ...org, "--outcome-ids", outcome.id])
    expect(updated.json.composite.entitlements).toMatchObject({ credits: [], units: [], outcomes: [{ id: outcome.id }] })
    expect((await app.cli(["composite", "archive", id, ...org])).json.composite.isActive).toBe(false)
    expect((await app.cli(["composite", "unarchive", id, ...org])).json.composite.isActive).toBe(true)
    const bad = await app.cli(["composite", "create", ...org, "--name", "Bad", "--ref-id", "cli-bad", "--price", "1"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("entitlements")
    const foreign = await app.cli(["composite", "get", id, "--org", other.organizationId, "--json"])
    expect(foreign.code).not.toBe(0)
  })
})
