/**
 * Threshold alerts end to end (docs/webhooks.md): prepaid balances move through
 * the public API (signals priced by the worker, adjustments), the cycle job
 * renews at a chosen instant, and real receivers get signed
 * `balance.threshold.crossed` and `wallet.balance.recovered` events once the
 * worker's webhook job has run.
 *  - each threshold (50, 80, 100 % used of what was granted this cycle) fires
 *    once per cycle, with the usage-log row whose move reached it; signals
 *    after that fire nothing; the next cycle fires again;
 *  - one move that reaches several thresholds fires each; a threshold reached
 *    again in the same cycle (after a grant) fires nothing;
 *  - the wallet fires `recovered` going back above the level it fell to, and not
 *    again until it has fallen again;
 *  - an endpoint that did not subscribe to these events gets none of them.
 */
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { type EventType, verifyWebhookSignature } from "../src/index.ts"
import { EventBodySchemas } from "../src/webhooks/EventSchemas.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, makeCredit, makeCustomer, makeOutcome, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

let app: TestApp
let acme: Tenant
let api: Client
/** Subscribed to the two new events (and to drops), with a 5 USD endpoint threshold. */
let alerts: Receiver
let alertsSecret: string
/** Subscribed to the spec's two wallet events only (the default). */
let wallet: Receiver

beforeAll(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
  alerts = await startReceiver()
  wallet = await startReceiver()
  const added = await app.cli([
    "webhook", "add", "--url", alerts.url, "--events", "balance.threshold.crossed,wallet.balance.recovered,wallet.balance.drop",
    "--threshold", "5", "--org", acme.organizationId, "--json"
  ])
  expect(added.code, added.stderr).toBe(0)
  expect(added.json.endpoint.events).toEqual(["balance.threshold.crossed", "wallet.balance.recovered", "wallet.balance.drop"])
  alertsSecret = added.json.endpoint.secret
  const plain = await app.cli(["webhook", "add", "--url", wallet.url, "--org", acme.organizationId, "--json"])
  expect(plain.code, plain.stderr).toBe(0)
  expect(plain.json.endpoint.events).toEqual(["wallet.balance.update", "wallet.balance.drop"])
})
afterAll(async () => {
  await alerts?.close()
  await wallet?.close()
  await app?.close()
})

/**
 * Every event `receiver` got, after the worker delivered everything due: signatures checked, and each
 * body exactly the shape the OpenAPI document's `webhooks` section gives its type (no field more).
 */
const delivered = async (receiver: Receiver, secret?: string) => {
  await drainSender(app)
  return receiver.received.map((request) => {
    if (secret !== undefined) {
      expect(verifyWebhookSignature(secret, request.headers["x-service-signature"] as string, request.body)).toBe(true)
    }
    const body = JSON.parse(request.body)
    const schema: Schema.Schema<any> = EventBodySchemas[body.event_type as EventType]
    Schema.decodeUnknownSync(schema, { onExcessProperty: "error" })(body)
    return body
  })
}

const thresholdEvents = async (customerId: string) =>
  (await delivered(alerts, alertsSecret)).filter((e) => e.event_type === "balance.threshold.crossed" && e.data.customer_id === customerId)

const walletEventsOf = async (receiver: Receiver, customerId: string, eventType: string) =>
  (await delivered(receiver)).filter((e) => e.event_type === eventType && e.data.customer_id === customerId)

/** One signal over HTTP, priced by the worker; its usage-log row's id. */
const signal = async (route: "credit" | "unit", body: Record<string, unknown>) => {
  const sent = await api.post(`/signal/${route}`, body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
  const rows = ok(await api.get(`/signal/usage-log?customerId=${body.customerId}&limit=200`)).usageLogs
  const row = rows.find((r: any) => r.rawId === sent.body.result.rawId)
  expect(row, "priced").toBeDefined()
  return row.id as string
}

describe("balance.threshold.crossed", () => {
  it("fires 50, 80 and 100 once each in a cycle, nothing after, and again in the next cycle", async () => {
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ])
    const customer = await makeCustomer(api, { externalId: `ext-${Date.now()}` })
    const purchase = await buy(api, customer.id, plan.id)
    const use = (quantity: number) => signal("unit", { customerId: customer.id, agentKey: unit.agentKey, quantity })

    await use(3) // 30 %
    expect(await thresholdEvents(customer.id)).toEqual([])
    const at60 = await use(3)
    const at90 = await use(3)
    const at110 = await use(2) // 1 from the allowance (100 %), 1 in arrears
    await use(1) // arrears only
    await use(4)
    const events = await thresholdEvents(customer.id)
    expect(events.map((e) => e.data.threshold)).toEqual([50, 80, 100])
    const common = {
      customer_id: customer.id,
      external_id: customer.externalId,
      balance_type: "UNIT",
      balance_id: unit.id,
      purchase_id: purchase.id,
      cycle_index: 0,
      period_start: purchase.currentPeriodStart,
      period_end: purchase.currentPeriodEnd,
      source: "USAGE"
    }
    expect(events.map((e) => e.data)).toEqual([
      { ...common, threshold: 50, granted: 10, used: 6, remaining: 4, usage_log_id: at60 },
      { ...common, threshold: 80, granted: 10, used: 9, remaining: 1, usage_log_id: at90 },
      { ...common, threshold: 100, granted: 10, used: 10, remaining: 0, usage_log_id: at110 }
    ])
    expect(new Set(events.map((e) => e.id)).size).toBe(3)
    // The endpoint that kept the default events got none of them.
    expect((await delivered(wallet)).filter((e) => e.event_type === "balance.threshold.crossed")).toEqual([])

    // The next cycle: the purchase's cycle ended a minute ago, the cycle job renews it at an explicit instant.
    const anchor = new Date(Date.now() - 60_000)
    anchor.setUTCMonth(anchor.getUTCMonth() - 1)
    const start = cycleStart(anchor, 0)
    const end = cycleStart(anchor, 1)
    await query(app, "UPDATE purchases SET billing_date = $3, period_start = $3, period_end = $4 WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      purchase.id,
      start.toISOString(),
      end.toISOString()
    ])
    await runCycles(app, new Date())
    const renewed = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(renewed.currentPeriodStart).toBe(end.toISOString())
    const nextAt50 = await use(5)
    const next = (await thresholdEvents(customer.id)).slice(3)
    expect(next.map((e) => e.data)).toEqual([{
      ...common,
      threshold: 50,
      granted: 10,
      used: 5,
      remaining: 5,
      usage_log_id: nextAt50,
      cycle_index: 1,
      period_start: renewed.currentPeriodStart,
      period_end: renewed.currentPeriodEnd
    }])
    const fired = await query<{ cycleIndex: number; threshold: number }>(
      app,
      "SELECT cycle_index, threshold FROM balance_threshold_alerts WHERE organization_id = $1 AND purchase_id = $2 ORDER BY cycle_index, threshold",
      [acme.organizationId, purchase.id]
    )
    expect(fired.map((row) => [row.cycleIndex, row.threshold])).toEqual([[0, 50], [0, 80], [0, 100], [1, 50]])
  })

  it("fires every threshold one move reaches, for adjustments too, and a threshold reached again in the cycle fires nothing", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    // 625 output tokens on gpt-4o are one credit (basePrice 0.00625).
    const use = (credits: number) =>
      signal("credit", { customerId: customer.id, agentKey: credit.agentKey, usage: { model: "gpt-4o", outputTokens: 625 * credits } })
    const adjust = async (delta: number) =>
      expect((await api.post(`/customers/${customer.id}/credits/adjust`, { agentKey: credit.agentKey, delta })).status).toBe(200)

    await use(40)
    expect(await thresholdEvents(customer.id)).toEqual([])
    // A claw-back of 30 leaves 40 used of 70 granted: 57 %.
    await adjust(-30)
    let events = await thresholdEvents(customer.id)
    expect(events.map((e) => e.data)).toEqual([
      expect.objectContaining({ threshold: 50, balance_type: "CREDIT", balance_id: credit.id, granted: 70, used: 40, remaining: 30, source: "ADJUSTMENT", usage_log_id: null })
    ])
    // A grant of 130: 40 of 200 (20 %); 70 more is 55 %, past 50 again: nothing, once a cycle.
    await adjust(130)
    await use(70)
    expect(await thresholdEvents(customer.id)).toHaveLength(1)
    // One signal from 55 % to 100 %: 80 and 100 together, both naming it.
    const all = await use(90)
    events = await thresholdEvents(customer.id)
    expect(events.slice(1).map((e) => [e.data.threshold, e.data.used, e.data.remaining, e.data.usage_log_id])).toEqual([
      [80, 200, 0, all],
      [100, 200, 0, all]
    ])
  })
})

describe("balance.threshold.crossed in one drain batch, and for outcomes", () => {
  it("names the signal whose move reached each threshold when one batch of the worker prices them all", async () => {
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const sent = await api.post("/signal/batch", {
      signals: [3, 3, 3, 1, 4].map((quantity) => ({ type: "unit", customerId: customer.id, agentKey: unit.agentKey, quantity }))
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    const rawIds = (sent.body.result.results as Array<any>).map((result) => result.rawId)
    // One drain: the five signals are one batch, and the balance row is written once.
    await drain(app)
    const rows = ok(await api.get(`/signal/usage-log?customerId=${customer.id}&limit=200`)).usageLogs
    const usageOf = (rawId: string) => rows.find((row: any) => row.rawId === rawId).id
    const events = await thresholdEvents(customer.id)
    expect(events.map((e) => [e.data.threshold, e.data.used, e.data.remaining, e.data.usage_log_id])).toEqual([
      [50, 6, 4, usageOf(rawIds[1])],
      [80, 9, 1, usageOf(rawIds[2])],
      [100, 10, 0, usageOf(rawIds[3])]
    ])
    // The fifth signal found no allowance left (no ARREAR component): refused, nothing moved, nothing fired.
    expect(rows.find((row: any) => row.rawId === rawIds[4])).toBeUndefined()
  })

  it("fires for a prepaid outcome balance when a completed run uses it", async () => {
    const outcome = await makeOutcome(api)
    const plan = await makePlan(app, acme, [{ type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const step = await api.post("/signal/outcome", {
      customerId: customer.id,
      agentKey: `${outcome.agentKey}-step`,
      runId: "run-1",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    })
    expect(step.status, JSON.stringify(step.body)).toBe(202)
    await drain(app)
    expect(await thresholdEvents(customer.id)).toEqual([])
    const complete = await api.post("/signal/outcome/complete", { customerId: customer.id, runId: "run-1" })
    expect(complete.status, JSON.stringify(complete.body)).toBe(200)
    await drain(app)
    const rows = ok(await api.get(`/signal/usage-log?customerId=${customer.id}&limit=200`)).usageLogs
    const billed = rows.find((row: any) => row.rawId === complete.body.result.rawId)
    expect((await thresholdEvents(customer.id)).map((e) => e.data)).toEqual([
      expect.objectContaining({
        balance_type: "OUTCOME",
        balance_id: outcome.id,
        threshold: 50,
        granted: 2,
        used: 1,
        remaining: 1,
        source: "USAGE",
        usage_log_id: billed.id
      })
    ])
  })
})

describe("wallet.balance.recovered", () => {
  it("fires when the wallet rises back above the level it fell to, and not again until it falls again", async () => {
    const customer = await makeCustomer(api)
    const adjust = async (delta: number) =>
      expect((await api.post(`/customers/${customer.id}/wallet/adjust`, { delta })).status).toBe(200)
    const recovered = () => walletEventsOf(alerts, customer.id, "wallet.balance.recovered")

    // The endpoint's 5 USD: an empty wallet is at or below it, so its first funding is a recovery.
    await adjust(20)
    expect((await recovered()).map((e) => e.data)).toEqual([
      expect.objectContaining({ previous_balance: 0, current_balance: 20, threshold: 5, threshold_source: "ENDPOINT", source: "ADJUSTMENT" })
    ])
    await adjust(-16) // 4: a drop
    await adjust(0.5) // 4.5: still below
    await adjust(10) // 14.5: recovered
    await adjust(10) // 24.5: nothing
    expect((await recovered()).map((e) => [e.data.previous_balance, e.data.current_balance])).toEqual([[0, 20], [4.5, 14.5]])
    expect((await walletEventsOf(alerts, customer.id, "wallet.balance.drop")).map((e) => e.data.current_balance)).toEqual([4])

    // The customer's own level replaces the endpoint's, as for drops.
    expect((await api.put(`/customers/${customer.id}/wallet/alert`, { threshold: 20 })).status).toBe(200)
    await adjust(-4.5) // exactly 20: at the level
    await adjust(1) // 21: recovered
    await adjust(-11) // 10: a drop, also below the endpoint's level... the customer's decides
    await adjust(30) // 40: recovered
    expect((await recovered()).slice(2).map((e) => e.data)).toEqual([
      expect.objectContaining({ previous_balance: 20, current_balance: 21, threshold: 20, threshold_source: "CUSTOMER" }),
      expect.objectContaining({ previous_balance: 10, current_balance: 40, threshold: 20, threshold_source: "CUSTOMER" })
    ])
    // Not subscribed: nothing for the endpoint that kept the default events.
    expect(await walletEventsOf(wallet, customer.id, "wallet.balance.recovered")).toEqual([])
    expect((await walletEventsOf(wallet, customer.id, "wallet.balance.update")).length).toBe(9)
  })
})
