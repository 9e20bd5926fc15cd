/**
 * Time driven by `TestClock`, on the services and a real database: the
 * service reads every business instant from Effect's Clock (src/time.ts), so
 * these tests set the clock and never wait for it.
 *  - the cycle job: a purchase renews when the clock reaches its period end,
 *    not a millisecond before;
 *  - the webhook retry schedule: a delivery that keeps failing is attempted at
 *    exactly the back-off instants (`BILLING_WEBHOOK_RETRY_SCHEDULE`'s
 *    default, 30 s, 2 min, 10 min, 1 h, 6 h), then fails.
 * (The key cache's TTL and expiry under TestClock: test/key-cache.test.ts.)
 *
 * The services are built once, on the live clock (their background fibers
 * must not wait on a clock nobody moves); each test provides their context
 * to its own fiber, which runs on its TestClock, so every `currentTime` the
 * services read inside it is the test's.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type Context, Duration, Effect, Layer, ManagedRuntime, Schema, TestClock } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as sleepForReal } from "node:timers/promises"
import { billingCycleJob } from "../src/billing/CycleJob.ts"
import { PurchaseCreate } from "../src/billing/Purchase.ts"
import { Purchases } from "../src/billing/Purchases.ts"
import { CustomerCreate } from "../src/customers/Customer.ts"
import { Customers } from "../src/customers/Customers.ts"
import { Ledger } from "../src/ledger/Ledger.ts"
import { decimal } from "../src/money.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { PlanCreate } from "../src/plans/Plan.ts"
import { Plans } from "../src/plans/Plans.ts"
import { currentTime } from "../src/time.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { WebhookOutbox } from "../src/webhooks/Outbox.ts"
import { WebhookSender } from "../src/webhooks/Sender.ts"
import { EndpointCreate } from "../src/webhooks/Webhook.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { onTestDatabase } from "./support/Layers.ts"

/** The services these tests call, with what they depend on: not the whole graph. */
const TestServices = onTestDatabase(Layer.mergeAll(
  Organizations.Default,
  Customers.Default,
  Plans.Default,
  Purchases.Default,
  Ledger.Default,
  WebhookEndpoints.Default,
  WebhookOutbox.Default,
  WebhookSender.Default
))
type Services = Layer.Layer.Success<typeof TestServices>

let runtime: ManagedRuntime.ManagedRuntime<Services, unknown>
let services: Context.Context<Services>

beforeAll(async () => {
  runtime = ManagedRuntime.make(TestServices)
  services = (await runtime.runtime()).context
})
afterAll(() => runtime?.dispose())

/** The services, in the test's fiber: its TestClock stays the clock they read. */
const withServices = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, services)

const HOUR = 3_600_000
/** A fixed start for the test clock (it starts at the epoch otherwise). */
const t0 = Date.parse("2026-03-10T09:30:00.000Z")

const workspace = (name: string) =>
  Effect.gen(function*() {
    const { organization } = yield* Effect.flatMap(Organizations, (organizations) => organizations.create({ name }))
    const customer = yield* Effect.flatMap(Customers, (customers) =>
      Effect.flatMap(
        Schema.decodeUnknown(CustomerCreate)({ name: `${name} customer`, email: "ada@example.com" }),
        (input) => customers.create(organization.id, input)
      ))
    return { organizationId: organization.id, customer }
  })

describe("the cycle job, on the Clock's now", () => {
  /** The worker as `billing cycle run` without `--now` runs it: the Clock says when now is. */
  const runCycleJob = Effect.flatMap(billingCycleJob, (job) => runWorker([job], { once: true, idle: Duration.zero }))

  const purchaseState = (organizationId: string, id: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ cycleIndex: number; periodStart: Date; periodEnd: Date }>`
        SELECT cycle_index, period_start, period_end FROM purchases WHERE organization_id = ${organizationId} AND id = ${id}`)
      .pipe(Effect.map(([row]) => ({ cycle: row!.cycleIndex, start: row!.periodStart.toISOString(), end: row!.periodEnd.toISOString() })))

  it.effect("renews a purchase when the clock reaches its period end, and not before", () =>
    withServices(Effect.gen(function*() {
      yield* TestClock.setTime(t0)
      const { customer, organizationId } = yield* workspace("Cycles")
      const plan = yield* Effect.flatMap(Plans, (plans) =>
        Effect.flatMap(
          Schema.decodeUnknown(PlanCreate)({
            name: "Monthly wallet",
            billingCycle: "MONTHLY",
            entitlements: [{ type: "WALLET", billingMode: "ADVANCE", amount: 5 }]
          }),
          (input) => plans.create(organizationId, input)
        ))
      const purchase = yield* Effect.flatMap(Purchases, (purchases) =>
        Effect.flatMap(
          Schema.decodeUnknown(PurchaseCreate)({ customerId: customer.id, planId: plan.id }),
          (input) => purchases.create(organizationId, input)
        ))

      // Bought at the Clock's now: the first cycle runs from t0 to a calendar month later.
      const firstEnd = "2026-04-10T09:30:00.000Z"
      expect(yield* purchaseState(organizationId, purchase.id)).toEqual({
        cycle: 0,
        start: new Date(t0).toISOString(),
        end: firstEnd
      })

      yield* TestClock.setTime(Date.parse(firstEnd) - 1)
      expect(yield* runCycleJob).toBe(0)
      expect((yield* purchaseState(organizationId, purchase.id)).cycle).toBe(0)

      yield* TestClock.adjust(1)
      expect(yield* runCycleJob).toBe(1)
      expect(yield* purchaseState(organizationId, purchase.id)).toEqual({
        cycle: 1,
        start: firstEnd,
        end: "2026-05-10T09:30:00.000Z"
      })
      // The renewal's wallet grant is dated at the cycle's start; the grant before it at the purchase.
      const grants = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ delta: string; createdAt: Date }>`
          SELECT delta, created_at FROM wallet_ledger
          WHERE organization_id = ${organizationId} AND customer_id = ${customer.id} ORDER BY created_at`)
      expect(grants.map((grant) => [decimal(grant.delta).value.toString(), grant.createdAt.toISOString()])).toEqual([
        ["5", new Date(t0).toISOString()],
        ["5", firstEnd]
      ])

      // Nothing more is due until the next period end.
      yield* TestClock.adjust(30 * 24 * HOUR - 1)
      expect(yield* runCycleJob).toBe(0)
    })))
})

describe("the webhook retry schedule, on the Clock", () => {
  /** A receiver that refuses every delivery, noting the signed instant (`t=`, seconds) of each. */
  const refusingReceiver = Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly signedAt: Array<number>; readonly server: http.Server }>((resume) => {
      const signedAt: Array<number> = []
      const server = http.createServer((request, response) => {
        const header = String(request.headers["x-service-signature"] ?? "")
        signedAt.push(Number(/t=(\d+)/.exec(header)?.[1]))
        request.resume()
        request.on("end", () => response.writeHead(500).end())
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, signedAt, server })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

  /** One batch of the webhook job at the Clock's now, as the worker runs it. */
  const runWebhookJob = Effect.flatMap(WebhookSender, (sender) => Effect.flatMap(currentTime, sender.job.runOnce))

  const deliveryState = (organizationId: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ status: string; attempts: number; nextAttemptAt: Date | null }>`
        SELECT status, attempts, next_attempt_at FROM webhook_deliveries WHERE organization_id = ${organizationId}`)
      .pipe(Effect.map(([row]) => ({ status: row!.status, attempts: row!.attempts, next: row!.nextAttemptAt?.toISOString() ?? null })))

  const attemptsRecorded = (organizationId: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ startedAt: Date; statusCode: number | null }>`
        SELECT started_at, status_code FROM webhook_attempts WHERE organization_id = ${organizationId} ORDER BY attempt`)

  /**
   * The attempt runs in a fiber of the sender's own and answers over the
   * network: wait, in real time, until its outcome is recorded (the attempt
   * row and the delivery's new state commit together); the TestClock stands
   * still meanwhile. The sender then counts the attempt as finished, a step
   * after the commit: the last 10 ms leave it that step, so that the next
   * batch finds nothing in flight (with something in flight it would pause
   * on the Clock, which here only the test moves).
   */
  const settled = (organizationId: string, attempts: number) =>
    Effect.gen(function*() {
      for (let waited = 0; waited < 15_000; waited += 10) {
        const recorded = (yield* attemptsRecorded(organizationId)).length >= attempts
        yield* Effect.promise(() => sleepForReal(10))
        if (recorded) return yield* deliveryState(organizationId)
      }
      return yield* Effect.dieMessage(`attempt ${attempts} was not recorded within 15 s`)
    })

  it.scoped("attempts a refused delivery at each back-off instant of the schedule, then fails it", () =>
    withServices(Effect.gen(function*() {
      const receiver = yield* refusingReceiver
      yield* TestClock.setTime(t0)
      const { customer, organizationId } = yield* workspace("Webhooks")
      yield* Effect.flatMap(WebhookEndpoints, (endpoints) =>
        Effect.flatMap(
          Schema.decodeUnknown(EndpointCreate)({ url: receiver.url, events: ["wallet.balance.update"] }),
          (input) => endpoints.add(organizationId, input)
        ))
      const recipients = yield* Effect.flatMap(WebhookOutbox, (outbox) =>
        outbox.testEvent(organizationId, "wallet.balance.update", {
          id: customer.id,
          externalId: null,
          balance: decimal("0")
        }))
      expect(recipients.recipients).toBe(1)

      // Retry n waits the schedule's n-th delay after attempt n: 30 s, 2 min, 10 min, 1 h, 6 h.
      const delaysMs = [30, 120, 600, 3600, 21600].map((seconds) => seconds * 1000)
      const instants = delaysMs.reduce((at, delay) => [...at, at[at.length - 1]! + delay], [t0])

      for (const [index, instant] of instants.entries()) {
        if (index > 0) {
          // A millisecond early, nothing is sent.
          yield* TestClock.setTime(instant - 1)
          yield* runWebhookJob
          expect((yield* deliveryState(organizationId)).attempts).toBe(index)
          yield* TestClock.setTime(instant)
        }
        yield* runWebhookJob
        const state = yield* settled(organizationId, index + 1)
        const next = instants[index + 1]
        expect(state).toEqual(
          next === undefined
            ? { status: "FAILED", attempts: 6, next: null }
            : { status: "PENDING", attempts: index + 1, next: new Date(next).toISOString() }
        )
      }

      const attempts = yield* attemptsRecorded(organizationId)
      expect(attempts.map((attempt) => [attempt.startedAt.toISOString(), attempt.statusCode])).toEqual(
        instants.map((instant) => [new Date(instant).toISOString(), 500])
      )
      // Each request was signed at its attempt's instant.
      expect(receiver.signedAt).toEqual(instants.map((instant) => Math.floor(instant / 1000)))

      // Failed for good: a later run sends nothing more.
      yield* TestClock.adjust(24 * HOUR)
      yield* runWebhookJob
      expect(yield* deliveryState(organizationId)).toEqual({ status: "FAILED", attempts: 6, next: null })
    })))
})
