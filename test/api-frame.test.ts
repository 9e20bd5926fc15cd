import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/organizations/ApiKeys.ts"
import { expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
})
afterAll(() => app.close())

describe("authentication", () => {
  it("accepts a valid key", async () => {
    const response = await app.request("GET", "/customers", { key: acme.apiKey })
    expect(response.status).toBe(200)
    expect(response.body.statusDetail.status).toBe("SUCCESS")
  })

  it.each([
    ["no header", {}],
    ["an empty bearer", { authorization: "Bearer " }],
    ["a wrong scheme", { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` }],
    ["a token without the Bearer prefix", { authorization: "sk_abcdefghijklmnopq" }],
    ["an unknown key", { authorization: "Bearer sk_unknownunknownunknown" }]
  ])("answers 401 in the envelope for %s", async (_, headers) => {
    expectError(await app.request("GET", "/customers", { key: null, headers }), 401, "api_key_refused")
  })

  it("answers 401 for the prefix of a real key with one character off", async () => {
    const wrong = acme.apiKey.slice(0, -1) + (acme.apiKey.endsWith("a") ? "b" : "a")
    expectError(await app.request("GET", "/customers", { key: wrong }), 401, "api_key_refused")
  })

  it("answers 401 for a revoked key (revoked from the CLI) and for an expired one", async () => {
    const tenant = await app.tenant("Keys")
    const created = await app.cli(["key", "create", "--org", tenant.organizationId, "--name", "ci", "--json"])
    expect(created.code).toBe(0)
    const key: string = created.json.apiKey
    expect(key).toMatch(/^sk_/)
    expect((await app.request("GET", "/customers", { key })).status).toBe(200)
    const revoked = await app.spawnCli(["key", "revoke", created.json.key.id, "--org", tenant.organizationId, "--json"])
    expect(revoked.code).toBe(0)
    expect(revoked.json.key.revokedAt).not.toBeNull()
    expectError(await app.request("GET", "/customers", { key }), 401, "api_key_refused")

    const expired = await app.run(
      Effect.flatMap(ApiKeys, (keys) => keys.create(tenant.organizationId, { expiresAt: new Date(Date.now() - 1000) }))
    )
    expectError(await app.request("GET", "/customers", { key: expired.secret }), 401, "api_key_refused")
  })

  it("stores keys only as hashes", async () => {
    const listed = await app.cli(["key", "list", "--org", acme.organizationId, "--json"])
    expect(listed.code).toBe(0)
    expect(JSON.stringify(listed.json)).not.toContain(acme.apiKey)
    const rows = await app.run(
      Effect.flatMap(ApiKeys, (keys) => keys.list(acme.organizationId))
    )
    expect(rows.length).toBeGreaterThan(0)
  })
})

describe("the envelope on every path", () => {
  it("answers an unknown route with 404, with or without a key", async () => {
    expectError(await app.request("GET", "/no-such-thing", { key: acme.apiKey }), 404, "route_not_found")
    expectError(await app.request("GET", "/no-such-thing", { key: null }), 404, "route_not_found")
  })

  it("answers a known path with the wrong method with 405", async () => {
    expectError(await app.request("PUT", "/customers", { key: acme.apiKey, body: {} }), 405, "method_not_allowed")
    expectError(await app.request("POST", "/customers/cus_x", { key: acme.apiKey, body: {} }), 405, "method_not_allowed")
  })

  it("answers invalid JSON, a non-object body and a schema failure with 400 naming the field", async () => {
    expectError(await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "{not json" }), 400, "invalid_json")
    expectError(await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "[1,2]" }), 400, "validation_failed")
    const missing = await app.request("POST", "/customers", { key: acme.apiKey, body: { name: "x" } })
    expectError(missing, 400, "validation_failed")
    expect(missing.body.statusDetail.message).toContain("email")
  })

  it("answers a bad query parameter with 400", async () => {
    const response = await app.request("GET", "/customers?limit=-3", { key: acme.apiKey })
    expectError(response, 400, "validation_failed")
    expect(response.body.statusDetail.message).toContain("limit")
  })

  it("answers input PostgreSQL cannot store, malformed paths and non-object bodies with 400, never 500", async () => {
    const nul = await app.request("POST", "/customers", {
      key: acme.apiKey,
      rawBody: JSON.stringify({ name: "Jo\u0000x", email: "jo@example.com" })
    })
    expectError(nul, 400, "validation_failed")
    expectError(await app.request("GET", "/customers?q=%00", { key: acme.apiKey }), 400, "validation_failed")
    expectError(await app.request("GET", "/customers/abc%00", { key: acme.apiKey }), 400, "validation_failed")
    expectError(await app.request("GET", "/customers/%ZZ", { key: acme.apiKey }), 400, "validation_failed")
    const array = await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "[]" })
    expectError(array, 400, "validation_failed")
    expect(array.body.statusDetail.message).toBe("Invalid request: the body must be a JSON object")
    const list = await app.request("GET", "/customers?q=Jo", { key: acme.apiKey })
    expect(list.body.result.customers).toEqual([])
  })

  it("carries a request id on every answer", async () => {
    const response = await app.request("GET", "/customers", { key: acme.apiKey, headers: { "x-request-id": "req-123" } })
    expect(response.headers.get("x-request-id")).toBe("req-123")
    const generated = await app.request("GET", "/nope", { key: null })
    expect(generated.headers.get("x-request-id")).toMatch(/[0-9a-f-]{36}/)
  })
})

describe("documentation", () => {
  it("serves the OpenAPI document generated from the API", async () => {
    const response = await app.request("GET", "/openapi.json", { key: null })
    expect(response.status).toBe(200)
    expect(response.body.openapi).toMatch(/^3\./)
    expect(Object.keys(response.body.paths)).toContain("/api/v1/customers")
    expect(Object.keys(response.body.paths)).toContain("/api/v1/customers/ext/{externalId}")
  })

  it("serves a browsable reference at /docs", async () => {
    const response = await fetch(app.baseUrl.replace("/api/v1", "/docs"))
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/html")
    expect(await response.text()).toContain("api-reference")
  })
})
