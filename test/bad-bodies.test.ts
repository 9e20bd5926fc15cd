/**
 * Bad input is a 4xx in the envelope on every route, never a 500, and writes
 * nothing. Table-driven from the OpenAPI document: every operation that takes
 * a request body gets a 20,000-deep array, a 5,000-deep `custom` object, a
 * lone UTF-16 surrogate in a string field, a text/plain body and a form body;
 * then no row of the organisation has changed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { jsonDepthExceeds, MAX_JSON_DEPTH } from "../src/http/BodyGuard.ts"
import { unstorableText } from "../src/schema.ts"

let app: TestApp
let acme: Tenant
let customerId: string

interface Operation {
  readonly method: string
  readonly path: string
  readonly stringField: string
}

let operations: Array<Operation> = []

/** Row count and a digest of the rows of every table that holds organisation rows, for `organizationId`. */
const rowsOf = async (organizationId: string) => {
  const tables = await query<{ tableName: string }>(
    app,
    `SELECT table_name FROM information_schema.columns
     WHERE column_name = 'organization_id' AND table_schema = current_schema()
       AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')
     ORDER BY table_name`
  )
  const counts: Record<string, string> = {}
  for (const { tableName } of tables) {
    const [row] = await query<{ count: string; digest: string | null }>(
      app,
      `SELECT count(*) AS count, md5(string_agg(t::text, ',' ORDER BY t::text)) AS digest
       FROM "${tableName}" t WHERE organization_id = $1`,
      [organizationId]
    )
    counts[tableName] = `${row!.count} ${row!.digest}`
  }
  return counts
}

/** The first string property of an operation's body schema, `$ref`s followed. */
const stringFieldOf = (document: any, schema: any, seen = 0): string | undefined => {
  if (schema === undefined || seen > 10) return undefined
  if (schema.$ref) return stringFieldOf(document, document.components.schemas[schema.$ref.split("/").pop()], seen + 1)
  for (const variant of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) {
    const found = stringFieldOf(document, variant, seen + 1)
    if (found) return found
  }
  for (const [name, property] of Object.entries<any>(schema.properties ?? {})) {
    const resolved = property.$ref ? document.components.schemas[property.$ref.split("/").pop()] : property
    const types = [resolved?.type, ...(resolved?.anyOf ?? []).map((v: any) => v.type)]
    if (types.includes("string")) return name
  }
  return undefined
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  const customer = await app.request("POST", "/customers", { key: acme.apiKey, body: { name: "Jo", email: "jo@example.com", externalId: "jo-1" } })
  customerId = customer.body.result.customer.id
  const document = (await app.request("GET", "/openapi.json")).body
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const method of ["post", "put", "patch", "delete"]) {
      const operation = item[method]
      if (!operation?.requestBody) continue
      const schema = operation.requestBody.content?.["application/json"]?.schema
      operations.push({
        method: method.toUpperCase(),
        path: path.replace(/^\/api\/v1/, "").replace("{externalId}", "jo-1").replace(/\{[^}]+\}/g, customerId),
        stringField: stringFieldOf(document, schema) ?? "name"
      })
    }
  }
})
afterAll(() => app.close())

const deepArray = "[".repeat(20_000) + "]".repeat(20_000)
const deepCustom = `{"customerId":"x","custom":${"{\"a\":".repeat(5_000)}1${"}".repeat(5_000)}}`

const expectEnvelope = (response: { status: number; body: any }, status: number) => {
  expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(status)
  expect(response.body).toEqual({
    statusCode: status,
    statusDetail: status === 415
      ? { status: "ERROR", code: "unsupported_media_type", message: expect.any(String) }
      : { status: "ERROR", code: "validation_failed", message: expect.any(String), errors: [{ field: expect.toBeOneOf([expect.any(String), null]), message: expect.any(String) }] },
    result: {}
  })
}

describe("the body checks", () => {
  it("count nesting without recursion, strings aside", () => {
    expect(jsonDepthExceeds(deepArray, MAX_JSON_DEPTH)).toBe(true)
    expect(jsonDepthExceeds("[".repeat(64) + "]".repeat(64), 64)).toBe(false)
    expect(jsonDepthExceeds(`{"a":"${"[".repeat(100)}"}`, 64)).toBe(false)
    expect(jsonDepthExceeds(`{"a":"\\"${"[".repeat(100)}"}`, 64)).toBe(false)
  })

  it("find a lone surrogate or a NUL anywhere, keys included, and only a lone surrogate", () => {
    expect(unstorableText({ a: [1, { b: "ok\ud800" }] })).toEqual({ path: ["a", 1, "b"], reason: "LONE_SURROGATE" })
    expect(unstorableText({ ["k\udc00"]: 1 })).toEqual({ path: ["k\udc00"], reason: "LONE_SURROGATE" })
    expect(unstorableText({ a: ["x", "nul \u0000"] })).toEqual({ path: ["a", 1], reason: "NUL" })
    expect(unstorableText({ a: "emoji \ud83d\ude00 fine" })).toBeUndefined()
  })
})

describe("every operation with a request body", () => {
  it("was found in the OpenAPI document", () => {
    expect(operations.length).toBeGreaterThan(20)
    expect(operations.map((o) => `${o.method} ${o.path}`)).toContain("POST /signal/credit")
  })

  it("answers bad bodies with a 4xx envelope, never a 5xx, and writes nothing", async () => {
    const before = await rowsOf(acme.organizationId)
    const failures: Array<string> = []
    for (const operation of operations) {
      const send = (rawBody: string, contentType = "application/json") =>
        app.request(operation.method, operation.path, { key: acme.apiKey, rawBody, headers: { "content-type": contentType } })
      const cases: Array<[string, () => Promise<{ status: number; body: any }>, number, string?]> = [
        ["20,000-deep array", () => send(deepArray), 400, "nested deeper"],
        ["5,000-deep custom", () => send(deepCustom), 400, "nested deeper"],
        ["lone surrogate", () => send(JSON.stringify({ [operation.stringField]: "bad \ud800 text" })), 400, operation.stringField],
        ["text/plain", () => send(JSON.stringify({ [operation.stringField]: "x" }), "text/plain"), 415],
        ["form", () => send(`${operation.stringField}=x`, "application/x-www-form-urlencoded"), 415]
      ]
      for (const [name, run, status, mentions] of cases) {
        const response = await run()
        const ok = response.status === status &&
          response.body?.statusDetail?.status === "ERROR" &&
          (mentions === undefined || String(response.body.statusDetail.message).includes(mentions))
        if (!ok) failures.push(`${operation.method} ${operation.path} ${name}: ${response.status} ${JSON.stringify(response.body).slice(0, 200)}`)
      }
    }
    expect(failures).toEqual([])
    expect(await rowsOf(acme.organizationId)).toEqual(before)
  })

  it("still reads a body with no Content-Type, or JSON with a charset, as JSON", async () => {
    const bare = await fetch(`${app.baseUrl}/customers`, {
      method: "POST",
      headers: { authorization: `Bearer ${acme.apiKey}` },
      body: new Blob([JSON.stringify({ name: "Bare", email: "bare@example.com" })]) // a Blob of no type sends no Content-Type
    })
    expect(bare.status).toBe(201)
    const charset = await app.request("POST", "/customers", {
      key: acme.apiKey,
      rawBody: JSON.stringify({ name: "Charset", email: "charset@example.com", description: "emoji \ud83d\ude00" }),
      headers: { "content-type": "application/json; charset=utf-8" }
    })
    expect(charset.status).toBe(201)
    expect(charset.body.result.customer.description).toBe("emoji \ud83d\ude00")
  })

  it("names the field of a lone surrogate, nested ones by their path", async () => {
    const response = await app.request("POST", "/signal/unit", {
      key: acme.apiKey,
      body: { customerId, agentKey: "pages", custom: { notes: ["fine", "bad \udc00"] } }
    })
    expectEnvelope(response, 400)
    expect(response.body.statusDetail.message).toContain("custom.notes[1]")
  })
})
