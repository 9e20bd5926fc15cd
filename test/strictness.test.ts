/**
 * One strictness rule for every write route: a field the operation does not
 * take is refused with 400 naming it, and the document says
 * `additionalProperties: false` on every request object schema. The routes are
 * read from the served document, so a new route is covered without a change here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let document: any
let key: string

beforeAll(async () => {
  app = await startTestApp()
  key = (await app.tenant()).apiKey
  document = (await app.request("GET", "/openapi.json", { key: null })).body
})

afterAll(() => app?.close())

interface Operation {
  readonly method: string
  readonly path: string
  readonly schema: any
}

const bodyOperations = (): Array<Operation> => {
  const operations: Array<Operation> = []
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      const schema = operation.requestBody?.content?.["application/json"]?.schema
      if (schema !== undefined) operations.push({ method: method.toUpperCase(), path, schema })
    }
  }
  return operations
}

const resolve = (schema: any): any =>
  schema?.$ref ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")]) : schema

/** Every object schema reachable from a request body, except free-form maps (`custom`, the composite tag). */
const objectSchemas = (schema: any, seen = new Set<any>()): Array<any> => {
  const resolved = resolve(schema)
  if (resolved === undefined || typeof resolved !== "object" || seen.has(resolved)) return []
  seen.add(resolved)
  const own = resolved.type === "object" && resolved.properties !== undefined ? [resolved] : []
  const children = [
    ...Object.values(resolved.properties ?? {}),
    ...(resolved.items ? [resolved.items] : []),
    ...(resolved.anyOf ?? []),
    ...(resolved.oneOf ?? []),
    ...(resolved.allOf ?? [])
  ]
  return [...own, ...children.flatMap((child) => objectSchemas(child, seen))]
}

describe("unknown fields on write routes", () => {
  it("the document has write routes to check", () => {
    expect(bodyOperations().length).toBeGreaterThan(40)
  })

  it("every request object schema is documented with additionalProperties: false", () => {
    const loose = bodyOperations().flatMap(({ method, path, schema }) =>
      objectSchemas(schema)
        // Free-form maps (`custom`, the composite tag) declare what their values are instead.
        .filter((object) => object.additionalProperties !== false && typeof object.additionalProperties !== "object")
        .map(() => `${method} ${path}`)
    )
    expect(loose).toEqual([])
  })

  it("every route with an object body refuses an unknown field with 400 naming it", async () => {
    const accepted: Array<string> = []
    for (const { method, path, schema } of bodyOperations()) {
      if (resolve(schema).type === "array") continue // the batch: each item is answered in its place
      const concrete = path.replace("/api/v1", "").replace(/\{externalId\}/g, "ext-1").replace(/\{\w+\}/g, "x_1")
      const response = await app.request(method, concrete, { key, body: { bogusField: true } })
      const message: string = response.body?.statusDetail?.message ?? ""
      if (response.status !== 400 || !message.includes("bogusField")) {
        accepted.push(`${method} ${path} → ${response.status} ${message}`)
      }
    }
    expect(accepted).toEqual([])
  })

  it("a customer create with every valid field and one unknown is refused and writes nothing", async () => {
    const response = await app.request("POST", "/customers", {
      key,
      body: { name: "Ada", email: "ada@example.com", bogus: true }
    })
    expect(response.status).toBe(400)
    expect(response.body.statusDetail.message).toContain("bogus")
    const list = await app.request("GET", "/customers", { key })
    expect(list.body.result.customers).toEqual([])
  })
})
