/**
 * Signal intake: validation of every route, customer resolution, the 202
 * promise, idempotency, PENDING then requeue, replay, and the usage-log reads.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, drain as drainIn, expectError, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let other: Tenant
let customerId: string

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
  const created = await as(acme).post("/customers", { name: "Jo", email: "jo@example.com", externalId: "jo-1" })
  customerId = created.body.result.customer.id
})
afterAll(() => app.close())

const as = (tenant: Tenant) => client(app, tenant)

const signalRows = (organizationId: string) =>
  query<{ id: string; status: string; route: string; errorStatus: number | null; errorMessage: string | null }>(
    app,
    "SELECT id, status, route, error_status, error_message FROM signals WHERE organization_id = $1 ORDER BY id",
    [organizationId]
  )

const drain = () => drainIn(app)

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

describe("signal intake", () => {
  it.each([
    ["/signal/credit", { agentKey: "chat", usage }],
    ["/signal/outcome", { agentKey: "draft", runId: "run-a" }],
    ["/signal/unit", { agentKey: "pages" }],
    ["/signal/wallet", { usage }]
  ])("%s answers 202 with messageId and rawId, and the signal is in the inbox", async (path, body) => {
    const before = (await signalRows(acme.organizationId)).length
    const response = await as(acme).post(path, { customerId, ...body })
    expect(response.status).toBe(202)
    expect(response.body).toEqual({
      statusCode: 202,
      statusDetail: { status: "SUCCESS", message: "Signal accepted for processing" },
      result: { queued: true, messageId: expect.stringMatching(/^msg_/), rawId: expect.stringMatching(/^sig_/) }
    })
    const rows = await signalRows(acme.organizationId)
    expect(rows.length).toBe(before + 1)
    expect(rows.find((row) => row.id === response.body.result.rawId)?.status).toBe("QUEUED")
  })

  it.each([
    ["/signal/credit", { agentKey: "chat", usage, price: 1 }, "price"],
    ["/signal/credit", { agentKey: "chat", usage: { ...usage, cost: 2 } }, "cost"],
    ["/signal/credit", { usage }, "agentKey"],
    ["/signal/credit", { agentKey: "chat" }, "usage"],
    ["/signal/credit", { agentKey: "chat", usage: { inputTokens: 5 } }, "model"],
    ["/signal/credit", { agentKey: "chat", usage: { ...usage, inputTokens: -1 } }, "inputTokens"],
    ["/signal/credit", { agentKey: "chat", usage: { ...usage, inputTokens: 1.5 } }, "inputTokens"],
    ["/signal/credit", { agentKey: "chat", usage, idempotencyKey: "" }, "idempotencyKey"],
    ["/signal/credit", { agentKey: "chat", usage, idempotencyKey: "k".repeat(256) }, "idempotencyKey"],
    ["/signal/credit", { agentKey: "chat", usage, composite: { a: "1", b: "2" } }, "composite"],
    ["/signal/credit", { agentKey: "chat", usage, member: "not-an-email" }, "member"],
    ["/signal/credit", { agentKey: "chat", usage, type: "CREDIT" }, "type"],
    ["/signal/outcome", { agentKey: "draft" }, "runId"],
    ["/signal/outcome/complete", {}, "runId"],
    ["/signal/outcome/complete", { runId: "r", agentKey: "draft" }, "agentKey"],
    ["/signal/outcome/complete", { runId: "r", usage }, "usage"],
    ["/signal/outcome/complete", { runId: "r", composite: { c: "1" } }, "composite"],
    ["/signal/wallet", { usage, agentKey: "chat" }, "agentKey"],
    ["/signal/wallet", { usage, composite: { c: "1" } }, "composite"],
    ["/signal/unit", { agentKey: "pages", usage }, "usage"],
    ["/signal/unit", { agentKey: "pages", quantity: 0 }, "quantity"],
    ["/signal/unit", { agentKey: "pages", quantity: "3" }, "quantity"],
    ["/signal/composite/complete", {}, "composite"],
    ["/signal/composite/complete", { composite: { c: "1" }, agentKey: "x" }, "agentKey"]
  ])("%s rejects %j with 400 naming %s and queues nothing", async (path, body, field) => {
    const before = (await signalRows(acme.organizationId)).length
    const response = await as(acme).post(path, { customerId, ...body })
    expectError(response, 400, "validation_failed", field)
    expect((await signalRows(acme.organizationId)).length).toBe(before)
  })

  it("answers 400 for a malformed externalId and for neither customerId nor externalId", async () => {
    expectError(await as(acme).post("/signal/unit", { externalId: "bad_id", agentKey: "pages" }), 400, "validation_failed", "externalId")
    expectError(await as(acme).post("/signal/unit", { externalId: "x".repeat(33), agentKey: "pages" }), 400, "validation_failed", "externalId")
    expectError(await as(acme).post("/signal/unit", { agentKey: "pages" }), 400, "customer_ref_missing", "customerId or externalId")
  })

  it("answers 401 without a valid key", async () => {
    const response = await app.request("POST", "/signal/unit", { key: "sk_nope", body: { customerId, agentKey: "p" } })
    expectError(response, 401, "api_key_refused")
  })

  it("answers 404 for an unknown customerId, and for another organisation's customer", async () => {
    // An organisation of its own: other tests queue signals for `other`.
    const stranger = await app.tenant("Stranger")
    const before = (await signalRows(acme.organizationId)).length
    expectError(await as(acme).post("/signal/unit", { customerId: "cus_missing", agentKey: "pages" }), 404, "customer_not_found")
    expectError(await as(stranger).post("/signal/unit", { customerId, agentKey: "pages" }), 404, "customer_not_found")
    expect((await signalRows(stranger.organizationId)).length).toBe(0)
    expect((await signalRows(acme.organizationId)).length).toBe(before)
  })

  it("uses customerId when both are sent, ignoring the externalId", async () => {
    const response = await as(acme).post("/signal/unit", { customerId, externalId: "nobody", agentKey: "pages" })
    expect(response.status).toBe(202)
  })

  it("answers 409 for an archived customer and queues nothing", async () => {
    const archived = await as(acme).post("/customers", { name: "Gone", email: "gone@example.com" })
    const id = archived.body.result.customer.id
    await as(acme).del(`/customers/${id}`)
    const before = (await signalRows(acme.organizationId)).length
    expectError(await as(acme).post("/signal/unit", { customerId: id, agentKey: "pages" }), 409, "customer_archived", "archived")
    expectError(await as(acme).post("/signal/outcome/complete", { customerId: id, runId: "r" }), 409, "customer_archived")
    expectError(await as(acme).post("/signal/composite/complete", { customerId: id, composite: { x: "1" } }), 409, "customer_archived")
    expect((await signalRows(acme.organizationId)).length).toBe(before)
  })
})

describe("idempotency", () => {
  it("a repeated key returns the original answer and records nothing new", async () => {
    const body = { customerId, agentKey: "pages", idempotencyKey: "same-key" }
    const first = await as(acme).post("/signal/unit", body)
    const before = (await signalRows(acme.organizationId)).length
    const again = await as(acme).post("/signal/unit", { ...body, quantity: 7 })
    expect(again.status).toBe(202)
    expect(again.body.result).toEqual(first.body.result)
    expect((await signalRows(acme.organizationId)).length).toBe(before)
  })

  it("keys are scoped per meter and per organisation", async () => {
    const unit = await as(acme).post("/signal/unit", { customerId, agentKey: "pages", idempotencyKey: "shared" })
    const wallet = await as(acme).post("/signal/wallet", { customerId, usage, idempotencyKey: "shared" })
    expect(wallet.status).toBe(202)
    expect(wallet.body.result.rawId).not.toBe(unit.body.result.rawId)
    const otherCustomer = await as(other).post("/customers", { name: "O", email: "o@example.com" })
    const elsewhere = await as(other).post("/signal/unit", {
      customerId: otherCustomer.body.result.customer.id,
      agentKey: "pages",
      idempotencyKey: "shared"
    })
    expect(elsewhere.status).toBe(202)
    expect(elsewhere.body.result.rawId).not.toBe(unit.body.result.rawId)
  })

  it("concurrent repeats of one key insert one signal", async () => {
    const body = { customerId, agentKey: "pages", idempotencyKey: "burst" }
    const answers = await Promise.all(Array.from({ length: 12 }, () => as(acme).post("/signal/unit", body)))
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([202]))
    expect(new Set(answers.map((a) => a.body.result.rawId)).size).toBe(1)
  })
})

describe("unknown externalId: PENDING, then requeued", () => {
  it("is accepted, ends PENDING with its 404 reason, and is requeued when a customer takes the externalId", async () => {
    const accepted = await as(acme).post("/signal/unit", { externalId: "late-1", agentKey: "pages" })
    expect(accepted.status).toBe(202)
    await drain()
    const pending = (await signalRows(acme.organizationId)).find((row) => row.id === accepted.body.result.rawId)!
    expect(pending).toMatchObject({ status: "PENDING", errorStatus: 404 })
    expect(pending.errorMessage).toContain("late-1")

    await as(acme).post("/customers", { name: "Late", email: "late@example.com", externalId: "late-1" })
    const requeued = (await signalRows(acme.organizationId)).find((row) => row.id === accepted.body.result.rawId)!
    expect(requeued.status).toBe("QUEUED")
    await drain()
    const failed = (await signalRows(acme.organizationId)).find((row) => row.id === accepted.body.result.rawId)!
    // The customer exists now; it has no plan, so the signal fails with the plan check's 422.
    expect(failed).toMatchObject({ status: "FAILED", errorStatus: 422 })
  })

  it("is requeued when an existing customer changes to the externalId", async () => {
    const accepted = await as(acme).post("/signal/unit", { externalId: "late-2", agentKey: "pages" })
    await drain()
    const customer = await as(acme).post("/customers", { name: "Renamed", email: "renamed@example.com" })
    await as(acme).patch(`/customers/${customer.body.result.customer.id}`, { externalId: "late-2" })
    const row = (await signalRows(acme.organizationId)).find((r) => r.id === accepted.body.result.rawId)!
    expect(row.status).toBe("QUEUED")
  })
})

describe("outcome complete and composite complete, synchronous answers", () => {
  it("outcome complete is 404 for a run with no step", async () => {
    expectError(await as(acme).post("/signal/outcome/complete", { customerId, runId: "never-ran" }), 404, "outcome_run_not_found", "never-ran")
  })

  it("outcome complete is 200 once, then 409; a repeated key replays the 200", async () => {
    await as(acme).post("/signal/outcome", { customerId, agentKey: "draft", runId: "run-1" })
    const first = await as(acme).post("/signal/outcome/complete", { customerId, runId: "run-1", idempotencyKey: "c1" })
    expect(first.status).toBe(200)
    expect(first.body.result).toEqual({ status: "COMPLETED", usageLog: null, rawId: expect.stringMatching(/^sig_/) })
    expectError(await as(acme).post("/signal/outcome/complete", { customerId, runId: "run-1" }), 409, "outcome_run_completed", "already")
    const replay = await as(acme).post("/signal/outcome/complete", { customerId, runId: "run-1", idempotencyKey: "c1" })
    expect(replay.status).toBe(200)
    expect(replay.body.result).toEqual(first.body.result)
  })

  it("outcome complete by externalId finds the run sent by customerId; another customer's run is 404", async () => {
    await as(acme).post("/signal/outcome", { customerId, agentKey: "draft", runId: "run-2" })
    const stranger = await as(acme).post("/customers", { name: "S", email: "s@example.com", externalId: "stranger" })
    expect(stranger.status).toBe(201)
    expectError(await as(acme).post("/signal/outcome/complete", { externalId: "stranger", runId: "run-2" }), 404, "outcome_run_not_found")
    const done = await as(acme).post("/signal/outcome/complete", { externalId: "jo-1", runId: "run-2" })
    expect(done.status).toBe(200)
  })

  it("composite complete is 422 when the customer has no active plan", async () => {
    const credit = await as(acme).created("/credits", {
      name: "Solo",
      agentKey: "solo",
      marginPercent: 0,
      modelBundle: gpt4oBundle
    }, "credit")
    await as(acme).created("/composites", {
      name: "Solo pack",
      refId: "solo-pack",
      price: 1,
      entitlements: { creditIds: [credit] }
    }, "composite")
    expectError(
      await as(acme).post("/signal/composite/complete", { customerId, composite: { "solo-pack": "v1" } }),
      422, "no_active_plan",
      "no active plan"
    )
  })

  it("composite complete is 404 for a tag naming no live composite", async () => {
    expectError(
      await as(acme).post("/signal/composite/complete", { customerId, composite: { "no-such": "v1" } }),
      404, "composite_not_found",
      "no-such"
    )
  })
})

describe("signal operators: replay", () => {
  it("replays a FAILED signal and refuses a PROCESSED one", async () => {
    const accepted = await as(acme).post("/signal/unit", { customerId, agentKey: "pages" })
    await drain()
    const rawId = accepted.body.result.rawId
    expect((await signalRows(acme.organizationId)).find((r) => r.id === rawId)?.status).toBe("FAILED")
    const replay = await app.cli(["signal", "replay", rawId, "--org", acme.organizationId, "--json"])
    expect(replay.code).toBe(0)
    expect(replay.json.replayed.map((s: any) => s.id)).toEqual([rawId])
    expect((await signalRows(acme.organizationId)).find((r) => r.id === rawId)?.status).toBe("QUEUED")
    const shown = await app.cli(["signal", "show", rawId, "--org", acme.organizationId, "--json"])
    expect(shown.json.signal).toMatchObject({ id: rawId, status: "QUEUED", route: "UNIT", customerId })
  })
})

describe("usage log reads", () => {
  it("needs customerId, validates filters and answers 404 for another organisation's customer", async () => {
    expectError(await as(acme).get("/signal/usage-log"), 400, "validation_failed", "customerId")
    expectError(await as(acme).get(`/signal/usage-log?customerId=${customerId}&meter=NOPE`), 400, "validation_failed", "meter")
    expectError(await as(acme).get(`/signal/usage-log?customerId=${customerId}&from=yesterday`), 400, "validation_failed", "from")
    expectError(await as(other).get(`/signal/usage-log?customerId=${customerId}`), 404, "customer_not_found")
    const empty = await as(acme).get(`/signal/usage-log?customerId=${customerId}`)
    expect(empty.status).toBe(200)
    expect(empty.body.result).toEqual({ usageLogs: [] })
  })

  it("lookup takes 1 to 10 ids and lists unknown ones in notFound, duplicates removed", async () => {
    expectError(await as(acme).post("/signal/usage-log/lookup", { ids: [] }), 400, "validation_failed", "ids")
    expectError(
      await as(acme).post("/signal/usage-log/lookup", { ids: Array.from({ length: 11 }, (_, i) => `usg_${i}`) }),
      400, "validation_failed",
      "ids"
    )
    const response = await as(acme).post("/signal/usage-log/lookup", { ids: ["usg_a", "usg_b", "usg_a"] })
    expect(response.status).toBe(200)
    expect(response.body.result).toEqual({ usageLogs: [], notFound: ["usg_a", "usg_b"] })
  })
})
