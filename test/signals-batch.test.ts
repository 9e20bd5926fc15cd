/**
 * `POST /signal/batch` and grouped inbox writes, on both databases: per-item
 * answers in order (each the answer its single route would give), the whole
 * request refused for 0 or 1,001 items, idempotency inside a batch and across
 * batch and single routes, completions refused, exact pricing of a batch by
 * the worker, concurrent single requests written in far fewer statements than
 * requests, and `billing signal send --file`.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Context, Effect, Either, Exit, Fiber, Layer, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as OpenApi from "@effect/platform/OpenApi"
import { Api } from "../src/app/Api.ts"
import { failureAnswer } from "../src/http/Envelope.ts"
import { makeId } from "../src/ids.ts"
import type { InboxRow as WriterRow } from "../src/signals/InboxRow.ts"
import { awaitAnswer, InboxWriter, type Refusal, type Written } from "../src/signals/InboxWriter.ts"
import { Intake } from "../src/signals/Intake.ts"
import type { Acknowledgement } from "../src/signals/Signal.ts"
import { client, drain, expectError, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
let customerId: string
let archivedId: string
const ids: Record<string, string> = {}

const api = () => client(app, acme)
const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

interface InboxRow {
  id: string
  messageId: string
  route: string
  status: string
  customerId: string | null
  externalId: string | null
  idempotencyKey: string | null
  body: unknown
}

const inbox = (where = "TRUE", params: ReadonlyArray<unknown> = []) =>
  query<InboxRow>(
    app,
    `SELECT id, message_id, route, status, customer_id, external_id, idempotency_key, body FROM signals
     WHERE organization_id = $1 AND ${where} ORDER BY id`,
    [acme.organizationId, ...params]
  )

const inboxCount = async () => (await inbox()).length

const batch = (signals: unknown) => api().post("/signal/batch", { signals })

/** An inbox row of a unit signal for the customer, handed to the writer directly. */
/** The writer's door as an effect, for one row (a single request) or many (a batch). */
const submitRow = (writer: InboxWriter, row: WriterRow) =>
  awaitAnswer<Written, Refusal>((answer) => writer.enqueue([row], (exits) => answer(exits[0]!)))
const writeRows = (writer: InboxWriter, rows: ReadonlyArray<WriterRow>) =>
  awaitAnswer<ReadonlyArray<Exit.Exit<Written, Refusal>>, never>((answer) =>
    writer.enqueue(rows, (exits) => answer(Exit.succeed(exits)))
  )

const unitRow = (idempotencyKey: string, custom?: Record<string, unknown>) => ({
  organizationId: acme.organizationId,
  id: makeId("sig"),
  messageId: makeId("msg"),
  route: "UNIT" as const,
  customerId,
  externalId: null,
  idempotencyKey,
  agentKey: "pages",
  runId: null,
  compositeRef: null,
  compositeValue: null,
  member: null,
  body: { customerId, agentKey: "pages", idempotencyKey, ...(custom ? { custom } : {}) }
})

const writerStats = () => app.run(Effect.flatMap(InboxWriter, (writer) => writer.stats))

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Batch")
  const created = (p: string, body: unknown, field: string) => api().created(p, body, field)
  ids.chat = await created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  ids.pages = await created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
  ids.report = await created("/outcomes", {
    name: "Report",
    agentKey: "report",
    marginPercent: 0,
    steps: [{ name: "Draft", agentKey: "draft", modelBundle: gpt4oBundle }]
  }, "outcome")
  ids.plan = await created("/plans", {
    name: "Batch plan",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: ids.chat, quantity: 10 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: ids.report, quantity: 5 },
      { type: "UNIT", billingMode: "ARREAR", unitId: ids.pages },
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
    ]
  }, "plan")
  customerId = await created("/customers", { name: "Jo", email: "jo@example.com", externalId: "jo-1" }, "customer")
  archivedId = await created("/customers", { name: "Gone", email: "gone@example.com" }, "customer")
  expect((await api().del(`/customers/${archivedId}`)).status).toBe(200)
})
afterAll(() => app.close())

describe("POST /signal/batch", () => {
  it("answers every item in order, each as its single route would, and writes only the queued ones", async () => {
    const before = await inboxCount()
    const items: Array<{ readonly item: unknown; readonly route?: string }> = [
      { item: { type: "credit", customerId, agentKey: "chat", usage, custom: { n: 1 } } },
      { item: { type: "wallet", externalId: "jo-1", usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } } },
      { item: { type: "unit", customerId, agentKey: "pages", quantity: 3 } },
      { item: { type: "outcome", customerId, agentKey: "draft", runId: "run-b1" } },
      { item: { type: "credit", customerId, agentKey: "chat", usage, price: 1 }, route: "/signal/credit" },
      { item: { type: "credit", customerId: "cus_missing", agentKey: "chat", usage }, route: "/signal/credit" },
      { item: { type: "unit", customerId: archivedId, agentKey: "pages" }, route: "/signal/unit" },
      { item: { type: "unit", agentKey: "pages" }, route: "/signal/unit" },
      { item: { type: "wallet", customerId, usage, agentKey: "chat" }, route: "/signal/wallet" },
      { item: { type: "unit", customerId, agentKey: "pages", quantity: 0 }, route: "/signal/unit" },
      { item: { type: "outcome_complete", customerId, runId: "run-b1" } },
      { item: { type: "composite_complete", customerId, composite: { x: "1" } } },
      { item: { customerId, agentKey: "pages" } },
      { item: { type: "CREDIT", customerId, agentKey: "chat", usage } },
      { item: 42 }
    ]
    const response = await batch(items.map((i) => i.item))
    expect(response.status, JSON.stringify(response.body)).toBe(202)
    expect(response.body.statusCode).toBe(202)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "4 of 15 signals accepted for processing" })
    const results = response.body.result.results as Array<any>
    expect(results.map((r) => r.index)).toEqual(items.map((_, index) => index))
    for (const index of [0, 1, 2, 3]) {
      expect(results[index]).toEqual({
        index,
        queued: true,
        messageId: expect.stringMatching(/^msg_/),
        rawId: expect.stringMatching(/^sig_/)
      })
    }
    // The refused items carry exactly the status, code and message of their single route.
    for (const [index, { item, route }] of items.entries()) {
      if (route === undefined) continue
      const { type: _, ...body } = item as Record<string, unknown>
      const single = await api().post(route, body)
      expect(single.status).not.toBe(202)
      expect(results[index], `item ${index}`).toEqual({
        index,
        queued: false,
        error: {
          statusCode: single.status,
          code: single.body.statusDetail.code,
          message: single.body.statusDetail.message,
          // A validation_failed item names its problems as the single route's answer does (statusDetail.errors).
          ...(single.body.statusDetail.errors === undefined ? {} : { errors: single.body.statusDetail.errors })
        }
      })
    }
    expect(results.slice(4, 10).map((r) => r.error.statusCode)).toEqual([400, 404, 409, 400, 400, 400])
    expect(results[4].error.message).toContain("price")
    expect(results.slice(4, 10).map((r) => r.error.code)).toEqual([
      "validation_failed",
      "customer_not_found",
      "customer_archived",
      "customer_ref_missing",
      "validation_failed",
      "validation_failed"
    ])
    expect(results[5].error.message).toBe("Customer cus_missing not found")
    expect(results[6].error.message).toBe(`Customer ${archivedId} is archived and cannot receive signals`)
    expect(results[7].error.message).toBe("customerId or externalId must be provided")
    expect(results[8].error.message).toContain("agentKey")
    expect(results[9].error.message).toContain("quantity")
    for (const index of [10, 11]) {
      expect(results[index]).toEqual({
        index,
        queued: false,
        error: {
          statusCode: 400,
          code: "validation_failed",
          message: expect.stringContaining("not accepted in a batch"),
          errors: [{ field: "type", message: expect.stringContaining("not accepted in a batch") }]
        }
      })
    }
    expect(results[12]).toEqual({
      index: 12,
      queued: false,
      error: {
        statusCode: 400,
        code: "validation_failed",
        message: "Invalid request: type: is missing",
        errors: [{ field: "type", message: "is missing" }]
      }
    })
    expect(results[13].error).toEqual({
      statusCode: 400,
      code: "validation_failed",
      message: "Invalid request: type: must be one of credit, outcome, unit, wallet",
      errors: [{ field: "type", message: "must be one of credit, outcome, unit, wallet" }]
    })
    expect(results[14].error.statusCode).toBe(400)

    // Only the four queued items were written, as their single routes would write them.
    expect(await inboxCount()).toBe(before + 4)
    const rows = await inbox("id = ANY($2)", [results.slice(0, 4).map((r) => r.rawId)])
    const byId = new Map(rows.map((row) => [row.id, row]))
    const expected = [
      { route: "CREDIT", customerId, externalId: null, body: { customerId, agentKey: "chat", usage, custom: { n: 1 } } },
      {
        route: "WALLET",
        customerId: null,
        externalId: "jo-1",
        body: { externalId: "jo-1", usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } }
      },
      { route: "UNIT", customerId, externalId: null, body: { customerId, agentKey: "pages", quantity: 3 } },
      { route: "OUTCOME", customerId, externalId: null, body: { customerId, agentKey: "draft", runId: "run-b1" } }
    ]
    expected.forEach((want, index) => {
      expect(byId.get(results[index].rawId)).toEqual({
        id: results[index].rawId,
        messageId: results[index].messageId,
        status: "QUEUED",
        idempotencyKey: null,
        ...want
      })
    })
  })

  it("refuses the whole request for 0 or 1,001 items (and a malformed body), writing nothing", async () => {
    const before = await inboxCount()
    const item = { type: "unit", customerId, agentKey: "pages" }
    expectError(await batch([]), 400, "validation_failed", "signals: must hold 1 to 1,000 signals")
    expectError(await batch(Array.from({ length: 1001 }, () => item)), 400, "validation_failed", "signals: must hold 1 to 1,000 signals")
    expectError(await api().post("/signal/batch", {}), 400, "validation_failed", "signals")
    expectError(await api().post("/signal/batch", { signals: item }), 400, "validation_failed", "signals")
    expectError(await api().post("/signal/batch", { signals: [item], extra: true }), 400, "validation_failed", "extra")
    expectError(await app.request("POST", "/signal/batch", { key: "sk_nope", body: { signals: [item] } }), 401, "api_key_refused")
    expect(await inboxCount()).toBe(before)
  })

  it("takes 1,000 items in one statement, plus one look-up for keys taken before", async () => {
    const earlier = await batch(Array.from({ length: 5 }, (_, i) => ({ type: "unit", customerId, agentKey: "pages", idempotencyKey: `thousand-${i}` })))
    const before = await writerStats()
    const items = Array.from({ length: 1000 }, (_, i) => ({
      type: "unit",
      customerId,
      agentKey: "pages",
      idempotencyKey: `thousand-${i % 990}` // the first 5 keys were taken before; the last 10 repeat keys of this batch
    }))
    const response = await batch(items)
    expect(response.status).toBe(202)
    const results = response.body.result.results as Array<any>
    expect(results.every((r) => r.queued)).toBe(true)
    expect(new Set(results.map((r) => r.rawId)).size).toBe(990)
    for (let i = 0; i < 5; i++) expect(results[i].rawId).toBe(earlier.body.result.results[i].rawId)
    for (let i = 990; i < 1000; i++) expect(results[i].rawId).toBe(results[i - 990].rawId)
    expect((await inbox("idempotency_key LIKE 'thousand-%'")).length).toBe(990)
    const after = await writerStats()
    expect(after.inserts - before.inserts).toBe(1)
    expect(after.statements - before.statements).toBe(2)

    // Repeats inside one batch only: no look-up at all.
    const twice = await batch([
      { type: "unit", customerId, agentKey: "pages", idempotencyKey: "twice" },
      { type: "unit", customerId, agentKey: "pages", idempotencyKey: "twice" }
    ])
    expect(twice.body.result.results[1].rawId).toBe(twice.body.result.results[0].rawId)
    expect((await writerStats()).statements - after.statements).toBe(1)
  })

  it("answers a key repeated inside a batch with the first rawId; a refused item does not use the key up", async () => {
    const response = await batch([
      { type: "unit", customerId: "cus_missing", agentKey: "pages", idempotencyKey: "dup-1" },
      { type: "unit", customerId, agentKey: "pages", idempotencyKey: "dup-1" },
      { type: "unit", customerId, agentKey: "pages", quantity: 7, idempotencyKey: "dup-1" },
      { type: "wallet", customerId, usage, idempotencyKey: "dup-1" },
      { type: "unit", customerId, agentKey: "pages", quantity: 0, idempotencyKey: "dup-2" },
      { type: "unit", customerId, agentKey: "pages", quantity: 2, idempotencyKey: "dup-2" }
    ])
    const results = response.body.result.results as Array<any>
    expect(results[0].error.statusCode).toBe(404)
    expect(results[1].queued).toBe(true)
    expect(results[2]).toEqual({ ...results[1], index: 2 })
    expect(results[3].queued).toBe(true)
    expect(results[3].rawId).not.toBe(results[1].rawId)
    expect(results[4].error.statusCode).toBe(400)
    expect(results[5].queued).toBe(true)
    const rows = await inbox("idempotency_key IN ('dup-1', 'dup-2')")
    expect(rows.map((row) => [row.route, row.idempotencyKey, row.body])).toEqual([
      ["UNIT", "dup-1", { customerId, agentKey: "pages", idempotencyKey: "dup-1" }],
      ["WALLET", "dup-1", { customerId, usage, idempotencyKey: "dup-1" }],
      ["UNIT", "dup-2", { customerId, agentKey: "pages", quantity: 2, idempotencyKey: "dup-2" }]
    ])
  })

  it("shares idempotency keys with the single routes, both ways, per route", async () => {
    const single = await api().post("/signal/unit", { customerId, agentKey: "pages", idempotencyKey: "shared-1" })
    expect(single.status).toBe(202)
    const first = await batch([
      { type: "unit", customerId, agentKey: "pages", quantity: 9, idempotencyKey: "shared-1" },
      { type: "credit", customerId, agentKey: "chat", usage, idempotencyKey: "shared-2" }
    ])
    const results = first.body.result.results as Array<any>
    expect(results[0]).toEqual({ index: 0, ...single.body.result })
    const again = await api().post("/signal/credit", { customerId, agentKey: "chat", usage, idempotencyKey: "shared-2" })
    expect(again.status).toBe(202)
    expect(again.body.result).toEqual({ queued: true, messageId: results[1].messageId, rawId: results[1].rawId })
    const other = await api().post("/signal/wallet", { customerId, usage, idempotencyKey: "shared-2" })
    expect(other.body.result.rawId).not.toBe(results[1].rawId)
    expect((await inbox("idempotency_key IN ('shared-1', 'shared-2')")).map((row) => row.route)).toEqual(["UNIT", "CREDIT", "WALLET"])
  })

  it("answers a repeated key with the first signal whatever the repeat names, even a customer it would refuse", async () => {
    const first = await api().post("/signal/unit", { customerId, agentKey: "pages", idempotencyKey: "kept-1" })
    expect(first.status).toBe(202)
    for (const who of ["cus_missing", archivedId]) {
      const again = await api().post("/signal/unit", { customerId: who, agentKey: "pages", idempotencyKey: "kept-1" })
      expect(again.status).toBe(202)
      expect(again.body.result).toEqual(first.body.result)
    }
    const inBatch = await batch([
      { type: "unit", customerId: "cus_missing", agentKey: "pages", idempotencyKey: "kept-1" },
      { type: "unit", customerId: archivedId, agentKey: "pages", idempotencyKey: "kept-1" }
    ])
    expect(inBatch.body.result.results).toEqual([{ index: 0, ...first.body.result }, { index: 1, ...first.body.result }])
    expect((await inbox("idempotency_key = 'kept-1'")).length).toBe(1)
    // Another body altogether (quantity, custom, timestamp) under the key: the first answer again, never a 422.
    const changed = await api().post("/signal/unit", {
      customerId,
      agentKey: "pages",
      quantity: 7,
      custom: { note: "other" },
      timestamp: new Date().toISOString(),
      idempotencyKey: "kept-1"
    })
    expect(changed.status).toBe(202)
    expect(changed.body.result).toEqual(first.body.result)
    expect((await inbox("idempotency_key = 'kept-1'")).length).toBe(1)
  })

  it("documents a reused key as it is answered: the first signal again, no 422 for it", () => {
    const document = OpenApi.fromApi(Api) as unknown as {
      readonly paths: Record<string, { readonly post: { readonly description: string; readonly responses: Record<string, { readonly description: string }> } }>
    }
    for (const route of ["credit", "outcome", "unit", "wallet"]) {
      const operation = document.paths[`/api/v1/signal/${route}`]!.post
      expect(operation.description).toContain("a reused key is never refused")
      expect(operation.responses["422"]!.description).not.toContain("idempotencyKey")
    }
  })

  it("is priced by the worker like the same signals sent one by one, to the exact decimal", async () => {
    const buyer = await api().created("/customers", { name: "Bo", email: "bo@example.com", externalId: "bo-1" }, "customer")
    expect((await api().post("/purchases", { customerId: buyer, planId: ids.plan })).status).toBe(201)
    // Start from an empty queue, so that this batch is priced on its own.
    await drain(app)
    const signals = [
      // credits: 0.0075 / 0.00625 = 1.2 each, customerCost 0.009
      { type: "credit", customerId: buyer, agentKey: "chat", usage },
      { type: "credit", externalId: "bo-1", agentKey: "chat", usage },
      { type: "credit", customerId: buyer, agentKey: "chat", usage },
      // wallet: (2000 * 2.5 + 1000 * 10) / 1e6 = 0.015 each
      { type: "wallet", customerId: buyer, usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } },
      { type: "wallet", externalId: "bo-1", usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } },
      // units: ARREAR at 0.5
      { type: "unit", customerId: buyer, agentKey: "pages", quantity: 2 },
      { type: "unit", customerId: buyer, agentKey: "pages", quantity: 3 },
      // a step bills nothing
      { type: "outcome", customerId: buyer, agentKey: "draft", runId: "run-bo" },
      // refused by the worker: not on the plan
      { type: "unit", customerId: buyer, agentKey: "nothing-sold" }
    ]
    const response = await batch(signals)
    const results = response.body.result.results as Array<any>
    expect(results.every((r) => r.queued)).toBe(true)
    await drain(app)
    const rows = await inbox("id = ANY($2)", [results.map((r) => r.rawId)])
    expect(rows.map((row) => row.status)).toEqual([...Array(8).fill("PROCESSED"), "FAILED"])
    const balances = (await api().get(`/customers/${buyer}/balances`)).body.result
    expect(balances.credits.find((c: any) => c.creditId === ids.chat)).toMatchObject({ granted: 10, used: 3.6, remaining: 6.4 })
    expect(balances.wallet.balance).toBe(9.97)
    const log = (await api().get(`/signal/usage-log?customerId=${buyer}&limit=200`)).body.result.usageLogs as Array<any>
    const byRaw = new Map(log.map((row) => [row.rawId, row]))
    expect(results.slice(0, 8).map((r) => {
      const row = byRaw.get(r.rawId)
      return [row.meter, row.quantity, row.customerCost, row.messageId === r.messageId]
    })).toEqual([
      ["CREDIT", 1.2, 0.009, true],
      ["CREDIT", 1.2, 0.009, true],
      ["CREDIT", 1.2, 0.009, true],
      ["WALLET", 0.015, 0.015, true],
      ["WALLET", 0.015, 0.015, true],
      ["UNIT", 2, 1, true],
      ["UNIT", 3, 1.5, true],
      ["OUTCOME_STEP", 1, 0, true]
    ])
    expect(byRaw.get(results[1].rawId).balance.remaining).toBe(7.6)
    expect(byRaw.get(results[4].rawId).balance.remaining).toBe(9.97)
  })

  it("refuses text PostgreSQL cannot store (NUL) as that item's or that request's 400 only", async () => {
    const before = await inboxCount()
    const response = await batch([
      { type: "unit", customerId, agentKey: "pages" },
      { type: "unit", customerId, agentKey: "pages", custom: { note: "a\u0000b" } }
    ])
    const results = response.body.result.results as Array<any>
    expect(results[0].queued).toBe(true)
    expect(results[1]).toEqual({
      index: 1,
      queued: false,
      error: {
        statusCode: 400,
        code: "validation_failed",
        message: "Invalid request: text must not contain NUL characters",
        errors: [{ field: "custom.note", message: "text must not contain NUL characters" }]
      }
    })
    const [bad, good] = await Promise.all([
      api().post("/signal/unit", { customerId, agentKey: "pa\u0000ges" }),
      api().post("/signal/unit", { customerId, agentKey: "pages" })
    ])
    expectError(bad!, 400, "validation_failed", "NUL")
    expect(bad!.body.statusDetail.errors).toEqual([{ field: "agentKey", message: "text must not contain NUL characters" }])
    expect(good!.status).toBe(202)
    // A lone surrogate is not text at all: the edge refuses the whole request, naming where it is (docs/api.md).
    const surrogate = await batch([{ type: "wallet", customerId, usage, custom: { ["\uD800"]: 1 } }])
    expectError(surrogate, 400, "validation_failed", "signals[0].custom.")
    expect(surrogate.body.statusDetail.message).toContain("lone UTF-16 surrogate")
    expect(await inboxCount()).toBe(before + 2)
  })

  it("is in the OpenAPI document with its request and result schemas", async () => {
    const response = await fetch(`${app.baseUrl}/openapi.json`)
    const spec = await response.json() as any
    const operation = spec.paths["/api/v1/signal/batch"].post
    expect(operation.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/SignalBatch" })
    const signals = spec.components.schemas.SignalBatch.properties.signals
    expect(signals).toMatchObject({ type: "array", minItems: 1, maxItems: 1000 })
    expect(signals.items.anyOf.map((s: any) => s.$ref)).toEqual([
      "#/components/schemas/SignalBatchCreditItem",
      "#/components/schemas/SignalBatchOutcomeItem",
      "#/components/schemas/SignalBatchUnitItem",
      "#/components/schemas/SignalBatchWalletItem"
    ])
    expect(spec.components.schemas.SignalBatchCreditItem).toMatchObject({
      required: ["type", "agentKey", "usage"],
      additionalProperties: false,
      properties: { type: { enum: ["credit"] } }
    })
    const result = operation.responses["202"].content["application/json"].schema.properties.result
    expect(result.properties.results.items.anyOf.map((s: any) => s.$ref)).toEqual([
      "#/components/schemas/SignalBatchQueued",
      "#/components/schemas/SignalBatchRefused"
    ])
  })
})

describe("grouped inbox writes of the single routes", () => {
  const paths = ["/signal/credit", "/signal/unit", "/signal/wallet", "/signal/outcome"] as const
  const bodyOf = (path: string, i: number) =>
    ({
      "/signal/credit": { agentKey: "chat", usage },
      "/signal/unit": { agentKey: "pages" },
      "/signal/wallet": { usage },
      "/signal/outcome": { agentKey: "draft", runId: `run-g${i}` }
    })[path]!

  it("answers 200 concurrent requests each on its own: 202 with distinct rawIds, or its own 404/409", async () => {
    const before = await writerStats()
    const rowsBefore = await inboxCount()
    const requests = Array.from({ length: 200 }, (_, i) => {
      // every 20th names an unknown customer (404), every 25th an archived one (409)
      const who = i % 20 === 7 ? "cus_missing" : i % 25 === 11 ? archivedId : customerId
      // ten requests share one key on one route: one row, one rawId
      const shared = i % 20 === 3
      const path = shared ? "/signal/unit" : paths[i % 4]!
      const key = shared ? "group-shared" : `group-${i}`
      return { path, who, shared, body: { customerId: who, idempotencyKey: key, ...bodyOf(path, i) } }
    })
    const answers = await Promise.all(requests.map(({ path, body }) => api().post(path, body)))
    const after = await writerStats()

    answers.forEach((answer, i) => {
      const { who } = requests[i]!
      if (who === "cus_missing") expectError(answer, 404, "customer_not_found", "Customer cus_missing not found")
      else if (who === archivedId) expectError(answer, 409, "customer_archived", "archived")
      else {
        expect(answer.status, JSON.stringify(answer.body)).toBe(202)
        expect(answer.body.statusDetail.message).toBe("Signal accepted for processing")
      }
    })
    const accepted = answers.filter((a) => a.status === 202).map((a) => a.body.result.rawId as string)
    expect(accepted.length).toBe(200 - 10 - 8)
    const shared = answers.filter((_, i) => requests[i]!.shared).map((a) => a.body.result.rawId)
    expect(new Set(shared).size).toBe(1)
    const distinct = new Set(accepted)
    expect(distinct.size).toBe(accepted.length - 9)
    expect((await inbox("id = ANY($2)", [[...distinct]])).length).toBe(distinct.size)
    expect(await inboxCount()).toBe(rowsBefore + distinct.size)
    // Every request went through the writer; overlapping ones shared inserts.
    expect(after.rows - before.rows).toBe(200)
    expect(after.inserts - before.inserts).toBeLessThan(200)
    expect(after.waiting).toBe(0)
  })

  it("writes 200 requests that arrive together in a handful of statements", async () => {
    const before = await writerStats()
    const answers = await app.run(Effect.flatMap(Intake, (intake) =>
      Effect.forEach(
        Array.from({ length: 200 }, (_, i) => i),
        (i) =>
          Effect.either(awaitAnswer<Acknowledgement, unknown>((answer) =>
            intake.accept(acme.organizationId, "UNIT", { customerId, agentKey: "pages", idempotencyKey: `burst-${i}` }, answer)
          )),
        { concurrency: "unbounded" }
      )))
    const after = await writerStats()
    expect(answers.every(Either.isRight)).toBe(true)
    expect(new Set(answers.map((a) => Either.getOrThrow(a).rawId)).size).toBe(200)
    expect((await inbox("idempotency_key LIKE 'burst-%'")).length).toBe(200)
    expect(after.rows - before.rows).toBe(200)
    expect(after.inserts - before.inserts).toBeLessThanOrEqual(5)
  })

  it.skipIf(!usesRealPostgres)(
    "(real PostgreSQL only) writes 200 concurrent HTTP requests in a few statements while the table is busy, answering none before its commit",
    async () => {
      const before = await writerStats()
      let locked!: () => void
      const lockTaken = new Promise<void>((resolve) => (locked = resolve))
      let released = false
      // Inserts wait for this lock (as they would for a slow disk) until every request is at the writer.
      const holder = app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE signals IN EXCLUSIVE MODE`
          yield* Effect.sync(locked)
          const writer = yield* InboxWriter
          for (let i = 0; i < HANG_GUARD_MS / 10 && (yield* writer.stats).waiting - before.waiting < 200; i++) yield* Effect.sleep(10)
          released = true
        }))))
      await lockTaken
      const answered: Array<boolean> = []
      const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => {
        const path = paths[i % 4]!
        return api().post(path, { customerId, idempotencyKey: `busy-${i}`, ...bodyOf(path, 1000 + i) }).then((answer) => {
          answered.push(released)
          return answer
        })
      }))
      await holder
      const after = await writerStats()
      expect(answers.map((a) => a.status)).toEqual(Array(200).fill(202))
      expect(answered.every((afterCommit) => afterCommit)).toBe(true)
      expect((await inbox("idempotency_key LIKE 'busy-%'")).length).toBe(200)
      expect(after.rows - before.rows).toBe(200)
      expect(after.inserts - before.inserts).toBeLessThanOrEqual(5)
      expect(after.statements - before.statements).toBe(after.inserts - before.inserts)
    }
  )

  it.skipIf(!usesRealPostgres)(
    "(real PostgreSQL only) still writes the row of a request interrupted while it waits, and counts it answered once",
    async () => {
      const before = await writerStats()
      const row = unitRow("gone-away-1")
      const exit = await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        // The insert waits for this lock, so the request is still waiting when it is interrupted.
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE signals IN EXCLUSIVE MODE`
          const writer = yield* InboxWriter
          const request = yield* Effect.fork(submitRow(writer, row))
          for (let i = 0; i < HANG_GUARD_MS / 5 && (yield* writer.stats).waiting === before.waiting; i++) yield* Effect.sleep(5)
          expect((yield* writer.stats).waiting).toBe(before.waiting + 1)
          const interrupted = yield* Fiber.interrupt(request)
          expect((yield* writer.stats).waiting).toBe(before.waiting)
          return interrupted
        }))))
      expect(Exit.isInterrupted(exit)).toBe(true)
      // The writer had taken the row: it is written once the lock is gone, though nobody waits for it.
      await eventually(async () => expect(await inbox("idempotency_key = 'gone-away-1'")).toHaveLength(1))
      const after = await writerStats()
      expect(after.waiting).toBe(before.waiting)
      expect(after.rows - before.rows).toBe(1)
    }
  )

  it("answers a row offered to a stopped writer 503 (interrupted) and writes nothing", async () => {
    const [exit, called] = await app.run(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const writer = yield* Layer.buildWithScope(InboxWriter.Default, scope).pipe(Effect.map(Context.get(InboxWriter)))
      yield* Scope.close(scope, Exit.void)
      // The callback form (the intake lane's) and the effect (the full server's) answer alike.
      const answers: Array<Exit.Exit<unknown, unknown>> = []
      writer.enqueue([unitRow("after-stop-1")], (exits) => answers.push(...exits))
      return [yield* Effect.exit(submitRow(writer, unitRow("after-stop-2"))), answers] as const
    }))
    for (const answer of [exit, ...called]) {
      expect(Exit.isFailure(answer) && Cause.isInterruptedOnly(answer.cause)).toBe(true)
      if (Exit.isFailure(answer)) expect(failureAnswer(answer.cause)).toEqual({ _tag: "Answer", status: 503, code: "service_unavailable", message: "The service is shutting down" })
    }
    expect(called).toHaveLength(1)
    expect(await inbox("idempotency_key LIKE 'after-stop-%'")).toHaveLength(0)
  })

  it("fails only the row the database refuses: the rest of its statement is written again without it", async () => {
    // An unpaired surrogate: intake refuses it before writing; here it reaches the database, which refuses it.
    const rowOf = (n: number, custom?: Record<string, unknown>) => unitRow(`fallback-${n}`, custom)
    const before = await writerStats()
    const [written, submitted] = await app.run(Effect.flatMap(InboxWriter, (writer) =>
      Effect.all([
        writeRows(writer, [rowOf(1), rowOf(2, { note: "\uD800" }), rowOf(3)]),
        Effect.forEach([rowOf(4), rowOf(5, { note: "\uDC00" }), rowOf(6)], (row) => Effect.exit(submitRow(writer, row)), {
          concurrency: "unbounded"
        })
      ])))
    const after = await writerStats()
    for (const exits of [written, submitted]) {
      expect(exits.map(Exit.isSuccess)).toEqual([true, false, true])
      const failed = exits[1]!
      expect(Exit.isFailure(failed) && Cause.isDie(failed.cause)).toBe(true)
    }
    expect((await inbox("idempotency_key LIKE 'fallback-%'")).map((row) => row.idempotencyKey)).toEqual([
      "fallback-1",
      "fallback-3",
      "fallback-4",
      "fallback-6"
    ])
    expect(after.waiting).toBe(0)
    // The three written together failed, then each was written alone.
    expect(after.inserts - before.inserts).toBeGreaterThanOrEqual(4)
  })

  it("writes a lone request at once, without waiting for company", async () => {
    await new Promise((resolve) => setTimeout(resolve, 50)) // past the memory of the bursts above
    const before = await writerStats()
    const answer = await api().post("/signal/unit", { customerId, agentKey: "pages" })
    expect(answer.status).toBe(202)
    const after = await writerStats()
    expect(after.inserts - before.inserts).toBe(1)
    expect(after.rows - before.rows).toBe(1)
    expect(after.lingers - before.lingers).toBe(0)
  })
})

describe("grouped inbox writes of batches", () => {
  /**
   * Batches offered while the table is locked: the first `batchWriters` take the writers and wait on
   * the lock, the rest wait for a writer, and `run` gets every batch's answer once the lock is gone.
   */
  const whileLocked = (batches: ReadonlyArray<ReadonlyArray<WriterRow>>) =>
    app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.gen(function*() {
        const writer = yield* InboxWriter
        const before = yield* writer.stats
        const locked = yield* Effect.makeLatch(false)
        const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE signals IN EXCLUSIVE MODE`
          yield* locked.open
          for (let i = 0; i < HANG_GUARD_MS / 10 && (yield* writer.stats).waiting - before.waiting < batches.length; i++) yield* Effect.sleep(10)
        })))
        yield* locked.await
        const answers = yield* Effect.forEach(batches, (rows) => writeRows(writer, rows), { concurrency: "unbounded" })
        yield* Fiber.join(holder)
        return { answers, before, after: yield* writer.stats }
      })))

  it.skipIf(!usesRealPostgres)(
    "(real PostgreSQL only) writes batches that wait for a writer in one statement, each answered in its order, a key repeated across them answered by the first",
    async () => {
      const rowOf = (n: number) => unitRow(`grouped-${n}`)
      const { answers, before, after } = await whileLocked([
        [rowOf(1), rowOf(2)],
        [rowOf(3), rowOf(4)],
        [rowOf(5), rowOf(6)],
        [rowOf(6), rowOf(7)],
        [rowOf(8), rowOf(9)]
      ])
      const ids = answers.map((exits) => exits.map((exit) => Exit.isSuccess(exit) ? exit.value : undefined))
      expect(ids.flat().every((written) => written !== undefined)).toBe(true)
      // The second grouped batch's key 6 is the first one's: answered with its signal, replayed.
      expect(ids[3]![0]).toEqual({ ...ids[2]![1]!, replayed: true })
      expect(ids.flat().filter((written) => !written!.replayed)).toHaveLength(9)
      expect((await inbox("idempotency_key LIKE 'grouped-%'")).map((row) => row.idempotencyKey).sort()).toEqual(
        [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => `grouped-${n}`)
      )
      // Two statements held by the lock, then one for the three batches that waited; no look-up.
      expect(after.inserts - before.inserts).toBe(3)
      expect(after.statements - before.statements).toBe(3)
      expect(after.rows - before.rows).toBe(10)
      expect(after.waiting).toBe(before.waiting)
    }
  )

  it.skipIf(!usesRealPostgres)(
    "(real PostgreSQL only) writes each batch of a failed shared statement again alone: only the row the database refuses fails",
    async () => {
      const rowOf = (n: number, custom?: Record<string, unknown>) => unitRow(`isolated-${n}`, custom)
      const { answers, before, after } = await whileLocked([
        [rowOf(1), rowOf(2)],
        [rowOf(3), rowOf(4)],
        [rowOf(5), rowOf(6)],
        // An unpaired surrogate: intake refuses it before writing; here it reaches the database, which refuses it.
        [rowOf(7, { note: "\uD800" }), rowOf(8)]
      ])
      expect(answers.map((exits) => exits.map(Exit.isSuccess))).toEqual([[true, true], [true, true], [true, true], [false, true]])
      const failed = answers[3]![0]!
      expect(Exit.isFailure(failed) && Cause.isDie(failed.cause)).toBe(true)
      expect((await inbox("idempotency_key LIKE 'isolated-%'")).map((row) => row.idempotencyKey).sort()).toEqual(
        [1, 2, 3, 4, 5, 6, 8].map((n) => `isolated-${n}`)
      )
      // Two held by the lock; the shared one (failed); each of its batches alone (one failed); that one's rows alone.
      expect(after.inserts - before.inserts).toBe(2 + 1 + 2 + 2)
      expect(after.waiting).toBe(before.waiting)
    }
  )
})

describe("billing signal send --file", () => {
  it("streams a JSON-lines file in batches of up to 1,000 and reports the refused lines (--json)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-send-"))
    const file = path.join(dir, "signals.jsonl")
    const lines = [
      ...Array.from({ length: 1200 }, (_, i) => JSON.stringify({ type: "unit", customerId, agentKey: "pages", idempotencyKey: `file-${i}` })),
      "",
      "{not json",
      JSON.stringify({ type: "credit", customerId: "cus_missing", agentKey: "chat", usage }),
      JSON.stringify({ type: "outcome_complete", customerId, runId: "r" }),
      JSON.stringify({ type: "unit", customerId: archivedId, agentKey: "pages" }),
      JSON.stringify({ type: "wallet", externalId: "jo-1", usage })
    ]
    fs.writeFileSync(file, `${lines.join("\n")}\n`)
    try {
      const before = await inboxCount()
      const sent = await app.cli(["signal", "send", "--file", file, "--org", acme.organizationId, "--json"])
      expect(sent.code, sent.stderr).toBe(0)
      expect(sent.json).toEqual({
        signals: 1205,
        queued: 1201,
        refused: 4,
        refusedByStatus: { "400": 2, "404": 1, "409": 1 },
        refusedItems: [
          { line: 1202, statusCode: 400, code: "invalid_json", message: expect.stringContaining("not valid JSON") },
          { line: 1203, statusCode: 404, code: "customer_not_found", message: "Customer cus_missing not found" },
          {
            line: 1204,
            statusCode: 400,
            code: "validation_failed",
            message: expect.stringContaining("not accepted in a batch"),
            errors: [{ field: "type", message: expect.stringContaining("not accepted in a batch") }]
          },
          { line: 1205, statusCode: 409, code: "customer_archived", message: `Customer ${archivedId} is archived and cannot receive signals` }
        ]
      })
      expect(await inboxCount()).toBe(before + 1201)
      expect((await inbox("idempotency_key LIKE 'file-%'")).length).toBe(1200)

      // Sent again: every keyed line answers its first signal, nothing new is written but the unkeyed wallet line.
      const again = await app.cli(["signal", "send", "--file", file, "--org", acme.organizationId, "--json"])
      expect(again.json).toMatchObject({ signals: 1205, queued: 1201, refused: 4 })
      expect(await inboxCount()).toBe(before + 1202)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
