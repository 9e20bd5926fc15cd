/**
 * Webhook endpoints and deliveries over HTTP (issue 27 item 3): create (201, the
 * secret whole once), read and list (masked), update, rotate, remove, the
 * deliveries of an endpoint and a retry, through the same services as the CLI
 * (`billing webhook ...`), which sees what the API made and the other way round.
 */
import { describe, expect, it } from "vitest"
import { verifyWebhookSignature } from "../src/index.ts"
import { type Client, clientOf, expectError, ok } from "./support/Http.ts"
import type { TestApp, Tenant } from "./support/TestApp.ts"
import { changeWallet, drainSender, startReceiver, webhookEndpointsFile } from "./webhooks-helpers.ts"

let app: TestApp
const { endpoints: made, receivers } = webhookEndpointsFile((started) => {
  app = started
})

const newTenant = async () => {
  const tenant: Tenant = await app.tenant("Hooks")
  return { tenant, api: clientOf(app, tenant) }
}

const create = async (api: Client, body: Record<string, unknown>) => {
  const result = ok(await api.post("/webhook-endpoints", body), 201)
  made.push({ api, id: result.endpoint.id })
  return result.endpoint
}

const masked = (secret: string) => `whsec_****${secret.slice(-4)}`

describe("webhook endpoints over HTTP", () => {
  it("shows the secret whole on create and rotate only, masked on every read", async () => {
    const { tenant, api } = await newTenant()
    const endpoint = await create(api, { url: "https://example.com/hooks", events: ["wallet.balance.drop"], threshold: 12.5 })
    expect(endpoint).toEqual({
      id: expect.stringMatching(/^whe_/),
      url: "https://example.com/hooks",
      events: ["wallet.balance.drop"],
      threshold: 12.5,
      enabled: true,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{20,}$/),
      removedAt: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String)
    })
    const read = ok(await api.get(`/webhook-endpoints/${endpoint.id}`)).endpoint
    expect(read).toEqual({ ...endpoint, secret: masked(endpoint.secret) })
    expect(ok(await api.get("/webhook-endpoints")).endpoints).toEqual([{ ...endpoint, secret: masked(endpoint.secret) }])

    const rotated = ok(await api.post(`/webhook-endpoints/${endpoint.id}/rotate-secret`))
    expect(rotated.rotated).toBe(true)
    expect(rotated.endpoint.secret).toMatch(/^whsec_/)
    expect(rotated.endpoint.secret).not.toBe(endpoint.secret)
    expect(ok(await api.get(`/webhook-endpoints/${endpoint.id}`)).endpoint.secret).toBe(masked(rotated.endpoint.secret))

    // The CLI reads the same endpoint from the same service, and prints no secret outside add and rotate-secret.
    const listed = await app.cli(["webhook", "list", "--json", "--org", tenant.organizationId])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.json.endpoints).toEqual([expect.objectContaining({ id: endpoint.id, threshold: 12.5, enabled: true })])
    expect(JSON.stringify(listed.json)).not.toContain(rotated.endpoint.secret)
  })

  it("defaults to the spec's two events, updates what is sent and removes without deleting", async () => {
    const { tenant, api } = await newTenant()
    const endpoint = await create(api, { url: "http://127.0.0.1:9/hooks" })
    expect(endpoint.events).toEqual(["wallet.balance.update", "wallet.balance.drop"])
    expect(endpoint.threshold).toBeNull()

    const updated = ok(await api.patch(`/webhook-endpoints/${endpoint.id}`, {
      url: "https://example.com/other",
      events: ["wallet.balance.update", "wallet.balance.update", "wallet.balance.recovered"],
      threshold: 3,
      enabled: false
    }))
    expect(updated).toEqual({
      updated: true,
      endpoint: {
        ...endpoint,
        url: "https://example.com/other",
        events: ["wallet.balance.update", "wallet.balance.recovered"],
        threshold: 3,
        enabled: false,
        secret: masked(endpoint.secret),
        updatedAt: expect.any(String)
      }
    })
    // Only what is sent changes; null removes the threshold.
    const again = ok(await api.patch(`/webhook-endpoints/${endpoint.id}`, { threshold: null, enabled: true })).endpoint
    expect(again).toMatchObject({ url: "https://example.com/other", threshold: null, enabled: true })

    // The CLI changes it through the same service.
    const viaCli = await app.cli(["webhook", "update", endpoint.id, "--threshold", "7.25", "--json", "--org", tenant.organizationId])
    expect(viaCli.code, viaCli.stderr).toBe(0)
    expect(ok(await api.get(`/webhook-endpoints/${endpoint.id}`)).endpoint.threshold).toBe(7.25)

    const removed = ok(await api.del(`/webhook-endpoints/${endpoint.id}`))
    expect(removed).toMatchObject({ removed: true, endpoint: { id: endpoint.id, enabled: false, removedAt: expect.any(String) } })
    expectError(await api.get(`/webhook-endpoints/${endpoint.id}`), 404, "webhook_endpoint_not_found")
    expectError(await api.patch(`/webhook-endpoints/${endpoint.id}`, { enabled: true }), 404, "webhook_endpoint_not_found")
    expectError(await api.del(`/webhook-endpoints/${endpoint.id}`), 404, "webhook_endpoint_not_found")
    expect(ok(await api.get("/webhook-endpoints")).endpoints).toEqual([])
    expect(ok(await api.get("/webhook-endpoints?includeRemoved=true")).endpoints.map((e: any) => e.id)).toEqual([endpoint.id])
  })

  it("refuses bad bodies with 400 and writes nothing; another organisation's endpoint is 404", async () => {
    const { api } = await newTenant()
    for (
      const body of [
        {},
        { url: "ftp://example.com/x" },
        { url: "not a url" },
        { url: "https://example.com", events: [] },
        { url: "https://example.com", events: ["wallet.nope"] },
        { url: "https://example.com", threshold: -1 },
        { url: "https://example.com", secret: "whsec_mine" }
      ]
    ) {
      expectError(await api.post("/webhook-endpoints", body), 400, "validation_failed")
    }
    expect(ok(await api.get("/webhook-endpoints?includeRemoved=true")).endpoints).toEqual([])

    const endpoint = await create(api, { url: "https://example.com/hooks" })
    expectError(await api.patch(`/webhook-endpoints/${endpoint.id}`, { url: "mailto:x@example.com" }), 400, "validation_failed")
    expectError(await api.patch(`/webhook-endpoints/${endpoint.id}`, { secret: "whsec_mine" }), 400, "validation_failed")
    expect(ok(await api.get(`/webhook-endpoints/${endpoint.id}`)).endpoint.url).toBe("https://example.com/hooks")

    const { api: other } = await newTenant()
    expectError(await other.get(`/webhook-endpoints/${endpoint.id}`), 404, "webhook_endpoint_not_found")
    expectError(await other.patch(`/webhook-endpoints/${endpoint.id}`, { enabled: false }), 404, "webhook_endpoint_not_found")
    expectError(await other.post(`/webhook-endpoints/${endpoint.id}/rotate-secret`), 404, "webhook_endpoint_not_found")
    expectError(await other.del(`/webhook-endpoints/${endpoint.id}`), 404, "webhook_endpoint_not_found")
    expectError(await other.get(`/webhook-endpoints/${endpoint.id}/deliveries`), 404, "webhook_endpoint_not_found")
    expect(ok(await other.get("/webhook-endpoints")).endpoints).toEqual([])
  })

  it("lists an endpoint's deliveries with their attempts and retries one by hand", async () => {
    const { tenant, api } = await newTenant()
    const customer = ok(await api.post("/customers", { name: "Jo", email: "jo@example.com" }), 201).customer
    const receiver = await startReceiver((n) => ({ status: n === 0 ? 500 : 200 }))
    receivers.push(receiver)
    const endpoint = await create(api, { url: receiver.url, events: ["wallet.balance.update"] })

    await changeWallet(app, { organizationId: tenant.organizationId, customerId: customer.id, from: "0", to: "5" })
    await drainSender(app)
    const [failed] = ok(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries`)).deliveries
    expect(failed).toMatchObject({
      id: expect.stringMatching(/^whd_/),
      endpointId: endpoint.id,
      eventType: "wallet.balance.update",
      status: "PENDING",
      attempts: 1,
      lastStatusCode: 500,
      nextAttemptAt: expect.any(String),
      attemptLog: [{ attempt: 1, statusCode: 500, error: "HTTP 500", durationMs: expect.any(Number), startedAt: expect.any(String) }]
    })
    expect(ok(await api.get(`/webhook-deliveries/${failed.id}`)).delivery).toEqual(failed)
    expect(ok(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries?status=DELIVERED`)).deliveries).toEqual([])
    expectError(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries?status=LOST`), 400, "validation_failed")

    // A retry by hand makes it due now; the worker sends it, signed with the current secret.
    const rotated = ok(await api.post(`/webhook-endpoints/${endpoint.id}/rotate-secret`)).endpoint.secret
    const retried = ok(await api.post(`/webhook-deliveries/${failed.id}/retry`))
    expect(retried).toMatchObject({ retried: true, delivery: { id: failed.id, status: "PENDING" } })
    await drainSender(app)
    const delivered = ok(await api.get(`/webhook-deliveries/${failed.id}`)).delivery
    expect(delivered).toMatchObject({ status: "DELIVERED", attempts: 2, lastStatusCode: 200 })
    expect(receiver.received).toHaveLength(2)
    const last = receiver.received[1]!
    expect(verifyWebhookSignature(rotated, String(last.headers["x-service-signature"]), last.body)).toBe(true)
    expect(last.body).toBe(receiver.received[0]!.body)

    // The CLI lists the same deliveries.
    const cli = await app.cli(["webhook", "deliveries", "--endpoint", endpoint.id, "--json", "--org", tenant.organizationId])
    expect(cli.json.deliveries.map((d: any) => [d.id, d.status])).toEqual([[failed.id, "DELIVERED"]])

    // A disabled endpoint's delivery is not retried (409); another organisation's is not found (404).
    ok(await api.patch(`/webhook-endpoints/${endpoint.id}`, { enabled: false }))
    expectError(await api.post(`/webhook-deliveries/${failed.id}/retry`), 409, "webhook_endpoint_disabled")
    const { api: other } = await newTenant()
    expectError(await other.post(`/webhook-deliveries/${failed.id}/retry`), 404, "webhook_delivery_not_found")
    expectError(await other.get(`/webhook-deliveries/${failed.id}`), 404, "webhook_delivery_not_found")
    expectError(await api.post("/webhook-deliveries/whd_nope/retry"), 404, "webhook_delivery_not_found")

    // Removed, its history stays readable.
    ok(await api.del(`/webhook-endpoints/${endpoint.id}`))
    expect(ok(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries`)).deliveries.map((d: any) => d.id)).toEqual([failed.id])
  })

  it("pages deliveries in creation order by cursor", async () => {
    const { tenant, api } = await newTenant()
    const customer = ok(await api.post("/customers", { name: "Jo", email: "jo@example.com" }), 201).customer
    const endpoint = await create(api, { url: "http://127.0.0.1:9/never", events: ["wallet.balance.update"] })
    ok(await api.patch(`/webhook-endpoints/${endpoint.id}`, { enabled: true }))
    for (const to of ["1", "2", "3"]) {
      await changeWallet(app, { organizationId: tenant.organizationId, customerId: customer.id, from: "0", to })
    }
    const first = ok(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries?limit=2`)).deliveries
    expect(first).toHaveLength(2)
    const rest = ok(await api.get(`/webhook-endpoints/${endpoint.id}/deliveries?limit=2&cursor=${first[1].id}`)).deliveries
    expect(rest).toHaveLength(1)
    expect([...first, ...rest].map((d: any) => d.id)).toEqual([...first, ...rest].map((d: any) => d.id).sort())
  })
})
