import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
let acme: Tenant
let other: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
})
afterAll(() => app.close())

const as = (tenant: Tenant) => clientOf(app, tenant)

// gpt-4o: 2.5 in, 10 out, 1.25 cache read, no cache write (USD per million tokens).
// 1000 * (60*2.5 + 30*10 + 10*1.25) / 100 / 1e6 = 1000 * 462.5 / 1e8 = 0.004625
const gpt4oItem = { modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 60, output: 30, cache: 10, cacheWrite: 0 }
// claude-sonnet-4: 3 in, 15 out, 0.3 cache read, 3.75 cache write.
// 2000 * (50*3 + 20*15 + 20*0.3 + 10*3.75) / 100 / 1e6 = 2000 * 493.5 / 1e8 = 0.00987
const sonnetItem = {
  modelId: "claude-sonnet-4",
  averageTokensPerLLMCall: 2000,
  input: 50,
  output: 20,
  cache: 20,
  cacheWrite: 10
}

let keySeq = 0
const nextKey = (prefix = "agent") => `${prefix}.${++keySeq}`

const creditBody = (overrides: Record<string, unknown> = {}) => ({
  name: "Research agent",
  agentKey: nextKey(),
  marginPercent: 20,
  modelBundle: [gpt4oItem],
  ...overrides
})

const createCredit = async (tenant: Tenant, overrides: Record<string, unknown> = {}) => {
  const response = await as(tenant).post("/credits", creditBody(overrides))
  expect(response.status).toBe(201)
  return response.body.result.credit
}

const countCredits = async (tenant: Tenant) => (await as(tenant).get("/credits?limit=200")).body.result.credits.length

describe("POST /credits", { timeout: 180_000 }, () => {
  it("creates a credit priced from its bundle, in the envelope, with modelName filled in", async () => {
    const response = await as(acme).post("/credits", {
      name: "Research agent",
      agentKey: "research.v1",
      description: "Deep research",
      marginPercent: 20,
      modelBundle: [gpt4oItem, sonnetItem]
    })
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Credit created" })
    expect(response.body.result.created).toBe(true)
    const credit = response.body.result.credit
    expect(credit).toEqual({
      id: expect.stringMatching(/^cred_/),
      name: "Research agent",
      agentKey: "research.v1",
      description: "Deep research",
      // 1000 + 2000 tokens; 0.004625 + 0.00987 USD; * 1.2
      tokensPerCredit: 3000,
      basePrice: 0.014495,
      modelBundle: [
        { ...gpt4oItem, modelName: "GPT-4o" },
        { ...sonnetItem, modelName: "Claude Sonnet 4" }
      ],
      marginPercent: 20,
      pricePerCredit: 0.017394,
      isActive: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String)
    })
    expect(new Date(credit.createdAt).toISOString()).toBe(credit.createdAt)
    const fetched = await as(acme).get(`/credits/${credit.id}`)
    expect(fetched.body.result.credit).toEqual(credit)
  })

  it("prices margins of -100 and 0 exactly, and leaves description null when unset", async () => {
    const free = await createCredit(acme, { marginPercent: -100 })
    expect(free.basePrice).toBe(0.004625)
    expect(free.pricePerCredit).toBe(0)
    expect(free.description).toBeNull()
    const atCost = await createCredit(acme, { marginPercent: 0 })
    expect(atCost.pricePerCredit).toBe(0.004625)
    // A fractional margin: 0.004625 * 1.125 = 0.005203125
    const fractional = await createCredit(acme, { marginPercent: 12.5 })
    expect(fractional.pricePerCredit).toBe(0.005203125)
  })

  it("defaults omitted cache and cacheWrite weights to 0", async () => {
    // 500 * (70*2.5 + 30*10) / 1e8 = 500 * 475 / 1e8 = 0.002375
    const credit = await createCredit(acme, {
      modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 500, input: 70, output: 30 }]
    })
    expect(credit.basePrice).toBe(0.002375)
    expect(credit.modelBundle[0]).toMatchObject({ cache: 0, cacheWrite: 0 })
  })

  it.each([
    ["name missing", { name: undefined }, "name", "validation_failed"],
    ["name empty", { name: "" }, "name", "validation_failed"],
    ["name over 80", { name: "n".repeat(81) }, "name", "validation_failed"],
    ["agentKey missing", { agentKey: undefined }, "agentKey", "validation_failed"],
    ["agentKey with capitals", { agentKey: "Research" }, "agentKey", "validation_failed"],
    ["agentKey with a space", { agentKey: "re search" }, "agentKey", "validation_failed"],
    ["agentKey over 80", { agentKey: "k".repeat(81) }, "agentKey", "validation_failed"],
    ["description over 400", { description: "d".repeat(401) }, "description", "validation_failed"],
    ["marginPercent missing", { marginPercent: undefined }, "marginPercent", "validation_failed"],
    ["marginPercent below -100", { marginPercent: -100.5 }, "marginPercent", "validation_failed"],
    ["marginPercent as text", { marginPercent: "20" }, "marginPercent", "validation_failed"],
    ["modelBundle missing", { modelBundle: undefined }, "modelBundle", "validation_failed"],
    ["modelBundle empty", { modelBundle: [] }, "modelBundle", "validation_failed"],
    ["weights not adding up to 100", { modelBundle: [{ ...gpt4oItem, cache: 5 }] }, "100", "invalid_model_bundle"],
    ["a fractional weight", { modelBundle: [{ ...gpt4oItem, input: 59.5, cache: 10.5 }] }, "whole number", "invalid_model_bundle"],
    ["a negative weight", { modelBundle: [{ ...gpt4oItem, input: 110, output: -20 }] }, "whole number", "invalid_model_bundle"],
    ["cacheWrite on a model without a cache-write rate", {
      modelBundle: [{ ...gpt4oItem, cache: 0, cacheWrite: 10 }]
    }, "cache-write", "invalid_model_bundle"],
    ["averageTokensPerLLMCall of 0", { modelBundle: [{ ...gpt4oItem, averageTokensPerLLMCall: 0 }] }, "averageTokensPerLLMCall", "invalid_model_bundle"],
    ["modelName sent", { modelBundle: [{ ...gpt4oItem, modelName: "GPT-4o" }] }, "modelName", "validation_failed"],
    ["a price sent", { basePrice: 1 }, "basePrice", "validation_failed"],
    ["pricePerCredit sent", { pricePerCredit: 1 }, "pricePerCredit", "validation_failed"]
  ])("rejects %s with 400 naming the problem and writes nothing", async (_, overrides, named, code) => {
    const before = await countCredits(acme)
    const body = Object.fromEntries(Object.entries(creditBody(overrides)).filter(([, v]) => v !== undefined))
    const response = await as(acme).post("/credits", body)
    expectError(response, 400, code as ErrorCode)
    expect(response.body.statusDetail.message).toContain(named)
    expect(await countCredits(acme)).toBe(before)
  })

  it("names the bundle item whose weights are wrong", async () => {
    const response = await as(acme).post("/credits", creditBody({ modelBundle: [gpt4oItem, { ...sonnetItem, cache: 0 }] }))
    expectError(response, 400, "invalid_model_bundle")
    expect(response.body.statusDetail.message).toContain("modelBundle.1")
  })

  it("answers invalid JSON with 400, and a missing or unknown key with 401 on every route", async () => {
    expectError(await app.request("POST", "/credits", { key: acme.apiKey, rawBody: "{\"name\":" }), 400, "invalid_json")
    const credit = await createCredit(acme)
    const routes: Array<[string, string, unknown]> = [
      ["GET", "/credits", undefined],
      ["POST", "/credits", creditBody()],
      ["GET", `/credits/${credit.id}`, undefined],
      ["PATCH", `/credits/${credit.id}`, { name: "x" }],
      ["POST", `/credits/${credit.id}/archive`, undefined],
      ["POST", `/credits/${credit.id}/unarchive`, undefined]
    ]
    for (const [method, path, body] of routes) {
      expectError(await app.request(method, path, { key: null, body }), 401, "api_key_refused")
      expectError(await app.request(method, path, { key: "sk_unknown", body }), 401, "api_key_refused")
    }
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit).toEqual(credit)
  })

  it("refuses an unknown model with 422 and writes nothing", async () => {
    const before = await countCredits(acme)
    const response = await as(acme).post("/credits", creditBody({ modelBundle: [{ ...gpt4oItem, modelId: "gpt-99" }] }))
    expectError(response, 422, "model_not_enabled")
    expect(response.body.statusDetail.message).toBe("model gpt-99 is not enabled in this workspace")
    expect(await countCredits(acme)).toBe(before)
  })

  it("refuses a model disabled in the workspace with 422, and only in that workspace", async () => {
    const tenant = await app.tenant("Disabler")
    const disabled = await app.cli(["model", "disable", "gpt-4o-mini", "--org", tenant.organizationId, "--json"])
    expect(disabled.code).toBe(0)
    expect(disabled.json.model).toMatchObject({ id: "gpt-4o-mini", enabled: false })
    const body = creditBody({ modelBundle: [{ ...gpt4oItem, modelId: "gpt-4o-mini" }] })
    const refused = await as(tenant).post("/credits", body)
    expectError(refused, 422, "model_not_enabled")
    expect(refused.body.statusDetail.message).toContain("gpt-4o-mini")
    expect(await countCredits(tenant)).toBe(0)
    expect((await as(other).post("/credits", body)).status).toBe(201)
    expect((await app.cli(["model", "enable", "gpt-4o-mini", "--org", tenant.organizationId, "--json"])).code).toBe(0)
    // gpt-4o-mini: 1000 * (60*0.15 + 30*0.6 + 10*0.075) / 1e8 = 1000 * 27.75 / 1e8 = 0.0002775
    const accepted = await as(tenant).post("/credits", body)
    expect(accepted.status).toBe(201)
    expect(accepted.body.result.credit.basePrice).toBe(0.0002775)
  })

  it("refuses an agentKey held by another active credit with 409; another organisation may use it", async () => {
    await createCredit(acme, { agentKey: "dup.key" })
    const before = await countCredits(acme)
    expectError(await as(acme).post("/credits", creditBody({ agentKey: "dup.key" })), 409, "agent_key_taken")
    expect(await countCredits(acme)).toBe(before)
    expect((await as(other).post("/credits", creditBody({ agentKey: "dup.key" }))).status).toBe(201)
  })
})

describe("PATCH /credits/{id}", { timeout: 180_000 }, () => {
  it("changes only the fields sent; a name change keeps the prices", async () => {
    const credit = await createCredit(acme, { description: "before" })
    const response = await as(acme).patch(`/credits/${credit.id}`, { name: "Renamed" })
    expect(response.status).toBe(200)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Credit updated" })
    expect(response.body.result.updated).toBe(true)
    expect(response.body.result.credit).toEqual({ ...credit, name: "Renamed", updatedAt: expect.any(String) })
    const cleared = await as(acme).patch(`/credits/${credit.id}`, { description: null })
    expect(cleared.body.result.credit.description).toBeNull()
    expect(cleared.body.result.credit.name).toBe("Renamed")
  })

  it("re-prices pricePerCredit when marginPercent is sent", async () => {
    const credit = await createCredit(acme, { marginPercent: 20 })
    const response = await as(acme).patch(`/credits/${credit.id}`, { marginPercent: 50 })
    // 0.004625 * 1.5
    expect(response.body.result.credit).toMatchObject({ basePrice: 0.004625, marginPercent: 50, pricePerCredit: 0.0069375 })
  })

  it("re-prices everything when modelBundle is sent", async () => {
    const credit = await createCredit(acme, { marginPercent: 20 })
    const response = await as(acme).patch(`/credits/${credit.id}`, { modelBundle: [sonnetItem] })
    expect(response.body.result.credit).toMatchObject({
      tokensPerCredit: 2000,
      basePrice: 0.00987,
      marginPercent: 20,
      // 0.00987 * 1.2
      pricePerCredit: 0.011844,
      modelBundle: [{ ...sonnetItem, modelName: "Claude Sonnet 4" }]
    })
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit.pricePerCredit).toBe(0.011844)
  })

  it("prices a new bundle at the workspace's current rates", async () => {
    const tenant = await app.tenant("Rates")
    const credit = await createCredit(tenant)
    const set = await app.cli(["model", "set", "--id", "gpt-4o", "--input", "5", "--org", tenant.organizationId, "--json"])
    expect(set.code).toBe(0)
    // Unchanged until re-priced.
    expect((await as(tenant).get(`/credits/${credit.id}`)).body.result.credit.basePrice).toBe(0.004625)
    // 1000 * (60*5 + 30*10 + 10*1.25) / 1e8 = 1000 * 612.5 / 1e8 = 0.006125
    const repriced = await as(tenant).patch(`/credits/${credit.id}`, { modelBundle: [gpt4oItem] })
    expect(repriced.body.result.credit.basePrice).toBe(0.006125)
  })

  it("answers 400, 404, 409 and 422 without changing anything", async () => {
    const credit = await createCredit(acme)
    const taken = await createCredit(acme)
    expectError(await as(acme).patch(`/credits/${credit.id}`, { name: "" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/credits/${credit.id}`, { marginPercent: -101 }), 400, "validation_failed")
    expectError(await as(acme).patch(`/credits/${credit.id}`, { modelBundle: [] }), 400, "validation_failed")
    expectError(await as(acme).patch(`/credits/${credit.id}`, { tokensPerCredit: 5 }), 400, "validation_failed")
    expectError(await as(acme).patch(`/credits/${credit.id}`, { agentKey: taken.agentKey }), 409, "agent_key_taken")
    expectError(
      await as(acme).patch(`/credits/${credit.id}`, { name: "Nope", modelBundle: [{ ...gpt4oItem, modelId: "nope" }] }),
      422, "model_not_enabled"
    )
    expectError(await as(acme).patch("/credits/cred_missing", { name: "x" }), 404, "credit_not_found")
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit).toEqual(credit)
  })
})

describe("archive and unarchive", () => {
  it("archives without deleting, frees the agentKey, and unarchive answers 409 once the key is taken", async () => {
    const credit = await createCredit(acme, { agentKey: "reused.key" })
    const archived = await as(acme).post(`/credits/${credit.id}/archive`)
    expect(archived.status).toBe(200)
    expect(archived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Credit archived" })
    expect(archived.body.result).toEqual({ archived: true, credit: { ...credit, isActive: false, updatedAt: expect.any(String) } })
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit.isActive).toBe(false)
    // Archiving twice answers the same credit.
    expect((await as(acme).post(`/credits/${credit.id}/archive`)).status).toBe(200)

    const unarchived = await as(acme).post(`/credits/${credit.id}/unarchive`)
    expect(unarchived.status).toBe(200)
    expect(unarchived.body.result).toMatchObject({ unarchived: true, credit: { id: credit.id, isActive: true } })

    await as(acme).post(`/credits/${credit.id}/archive`)
    const successor = await createCredit(acme, { agentKey: "reused.key" })
    expectError(await as(acme).post(`/credits/${credit.id}/unarchive`), 409, "agent_key_taken")
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit.isActive).toBe(false)
    expect((await as(acme).get(`/credits/${successor.id}`)).body.result.credit.isActive).toBe(true)
  })

  it("answers 404 for a missing credit", async () => {
    expectError(await as(acme).post("/credits/cred_missing/archive"), 404, "credit_not_found")
    expectError(await as(acme).post("/credits/cred_missing/unarchive"), 404, "credit_not_found")
    expectError(await as(acme).get("/credits/cred_missing"), 404, "credit_not_found")
  })
})

describe("GET /credits", () => {
  it("filters by active and pages by cursor in creation order", async () => {
    const tenant = await app.tenant("Lister")
    const created = []
    for (let i = 0; i < 5; i++) created.push(await createCredit(tenant, { name: `Credit ${i}` }))
    await app.request("POST", `/credits/${created[1].id}/archive`, { key: tenant.apiKey })

    const all = await as(tenant).get("/credits")
    expect(all.status).toBe(200)
    expect(all.body.statusDetail).toEqual({ status: "SUCCESS", message: "Credits" })
    expect(all.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 0", "Credit 1", "Credit 2", "Credit 3", "Credit 4"])
    const active = await as(tenant).get("/credits?active=true")
    expect(active.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 0", "Credit 2", "Credit 3", "Credit 4"])
    const archived = await as(tenant).get("/credits?active=false")
    expect(archived.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 1"])

    const first = await as(tenant).get("/credits?limit=2")
    expect(first.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 0", "Credit 1"])
    const second = await as(tenant).get(`/credits?limit=2&cursor=${first.body.result.credits[1].id}`)
    expect(second.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 2", "Credit 3"])
    const last = await as(tenant).get(`/credits?limit=2&cursor=${second.body.result.credits[1].id}&active=true`)
    expect(last.body.result.credits.map((c: any) => c.name)).toEqual(["Credit 4"])
    expect((await as(tenant).get("/credits?limit=5000")).status).toBe(200)

    expectError(await as(tenant).get("/credits?active=yes"), 400, "validation_failed")
    expectError(await as(tenant).get("/credits?limit=0"), 400, "validation_failed")
  })
})

describe("isolation between organisations", () => {
  it("answers 404 on every route for another organisation's credit and never lists it", async () => {
    const credit = await createCredit(acme)
    expectError(await as(other).get(`/credits/${credit.id}`), 404, "credit_not_found")
    expectError(await as(other).patch(`/credits/${credit.id}`, { name: "Mine now" }), 404, "credit_not_found")
    expectError(await as(other).post(`/credits/${credit.id}/archive`), 404, "credit_not_found")
    expectError(await as(other).post(`/credits/${credit.id}/unarchive`), 404, "credit_not_found")
    const listed = await as(other).get("/credits?limit=200")
    expect(listed.body.result.credits.map((c: any) => c.id)).not.toContain(credit.id)
    expect((await as(acme).get(`/credits/${credit.id}`)).body.result.credit).toEqual(credit)
  })
})

// Each CLI call starts a process of its own: slow on a busy machine.
describe("billing credit (CLI)", { timeout: 240_000 }, () => {
  it("creates, lists, gets, updates, archives and unarchives with --json", async () => {
    const tenant = await app.tenant("Cli")
    const org = ["--org", tenant.organizationId, "--json"]
    const created = await app.cli([
      "credit",
      "create",
      "--name",
      "Cli credit",
      "--agent-key",
      "cli.credit",
      "--margin",
      "20",
      "--model-bundle",
      JSON.stringify([gpt4oItem]),
      ...org
    ])
    expect(created.stderr).toBe("")
    expect(created.code).toBe(0)
    expect(created.json).toEqual({
      created: true,
      credit: expect.objectContaining({ agentKey: "cli.credit", basePrice: 0.004625, pricePerCredit: 0.00555 })
    })
    const id = created.json.credit.id
    // What the CLI wrote, the API reads.
    expect((await as(tenant).get(`/credits/${id}`)).body.result.credit).toEqual(created.json.credit)

    const listed = await app.cli(["credit", "list", ...org])
    expect(listed.json.credits.map((c: any) => c.id)).toEqual([id])
    expect((await app.cli(["credit", "get", id, ...org])).json.credit.id).toBe(id)

    const updated = await app.cli(["credit", "update", id, "--margin", "50", ...org])
    expect(updated.json).toMatchObject({ updated: true, credit: { pricePerCredit: 0.0069375 } })

    const archived = await app.cli(["credit", "archive", id, ...org])
    expect(archived.json).toMatchObject({ archived: true, credit: { isActive: false } })
    expect((await app.cli(["credit", "list", "--active", ...org])).json.credits).toEqual([])
    const unarchived = await app.cli(["credit", "unarchive", id, ...org])
    expect(unarchived.json).toMatchObject({ unarchived: true, credit: { isActive: true } })
  })

  it("fails with a message on stderr and a non-zero exit", async () => {
    const tenant = await app.tenant("Cli errors")
    const bad = await app.cli(["credit", "create", "--name", "x", "--org", tenant.organizationId, "--json"])
    expect(bad.code).toBe(2)
    // The flag a person types, not the API field behind it (docs/cli.md).
    expect(bad.stderr).toContain("--agent-key is required")
    expect(bad.stderr).not.toContain("agentKey")
    expect(bad.stdout).toBe("")
    const missing = await app.cli(["credit", "get", "cred_missing", "--org", tenant.organizationId, "--json"])
    expect(missing.code).toBe(4)
    expect(missing.stderr).toContain("not found")
    // Another organisation's credit is not found either.
    const credit = await createCredit(acme)
    const foreign = await app.cli(["credit", "get", credit.id, "--org", tenant.organizationId, "--json"])
    expect(foreign.code).not.toBe(0)
  })
})

describe.skipIf(!usesRealPostgres)("concurrent writes (needs real PostgreSQL)", () => {
  it("lets exactly one of several simultaneous creates take an agentKey", async () => {
    const tenant = await app.tenant("Racer")
    const results = await Promise.all(
      Array.from({ length: 6 }, () => as(tenant).post("/credits", creditBody({ agentKey: "raced.key" })))
    )
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409])
    expect(await countCredits(tenant)).toBe(1)
  })
})
