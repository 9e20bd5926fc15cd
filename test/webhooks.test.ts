/**
 * Webhook events and their delivery to a real receiver on loopback: signatures,
 * headers, retries on the schedule, timeouts, disabled endpoints, secret
 * rotation, drop levels, and events written only when the wallet change commits.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { decimal } from "../src/money.ts"
import { verifyWebhookSignature } from "../src/index.ts"
import { WebhookDeliveries } from "../src/webhooks/Deliveries.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { WebhookOutbox } from "../src/webhooks/Outbox.ts"
import type { Endpoint, EventType } from "../src/webhooks/Webhook.ts"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { changeWallet, drainSender, type Receiver, runSender, startReceiver } from "./webhooks-helpers.ts"
import type { OrganizationId } from "../src/ids.ts"

/** A full garbage collection on demand (what `node --expose-gc` gives as `gc`). */
setFlagsFromString("--expose-gc")
const collectGarbage = runInNewContext("gc") as () => void

let app: TestApp
let acme: Tenant
let customerId: string
const receivers: Array<Receiver> = []
/** This test's endpoints, removed after it so that no delivery of it is left due for a later test's clock. */
const endpointsOfTest: Array<Endpoint> = []

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
})
afterAll(() => app.close())

beforeEach(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0,0,0,0,0"
  process.env.BILLING_WEBHOOK_TIMEOUT_MS = "5000"
  // A fresh organisation per test keeps each test's endpoints and events to itself.
  acme = await app.tenant("Acme")
  const created = await app.request("POST", "/customers", {
    key: acme.apiKey,
    body: { name: "Jo", email: "jo@example.com", externalId: "jo-1" }
  })
  customerId = created.body.result.customer.id
})
afterEach(async () => {
  for (const endpoint of endpointsOfTest.splice(0)) {
    await app.run(Effect.ignore(Effect.flatMap(WebhookEndpoints, (e) => e.remove(acme.organizationId, endpoint.id))))
  }
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()))
})

const receiver = async (...args: Parameters<typeof startReceiver>) => {
  const started = await startReceiver(...args)
  receivers.push(started)
  return started
}

const addEndpoint = async (
  url: string,
  options: { events?: ReadonlyArray<EventType>; threshold?: string; organizationId?: OrganizationId } = {}
) => {
  const endpoint = await app.run(Effect.flatMap(WebhookEndpoints, (endpoints) =>
    endpoints.add(options.organizationId ?? acme.organizationId, {
      url,
      ...(options.events ? { events: options.events } : {}),
      ...(options.threshold !== undefined ? { threshold: decimal(options.threshold) } : {})
    })))
  if (options.organizationId === undefined) endpointsOfTest.push(endpoint)
  return endpoint
}

const endpointsDo = <A>(f: (endpoints: WebhookEndpoints) => Effect.Effect<A, unknown>) =>
  app.run(Effect.flatMap(WebhookEndpoints, f))

const deliveriesOf = (endpoint: Endpoint) =>
  app.run(Effect.flatMap(WebhookDeliveries, (deliveries) =>
    deliveries.list(acme.organizationId, { endpointId: endpoint.id, limit: 200 })))

const change = (from: string, to: string, extra: { alertLevel?: string | null; at?: Date } = {}) =>
  changeWallet(app, { organizationId: acme.organizationId, customerId, from, to, ...extra })

const bodies = (r: Receiver) => r.received.map((request) => JSON.parse(request.body))

describe("delivery", () => {
  it("POSTs a signed wallet.balance.update with the headers and data of the spec", async () => {
    const hook = await receiver()
    const endpoint = await addEndpoint(hook.url)
    await changeWallet(app, {
      organizationId: acme.organizationId,
      customerId,
      from: "10.5",
      to: "7.25",
      usageLogId: "ul_123"
    })
    await drainSender(app)

    expect(hook.received).toHaveLength(1)
    const [request] = hook.received
    const body = JSON.parse(request!.body)
    expect(body).toEqual({
      id: expect.stringMatching(/^evt_/),
      event_type: "wallet.balance.update",
      triggered_at: expect.any(String),
      data: {
        customer_id: customerId,
        external_id: null,
        previous_balance: 10.5,
        current_balance: 7.25,
        delta: -3.25,
        source: "ADJUSTMENT",
        usage_log_id: "ul_123"
      }
    })
    expect(new Date(body.triggered_at).toISOString()).toBe(body.triggered_at)
    expect(request!.headers["content-type"]).toBe("application/json")
    expect(request!.headers["x-service-event-id"]).toBe(body.id)
    expect(request!.headers["x-service-event-type"]).toBe("wallet.balance.update")
    const signature = request!.headers["x-service-signature"] as string
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    expect(verifyWebhookSignature(endpoint.secret, signature, request!.body)).toBe(true)
    expect(verifyWebhookSignature(endpoint.secret, signature, request!.body.replace("7.25", "72.5"))).toBe(false)
    expect(verifyWebhookSignature(`${endpoint.secret}x`, signature, request!.body)).toBe(false)

    const [delivery] = await deliveriesOf(endpoint)
    expect(delivery).toMatchObject({ status: "DELIVERED", attempts: 1, lastStatusCode: 200, nextAttemptAt: null })
    expect(delivery!.attemptLog).toHaveLength(1)
    expect(delivery!.attemptLog[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null })
  })

  it("keeps every digit of an exact decimal in the body", async () => {
    const hook = await receiver()
    await addEndpoint(hook.url)
    await change("0.1", "0.123456789012")
    await drainSender(app)
    expect(hook.received[0]!.body).toContain(`"current_balance":0.123456789012`)
    expect(hook.received[0]!.body).toContain(`"delta":0.023456789012`)
  })

  it("writes nothing when the wallet change rolls back, and nothing for an unchanged balance", async () => {
    const hook = await receiver()
    const endpoint = await addEndpoint(hook.url)
    const failed = await app.run(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const outbox = yield* WebhookOutbox
        return yield* Effect.flip(
          Effect.zipRight(
            outbox.walletChanged({
              organizationId: acme.organizationId,
              customerId,
              externalId: null,
              previousBalance: decimal("5"),
              currentBalance: decimal("1"),
              delta: decimal("-4"),
              source: "USAGE",
              usageLogId: null,
              alertLevel: null,
              at: new Date()
            }),
            Effect.fail("the rest of the charge failed")
          ).pipe(sql.withTransaction)
        )
      })
    )
    expect(failed).toBe("the rest of the charge failed")
    await change("3", "3")
    await drainSender(app)
    expect(hook.received).toHaveLength(0)
    expect(await deliveriesOf(endpoint)).toHaveLength(0)
  })

  it("sends only the events an endpoint subscribed to", async () => {
    const updates = await receiver()
    const drops = await receiver()
    await addEndpoint(updates.url, { events: ["wallet.balance.update"], threshold: "5" })
    await addEndpoint(drops.url, { events: ["wallet.balance.drop"], threshold: "5" })
    await change("10", "4")
    await drainSender(app)
    expect(bodies(updates).map((b) => b.event_type)).toEqual(["wallet.balance.update"])
    expect(bodies(drops).map((b) => b.event_type)).toEqual(["wallet.balance.drop"])
  })

  it("keeps other organisations' endpoints out of a customer's events", async () => {
    const other = await app.tenant("Other")
    const theirs = await receiver()
    await addEndpoint(theirs.url, { organizationId: other.organizationId })
    const ours = await receiver()
    await addEndpoint(ours.url)
    await change("1", "2")
    await drainSender(app)
    expect(ours.received).toHaveLength(1)
    expect(theirs.received).toHaveLength(0)
  })
})

describe("retries", () => {
  it("retries a failing receiver on the schedule with the same event id, then stops at DELIVERED", async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0.3,0.6,5,5,5"
    const hook = await receiver((n) => ({ status: n < 2 ? 503 : 204 }))
    const endpoint = await addEndpoint(hook.url)
    await change("20", "15")

    // The worker's clock is chosen, not slept through: each retry must be due exactly one
    // scheduled delay after the failed attempt ended, and not a millisecond before.
    let now = new Date()
    await drainSender(app, now)
    expect(hook.received).toHaveLength(1)
    for (const [failed, delayMs] of [[1, 300], [2, 600]] as const) {
      const [pending] = await deliveriesOf(endpoint)
      expect(pending).toMatchObject({ status: "PENDING", attempts: failed, lastStatusCode: 503 })
      const { durationMs } = pending!.attemptLog[failed - 1]!
      const due = pending!.nextAttemptAt!.getTime()
      expect(due).toBe(now.getTime() + durationMs + delayMs)
      await drainSender(app, new Date(due - 1))
      expect(hook.received).toHaveLength(failed)
      now = new Date(due)
      await drainSender(app, now)
      expect(hook.received).toHaveLength(failed + 1)
    }
    // Delivered: nothing is due however late the clock.
    await drainSender(app, new Date(now.getTime() + 86_400_000))
    expect(hook.received).toHaveLength(3)
    const ids = hook.received.map((request) => request.headers["x-service-event-id"])
    expect(new Set(ids).size).toBe(1)
    expect(ids[0]).toMatch(/^evt_/)
    // The exact same bytes every time: the body is stored once.
    expect(new Set(hook.received.map((request) => request.body)).size).toBe(1)

    const [delivery] = await deliveriesOf(endpoint)
    expect(delivery).toMatchObject({ status: "DELIVERED", attempts: 3, lastStatusCode: 204, nextAttemptAt: null })
    expect(delivery!.attemptLog.map((a) => [a.attempt, a.statusCode, a.error])).toEqual([
      [1, 503, "HTTP 503"],
      [2, 503, "HTTP 503"],
      [3, 204, null]
    ])
  })

  it("shows the next retry while waiting for it", async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "3600"
    const hook = await receiver(() => ({ status: 500 }))
    const endpoint = await addEndpoint(hook.url)
    await change("2", "1")
    const now = new Date()
    await drainSender(app, now)
    const [delivery] = await deliveriesOf(endpoint)
    expect(delivery).toMatchObject({ status: "PENDING", attempts: 1, lastStatusCode: 500 })
    // An hour after the failed attempt ended.
    expect(delivery!.nextAttemptAt!.getTime()).toBe(now.getTime() + delivery!.attemptLog[0]!.durationMs + 3600_000)
  })

  it("gives up after the first attempt and 5 retries", async () => {
    const hook = await receiver(() => ({ status: 500 }))
    const endpoint = await addEndpoint(hook.url)
    await change("2", "1")
    await drainSender(app)
    expect(hook.received).toHaveLength(6)
    const [delivery] = await deliveriesOf(endpoint)
    expect(delivery).toMatchObject({ status: "FAILED", attempts: 6, nextAttemptAt: null, lastStatusCode: 500 })
    expect(delivery!.attemptLog.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6])
  })

  it("counts a refused connection as a failed attempt", async () => {
    const hook = await receiver()
    const url = hook.url
    await hook.close()
    receivers.splice(receivers.indexOf(hook), 1)
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
    const endpoint = await addEndpoint(url)
    await change("2", "1")
    await drainSender(app)
    const [delivery] = await deliveriesOf(endpoint)
    expect(delivery).toMatchObject({ status: "FAILED", attempts: 2, lastStatusCode: null })
    expect(delivery!.lastError).toMatch(/connection failed/)
  })

  it("does not hold up another endpoint while a slow receiver has 4 deliveries in flight", async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "3600"
    // Longer than the test: while the slow receiver holds its requests, only its answer ends them.
    process.env.BILLING_WEBHOOK_TIMEOUT_MS = "600000"
    const slow = await receiver(() => ({ status: 200, hold: true }))
    const fast = await receiver()
    const slowEndpoint = await addEndpoint(slow.url)
    // A backlog at the slow endpoint: more than it is ever given at once.
    for (let i = 0; i < 10; i++) await change(String(20 - i), String(19 - i))
    await runSender(app)
    await eventually(() => expect(slow.held()).toBe(4))

    // The slow deliveries are in flight and unanswered; a new event for another endpoint goes out all the same.
    const fastEndpoint = await addEndpoint(fast.url)
    await change("10", "9")
    await eventually(async () => {
      await runSender(app)
      expect((await deliveriesOf(fastEndpoint)).map((d) => d.status)).toEqual(["DELIVERED"])
    })
    expect(fast.received).toHaveLength(1)
    // Still 4 held, none answered, and no batch took a fifth: at most 4 in flight per endpoint.
    expect(slow.received).toHaveLength(4)
    expect(slow.held()).toBe(4)
    const inFlight = await deliveriesOf(slowEndpoint)
    expect(inFlight).toHaveLength(11)
    expect(inFlight.filter((d) => d.attempts === 1 && d.attemptLog.length === 0)).toHaveLength(4)
    expect(inFlight.filter((d) => d.attempts === 0)).toHaveLength(7)
    expect(inFlight.every((d) => d.status === "PENDING")).toBe(true)

    // A slow answer within the timeout is delivered.
    expect(slow.release()).toBe(4)
    await eventually(async () => {
      expect((await deliveriesOf(slowEndpoint)).filter((d) => d.status === "DELIVERED")).toHaveLength(4)
    })
  })

  it("cuts a receiver that never answers off at the timeout, even after a garbage collection", async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "3600"
    process.env.BILLING_WEBHOOK_TIMEOUT_MS = "400"
    // A full collection as each attempt reaches the receiver, which then holds it until the test ends:
    // the attempt's timeout is armed and not yet fired (unless the machine was too slow to get here
    // within it), and only the timeout can end the attempt. A timeout signal inside AbortSignal.any()
    // is held only weakly by Node and was collected unfired: the attempt then lasted as long as the
    // receiver, nodejs/node#57736. (Collections on a timer instead, every 100 or 200 ms, starved the
    // sender on a loaded machine: full collections back to back, past the drain's limit.)
    const silent = await receiver(() => {
      collectGarbage()
      return { status: 200, hold: true }
    })
    const endpoint = await addEndpoint(silent.url)
    for (let i = 0; i < 6; i++) await change(String(20 - i), String(19 - i))
    await drainSender(app)
    expect(silent.received).toHaveLength(6)

    const deliveries = await deliveriesOf(endpoint)
    expect(deliveries).toHaveLength(6)
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({ status: "PENDING", attempts: 1, lastStatusCode: null })
      expect(delivery.lastError).toBe("timed out after 400 ms")
      expect(delivery.attemptLog).toHaveLength(1)
      // Not a failure on the spot: it waited (a timer may fire a little early against the wall clock).
      expect(delivery.attemptLog[0]!.durationMs).toBeGreaterThanOrEqual(200)
    }
  })

  it("signs every attempt with the secret current at that attempt", async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "3600"
    const hook = await receiver((n) => ({ status: n === 0 ? 500 : 200 }))
    const endpoint = await addEndpoint(hook.url)
    await change("5", "4")
    await drainSender(app)
    expect(hook.received).toHaveLength(1)
    const rotated = await endpointsDo((e) => e.rotateSecret(acme.organizationId, endpoint.id))
    expect(rotated.secret).toMatch(/^whsec_/)
    expect(rotated.secret).not.toBe(endpoint.secret)
    // The retry, on a clock moved to when it is due.
    const [pending] = await deliveriesOf(endpoint)
    await drainSender(app, pending!.nextAttemptAt!)
    expect(hook.received).toHaveLength(2)
    expect((await deliveriesOf(endpoint))[0]).toMatchObject({ status: "DELIVERED", attempts: 2 })
    const [first, second] = hook.received
    expect(first!.body).toBe(second!.body)
    expect(verifyWebhookSignature(endpoint.secret, first!.headers["x-service-signature"] as string, first!.body)).toBe(true)
    const secondSignature = second!.headers["x-service-signature"] as string
    expect(verifyWebhookSignature(rotated.secret, secondSignature, second!.body)).toBe(true)
    expect(verifyWebhookSignature(endpoint.secret, secondSignature, second!.body)).toBe(false)
  })
})

describe("disabled and removed endpoints", () => {
  it("never sends an event triggered while the endpoint was disabled, even after it is enabled", async () => {
    const hook = await receiver()
    const endpoint = await addEndpoint(hook.url)
    await endpointsDo((e) => e.disable(acme.organizationId, endpoint.id))
    await change("10", "9")
    await endpointsDo((e) => e.enable(acme.organizationId, endpoint.id))
    await drainSender(app)
    expect(hook.received).toHaveLength(0)
    expect(await deliveriesOf(endpoint)).toHaveLength(0)

    await change("9", "8")
    await drainSender(app)
    expect(bodies(hook).map((b) => b.data.current_balance)).toEqual([8])
  })

  it("holds queued deliveries while disabled and sends them once enabled again", async () => {
    const hook = await receiver()
    const endpoint = await addEndpoint(hook.url)
    await change("10", "9")
    await endpointsDo((e) => e.disable(acme.organizationId, endpoint.id))
    await drainSender(app)
    expect(hook.received).toHaveLength(0)
    await endpointsDo((e) => e.enable(acme.organizationId, endpoint.id))
    await drainSender(app)
    expect(hook.received).toHaveLength(1)
  })

  it("cancels a removed endpoint's pending deliveries and keeps its history", async () => {
    const hook = await receiver()
    const endpoint = await addEndpoint(hook.url)
    await change("10", "9")
    await drainSender(app)
    await change("9", "8")
    await endpointsDo((e) => e.remove(acme.organizationId, endpoint.id))
    await drainSender(app)
    expect(hook.received).toHaveLength(1)
    const history = await deliveriesOf(endpoint)
    expect(history.map((d) => d.status)).toEqual(["CANCELLED", "DELIVERED"])
    await change("8", "7")
    expect(await deliveriesOf(endpoint)).toHaveLength(2)
  })
})

describe("wallet.balance.drop", () => {
  const dropsOf = (r: Receiver) => bodies(r).filter((b) => b.event_type === "wallet.balance.drop")

  it("fires when the balance goes from above the customer's level to at or below it", async () => {
    const hook = await receiver()
    await addEndpoint(hook.url, { threshold: "1" })
    await change("15", "10", { alertLevel: "10" }) // crosses: at the level counts
    await change("10", "5", { alertLevel: "10" }) // already at or below: no new drop
    await change("5", "12", { alertLevel: "10" }) // rising: no drop
    await change("12", "10.5", { alertLevel: "10" }) // still above: no drop
    await change("10.5", "-3", { alertLevel: "10" }) // crosses again
    await drainSender(app)
    const drops = dropsOf(hook)
    expect(drops.map((d) => [d.data.previous_balance, d.data.current_balance])).toEqual(
      expect.arrayContaining([[15, 10], [10.5, -3]])
    )
    expect(drops).toHaveLength(2)
    for (const drop of drops) expect(drop.data).toMatchObject({ threshold: 10, threshold_source: "CUSTOMER" })
    expect(bodies(hook).filter((b) => b.event_type === "wallet.balance.update")).toHaveLength(5)
  })

  it("uses each endpoint's own threshold when the customer has no level", async () => {
    const low = await receiver()
    const high = await receiver()
    const none = await receiver()
    await addEndpoint(low.url, { threshold: "5" })
    await addEndpoint(high.url, { threshold: "20" })
    await addEndpoint(none.url)
    await change("25", "10")
    await drainSender(app)
    expect(dropsOf(low)).toHaveLength(0)
    expect(dropsOf(high).map((d) => d.data)).toEqual([
      expect.objectContaining({ current_balance: 10, threshold: 20, threshold_source: "ENDPOINT" })
    ])
    expect(dropsOf(none)).toHaveLength(0)
    expect(none.received).toHaveLength(1)

    await change("10", "5")
    await drainSender(app)
    expect(dropsOf(low).map((d) => d.data.threshold)).toEqual([5])
    expect(dropsOf(high)).toHaveLength(1)
  })

  it("lets the customer's level override the endpoints' thresholds", async () => {
    const hook = await receiver()
    await addEndpoint(hook.url, { threshold: "5" })
    await change("150", "50", { alertLevel: "100" })
    await change("50", "4", { alertLevel: "100" })
    await drainSender(app)
    expect(dropsOf(hook).map((d) => [d.data.current_balance, d.data.threshold])).toEqual([[50, 100]])
  })
})

describe("receiver's duty: duplicates and order", () => {
  it("lets a receiver drop a duplicate by id and a late event by triggered_at", async () => {
    const { WalletMirror } = await import("../examples/webhook-receiver.ts")
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "3600"
    // The first event's first attempt fails, so its retry arrives after the second event.
    const hook = await receiver((n) => ({ status: n === 0 ? 500 : 200 }))
    const endpoint = await addEndpoint(hook.url)
    await change("10", "8", { at: new Date(Date.now() - 1000) })
    await drainSender(app)
    expect(hook.received).toHaveLength(1)
    await change("8", "3")
    await drainSender(app)
    expect(hook.received).toHaveLength(2)
    // The retry, on a clock moved to when it is due.
    const retry = (await deliveriesOf(endpoint)).find((d) => d.status === "PENDING")
    await drainSender(app, retry!.nextAttemptAt!)
    expect(hook.received).toHaveLength(3)
    const arrived = bodies(hook)
    expect(arrived.map((b) => b.data.current_balance)).toEqual([8, 3, 8])
    expect(arrived[2].id).toBe(arrived[0].id)

    const mirror = new WalletMirror()
    // What the receiver applies: the 500 answer was not an acknowledgement, so it starts from request 2.
    const applied = arrived.slice(1).map((event) => mirror.apply(event))
    expect(applied).toEqual([true, false])
    expect(mirror.apply(arrived[1])).toBe(false)
    expect(mirror.balanceOf(customerId)).toBe(3)
  })
})
