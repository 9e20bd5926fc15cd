import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

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

describe("POST /customers", () => {
  it("creates a customer in the envelope with every field", async () => {
    const response = await as(acme).post("/customers", {
      name: "Jo Bloggs",
      email: "jo@example.com",
      externalId: "jo-1",
      city: "Lisbon"
    })
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Customer created" })
    const customer = response.body.result.customer
    expect(response.body.result.created).toBe(true)
    expect(customer).toMatchObject({
      name: "Jo Bloggs",
      email: "jo@example.com",
      externalId: "jo-1",
      city: "Lisbon",
      website: null,
      currencyCode: "USD",
      archivedAt: null
    })
    expect(customer.id).toMatch(/^cus_/)
    expect(customer.slug).toMatch(/^jo-bloggs-/)
    expect(new Date(customer.createdAt).toISOString()).toBe(customer.createdAt)
  })

  it("leaves externalId null when unset", async () => {
    const response = await as(acme).post("/customers", { name: "No Ext", email: "noext@example.com" })
    expect(response.status).toBe(201)
    expect(response.body.result.customer.externalId).toBeNull()
  })

  it.each([
    [{ email: "a@example.com" }, "name"],
    [{ name: "A" }, "email"],
    [{ name: "A", email: "not-an-email" }, "email"],
    [{ name: "A", email: "a@example.com", externalId: "has_underscore" }, "externalId"],
    [{ name: "A", email: "a@example.com", externalId: "x".repeat(33) }, "externalId"],
    [{ name: "A", email: "a@example.com", externalId: "" }, "externalId"],
    [{ name: 5, email: "a@example.com" }, "name"],
    [{ name: "A", email: "a@example.com", description: "d".repeat(401) }, "description"]
  ])("rejects %j with 400 naming %s and writes nothing", async (body, field) => {
    const before = await as(acme).get("/customers?limit=200")
    const response = await as(acme).post("/customers", body)
    expectError(response, 400, "validation_failed")
    expect(response.body.statusDetail.message).toContain(field)
    const after = await as(acme).get("/customers?limit=200")
    expect(after.body.result.customers.length).toBe(before.body.result.customers.length)
  })

  it("refuses an externalId held by another active customer with 409", async () => {
    await as(acme).post("/customers", { name: "First", email: "first@example.com", externalId: "dup-1" })
    const response = await as(acme).post("/customers", { name: "Second", email: "second@example.com", externalId: "dup-1" })
    expectError(response, 409, "external_id_taken")
  })

  it("treats externalId as case-sensitive", async () => {
    await as(acme).post("/customers", { name: "Lower", email: "l@example.com", externalId: "case-a" })
    const upper = await as(acme).post("/customers", { name: "Upper", email: "u@example.com", externalId: "CASE-A" })
    expect(upper.status).toBe(201)
  })

  it("lets another organisation use the same externalId", async () => {
    await as(acme).post("/customers", { name: "Mine", email: "m@example.com", externalId: "shared-1" })
    const response = await as(other).post("/customers", { name: "Theirs", email: "t@example.com", externalId: "shared-1" })
    expect(response.status).toBe(201)
  })

  it("answers invalid JSON with 400 in the envelope", async () => {
    const response = await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "{\"name\":" })
    expectError(response, 400, "invalid_json")
  })
})

describe("GET, PATCH, DELETE /customers/{id} and the /ext twins", () => {
  it("gets by id and by external id, and 404s across organisations", async () => {
    const created = (await as(acme).post("/customers", { name: "Get Me", email: "g@example.com", externalId: "get-me" }))
      .body.result.customer
    expect((await as(acme).get(`/customers/${created.id}`)).body.result.customer.id).toBe(created.id)
    expect((await as(acme).get("/customers/ext/get-me")).body.result.customer.id).toBe(created.id)
    expectError(await as(other).get(`/customers/${created.id}`), 404, "customer_not_found")
    expectError(await as(other).get("/customers/ext/get-me"), 404, "customer_not_found")
    expectError(await as(other).patch(`/customers/${created.id}`, { name: "x" }), 404, "customer_not_found")
    expectError(await as(other).del(`/customers/${created.id}`), 404, "customer_not_found")
    expectError(await as(acme).get("/customers/cus_missing"), 404, "customer_not_found")
    expectError(await as(acme).get("/customers/ext/not_valid!"), 400, "validation_failed")
    expectError(await as(acme).get("/customers/ext/nobody"), 404, "customer_not_found")
  })

  it("PATCH changes only the sent fields and null clears an optional field", async () => {
    const created = (await as(acme).post("/customers", {
      name: "Patch Me",
      email: "p@example.com",
      phone: "+351 1",
      city: "Porto"
    })).body.result.customer
    const response = await as(acme).patch(`/customers/${created.id}`, { phone: null, name: "Patched" })
    expect(response.status).toBe(200)
    expect(response.body.result.customer).toMatchObject({
      name: "Patched",
      phone: null,
      city: "Porto",
      email: "p@example.com"
    })
    expectError(await as(acme).patch(`/customers/${created.id}`, { email: "nope" }), 400, "validation_failed")
    expectError(await as(acme).patch(`/customers/${created.id}`, { name: null }), 400, "validation_failed")
  })

  it("PATCH by external id changes the externalId, after which the new one addresses it", async () => {
    await as(acme).post("/customers", { name: "Renamed", email: "r@example.com", externalId: "old-ext" })
    const response = await as(acme).patch("/customers/ext/old-ext", { externalId: "new-ext" })
    expect(response.status).toBe(200)
    expect(response.body.result.customer.externalId).toBe("new-ext")
    expectError(await as(acme).get("/customers/ext/old-ext"), 404, "customer_not_found")
    expect((await as(acme).get("/customers/ext/new-ext")).status).toBe(200)
    const cleared = await as(acme).patch("/customers/ext/new-ext", { externalId: null })
    expect(cleared.body.result.customer.externalId).toBeNull()
  })

  it("PATCH to an externalId already held is 409", async () => {
    await as(acme).post("/customers", { name: "Holder", email: "h@example.com", externalId: "held" })
    const other2 = (await as(acme).post("/customers", { name: "Wants", email: "w@example.com" })).body.result.customer
    expectError(await as(acme).patch(`/customers/${other2.id}`, { externalId: "held" }), 409, "external_id_taken")
  })

  it("DELETE archives: PATCH is then 409, the externalId is free again, GET by id still answers", async () => {
    const created = (await as(acme).post("/customers", { name: "Gone", email: "gone@example.com", externalId: "reuse-me" }))
      .body.result.customer
    const archived = await as(acme).del("/customers/ext/reuse-me")
    expect(archived.status).toBe(200)
    expect(archived.body.result.archived).toBe(true)
    expect(archived.body.result.customer.archivedAt).not.toBeNull()
    expectError(await as(acme).get("/customers/ext/reuse-me"), 404, "customer_not_found")
    expectError(await as(acme).patch(`/customers/${created.id}`, { name: "Back" }), 409, "customer_archived")
    expect((await as(acme).get(`/customers/${created.id}`)).body.result.customer.archivedAt).not.toBeNull()
    const reused = await as(acme).post("/customers", { name: "New Holder", email: "nh@example.com", externalId: "reuse-me" })
    expect(reused.status).toBe(201)
    expect((await as(acme).get("/customers/ext/reuse-me")).body.result.customer.id).toBe(reused.body.result.customer.id)
  })
})

describe("GET /customers", () => {
  it("pages by cursor and filters by q on name or e-mail, case-insensitively", async () => {
    const tenant = await app.tenant("Pager")
    for (let i = 0; i < 5; i++) {
      await app.request("POST", "/customers", {
        key: tenant.apiKey,
        body: { name: `Person ${i}`, email: i === 3 ? "SPECIAL@example.com" : `p${i}@example.com` }
      })
    }
    const first = await app.request("GET", "/customers?limit=2", { key: tenant.apiKey })
    expect(first.body.result.customers.map((c: any) => c.name)).toEqual(["Person 0", "Person 1"])
    const cursor = first.body.result.customers[1].id
    const second = await app.request("GET", `/customers?limit=2&cursor=${cursor}`, { key: tenant.apiKey })
    expect(second.body.result.customers.map((c: any) => c.name)).toEqual(["Person 2", "Person 3"])
    const last = await app.request("GET", `/customers?limit=2&cursor=${second.body.result.customers[1].id}`, {
      key: tenant.apiKey
    })
    expect(last.body.result.customers.map((c: any) => c.name)).toEqual(["Person 4"])
    const clamped = await app.request("GET", "/customers?limit=5000", { key: tenant.apiKey })
    expect(clamped.status).toBe(200)
    const byEmail = await app.request("GET", "/customers?q=special", { key: tenant.apiKey })
    expect(byEmail.body.result.customers.map((c: any) => c.name)).toEqual(["Person 3"])
    const byName = await app.request("GET", "/customers?q=PERSON%204", { key: tenant.apiKey })
    expect(byName.body.result.customers.map((c: any) => c.name)).toEqual(["Person 4"])
    expectError(await app.request("GET", "/customers?limit=0", { key: tenant.apiKey }), 400, "validation_failed")
    expectError(await app.request("GET", "/customers?limit=abc", { key: tenant.apiKey }), 400, "validation_failed")
  })
})
