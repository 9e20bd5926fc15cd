/**
 * Refused usage told, and codes for machines (issue 27), end to end through
 * HTTP and the CLI, on both databases:
 *  - a signal the worker refuses (unknown agentKey, model not enabled, out of
 *    allowance) is looked up by its rawId (`GET /signals/{rawId}`) and listed
 *    (`GET /signals?customerId=&status=FAILED`) with its error's status, code
 *    and message; a priced one names its usage-log row; a held one says why;
 *    another organisation's rawId is a 404;
 *  - an endpoint subscribed to `signal.refused` gets one signed event per
 *    refusal, the same facts; an endpoint on the default events gets none;
 *  - every error answer carries `statusDetail.code`: distinct 409s carry
 *    distinct codes, a body that fails its schema `validation_failed`, and the
 *    edge's own failures (unknown route, no key, wrong method, not JSON) theirs.
 */
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhookSignature } from "../src/index.ts"
import { EventBodySchemas } from "../src/webhooks/EventSchemas.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, expectError, makeCredit, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

let app: TestApp
let acme: Tenant
let api: Client
let other: Client
/** Subscribed to `signal.refused` alone. */
let told: Receiver
let toldSecret: string
/** On the default events (the spec's two wallet events). */
let plain: Receiver

beforeAll(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
  other = clientOf(app, await app.tenant("Other"))
  told = await startReceiver()
  plain = await startReceiver()
  const added = await app.cli(["webhook", "add", "--url", told.url, "--events", "signal.refused", "--org", acme.organizationId, "--json"])
  expect(added.code, added.stderr).toBe(0)
  expect(added.json.endpoint.events).toEqual(["signal.refused"])
  toldSecret = added.json.endpoint.secret
  const defaults = await app.cli(["webhook", "add", "--url", plain.url, "--org", acme.organizationId, "--json"])
  expect(defaults.code, defaults.stderr).toBe(0)
  expect(defaults.json.endpoint.events).not.toContain("signal.refused")
})
afterAll(async () => {
  await told?.close()
  await plain?.close()
  await app?.close()
})

/** `signal.refused` events a receiver got, signatures checked and bodies decoded with the documented schema. */
const refusedEvents = async (receiver: Receiver, secret?: string) => {
  await drainSender(app)
  return receiver.received.flatMap((request) => {
    const body = JSON.parse(request.body)
    if (body.event_type !== "signal.refused") return []
    if (secret !== undefined) {
      expect(verifyWebhookSignature(secret, request.headers["x-service-signature"] as string, request.body)).toBe(true)
    }
    expect(request.headers["x-service-event-type"]).toBe("signal.refused")
    Schema.decodeUnknownSync(EventBodySchemas["signal.refused"], { onExcessProperty: "error" })(body)
    return [body]
  })
}

const accepted = async (route: string, body: Record<string, unknown>) => {
  const sent = await api.post(`/signal/${route}`, body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.result.rawId as string
}

const signalOf = async (client: Client, rawId: string) => ok(await client.get(`/signals/${rawId}`)).signal

describe("refused usage is told", () => {
  it("shows each refusal's status, code and message by rawId and in the list, and tells a subscribed endpoint", async () => {
    const credit = await makeCredit(api)
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 1000 },
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }
    ])
    const externalId = `told-${Date.now()}`
    const customer = await makeCustomer(api, { externalId })
    await buy(api, customer.id, plan.id)
    const disabled = await app.cli(["model", "disable", "gpt-4.1-mini", "--org", acme.organizationId, "--json"])
    expect(disabled.code, disabled.stderr).toBe(0)

    const usage = { model: "gpt-4o", inputTokens: 500, outputTokens: 500 }
    const priced = await accepted("credit", { customerId: customer.id, agentKey: credit.agentKey, usage })
    const unknownKey = await accepted("credit", {
      customerId: customer.id,
      agentKey: "no-such-agent",
      usage,
      idempotencyKey: `told-${Date.now()}`
    })
    const notEnabled = await accepted("credit", {
      externalId,
      agentKey: credit.agentKey,
      usage: { model: "gpt-4.1-mini", inputTokens: 10 }
    })
    const outOfAllowance = await accepted("unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 2 })
    const held = await accepted("unit", { externalId: `nobody-${Date.now()}`, agentKey: unit.agentKey })
    await drain(app)

    const done = await signalOf(api, priced)
    expect(done).toMatchObject({ rawId: priced, route: "CREDIT", status: "PROCESSED", customerId: customer.id, error: null })
    expect(done.usageLogId).toMatch(/^usg_/)
    const rows = ok(await api.post("/signal/usage-log/lookup", { ids: [done.usageLogId] })).usageLogs
    expect(rows).toHaveLength(1)

    const refusals = [
      [unknownKey, "CREDIT", "unknown_target"],
      [notEnabled, "CREDIT", "model_not_enabled"],
      [outOfAllowance, "UNIT", "out_of_allowance"]
    ] as const
    for (const [rawId, route, code] of refusals) {
      const signal = await signalOf(api, rawId)
      expect(signal, code).toMatchObject({
        rawId,
        route,
        status: "FAILED",
        // Sent by externalId, the refused signal names the customer it was found to be for.
        customerId: customer.id,
        usageLogId: null,
        error: { status: 422, code, message: expect.any(String) },
        occurredAt: null
      })
      expect(signal.messageId).toEqual(expect.any(String))
      expect(Date.parse(signal.receivedAt)).not.toBeNaN()
    }
    expect((await signalOf(api, notEnabled)).externalId).toBe(externalId)
    expect((await signalOf(api, unknownKey)).agentKey).toBe("no-such-agent")

    // Held, not refused: it says why, and it is not told as a refusal.
    expect(await signalOf(api, held)).toMatchObject({
      status: "PENDING",
      customerId: null,
      error: { status: 404, code: "customer_not_found" }
    })

    const failed = ok(await api.get(`/signals?customerId=${customer.id}&status=FAILED`)).signals
    expect(failed.map((s: any) => s.rawId)).toEqual([unknownKey, notEnabled, outOfAllowance])
    const all = ok(await api.get(`/signals?customerId=${customer.id}`)).signals
    expect(all.map((s: any) => s.rawId)).toEqual([priced, unknownKey, notEnabled, outOfAllowance])
    // Cursor pagination, in the order they were accepted.
    const first = ok(await api.get(`/signals?customerId=${customer.id}&limit=2`)).signals
    const second = ok(await api.get(`/signals?customerId=${customer.id}&limit=2&cursor=${first[1].rawId}`)).signals
    expect([...first, ...second].map((s: any) => s.rawId)).toEqual(all.map((s: any) => s.rawId))
    expect(ok(await api.get("/signals?status=PENDING")).signals.map((s: any) => s.rawId)).toContain(held)

    // Another organisation sees none of it.
    expectError(await other.get(`/signals/${unknownKey}`), 404, "signal_not_found")
    expectError(await other.get(`/signals?customerId=${customer.id}`), 404, "customer_not_found")
    expect(ok(await other.get("/signals?status=FAILED")).signals).toEqual([])
    expectError(await api.get("/signals/sig_nothing"), 404, "signal_not_found")
    expectError(await api.get("/signals?status=LOST"), 400, "validation_failed")

    // One signed event per refusal to the subscribed endpoint, the same facts; none to the other.
    const events = await refusedEvents(told, toldSecret)
    const mine = events.filter((event) => event.data.customer_id === customer.id)
    expect(mine.map((event) => event.data.raw_id).sort()).toEqual([unknownKey, notEnabled, outOfAllowance].sort())
    const unknownEvent = mine.find((event) => event.data.raw_id === unknownKey)!
    const unknownSignal = await signalOf(api, unknownKey)
    expect(unknownEvent.data).toEqual({
      raw_id: unknownKey,
      message_id: unknownSignal.messageId,
      route: "CREDIT",
      status: "FAILED",
      customer_id: customer.id,
      // Sent by customerId, to a customer that has an externalId: the event names it (issue 37; it said null).
      external_id: externalId,
      agent_key: "no-such-agent",
      idempotency_key: unknownSignal.idempotencyKey,
      received_at: unknownSignal.receivedAt,
      occurred_at: null,
      error: unknownSignal.error
    })
    expect(mine.find((event) => event.data.raw_id === outOfAllowance)!.data.error.code).toBe("out_of_allowance")
    expect(events.map((event) => event.data.raw_id)).not.toContain(held)
    expect(await refusedEvents(plain)).toEqual([])

    // The CLI shows the same code.
    const shown = await app.cli(["signal", "show", outOfAllowance, "--org", acme.organizationId, "--json"])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.json.signal).toMatchObject({ status: "FAILED", errorStatus: 422, errorCode: "out_of_allowance" })

    // A replay refused again is told again, as a new event.
    const replayed = await app.cli(["signal", "replay", unknownKey, "--org", acme.organizationId, "--json"])
    expect(replayed.code, replayed.stderr).toBe(0)
    await drain(app)
    const again = (await refusedEvents(told, toldSecret)).filter((event) => event.data.raw_id === unknownKey)
    expect(again).toHaveLength(2)
    expect(new Set(again.map((event) => event.id)).size).toBe(2)
    expect(again[1].data.error.code).toBe("unknown_target")
  })
})

describe("every error answer carries its code", () => {
  it("tells distinct 409s apart", async () => {
    const externalId = `taken-${Date.now()}`
    const holder = await makeCustomer(api, { externalId })
    expectError(await api.post("/customers", { name: "Second", email: "second@example.com", externalId }), 409, "external_id_taken")

    const credit = await makeCredit(api)
    expectError(
      await api.post("/credits", {
        name: "Again",
        agentKey: credit.agentKey,
        marginPercent: 10,
        modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
      }),
      409,
      "agent_key_taken"
    )

    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 }])
    await buy(api, holder.id, plan.id)
    expectError(await api.post("/purchases", { customerId: holder.id, planId: plan.id }), 409, "purchase_already_held")

    ok(await api.del(`/customers/${holder.id}`))
    expectError(await api.patch(`/customers/${holder.id}`, { name: "Renamed" }), 409, "customer_archived")
    // The intake lane answers the same refusal with the same code.
    const usage = { model: "gpt-4o", inputTokens: 1 }
    expectError(await api.post("/signal/credit", { customerId: holder.id, agentKey: credit.agentKey, usage }), 409, "customer_archived")
    // A batch item carries its route's code in its own place.
    const batch = ok(
      await api.post("/signal/batch", {
        signals: [{ type: "credit", customerId: holder.id, agentKey: credit.agentKey, usage }, { type: "credit", agentKey: "x", usage }]
      }),
      202
    ).results
    expect(batch.map((result: any) => [result.error.statusCode, result.error.code])).toEqual([[409, "customer_archived"], [
      400,
      "customer_ref_missing"
    ]])
  })

  it("names a body that fails its schema validation_failed, and the edge's own failures theirs", async () => {
    expectError(await api.post("/customers", { name: "No e-mail" }), 400, "validation_failed")
    expectError(await api.post("/customers", { name: "x", email: "x@example.com", bogus: 1 }), 400, "validation_failed")
    // The intake lane's decode errors too.
    expectError(await api.post("/signal/credit", { customerId: "cus_x", agentKey: "a" }), 400, "validation_failed")
    expectError(await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "{not json" }), 400, "invalid_json")
    expectError(await app.request("GET", "/no/such/route", { key: acme.apiKey }), 404, "route_not_found")
    expectError(await app.request("GET", "/customers", { key: null }), 401, "api_key_refused")
    expectError(await app.request("GET", "/customers", { key: "sk_not_a_key" }), 401, "api_key_refused")
    expectError(await app.request("PUT", "/customers", { key: acme.apiKey, body: {} }), 405, "method_not_allowed")
    expectError(
      await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "name=x", headers: { "content-type": "text/plain" } }),
      415,
      "unsupported_media_type"
    )
    expectError(await api.get("/customers/cus_nobody"), 404, "customer_not_found")
  })
})
