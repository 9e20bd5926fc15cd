/**
 * Events and operations over HTTP (issue 37, point 4), end to end on both
 * databases, through the same services as the CLI:
 *  - `GET /events` (newest first, filters, cursor), `GET /events/{id}` (the
 *    body as delivered, every delivery and attempt), `POST /events/{id}/replay`
 *    (the same event id delivered again to a real receiver, signed);
 *  - `POST /signals/{rawId}/replay`, `POST /invoices/{id}/void`;
 *  - `GET/POST /api-keys`, `GET /api-keys/{id}`, `POST /api-keys/{id}/revoke`:
 *    the secret once (not even in an Idempotency-Key replay), never on a read,
 *    no key revoking itself;
 *  - another organisation's ids are 404, bad input 400 with nothing written.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { BillingApiError, createBillingClient } from "../client/src/index.ts"
import { verifyWebhookSignature } from "../src/index.ts"
import { ApiKeys } from "../src/organizations/ApiKeys.ts"
import { buy, type Client, clientOf, expectError, makeCredit, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import type { TestApp, Tenant } from "./support/TestApp.ts"
import { drainSender, startReceiver, webhookEndpointsFile } from "./webhooks-helpers.ts"

let app: TestApp
const { endpoints: made, receivers } = webhookEndpointsFile((started) => {
  app = started
})

const newTenant = async (name = "Ops") => {
  const tenant: Tenant = await app.tenant(name)
  return { tenant, api: clientOf(app, tenant) }
}

/** An endpoint on a real loopback receiver, and its secret. */
const subscribe = async (api: Client, events: ReadonlyArray<string>) => {
  const receiver = await startReceiver()
  receivers.push(receiver)
  const endpoint = ok(await api.post("/webhook-endpoints", { url: receiver.url, events }), 201).endpoint
  made.push({ api, id: endpoint.id })
  return { receiver, endpoint }
}

const adjustWallet = async (api: Client, customerId: string, delta: number) =>
  ok(await api.post(`/customers/${customerId}/wallet/adjust`, { delta }))

describe("webhook events over HTTP", () => {
  it("lists an event with its body as delivered, shows its deliveries, and replays it to a real receiver", async () => {
    const { tenant, api } = await newTenant()
    const { receiver, endpoint } = await subscribe(api, ["wallet.balance.update"])
    const customer = await makeCustomer(api, { externalId: `ev-${Date.now()}` })
    await adjustWallet(api, customer.id, 5)

    const [listed] = ok(await api.get("/events")).events
    expect(listed).toEqual({
      id: expect.stringMatching(/^evt_/),
      eventType: "wallet.balance.update",
      customerId: customer.id,
      triggeredAt: expect.any(String),
      test: false,
      data: expect.objectContaining({ customer_id: customer.id, previous_balance: 0, current_balance: 5, delta: 5, source: "ADJUSTMENT" }),
      body: expect.any(String),
      deliveryCounts: { total: 1, pending: 1, delivered: 0, failed: 0, cancelled: 0 }
    })
    expect(JSON.parse(listed.body)).toEqual({ id: listed.id, event_type: "wallet.balance.update", triggered_at: listed.triggeredAt, data: listed.data })

    await drainSender(app)
    expect(receiver.received).toHaveLength(1)
    const first = receiver.received[0]!
    // The body listed is the body delivered, byte for byte.
    expect(first.body).toBe(listed.body)
    expect(first.headers["x-service-event-id"]).toBe(listed.id)

    const read = ok(await api.get(`/events/${listed.id}`))
    expect(read.event).toEqual({ ...listed, deliveryCounts: { total: 1, pending: 0, delivered: 1, failed: 0, cancelled: 0 } })
    expect(read.deliveries).toEqual([expect.objectContaining({
      eventId: listed.id,
      endpointId: endpoint.id,
      status: "DELIVERED",
      attempts: 1,
      replayOf: null,
      attemptLog: [expect.objectContaining({ attempt: 1, statusCode: 200, error: null })]
    })])

    // A replay: the same event id and bytes, a new delivery naming the one it repeats, signed with the current secret.
    const rotated = ok(await api.post(`/webhook-endpoints/${endpoint.id}/rotate-secret`)).endpoint.secret
    const replayed = await api.post(`/events/${listed.id}/replay`)
    const result = ok(replayed)
    expect(replayed.body.statusDetail.message).toBe("Event queued for 1 endpoint(s); the worker sends it next")
    expect(result).toEqual({
      replayed: true,
      event: { ...read.event, deliveryCounts: { total: 2, pending: 1, delivered: 1, failed: 0, cancelled: 0 } },
      deliveries: [expect.objectContaining({ eventId: listed.id, endpointId: endpoint.id, status: "PENDING", replayOf: read.deliveries[0].id, attempts: 0 })]
    })
    await drainSender(app)
    expect(receiver.received).toHaveLength(2)
    const second = receiver.received[1]!
    expect(second.body).toBe(first.body)
    expect(second.headers["x-service-event-id"]).toBe(listed.id)
    expect(second.headers["x-service-event-type"]).toBe("wallet.balance.update")
    expect(verifyWebhookSignature(rotated, String(second.headers["x-service-signature"]), second.body)).toBe(true)
    const after = ok(await api.get(`/events/${listed.id}`))
    expect(after.event.deliveryCounts).toEqual({ total: 2, pending: 0, delivered: 2, failed: 0, cancelled: 0 })
    expect(after.deliveries.map((d: any) => [d.status, d.replayOf])).toEqual([["DELIVERED", null], ["DELIVERED", read.deliveries[0].id]])

    // The CLI reads the same events from the same service.
    const cliList = await app.cli(["webhook", "events", "--json", "--org", tenant.organizationId])
    expect(cliList.code, cliList.stderr).toBe(0)
    expect(cliList.json).toEqual({ events: [after.event], nextCursor: null })
    const cliShow = await app.cli(["webhook", "event", listed.id, "--json", "--org", tenant.organizationId])
    expect(cliShow.code, cliShow.stderr).toBe(0)
    expect(cliShow.json.event).toEqual(after.event)
    expect(cliShow.json.deliveries.map((d: any) => d.id)).toEqual(after.deliveries.map((d: any) => d.id))

    // Once the endpoint is removed, a replay has nobody to send to: nothing is queued, as `billing webhook replay`.
    ok(await api.del(`/webhook-endpoints/${endpoint.id}`))
    const none = await api.post(`/events/${listed.id}/replay`)
    expect(ok(none)).toMatchObject({ replayed: true, deliveries: [] })
    expect(none.body.statusDetail.message).toBe("Event queued for 0 endpoint(s); the worker sends it next")
  })

  it("lists newest first, by type, customer and [from, to), and pages by cursor", async () => {
    const { tenant, api } = await newTenant()
    await subscribe(api, ["wallet.balance.update", "wallet.balance.drop"])
    const jo = await makeCustomer(api)
    const al = await makeCustomer(api)
    ok(await api.put(`/customers/${jo.id}/wallet/alert`, { threshold: 3 }))
    await adjustWallet(api, jo.id, 5) // update
    await adjustWallet(api, al.id, 2) // update
    await adjustWallet(api, jo.id, -4) // update and drop (5 -> 1, at or below 3)

    const all = ok(await api.get("/events")).events
    // The last adjustment made two events in one transaction (the update and the drop), so either comes first.
    expect(all.slice(0, 2).map((e: any) => `${e.eventType} ${e.customerId} ${e.data.delta}`).sort()).toEqual(
      [`wallet.balance.drop ${jo.id} -4`, `wallet.balance.update ${jo.id} -4`]
    )
    expect(all.slice(2).map((e: any) => [e.eventType, e.customerId, e.data.delta])).toEqual([
      ["wallet.balance.update", al.id, 2],
      ["wallet.balance.update", jo.id, 5]
    ])
    // Newest first: ids descend.
    expect([...all.map((e: any) => e.id)].sort().reverse()).toEqual(all.map((e: any) => e.id))

    expect(ok(await api.get("/events?type=wallet.balance.drop")).events.map((e: any) => e.customerId)).toEqual([jo.id])
    expect(ok(await api.get(`/events?customerId=${al.id}`)).events.map((e: any) => e.data.delta)).toEqual([2])
    expect(ok(await api.get(`/events?customerId=${jo.id}&type=wallet.balance.update`)).events.map((e: any) => e.data.delta))
      .toEqual([-4, 5])

    const oldest = all.at(-1)
    const newest = all[0]
    const sinceOldest = ok(await api.get(`/events?from=${encodeURIComponent(oldest.triggeredAt)}`)).events
    expect(sinceOldest.map((e: any) => e.id)).toEqual(all.map((e: any) => e.id))
    const beforeOldest = ok(await api.get(`/events?to=${encodeURIComponent(oldest.triggeredAt)}`)).events
    expect(beforeOldest).toEqual([])
    const window = ok(await api.get(
      `/events?from=${encodeURIComponent(oldest.triggeredAt)}&to=${encodeURIComponent(new Date(Date.parse(newest.triggeredAt) + 1).toISOString())}`
    )).events
    expect(window.map((e: any) => e.id)).toEqual(all.map((e: any) => e.id))

    // Pages of two, newest first, the cursor the last id of the page before.
    const page1 = ok(await api.get("/events?limit=2")).events
    const page2 = ok(await api.get(`/events?limit=2&cursor=${page1[1].id}`)).events
    const page3 = ok(await api.get(`/events?limit=2&cursor=${page2[1].id}`)).events
    expect([...page1, ...page2].map((e: any) => e.id)).toEqual(all.map((e: any) => e.id))
    expect(page3).toEqual([])

    // The CLI takes the same filters.
    const cli = await app.cli(["webhook", "events", "--type", "wallet.balance.drop", "--json", "--org", tenant.organizationId])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json.events.map((e: any) => e.id)).toEqual([all[0].id])
    const badCli = await app.cli(["webhook", "events", "--type", "wallet.nope", "--json", "--org", tenant.organizationId])
    expect(badCli.code).toBe(2)
  })

  it("refuses bad queries with 400 and another organisation's ids with 404", async () => {
    const { api } = await newTenant()
    await subscribe(api, ["wallet.balance.update"])
    const customer = await makeCustomer(api)
    await adjustWallet(api, customer.id, 1)
    const [event] = ok(await api.get("/events")).events

    expectError(await api.get("/events?type=wallet.nope"), 400, "validation_failed")
    expectError(await api.get("/events?from=yesterday"), 400, "validation_failed")
    expectError(await api.get("/events?limit=0"), 400, "validation_failed")
    expectError(await api.get("/events?bogus=1"), 400, "validation_failed")
    expectError(await api.get("/events?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z"), 400, "invalid_time_range")
    expectError(await api.get("/events?cursor=evt_nothing"), 400, "unknown_cursor")
    expectError(await api.get("/events?customerId=cus_nothing"), 404, "customer_not_found")
    expectError(await api.get("/events/evt_nothing"), 404, "webhook_event_not_found")
    expectError(await api.post("/events/evt_nothing/replay"), 404, "webhook_event_not_found")

    const { api: other } = await newTenant("Other")
    expect(ok(await other.get("/events")).events).toEqual([])
    expectError(await other.get(`/events/${event.id}`), 404, "webhook_event_not_found")
    expectError(await other.post(`/events/${event.id}/replay`), 404, "webhook_event_not_found")
    expectError(await other.get(`/events?customerId=${customer.id}`), 404, "customer_not_found")
    expectError(await other.get(`/events?cursor=${event.id}`), 400, "unknown_cursor")
    // The other organisation's replay queued nothing.
    expect(ok(await api.get(`/events/${event.id}`)).deliveries).toHaveLength(1)
  })

  it("marks a test event of `billing trigger`", async () => {
    const { tenant, api } = await newTenant()
    await subscribe(api, ["wallet.balance.update"])
    const customer = await makeCustomer(api)
    const triggered = await app.cli(["trigger", "wallet.balance.update", "--customer", customer.id, "--json", "--org", tenant.organizationId])
    expect(triggered.code, triggered.stderr).toBe(0)
    const [event] = ok(await api.get("/events")).events
    expect(event).toMatchObject({ id: triggered.json.event.id, test: true, data: { delta: 0 } })
  })
})

describe("signal replay over HTTP", () => {
  it("queues a refused signal again, which the worker then prices; a billed one is 409", async () => {
    const { tenant, api } = await newTenant()
    const credit = await makeCredit(api)
    const customer = await makeCustomer(api)
    const usage = { model: "gpt-4o", inputTokens: 500, outputTokens: 500 }
    const sent = await api.post("/signal/credit", { customerId: customer.id, agentKey: credit.agentKey, usage })
    expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    const rawId = sent.body.result.rawId
    await drain(app)
    expect(ok(await api.get(`/signals/${rawId}`)).signal).toMatchObject({ status: "FAILED", error: { code: "no_active_plan" } })

    // Fixed: a plan bought; the replay queues it, the worker prices it.
    const plan = await makePlan(app, tenant, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 }])
    await buy(api, customer.id, plan.id)
    const replayed = ok(await api.post(`/signals/${rawId}/replay`))
    expect(replayed).toMatchObject({ replayed: true, signal: { rawId, status: "QUEUED", error: null, requeuedAt: expect.any(String) } })
    await drain(app)
    const priced = ok(await api.get(`/signals/${rawId}`)).signal
    expect(priced).toMatchObject({ status: "PROCESSED", usageLogId: expect.stringMatching(/^usg_/) })
    const rows = ok(await api.post("/signal/usage-log/lookup", { ids: [priced.usageLogId] })).usageLogs
    expect(rows).toHaveLength(1)

    // Billed: a replay would bill it twice.
    expectError(await api.post(`/signals/${rawId}/replay`), 409, "signal_already_processed")
    expectError(await api.post("/signals/sig_nothing/replay"), 404, "signal_not_found")
    const { api: other } = await newTenant("Other")
    expectError(await other.post(`/signals/${rawId}/replay`), 404, "signal_not_found")
    expect(ok(await api.get(`/signals/${rawId}`)).signal.status).toBe("PROCESSED")
  })
})

describe("invoice void over HTTP", () => {
  it("voids an OPEN invoice and tells the subscribed endpoint; anything else is 409, another organisation's 404", async () => {
    const { tenant, api } = await newTenant()
    const { receiver, endpoint } = await subscribe(api, ["invoice.voided"])
    const unit = await makeUnit(api, { flatPrice: 10 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoice.status).toBe("OPEN")

    const { api: other } = await newTenant("Other")
    expectError(await other.post(`/invoices/${invoice.id}/void`), 404, "invoice_not_found")
    expectError(await api.post("/invoices/inv_nothing/void"), 404, "invoice_not_found")

    const voided = ok(await api.post(`/invoices/${invoice.id}/void`))
    expect(voided).toEqual({ voided: true, invoice: { ...invoice, status: "VOID", voidedAt: expect.any(String), amountDue: 0 } })
    expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice).toEqual(voided.invoice)
    expectError(await api.post(`/invoices/${invoice.id}/void`), 409, "invoice_not_open")

    // The event, stored and delivered signed.
    const [event] = ok(await api.get("/events?type=invoice.voided")).events
    expect(event.data.invoice).toMatchObject({ id: invoice.id, status: "VOID" })
    await drainSender(app)
    const delivered = receiver.received.find((request) => request.headers["x-service-event-id"] === event.id)!
    expect(delivered.body).toBe(event.body)
    expect(verifyWebhookSignature(endpoint.secret, String(delivered.headers["x-service-signature"]), delivered.body)).toBe(true)

    // The CLI sees it VOID.
    const shown = await app.cli(["invoice", "show", invoice.id, "--json", "--org", tenant.organizationId])
    expect(shown.json.invoice.status).toBe("VOID")
  })
})

describe("API keys over HTTP", () => {
  it("creates a key shown once, lists and reads keys without secrets, and revokes another key", async () => {
    const { tenant, api } = await newTenant()
    const [own] = ok(await api.get("/api-keys")).apiKeys
    expect(own).toEqual({
      id: expect.stringMatching(/^key_/),
      name: expect.any(String),
      prefix: tenant.apiKey.slice(0, 10),
      status: "ACTIVE",
      createdAt: expect.any(String),
      expiresAt: null,
      revokedAt: null,
      createdBy: null
    })

    const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
    const created = await api.post("/api-keys", { name: "  ci runner  ", expiresAt })
    const result = ok(created, 201)
    expect(result).toEqual({
      created: true,
      apiKey: {
        id: expect.stringMatching(/^key_/),
        name: "ci runner",
        prefix: result.secret.slice(0, 10),
        status: "ACTIVE",
        createdAt: expect.any(String),
        expiresAt,
        revokedAt: null,
        createdBy: own.id
      },
      secret: expect.stringMatching(/^sk_[a-z0-9]{39}$/)
    })
    const secret: string = result.secret
    const ci = clientOf(app, { organizationId: tenant.organizationId, apiKey: secret })
    expect(ok(await ci.get("/customers")).customers).toEqual([])

    // No read shows a secret, nor its hash.
    const listed = await api.get("/api-keys")
    expect(ok(listed).apiKeys.map((k: any) => k.id)).toEqual([own.id, result.apiKey.id])
    expect(JSON.stringify(listed.body)).not.toContain(secret)
    expect(JSON.stringify(listed.body)).not.toContain(tenant.apiKey)
    expect(ok(await api.get(`/api-keys/${result.apiKey.id}`)).apiKey).toEqual(result.apiKey)
    const page = ok(await api.get(`/api-keys?limit=1&cursor=${own.id}`)).apiKeys
    expect(page.map((k: any) => k.id)).toEqual([result.apiKey.id])
    const cliList = await app.cli(["key", "list", "--json", "--org", tenant.organizationId])
    expect(cliList.json.keys).toEqual(ok(listed).apiKeys)
    expect(JSON.stringify(cliList.json)).not.toContain(secret)

    // A key does not revoke itself; another key of the organisation does, and it is refused from then on.
    expectError(await ci.post(`/api-keys/${result.apiKey.id}/revoke`), 409, "api_key_in_use")
    expect((await ci.get("/customers")).status).toBe(200)
    const revoked = ok(await ci.post(`/api-keys/${own.id}/revoke`))
    expect(revoked).toEqual({ revoked: true, apiKey: { ...own, status: "REVOKED", revokedAt: expect.any(String) } })
    expectError(await api.get("/customers"), 401, "api_key_refused")
    // Revoked again: nothing changes.
    const again = ok(await ci.post(`/api-keys/${own.id}/revoke`))
    expect(again.apiKey).toEqual(revoked.apiKey)
    expect(ok(await ci.get("/api-keys")).apiKeys.map((k: any) => [k.id, k.status])).toEqual([[own.id, "REVOKED"], [result.apiKey.id, "ACTIVE"]])
  })

  it("refuses bad bodies and past expiries with 400, writing nothing; another organisation's keys are 404", async () => {
    const { tenant, api } = await newTenant()
    const before = ok(await api.get("/api-keys")).apiKeys
    expectError(await api.post("/api-keys", { name: "" }), 400, "validation_failed")
    expectError(await api.post("/api-keys", { name: "   " }), 400, "validation_failed")
    expectError(await api.post("/api-keys", { name: "x".repeat(101) }), 400, "validation_failed")
    expectError(await api.post("/api-keys", { expiresAt: "soon" }), 400, "validation_failed")
    expectError(await api.post("/api-keys", { secret: "sk_mine" }), 400, "validation_failed")
    expectError(await api.post("/api-keys", { expiresAt: new Date(Date.now() - 60_000).toISOString() }), 400, "api_key_expiry_in_past")
    expectError(await api.get("/api-keys?cursor=key_nothing"), 400, "unknown_cursor")
    expect(ok(await api.get("/api-keys")).apiKeys).toEqual(before)
    // The CLI has the same rules.
    const cliPast = await app.cli(["key", "create", "--expires-at", "2020-01-01T00:00:00Z", "--json", "--org", tenant.organizationId])
    expect(cliPast.code).toBe(2)
    expect(cliPast.stderr).toContain("not in the future")
    const cliName = await app.cli(["key", "create", "--name", " ", "--json", "--org", tenant.organizationId])
    expect(cliName.code).toBe(2)
    expect(ok(await api.get("/api-keys")).apiKeys).toEqual(before)

    const { api: other } = await newTenant("Other")
    expectError(await other.get(`/api-keys/${before[0].id}`), 404, "api_key_not_found")
    expectError(await other.post(`/api-keys/${before[0].id}/revoke`), 404, "api_key_not_found")
    expectError(await api.post("/api-keys/key_nothing/revoke"), 404, "api_key_not_found")
    expect((await api.get("/customers")).status).toBe(200)

    // An expired key is listed as such.
    const expired = await app.run(Effect.flatMap(ApiKeys, (keys) => keys.create(tenant.organizationId, { name: "old", expiresAt: new Date(Date.now() - 1000) })))
    expect(ok(await api.get(`/api-keys/${expired.apiKey.id}`)).apiKey.status).toBe("EXPIRED")
  })

  it("answers a create repeated with its Idempotency-Key with the same key, its secret left out", async () => {
    const { tenant, api } = await newTenant()
    const post = () => app.request("POST", "/api-keys", { key: tenant.apiKey, body: { name: "retry" }, headers: { "idempotency-key": "mint-1" } })
    const first = await post()
    const created = ok(first, 201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    expect(created.secret).toMatch(/^sk_/)
    const repeat = await post()
    expect(repeat.status).toBe(201)
    expect(repeat.headers.get("idempotent-replayed")).toBe("true")
    expect(repeat.body).toEqual({ ...first.body, result: { ...created, secret: null } })
    expect(ok(await api.get("/api-keys")).apiKeys.filter((k: any) => k.name === "retry")).toHaveLength(1)
    // The secret is stored nowhere: not in the key's row, not in the recorded answer.
    const stored = await query<{ text: string }>(
      app,
      "SELECT row_to_json(r)::text AS text FROM idempotent_requests r WHERE organization_id = $1",
      [tenant.organizationId]
    )
    expect(stored).toHaveLength(1)
    expect(stored[0]!.text).not.toContain(created.secret)
    const rows = await query<{ text: string }>(app, "SELECT row_to_json(k)::text AS text FROM api_keys k WHERE id = $1", [created.apiKey.id])
    expect(rows[0]!.text).not.toContain(created.secret)
  })
})

describe("through the typed client (@billing/client)", () => {
  it("lists, reads and replays events, voids an invoice and manages keys, with typed results and errors", async () => {
    const { tenant, api } = await newTenant()
    const billing = createBillingClient({ baseUrl: app.baseUrl, apiKey: tenant.apiKey })
    const { receiver } = await subscribe(api, ["wallet.balance.update"])
    const customer = await makeCustomer(api)
    await adjustWallet(api, customer.id, 3)
    await drainSender(app)

    const { events } = await billing.events.list({ customerId: customer.id, type: "wallet.balance.update", limit: 10 })
    expect(events.map((event) => [event.eventType, event.deliveryCounts.delivered])).toEqual([["wallet.balance.update", 1]])
    const read = await billing.events.get({ id: events[0]!.id })
    expect(read.deliveries.map((delivery) => delivery.status)).toEqual(["DELIVERED"])
    const replayed = await billing.events.replay({ id: events[0]!.id })
    expect(replayed.deliveries).toHaveLength(1)
    await drainSender(app)
    expect(receiver.received.map((request) => request.headers["x-service-event-id"])).toEqual([events[0]!.id, events[0]!.id])

    const unit = await makeUnit(api, { flatPrice: 4 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    await buy(api, customer.id, plan.id)
    const [invoice] = (await billing.invoices.list({ customerId: customer.id })).invoices
    expect((await billing.invoices.void({ id: invoice!.id })).invoice.status).toBe("VOID")
    const twice = await billing.invoices.void({ id: invoice!.id }).catch((error: unknown) => error)
    expect(twice).toBeInstanceOf(BillingApiError)
    expect(twice).toMatchObject({ status: 409, code: "invoice_not_open", operation: "invoices.void" })
    await expect(billing.signals.replay({ rawId: "sig_nothing" })).rejects.toMatchObject({ status: 404, code: "signal_not_found" })

    const minted = await billing.apiKeys.create({ name: "from the client" })
    expect(minted.secret).toMatch(/^sk_/)
    expect((await billing.apiKeys.list()).apiKeys.map((key) => key.name)).toContain("from the client")
    expect((await billing.apiKeys.revoke({ id: minted.apiKey.id })).apiKey.status).toBe("REVOKED")
  })
})
