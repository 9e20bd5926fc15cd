/**
 * Wallet events end to end: the wallet moves through the public API
 * (POST /customers/{id}/wallet/adjust, PUT /customers/{id}/wallet/alert) and a
 * real receiver gets signed events once the worker's webhook job has run.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhookSignature } from "../src/index.ts"
import { decimal } from "../src/money.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { workerJobs } from "../src/app/Jobs.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

let app: TestApp
let acme: Tenant
let hook: Receiver
let secret: string

beforeAll(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
  app = await startTestApp()
  acme = await app.tenant("Acme")
  hook = await startReceiver()
  const endpoint = await app.run(Effect.flatMap(WebhookEndpoints, (endpoints) =>
    endpoints.add(acme.organizationId, { url: hook.url, threshold: decimal("50") })))
  secret = endpoint.secret
})
afterAll(async () => {
  await hook.close()
  await app.close()
})

const post = (path: string, body: unknown) => app.request("POST", path, { key: acme.apiKey, body })
const put = (path: string, body: unknown) => app.request("PUT", path, { key: acme.apiKey, body })

/** Events received since `from`, after the worker has delivered everything due. */
const eventsSince = async (from: number) => {
  await drainSender(app)
  for (const request of hook.received.slice(from)) {
    expect(verifyWebhookSignature(secret, request.headers["x-service-signature"] as string, request.body)).toBe(true)
  }
  return hook.received.slice(from).map((request) => JSON.parse(request.body))
}

describe("wallet adjustments over HTTP", () => {
  it("sends updates for every adjustment and drops at the endpoint's threshold, then at the customer's level", async () => {
    const created = await post("/customers", { name: "Jo", email: "jo@example.com", externalId: "jo-1" })
    const customerId = created.body.result.customer.id

    let seen = hook.received.length
    const credit = await post(`/customers/${customerId}/wallet/adjust`, { delta: 100 })
    expect(credit.status).toBe(200)
    const [update] = await eventsSince(seen)
    expect(update).toMatchObject({
      event_type: "wallet.balance.update",
      data: {
        customer_id: customerId,
        external_id: "jo-1",
        previous_balance: 0,
        current_balance: 100,
        delta: 100,
        source: "ADJUSTMENT",
        usage_log_id: null
      }
    })

    seen = hook.received.length
    expect((await post(`/customers/${customerId}/wallet/adjust`, { delta: -60.5 })).status).toBe(200)
    const afterDebit = await eventsSince(seen)
    expect(afterDebit.map((e) => e.event_type).sort()).toEqual(["wallet.balance.drop", "wallet.balance.update"])
    expect(afterDebit.find((e) => e.event_type === "wallet.balance.drop").data).toMatchObject({
      previous_balance: 100,
      current_balance: 39.5,
      threshold: 50,
      threshold_source: "ENDPOINT"
    })

    expect((await put(`/customers/${customerId}/wallet/alert`, { threshold: 30 })).status).toBe(200)
    seen = hook.received.length
    expect((await post(`/customers/${customerId}/wallet/adjust`, { delta: 20 })).status).toBe(200)
    expect((await post(`/customers/${customerId}/wallet/adjust`, { delta: -30 })).status).toBe(200)
    const withLevel = await eventsSince(seen)
    expect(withLevel.filter((e) => e.event_type === "wallet.balance.update").map((e) => e.data.current_balance).sort())
      .toEqual([29.5, 59.5])
    // 59.5 -> 29.5 crosses the endpoint's 50 too, but the customer's own level decides.
    expect(withLevel.filter((e) => e.event_type === "wallet.balance.drop").map((e) => e.data)).toEqual([
      expect.objectContaining({ previous_balance: 59.5, current_balance: 29.5, threshold: 30, threshold_source: "CUSTOMER" })
    ])
  })

  it("sends nothing for a refused adjustment", async () => {
    const created = await post("/customers", { name: "Al", email: "al@example.com" })
    const customerId = created.body.result.customer.id
    const seen = hook.received.length
    expect((await post(`/customers/${customerId}/wallet/adjust`, { delta: 0 })).status).toBe(400)
    expect((await post(`/customers/${customerId}/wallet/adjust`, { delta: "5" })).status).toBe(400)
    expect((await post(`/customers/cus_missing/wallet/adjust`, { delta: 5 })).status).toBe(404)
    expect(await eventsSince(seen)).toEqual([])
  })
})

describe("purchases and wallet usage", () => {
  it("sends PURCHASE for the wallet grant and USAGE, with the usage-log row, for a priced wallet signal", async () => {
    const created = await post("/customers", { name: "Cy", email: "cy@example.com", externalId: "cy-1" })
    const customerId = created.body.result.customer.id
    const plan = await post("/plans", {
      name: "Wallet only",
      billingCycle: "MONTHLY",
      entitlements: [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }]
    })
    expect(plan.status).toBe(201)

    let seen = hook.received.length
    expect((await post("/purchases", { customerId, planId: plan.body.result.plan.id })).status).toBe(201)
    const [grant] = await eventsSince(seen)
    expect(grant).toMatchObject({
      event_type: "wallet.balance.update",
      data: { customer_id: customerId, external_id: "cy-1", previous_balance: 0, current_balance: 10, source: "PURCHASE" }
    })

    seen = hook.received.length
    const signal = await post("/signal/wallet", {
      externalId: "cy-1",
      usage: { model: "gpt-4o", inputTokens: 1_000_000, outputTokens: 0, cacheTokens: 0, cacheWriteTokens: 0 }
    })
    expect(signal.status).toBe(202)
    // The whole worker, as `billing worker --once` runs it: pricing first makes the event, then delivery sends it.
    await app.run(Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: true, idle: 10 })))
    const usage = (await eventsSince(seen)).filter((e) => e.event_type === "wallet.balance.update")
    expect(usage).toHaveLength(1)
    expect(usage[0].data).toMatchObject({
      customer_id: customerId,
      previous_balance: 10,
      current_balance: 7.5,
      delta: -2.5,
      source: "USAGE",
      usage_log_id: expect.any(String)
    })
  })
})

