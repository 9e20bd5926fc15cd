/**
 * Strict queries (docs/api.md, "Strict queries"; src/http/StrictQuery.ts): a
 * query parameter a route does not take is 400 `validation_failed` naming it,
 * on every route of the API, read from the routes' declared schemas; declared
 * parameters work as before; the key is judged first (401); what lies outside
 * the API's routes (the customer's pages, the OpenAPI document) is untouched.
 * Every operation of the served document is swept, so a new route is covered
 * without a change here. Both databases.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let tenant: Tenant
let document: any

beforeAll(async () => {
  app = await startTestApp()
  tenant = await app.tenant("Strict queries")
  document = (await app.request("GET", "/openapi.json", { key: null })).body
})
afterAll(() => app?.close())

const get = (path: string, key: string | null = tenant.apiKey) => app.request("GET", path, { key })

const expectUnknownParameter = (response: { status: number; body: any }, name: string) => {
  expect(response.status).toBe(400)
  expect(response.body.statusCode).toBe(400)
  expect(response.body.statusDetail).toMatchObject({ status: "ERROR", code: "validation_failed" })
  expect(response.body.statusDetail.message).toContain(`unknown query parameter "${name}"`)
  expect(response.body.result).toEqual({})
}

describe("an unknown query parameter", () => {
  it("GET /invoices?externalId=...: 400 naming it, where it used to answer every invoice", async () => {
    const response = await get("/invoices?externalId=acme-ai-1")
    expectUnknownParameter(response, "externalId")
    // The message says what the route takes, so the caller sees customerId is the filter.
    expect(response.body.statusDetail.message).toContain("this route takes limit, cursor, customerId")
  })

  it("GET /customers?bogus=1 and GET /signals?state=FAILED: 400 naming each", async () => {
    expectUnknownParameter(await get("/customers?bogus=1"), "bogus")
    expectUnknownParameter(await get("/signals?state=FAILED"), "state")
    // Several unknown ones are all named; a known one beside them does not hide them.
    const several = await get("/customers?limit=5&bogus=1&other=2")
    expect(several.status).toBe(400)
    expect(several.body.statusDetail.message).toContain(`unknown query parameters "bogus", "other"`)
  })

  it("on a route that takes none: 400, saying it takes none", async () => {
    const created = await app.request("POST", "/customers", { key: tenant.apiKey, body: { name: "Jo", email: "jo@example.com" } })
    expect(created.status).toBe(201)
    const response = await get(`/customers/${created.body.result.customer.id}?expand=members`)
    expectUnknownParameter(response, "expand")
    expect(response.body.statusDetail.message).toContain("this route takes no query parameters")
  })

  it("on a write: 400 and nothing written", async () => {
    const before = (await get("/customers?q=dry-run-probe")).body.result.customers.length
    const response = await app.request("POST", "/customers?dryRun=true", {
      key: tenant.apiKey,
      body: { name: "dry-run-probe", email: "dry@example.com" }
    })
    expectUnknownParameter(response, "dryRun")
    expect((await get("/customers?q=dry-run-probe")).body.result.customers.length).toBe(before)
  })

  it("the key is judged first: 401 without a valid key, whatever the query", async () => {
    const response = await get("/customers?bogus=1", null)
    expect(response.status).toBe(401)
    expect(response.body.statusDetail.code).toBe("api_key_refused")
    expect((await get("/customers?bogus=1", "sk_not_a_key")).status).toBe(401)
  })

  it("every operation of the document refuses one, before its path or body is looked at", async () => {
    const operations: Array<{ method: string; path: string }> = []
    for (const [path, item] of Object.entries<any>(document.paths)) {
      for (const method of Object.keys(item)) operations.push({ method: method.toUpperCase(), path: path.replace(/^\/api\/v1/, "") })
    }
    expect(operations.length).toBeGreaterThan(60)
    const refused: Array<string> = []
    for (const { method, path } of operations) {
      // Path parameters get a value of the right form that names nothing: the query is refused before any look-up.
      const concrete = path.replace(/\{[^}]+\}/g, "zz_none")
      const response = await app.request(method, `${concrete}?zzUnknown=1`, {
        key: tenant.apiKey,
        ...(method === "GET" || method === "DELETE" ? {} : { body: {} })
      })
      if (response.status === 400 && String(response.body.statusDetail?.message).includes(`unknown query parameter "zzUnknown"`)) {
        refused.push(`${method} ${path}`)
      }
    }
    expect(refused).toEqual(operations.map(({ method, path }) => `${method} ${path}`))
  })
})

describe("declared parameters", () => {
  it("are taken as before, on several routes", async () => {
    const customer = (await app.request("POST", "/customers", {
      key: tenant.apiKey,
      body: { name: "Declared", email: "declared@example.com", externalId: "declared-1" }
    })).body.result.customer
    const listed = await get("/customers?limit=2&q=declared&includeArchived=false")
    expect(listed.status).toBe(200)
    expect(listed.body.result.customers.map((c: any) => c.id)).toEqual([customer.id])
    expect((await get(`/invoices?customerId=${customer.id}&limit=10`)).status).toBe(200)
    expect((await get(`/signals?customerId=${customer.id}&status=FAILED`)).status).toBe(200)
    expect((await get("/credits?active=true&limit=5")).status).toBe(200)
    // A parameter given twice is judged by its schema, as before (not as an unknown name).
    expect((await get("/customers?limit=1&limit=2")).body.statusDetail.code).toBe("validation_failed")
  })

  it("a declared parameter with a bad value is still the schema's 400, naming it", async () => {
    const response = await get("/customers?limit=0")
    expect(response.status).toBe(400)
    expect(response.body.statusDetail.message).toContain("limit")
    expect(response.body.statusDetail.message).not.toContain("unknown query parameter")
  })
})

describe("outside the API's routes", () => {
  it("the OpenAPI document and the customer's pages take their own query", async () => {
    const openapi = await fetch(`${app.baseUrl}/openapi.json?download=1`)
    expect(openapi.status).toBe(200)
    const origin = app.baseUrl.replace(/\/api\/v1$/, "")
    // The portal reads its token from the query: a bad token is its own 401 page, not a 400 envelope.
    const portal = await fetch(`${origin}/portal?token=pt_bad&utm_source=mail`)
    expect(portal.status).toBe(401)
    expect(portal.headers.get("content-type")).toContain("text/html")
  })
})
