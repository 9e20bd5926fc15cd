/**
 * The OpenAPI document itself: valid for a strict OpenAPI 3.1 validator, every
 * error documented as the envelope it is sent as, and words for people on every
 * operation, parameter and field a client fills. Built from the API definition
 * (as `/api/v1/openapi.json` serves it), so no database is needed.
 */
import * as OpenApi from "@effect/platform/OpenApi"
import { Validator } from "@seriousme/openapi-schema-validator"
import { describe, expect, it } from "vitest"
import { Api } from "../src/app/Api.ts"
import { ErrorEnvelope, errorResponse, errorStatuses } from "../src/http/Envelope.ts"
import { codesOfStatus, errorCodes } from "../src/http/ApiErrors.ts"
import { operationServiceErrors } from "../src/http/OperationErrors.ts"
import { EVENT_TYPES } from "../src/webhooks/EventBody.ts"

const document = JSON.parse(JSON.stringify(OpenApi.fromApi(Api))) as any

const operations = Object.entries<any>(document.paths).flatMap(([path, item]) =>
  Object.entries<any>(item).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, operation }))
)

const resolve = (schema: any): any =>
  schema?.$ref ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")]) : schema

/** `path: schema` of every property a client fills in a request body, nested objects and array items included. */
const bodyFields = (schema: any, path: string, seen = new Set<any>()): Array<[string, any]> => {
  const resolved = resolve(schema)
  if (resolved === undefined || typeof resolved !== "object" || seen.has(resolved)) return []
  seen.add(resolved)
  const own = Object.entries<any>(resolved.properties ?? {}).flatMap(([name, property]) => [
    [`${path}.${name}`, property] as [string, any],
    ...bodyFields(property, `${path}.${name}`, seen)
  ])
  const nested = [
    ...(resolved.items ? bodyFields(resolved.items, `${path}[]`, seen) : []),
    ...[...(resolved.anyOf ?? []), ...(resolved.oneOf ?? [])].flatMap((member: any) => bodyFields(member, path, seen))
  ]
  return [...own, ...nested]
}

/** Effect's generated wording ("a string at most 80 character(s) long") says nothing a person needs. */
const generated = /^(an? |Expected |minLength|maxLength)/

const described = (schema: any): boolean => {
  const text = schema?.description ?? resolve(schema)?.description
  if (typeof text === "string") return text.length > 0 && !generated.test(text)
  // A nullable field: its non-null member carries the words.
  const members: Array<any> = schema?.anyOf ?? []
  return members.some((member) => member.type !== "null" && described(member))
}

describe("the OpenAPI document", () => {
  it("passes a strict OpenAPI 3.1 validator, every $ref resolving", async () => {
    const validator = new Validator()
    // The validator resolves references in the object it is given: it gets a copy.
    const result = await validator.validate(structuredClone(document))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
    expect(() => validator.resolveRefs()).not.toThrow()
  })

  it("documents every webhook event's body, with the headers a delivery carries", () => {
    expect(Object.keys(document.webhooks)).toEqual([...EVENT_TYPES])
    for (const eventType of EVENT_TYPES) {
      const operation = document.webhooks[eventType].post
      expect(operation.parameters.map((p: any) => p.name)).toEqual(["X-Service-Signature", "X-Service-Event-Id", "X-Service-Event-Type"])
      const schema = operation.requestBody.content["application/json"].schema
      expect(schema.properties.event_type.enum).toEqual([eventType])
      expect(schema.properties.data.required).toContain("customer_id")
    }
    expect(document.webhooks["balance.threshold.crossed"].post.requestBody.content["application/json"].schema.properties.data.properties.threshold)
      .toMatchObject({ enum: [50, 80, 100] })
  })

  it("documents every error as the envelope of its status, with when it happens", () => {
    const wrong: Array<string> = []
    for (const { name, operation } of operations) {
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        if (Number(status) < 400) continue
        const schema = response.content?.["application/json"]?.schema
        if (schema?.$ref !== `#/components/schemas/Error${status}`) wrong.push(`${name} ${status}: ${JSON.stringify(schema)}`)
        if (!response.description || response.description === "Error") wrong.push(`${name} ${status}: no description`)
      }
      for (const status of ["400", "401", "405", "500"]) {
        if (!operation.responses[status]) wrong.push(`${name}: no ${status}`)
      }
      if (operation.requestBody && !operation.responses["415"]) wrong.push(`${name}: has a body but no 415`)
      if (!operation.requestBody && operation.responses["415"]) wrong.push(`${name}: no body but a 415`)
    }
    expect(wrong).toEqual([])
    // Only the portal token can be refused for another organisation.
    expect(operations.filter(({ operation }) => operation.responses["403"]).map(({ name }) => name)).toEqual([
      "POST /api/v1/portal/token"
    ])
    // Reads by id never clash with state.
    expect(document.paths["/api/v1/customers/{id}"].get.responses["409"]).toBeUndefined()
    expect(document.paths["/api/v1/customers/{id}"].get.responses["422"]).toBeUndefined()
    // The framework's own error classes are never sent, so they are not in the document.
    expect(Object.keys(document.components.schemas)).not.toContain("HttpApiDecodeError")
    expect(Object.keys(document.components.schemas)).not.toContain("BadRequest")
  })

  it("each error envelope schema is what an error answer is encoded as", () => {
    for (const status of errorStatuses) {
      const code = codesOfStatus(status)[0]!
      const response = errorResponse(status, "why", code)
      const body = response.body
      if (body._tag !== "Uint8Array") throw new Error("expected a JSON body")
      expect(JSON.parse(new TextDecoder().decode(body.body))).toEqual({
        statusCode: status,
        statusDetail: { status: "ERROR", code, message: "why" },
        result: {}
      })
      // A code of another status is not one this envelope may carry.
      const otherCode = errorCodes.find((entry) => entry.status !== status)!.code
      expect(() => errorResponse(status, "why", otherCode)).toThrow()
      expect(ErrorEnvelope[status].ast.annotations).toBeDefined()
    }
    const error400 = document.components.schemas.Error400
    expect(error400.properties.statusCode).toMatchObject({ enum: [400] })
    expect(error400.properties.result).toMatchObject({ type: "object", additionalProperties: false })
    expect(error400.additionalProperties).toBe(false)
  })

  it("enumerates the codes of each status in its envelope, and each operation's own codes, each of a status it declares", () => {
    // Every status an answer can carry has its codes, and every code is in its status's envelope.
    // 503 (shutting down) has its envelope but is on no operation, so the document leaves it out.
    for (const status of errorStatuses.filter((status) => status !== 503)) {
      const code = document.components.schemas[`Error${status}`].properties.statusDetail.properties.code
      expect(code.enum, `Error${status}`).toEqual(codesOfStatus(status))
      expect(code.enum.length).toBeGreaterThan(0)
      expect(document.components.schemas[`Error${status}`].properties.statusDetail.required).toContain("code")
    }
    expect(errorCodes.every((entry) => (errorStatuses as ReadonlyArray<number>).includes(entry.status))).toBe(true)
    // Every operation's codes are its own (src/http/OperationErrors.ts, from its handler's type: run
    // `npx tsx scripts/operation-errors.ts` for a new route), each of a status it declares, and each status it
    // declares has a code.
    const statusOf = new Map(errorCodes.map((entry) => [entry.code as string, String(entry.status)]))
    expect(operations.map(({ operation }) => operation.operationId).filter((id) => !(id in operationServiceErrors))).toEqual([])
    for (const { name, operation } of operations) {
      const statuses = Object.keys(operation.responses).filter((status) => Number(status) >= 400)
      const codes: Array<string> = operation["x-error-codes"]
      expect(codes.filter((code) => !statuses.includes(statusOf.get(code)!)), `${name}: codes of undeclared statuses`).toEqual([])
      expect(statuses.filter((status) => !codes.some((code) => statusOf.get(code) === status)), `${name}: statuses without a code`).toEqual([])
      expect(new Set(codes).size, name).toBe(codes.length)
    }
    const codesOf = (path: string, method: string) => document.paths[`/api/v1${path}`][method]["x-error-codes"]
    // Only what the operation can answer: a read of a customer names neither a plan's nor a tax's codes.
    expect(codesOf("/customers/{id}", "get")).toEqual([
      "validation_failed",
      "api_key_refused",
      "customer_not_found",
      "method_not_allowed",
      "rate_limited",
      "internal_error"
    ])
    expect(codesOf("/customers", "post")).toEqual([
      "invalid_json",
      "validation_failed",
      "api_key_refused",
      "method_not_allowed",
      "external_id_taken",
      "idempotency_key_in_use",
      "unsupported_media_type",
      "idempotency_key_reused",
      "rate_limited",
      "internal_error"
    ])
    // A signal route that waits for the worker (Prefer: wait=N) answers the worker's refusals too.
    expect(codesOf("/signal/unit", "post")).toEqual(expect.arrayContaining(["no_active_plan", "no_plan_at_signal_time", "out_of_allowance"]))
    expect(codesOf("/signal/batch", "post")).not.toContain("no_active_plan")
    // A state clash is told apart: both 409s of a customer update, and the intake's 409.
    expect(codesOf("/customers/{id}", "patch")).toEqual(expect.arrayContaining(["external_id_taken", "customer_archived"]))
    expect(codesOf("/signal/credit", "post")).toEqual(expect.arrayContaining(["customer_archived", "validation_failed", "invalid_json"]))
    // A read by id declares no 409, so it names no 409 code.
    expect(codesOf("/customers/{id}", "get")).not.toContain("external_id_taken")
    expect(codesOf("/customers/{id}", "get")).toEqual(expect.arrayContaining(["customer_not_found", "api_key_refused", "internal_error"]))
  })

  it("has a summary and a description on every operation, and a description on every tag", () => {
    expect(operations.length).toBeGreaterThan(80)
    const bare = operations.filter(({ operation }) => !operation.summary || !operation.description).map(({ name }) => name)
    expect(bare).toEqual([])
    const summaries = operations.map(({ operation }) => operation.summary)
    expect(new Set(summaries).size).toBe(summaries.length)
    expect(document.tags.filter((tag: any) => !tag.description)).toEqual([])
  })

  it("describes every parameter and every field a client fills", () => {
    const bare: Array<string> = []
    for (const { name, operation } of operations) {
      for (const parameter of operation.parameters ?? []) {
        if (!described(parameter)) bare.push(`${name} ${parameter.in} ${parameter.name}`)
      }
      const body = operation.requestBody?.content?.["application/json"]?.schema
      for (const [field, schema] of body ? bodyFields(body, "body") : []) {
        if (!described(schema)) bare.push(`${name} ${field}`)
      }
    }
    expect(bare).toEqual([])
  })

  it("states the limits the service enforces", () => {
    const body = (path: string, method = "post") =>
      resolve(document.paths[`/api/v1${path}`][method].requestBody.content["application/json"].schema)
    const limit = document.paths["/api/v1/customers"].get.parameters.find((p: any) => p.name === "limit")
    // Values above 200 are clamped, not refused: no maximum.
    expect(limit.schema).toMatchObject({ type: "integer", minimum: 1 })
    expect(limit.schema.maximum).toBeUndefined()
    expect(body("/credits").properties.marginPercent).toMatchObject({ minimum: -100 })
    expect(body("/composites").properties.price).toMatchObject({ minimum: 0, maximum: 10_000_000 })
    expect(body("/customers/{id}/credits/adjust").properties.delta).toMatchObject({
      type: "integer",
      minimum: -10_000_000,
      maximum: 10_000_000,
      not: { const: 0 }
    })
    expect(body("/customers/{id}/units/adjust").properties.delta).toMatchObject({ type: "number", not: { const: 0 } })
    expect(body("/customers/{id}/wallet/alert", "put").properties.threshold.anyOf).toContainEqual(
      expect.objectContaining({ minimum: 0 })
    )
    for (const path of ["/signal/credit", "/signal/unit", "/signal/outcome/complete", "/purchases"]) {
      expect(body(path).allOf).toEqual([{ anyOf: [{ required: ["customerId"] }, { required: ["externalId"] }] }])
    }
    expect(resolve({ $ref: "#/components/schemas/Money" }).description).toMatch(/decimal/)
  })
})
