/**
 * Webhook deliveries whose worker disappears, on both databases:
 *  - a `billing worker` killed after its POST reached the receiver and before
 *    the attempt's result committed (`BILLING_FAULT=webhooks.before-commit`,
 *    src/Fault.ts): the claim stands, nothing of the attempt is
 *    recorded, and the next worker re-sends the same event (same id, same
 *    bytes) once the claim's lease has run out, not before; it is then
 *    recorded delivered once;
 *  - a claimed delivery whose worker vanished (its fibers interrupted
 *    mid-POST) is picked up again exactly at the end of the lease (the
 *    timeout plus 60 s, src/webhooks/Sender.ts), not a millisecond earlier.
 * The lease is driven with a chosen `now`, never by waiting.
 */
import { Context, Effect, Layer } from "effect"
import { createHmac } from "node:crypto"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { WebhookSender } from "../src/webhooks/Sender.ts"
import { query } from "./signals-fixtures.ts"
import { describeExit, runCli } from "./support/Cli.ts"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { changeWallet, drainSender, type Receiver, runSender, startReceiver } from "./webhooks-helpers.ts"

/** docs/webhooks.md: "A claim holds the delivery for the timeout plus 60 s." */
const LEASE_MARGIN_MS = 60_000

let app: TestApp
let tenant: Tenant
let customerId: string
let receiver: Receiver
let secret: string

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

beforeEach(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "30,120,600,3600,21600"
  tenant = await app.tenant("Crash hooks")
  const created = await app.request("POST", "/customers", {
    key: tenant.apiKey,
    body: { name: "Jo", email: "jo@example.com", externalId: "jo-1" }
  })
  customerId = created.body.result.customer.id
  receiver = await startReceiver()
  const endpoint = await app.run(Effect.flatMap(WebhookEndpoints, (e) => e.add(tenant.organizationId, { url: receiver.url })))
  secret = endpoint.secret
})
afterEach(async () => {
  receiver.release()
  await receiver.close()
  delete process.env.BILLING_WEBHOOK_TIMEOUT_MS
})

interface DeliveryState {
  readonly id: string
  readonly eventId: string
  readonly status: string
  readonly attempts: number
  readonly nextAttemptAt: string | null
  readonly recorded: ReadonlyArray<{ attempt: number; statusCode: number | null }>
}

/** The tenant's one delivery and its recorded attempts, read straight from the tables. */
const delivery = async (): Promise<DeliveryState> => {
  const rows = await query<{ id: string; eventId: string; status: string; attempts: number; nextAttemptAt: Date | null }>(
    app,
    `SELECT id, event_id, status, attempts, next_attempt_at FROM webhook_deliveries WHERE organization_id = $1`,
    [tenant.organizationId]
  )
  expect(rows).toHaveLength(1)
  const row = rows[0]!
  const recorded = await query<{ attempt: number; statusCode: number | null }>(
    app,
    `SELECT attempt, status_code FROM webhook_attempts WHERE organization_id = $1 AND delivery_id = $2 ORDER BY attempt`,
    [tenant.organizationId, row.id]
  )
  return {
    id: row.id,
    eventId: row.eventId,
    status: row.status,
    attempts: Number(row.attempts),
    nextAttemptAt: row.nextAttemptAt === null ? null : new Date(row.nextAttemptAt).toISOString(),
    recorded: recorded.map((r) => ({ attempt: Number(r.attempt), statusCode: r.statusCode === null ? null : Number(r.statusCode) }))
  }
}

/** Checks a received request's signature with node:crypto (docs/webhooks.md) and returns its event id. */
const signedEventId = (request: Receiver["received"][number]) => {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(request.headers["x-service-signature"] as string)
  expect(match).not.toBeNull()
  expect(match![2]).toBe(createHmac("sha256", secret).update(`${match![1]}.${request.body}`).digest("hex"))
  const id = JSON.parse(request.body).id
  expect(request.headers["x-service-event-id"]).toBe(id)
  return id as string
}

/**
 * The event went out a second time with the same bytes, and the delivery is
 * DELIVERED, recorded once: the lost attempt counts (attempt 2), but only the
 * attempt that committed is logged.
 */
const expectSentAgainOnce = async (queued: DeliveryState) => {
  expect(receiver.received).toHaveLength(2)
  expect(receiver.received[1]!.body).toBe(receiver.received[0]!.body)
  expect(await delivery()).toEqual({
    ...queued,
    status: "DELIVERED",
    attempts: 2,
    nextAttemptAt: null,
    recorded: [{ attempt: 2, statusCode: 200 }]
  })
}

describe("a webhook worker killed between its POST and the commit of the result", () => {
  it("leaves the claim, records nothing, and the next worker re-sends the same event once the lease is over", async () => {
    await changeWallet(app, { organizationId: tenant.organizationId, customerId, from: "10", to: "4.5" })
    const queued = await delivery()
    expect(queued).toMatchObject({ status: "PENDING", attempts: 0, recorded: [] })

    // The worker's clock, chosen: its claim holds the delivery until now + timeout + 60 s.
    const now = new Date(Date.now() + 1000)
    // Longer than any attempt on a loaded machine: the receiver's answer, never the timeout, ends it.
    const timeoutMs = 600_000
    const leaseEnd = new Date(now.getTime() + timeoutMs + LEASE_MARGIN_MS)
    const killed = await runCli(app, ["worker", "--once", "--now", now.toISOString()], {
      BILLING_FAULT: "webhooks.before-commit",
      BILLING_WEBHOOK_TIMEOUT_MS: String(timeoutMs)
    })
    // Killed at the fault point, not failed in some other way.
    expect(killed.signal, describeExit(killed)).toBe("SIGKILL")
    // The attempt was made (the receiver answered 200), but its result never committed.
    expect(receiver.received).toHaveLength(1)
    const eventId = signedEventId(receiver.received[0]!)
    expect(eventId).toBe(queued.eventId)
    expect(await delivery()).toEqual({
      ...queued,
      attempts: 1,
      nextAttemptAt: leaseEnd.toISOString(),
      recorded: []
    })

    // Before the lease ends no worker takes it: not at the same instant, not a millisecond before the end.
    for (const at of [now, new Date(leaseEnd.getTime() - 1)]) {
      expect(await runSender(app, at)).toBe(0)
    }
    expect(receiver.received).toHaveLength(1)

    // The next worker process, at the lease's end.
    const next = await runCli(app, ["worker", "--once", "--now", leaseEnd.toISOString(), "--json"])
    expect(next.code, describeExit(next)).toBe(0)
    await expectSentAgainOnce(queued)
    expect(signedEventId(receiver.received[1]!)).toBe(eventId)

    // Nothing is sent again, however late.
    await drainSender(app, new Date(leaseEnd.getTime() + 86_400_000))
    expect(receiver.received).toHaveLength(2)
  })
})

describe("the lease of a claimed delivery", () => {
  it("keeps a delivery whose worker vanished mid-POST until exactly the timeout plus 60 s after the claim", async () => {
    // Longer than the test: only the worker vanishing ends the attempt, however slow the machine.
    const timeoutMs = 600_000
    process.env.BILLING_WEBHOOK_TIMEOUT_MS = String(timeoutMs)
    // The first request is never answered: the worker is gone before it could be.
    receiver.reply = (n) => (n === 0 ? { status: 200, hold: true } : { status: 200 })
    await changeWallet(app, { organizationId: tenant.organizationId, customerId, from: "3", to: "2" })
    const queued = await delivery()
    const claimedAt = new Date(Date.now() + 1000)
    const leaseEnd = new Date(claimedAt.getTime() + timeoutMs + LEASE_MARGIN_MS)

    // A worker of its own (a sender with its own scope) claims it and POSTs, then vanishes:
    // closing its scope interrupts the attempt mid-request, so no result is ever written.
    await app.run(Effect.scoped(Effect.gen(function*() {
      const sender = Context.get(yield* Layer.build(WebhookSender.Default), WebhookSender)
      yield* sender.runDue(claimedAt)
      yield* Effect.promise(() => eventually(() => expect(receiver.held()).toBe(1)))
    })))
    expect(receiver.received).toHaveLength(1)
    expect(await delivery()).toEqual({ ...queued, attempts: 1, nextAttemptAt: leaseEnd.toISOString(), recorded: [] })

    // Another worker: nothing to do until the lease ends.
    for (const at of [claimedAt, new Date(claimedAt.getTime() + timeoutMs), new Date(leaseEnd.getTime() - 1)]) {
      expect(await runSender(app, at)).toBe(0)
    }
    expect(receiver.received).toHaveLength(1)

    // At the lease's end it is taken again and delivered.
    await drainSender(app, leaseEnd)
    await expectSentAgainOnce(queued)
    expect(JSON.parse(receiver.received[1]!.body).id).toBe(queued.eventId)
  })
})
