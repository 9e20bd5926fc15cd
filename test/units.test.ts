import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
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

let keyCounter = 0
const freshKey = (prefix = "unit") => `${prefix}-${++keyCounter}`

const slab = (agentKey = freshKey()) => ({
  name: "API calls",
  agentKey,
  pricingType: "SLAB",
  tiers: [{ upTo: 100, price: 0.5 }, { upTo: 1000, price: 0.25 }, { upTo: null, price: 0.1 }]
})

const createUnit = async (tenant: Tenant, body: unknown) => {
  const response = await as(tenant).post("/units", body)
  expect(response.status).toBe(201)
  return response.body.result.unit
}

describe("POST /units", () => {
  it("creates a FLAT unit in the envelope, recording the creating key's name", async () => {
    const response = await as(acme).post("/units", {
      name: "Emails sent",
      agentKey: "emails.sent",
      description: "one outgoing e-mail",
      pricingType: "FLAT",
      flatPrice: 0.0125
    })
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Unit created" })
    expect(response.body.result.created).toBe(true)
    const unit = response.body.result.unit
    expect(unit).toEqual({
      id: expect.stringMatching(/^unit_/),
      name: "Emails sent",
      agentKey: "emails.sent",
      description: "one outgoing e-mail",
      pricingType: "FLAT",
      flatPrice: 0.0125,
      tiers: [],
      isActive: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      createdByName: "default"
    })
    expect(new Date(unit.createdAt).toISOString()).toBe(unit.createdAt)
  })

  it("creates SLAB and VOLUME units with ordered tiers that each get an id", async () => {
    const unit = await createUnit(acme, slab())
    expect(unit.pricingType).toBe("SLAB")
    // A number where the spec says number: 0 on tiered units; sent back, it means "not set".
    expect(unit.flatPrice).toBe(0)
    expect(unit.description).toBeNull()
    const again = await as(acme).patch(`/units/${unit.id}`, { pricingType: "SLAB", flatPrice: 0, tiers: unit.tiers.map(({ upTo, price }: any) => ({ upTo, price })) })
    expect(again.status, JSON.stringify(again.body)).toBe(200)
    expect(again.body.result.unit.flatPrice).toBe(0)
    expect(unit.tiers).toEqual([
      { id: expect.stringMatching(/^tier_/), upTo: 100, price: 0.5, order: 1 },
      { id: expect.stringMatching(/^tier_/), upTo: 1000, price: 0.25, order: 2 },
      { id: expect.stringMatching(/^tier_/), upTo: null, price: 0.1, order: 3 }
    ])
    expect(new Set(unit.tiers.map((t: any) => t.id)).size).toBe(3)
    const volume = await createUnit(acme, { ...slab(), pricingType: "VOLUME", tiers: [{ upTo: 2.5, price: 3 }, { price: 1 }] })
    expect(volume.tiers.map((t: any) => [t.upTo, t.price])).toEqual([[2.5, 3], [null, 1]])
  })

  it("keeps tier decimals exact", async () => {
    const unit = await createUnit(acme, {
      ...slab(),
      tiers: [{ upTo: 0.000001, price: 123456.123456789 }, { upTo: null, price: 0.1 }]
    })
    expect(unit.tiers[0].upTo).toBe(0.000001)
    expect(unit.tiers[0].price).toBe(123456.123456789)
  })

  it.each([
    [{ agentKey: "a", pricingType: "FLAT", flatPrice: 1 }, "name", "validation_failed"],
    [{ name: "", agentKey: "a", pricingType: "FLAT", flatPrice: 1 }, "name", "validation_failed"],
    [{ name: "x".repeat(81), agentKey: "a", pricingType: "FLAT", flatPrice: 1 }, "name", "validation_failed"],
    [{ name: "A", pricingType: "FLAT", flatPrice: 1 }, "agentKey", "validation_failed"],
    [{ name: "A", agentKey: "", pricingType: "FLAT", flatPrice: 1 }, "agentKey", "validation_failed"],
    [{ name: "A", agentKey: "Upper", pricingType: "FLAT", flatPrice: 1 }, "agentKey", "validation_failed"],
    [{ name: "A", agentKey: "has space", pricingType: "FLAT", flatPrice: 1 }, "agentKey", "validation_failed"],
    [{ name: "A", agentKey: "k".repeat(81), pricingType: "FLAT", flatPrice: 1 }, "agentKey", "validation_failed"],
    [{ name: "A", agentKey: "a", description: "d".repeat(401), pricingType: "FLAT", flatPrice: 1 }, "description", "validation_failed"],
    [{ name: "A", agentKey: "a", flatPrice: 1 }, "pricingType", "validation_failed"],
    [{ name: "A", agentKey: "a", pricingType: "TIERED", flatPrice: 1 }, "pricingType", "validation_failed"],
    [{ name: "A", agentKey: "a", pricingType: "FLAT" }, "flatPrice", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "FLAT", flatPrice: -1 }, "flatPrice", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "FLAT", flatPrice: "1" }, "flatPrice", "validation_failed"],
    [{ name: "A", agentKey: "a", pricingType: "FLAT", flatPrice: 1, tiers: [{ upTo: null, price: 1 }] }, "tiers", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB" }, "tiers", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [] }, "tiers", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", flatPrice: 1, tiers: [{ upTo: null, price: 1 }] }, "flatPrice", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [{ upTo: 10, price: 1 }] }, "last tier", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "VOLUME", tiers: [{ upTo: null, price: 1 }, { upTo: null, price: 1 }] }, "last tier", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [{ upTo: 10, price: 1 }, { upTo: 5, price: 1 }, { upTo: null, price: 1 }] }, "ascending", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [{ upTo: 0, price: 1 }, { upTo: null, price: 1 }] }, "ascending", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [{ upTo: 10, price: -1 }, { upTo: null, price: 1 }] }, "price", "invalid_unit_pricing"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: [{ upTo: 10 }, { upTo: null, price: 1 }] }, "price", "validation_failed"],
    [{ name: "A", agentKey: "a", pricingType: "SLAB", tiers: Array.from({ length: 101 }, (_, i) => ({ upTo: i === 100 ? null : i + 1, price: 1 })) }, "tiers", "validation_failed"]
  ])("rejects %j with 400 naming %s (%s) and writes nothing", async (body, field, code) => {
    const before = await as(acme).get("/units?limit=200")
    const response = await as(acme).post("/units", body)
    expectError(response, 400, code as ErrorCode)
    expect(response.body.statusDetail.message).toContain(field)
    const after = await as(acme).get("/units?limit=200")
    expect(after.body.result.units.length).toBe(before.body.result.units.length)
  })

  it("accepts the limits themselves: 80-character name and agentKey, 400-character description, price 0", async () => {
    const unit = await createUnit(acme, {
      name: "n".repeat(80),
      agentKey: `k${"0".repeat(74)}${++keyCounter}`.slice(0, 80),
      description: "d".repeat(400),
      pricingType: "FLAT",
      flatPrice: 0
    })
    expect(unit.flatPrice).toBe(0)
  })

  it("refuses an agentKey held by another active unit with 409, allows it after archive and in another org", async () => {
    const first = await createUnit(acme, slab("shared.key"))
    expectError(await as(acme).post("/units", slab("shared.key")), 409, "agent_key_taken")
    expect((await as(other).post("/units", slab("shared.key"))).status).toBe(201)
    await as(acme).post(`/units/${first.id}/archive`)
    const second = await createUnit(acme, slab("shared.key"))
    expectError(await as(acme).post(`/units/${first.id}/unarchive`), 409, "agent_key_taken")
    expect((await as(acme).get(`/units/${first.id}`)).body.result.unit.isActive).toBe(false)
    expect(second.isActive).toBe(true)
  })

  it("lets exactly one of several simultaneous creates with one agentKey win; the others are 409", async () => {
    const answers = await Promise.all([1, 2, 3].map(() => as(acme).post("/units", slab("race.key"))))
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409, 409])
    const active = (await as(acme).get("/units?active=true&limit=200")).body.result.units
    expect(active.filter((unit: any) => unit.agentKey === "race.key")).toHaveLength(1)
  })

  it("answers invalid JSON, a missing key and a bad key in the envelope", async () => {
    expectError(await app.request("POST", "/units", { key: acme.apiKey, rawBody: "{\"name\":" }), 400, "invalid_json")
    expectError(await app.request("POST", "/units", { body: slab() }), 401, "api_key_refused")
    expectError(await app.request("GET", "/units", { key: "sk_nope" }), 401, "api_key_refused")
  })
})

describe("authentication on every /units route", () => {
  it.each([
    ["GET", "/units"],
    ["POST", "/units"],
    ["GET", "/units/x"],
    ["PATCH", "/units/x"],
    ["POST", "/units/x/archive"],
    ["POST", "/units/x/unarchive"]
  ])("%s %s without a valid key is 401 in the envelope", async (method, path) => {
    const body = method === "GET" ? {} : { body: {} }
    expectError(await app.request(method, path, body), 401, "api_key_refused")
    expectError(await app.request(method, path, { key: "sk_revoked_or_unknown", ...body }), 401, "api_key_refused")
  })
})

describe("GET /units", () => {
  it("lists by creation with cursor pages and the active filter", async () => {
    const tenant = await app.tenant("Lister")
    const ids: Array<string> = []
    for (let i = 0; i < 4; i++) ids.push((await createUnit(tenant, slab(`list-${i}`))).id)
    await app.request("POST", `/units/${ids[1]}/archive`, { key: tenant.apiKey })
    const list = (query: string) =>
      app.request("GET", `/units${query}`, { key: tenant.apiKey }).then((r) => {
        expect(r.status).toBe(200)
        expect(r.body.statusDetail.status).toBe("SUCCESS")
        return r.body.result.units.map((u: any) => u.id)
      })
    expect(await list("")).toEqual(ids)
    expect(await list("?active=true")).toEqual([ids[0], ids[2], ids[3]])
    expect(await list("?active=false")).toEqual([ids[1]])
    expect(await list("?limit=2")).toEqual(ids.slice(0, 2))
    expect(await list(`?limit=2&cursor=${ids[1]}`)).toEqual(ids.slice(2))
    expect(await list("?limit=5000")).toEqual(ids)
    expectError(await app.request("GET", "/units?active=yes", { key: tenant.apiKey }), 400, "validation_failed")
    expectError(await app.request("GET", "/units?limit=0", { key: tenant.apiKey }), 400, "validation_failed")
    expect((await app.request("GET", "/units", { key: other.apiKey })).body.result.units.map((u: any) => u.id))
      .not.toContain(ids[0])
  })
})

describe("GET, PATCH /units/{id}, archive and unarchive", () => {
  it("gets a unit, 404 when missing or of another organisation on every route", async () => {
    const unit = await createUnit(acme, slab())
    const got = await as(acme).get(`/units/${unit.id}`)
    expect(got.status).toBe(200)
    expect(got.body.statusDetail.status).toBe("SUCCESS")
    expect(got.body.result).toEqual({ unit })
    for (const id of [unit.id, "unit_missing"]) {
      const tenant = id === unit.id ? other : acme
      expectError(await as(tenant).get(`/units/${id}`), 404, "unit_not_found")
      expectError(await as(tenant).patch(`/units/${id}`, { name: "x" }), 404, "unit_not_found")
      expectError(await as(tenant).post(`/units/${id}/archive`), 404, "unit_not_found")
      expectError(await as(tenant).post(`/units/${id}/unarchive`), 404, "unit_not_found")
    }
    expect((await as(acme).get(`/units/${unit.id}`)).body.result.unit).toEqual(unit)
  })

  it("PATCH changes only the sent fields; sending tiers replaces them", async () => {
    const unit = await createUnit(acme, { ...slab(), description: "keep me" })
    const renamed = await as(acme).patch(`/units/${unit.id}`, { name: "Renamed" })
    expect(renamed.status).toBe(200)
    expect(renamed.body.statusDetail).toEqual({ status: "SUCCESS", message: "Unit updated" })
    expect(renamed.body.result.updated).toBe(true)
    expect(renamed.body.result.unit).toMatchObject({
      name: "Renamed",
      description: "keep me",
      agentKey: unit.agentKey,
      tiers: unit.tiers,
      createdByName: "default"
    })
    const retiered = (await as(acme).patch(`/units/${unit.id}`, { tiers: [{ upTo: 5, price: 2 }, { upTo: null, price: 1 }] }))
      .body.result.unit
    expect(retiered.tiers.map((t: any) => [t.upTo, t.price, t.order])).toEqual([[5, 2, 1], [null, 1, 2]])
    const cleared = (await as(acme).patch(`/units/${unit.id}`, { description: null })).body.result.unit
    expect(cleared.description).toBeNull()
  })

  it("PATCH can switch pricing type, dropping the old type's fields", async () => {
    const unit = await createUnit(acme, slab())
    expectError(await as(acme).patch(`/units/${unit.id}`, { pricingType: "FLAT" }), 400, "invalid_unit_pricing")
    const flat = (await as(acme).patch(`/units/${unit.id}`, { pricingType: "FLAT", flatPrice: 2 })).body.result.unit
    expect(flat).toMatchObject({ pricingType: "FLAT", flatPrice: 2, tiers: [] })
    expectError(await as(acme).patch(`/units/${unit.id}`, { pricingType: "VOLUME" }), 400, "invalid_unit_pricing")
    const volume = (await as(acme).patch(`/units/${unit.id}`, { pricingType: "VOLUME", tiers: [{ upTo: null, price: 3 }] }))
      .body.result.unit
    expect(volume).toMatchObject({ pricingType: "VOLUME", flatPrice: 0 })
    expect(volume.tiers).toHaveLength(1)
    const slabAgain = (await as(acme).patch(`/units/${unit.id}`, { pricingType: "SLAB" })).body.result.unit
    expect(slabAgain.tiers).toEqual(volume.tiers)
  })

  it("PATCH rejects bad fields with 400 and an agentKey clash with 409, changing nothing", async () => {
    const unit = await createUnit(acme, slab())
    const taken = await createUnit(acme, slab())
    expectError(await as(acme).patch(`/units/${unit.id}`, { name: "" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/units/${unit.id}`, { agentKey: "BAD KEY" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/units/${unit.id}`, { description: "d".repeat(401) }), 400, "validation_failed")
    expectError(await as(acme).patch(`/units/${unit.id}`, { tiers: [{ upTo: 5, price: 1 }] }), 400, "invalid_unit_pricing")
    expectError(await as(acme).patch(`/units/${unit.id}`, { flatPrice: 3 }), 400, "invalid_unit_pricing")
    expectError(await as(acme).patch(`/units/${unit.id}`, { agentKey: taken.agentKey }), 409, "agent_key_taken")
    expect((await as(acme).get(`/units/${unit.id}`)).body.result.unit).toEqual(unit)
  })

  it("archives and unarchives, idempotently", async () => {
    const unit = await createUnit(acme, slab())
    const archived = await as(acme).post(`/units/${unit.id}/archive`)
    expect(archived.status).toBe(200)
    expect(archived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Unit archived" })
    expect(archived.body.result.archived).toBe(true)
    expect(archived.body.result.unit.isActive).toBe(false)
    expect((await as(acme).post(`/units/${unit.id}/archive`)).body.result.unit.isActive).toBe(false)
    expect((await as(acme).get("/units?active=true")).body.result.units.map((u: any) => u.id)).not.toContain(unit.id)
    const unarchived = await as(acme).post(`/units/${unit.id}/unarchive`)
    expect(unarchived.status).toBe(200)
    expect(unarchived.body.result.unarchived).toBe(true)
    expect(unarchived.body.result.unit.isActive).toBe(true)
    expect((await as(acme).get("/units?active=true")).body.result.units.map((u: any) => u.id)).toContain(unit.id)
  })
})

describe("billing unit (CLI)", () => {
  it("creates from flags and from a YAML file, lists, gets, updates, archives and unarchives with --json", async () => {
    const org = ["--org", acme.organizationId, "--json"]
    const created = await app.cli(["unit", "create", ...org, "--name", "Seats", "--agent-key", "cli.seats", "--pricing-type", "FLAT", "--flat-price", "12.5"])
    expect(created.code, created.stderr).toBe(0)
    expect(created.json.unit).toMatchObject({ name: "Seats", pricingType: "FLAT", flatPrice: 12.5, createdByName: "cli" })
    const id = created.json.unit.id
    const { writeFileSync } = await import("node:fs")
    const file = `/tmp/units-cli-${process.pid}.yaml`
    writeFileSync(file, "name: Tiered\nagentKey: cli.tiered\npricingType: VOLUME\ntiers:\n  - upTo: 10\n    price: 1\n  - upTo: null\n    price: 0.5\n")
    const fromFile = await app.cli(["unit", "create", ...org, "--file", file])
    expect(fromFile.code, fromFile.stderr).toBe(0)
    expect(fromFile.json.unit.tiers.map((t: any) => t.price)).toEqual([1, 0.5])
    const listed = await app.cli(["unit", "list", ...org])
    expect(listed.json.units.map((u: any) => u.id)).toContain(id)
    const updated = await app.cli(["unit", "update", id, ...org, "--flat-price", "13"])
    expect(updated.json.unit.flatPrice).toBe(13)
    expect((await app.cli(["unit", "archive", id, ...org])).json.unit.isActive).toBe(false)
    expect((await app.cli(["unit", "list", ...org, "--active"])).json.units.map((u: any) => u.id)).not.toContain(id)
    expect((await app.cli(["unit", "unarchive", id, ...org])).json.unit.isActive).toBe(true)
    const bad = await app.cli(["unit", "create", ...org, "--name", "Bad", "--agent-key", "cli.bad", "--pricing-type", "SLAB"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("tiers")
    const foreign = await app.cli(["unit", "get", id, "--org", other.organizationId, "--json"])
    expect(foreign.code).not.toBe(0)
    expect(foreign.stderr).toContain("not found")
    const human = await app.cli(["unit", "get", id, "--org", acme.organizationId])
    expect(human.code).toBe(0)
    expect(human.stdout).toContain("Seats")
  })
})
