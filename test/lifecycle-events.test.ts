/**
 * Lifecycle events end to end (issue 38, docs/webhooks.md "Lifecycle events"):
 * purchases made, changed and cancelled and invoices paid over HTTP, an
 * invoice voided with the CLI, and the cycle job renewing, finalising a DRAFT
 * and marking invoices overdue; a real receiver gets every event signed, each
 * body of the shape the OpenAPI document gives it, naming the customer and
 * carrying the record exactly as `GET /purchases/{id}` or `GET /invoices/{id}`
 * answered right after the change. An endpoint gets only the events it names;
 * a change that rolls back (a cycle run killed before its commit, a change
 * inside a transaction that fails) sends nothing.
 *
 * The app's clock is a SettableClock (a database of the file's own: the cycle
 * job serves every organisation), so the cycle job runs at chosen instants.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LifecycleEventBodySchemas } from "../src/billing/LifecycleEventSchemas.ts"
import { Purchases } from "../src/billing/Purchases.ts"
import { PurchaseId } from "../src/ids.ts"
import { verifyWebhookSignature } from "../src/index.ts"
import { LIFECYCLE_EVENT_TYPES, type LifecycleEventType } from "../src/webhooks/EventBody.ts"
import { type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { describeExit, runCli } from "./support/Cli.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

const clock = makeSettableClock()
let app: TestApp
let acme: Tenant
let api: Client
let org: ReadonlyArray<string>
/** Subscribed to every lifecycle event, over HTTP. */
let hook: Receiver
let secret: string
/** Subscribed to wallet updates and `purchase.cancelled` only, with the CLI. */
let narrow: Receiver
let narrowSecret: string

beforeAll(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
  app = await startTestApp({ ownDatabase: true, clock })
  acme = await app.tenant("Lifecycle")
  api = clientOf(app, acme)
  org = ["--org", acme.organizationId]
  hook = await startReceiver()
  narrow = await startReceiver()
  const endpoint = ok(await api.post("/webhook-endpoints", { url: hook.url, events: [...LIFECYCLE_EVENT_TYPES] }), 201).endpoint
  expect(endpoint.events).toEqual([...LIFECYCLE_EVENT_TYPES])
  secret = endpoint.secret
  const added = await app.cli([
    "webhook", "add", "--url", narrow.url, "--events", "wallet.balance.update,purchase.cancelled", "--json", ...org
  ])
  expect(added.code, added.stderr).toBe(0)
  expect(added.json.endpoint.events).toEqual(["wallet.balance.update", "purchase.cancelled"])
  narrowSecret = added.json.endpoint.secret
})
afterAll(async () => {
  await hook.close()
  await narrow.close()
  await app.close()
})

const at = (iso: string) => clock.set(Date.parse(iso))

const isLifecycle = (type: string): type is LifecycleEventType => (LIFECYCLE_EVENT_TYPES as ReadonlyArray<string>).includes(type)

/**
 * The lifecycle events `receiver` got from request `from` on, once the worker has delivered everything due:
 * each signed with `key` (at the app's clock, which signed it), its headers naming it, its body exactly the
 * shape the OpenAPI document gives its type (no field more); in the order they were written (event ids are
 * made in order).
 */
const received = async (receiver: Receiver, key: string, from: number) => {
  await drainSender(app)
  const now = new Date(clock.unsafeCurrentTimeMillis())
  return receiver.received.slice(from).flatMap((request) => {
    expect(verifyWebhookSignature(key, request.headers["x-service-signature"] as string, request.body, { now })).toBe(true)
    const body = JSON.parse(request.body)
    expect(request.headers["x-service-event-id"]).toBe(body.id)
    expect(request.headers["x-service-event-type"]).toBe(body.event_type)
    if (!isLifecycle(body.event_type)) return []
    Schema.decodeUnknownSync(LifecycleEventBodySchemas[body.event_type as LifecycleEventType] as Schema.Schema<unknown>, { onExcessProperty: "error" })(body)
    expect(body.test).toBeUndefined()
    return [body]
  }).sort((a, b) => (a.id < b.id ? -1 : 1))
}

const types = (events: ReadonlyArray<any>) => events.map((event) => event.event_type)

const purchaseNow = async (id: string) => ok(await api.get(`/purchases/${id}`)).purchase
const invoiceNow = async (id: string) => ok(await api.get(`/invoices/${id}`)).invoice

/** The event's data names the customer and carries the record as GET answers it now. */
const expectRecord = async (event: any, customer: { id: string; externalId: string | null }) => {
  expect(event.data.customer_id).toBe(customer.id)
  expect(event.data.external_id).toBe(customer.externalId)
  if (event.event_type.startsWith("purchase.")) expect(event.data.purchase).toEqual(await purchaseNow(event.data.purchase.id))
  else expect(event.data.invoice).toEqual(await invoiceNow(event.data.invoice.id))
}

describe("purchases and invoices over HTTP", () => {
  it("created, changed (now, scheduled, unscheduled, auto-payment), paid, voided and cancelled: signed, the record as GET shows it", async () => {
    at("2025-03-10T09:00:00.000Z")
    const small = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }])
    const big = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 40 }])
    const jo = await makeCustomer(api, { externalId: "jo-1" })
    const customer = { id: jo.id, externalId: "jo-1" }

    // A new purchase: purchase.created naming the PLAN invoice it issued (OPEN: auto-payment is off), then invoice.created.
    let seen = hook.received.length
    const purchase = ok(await api.post("/purchases", { customerId: jo.id, planId: small.id }), 201).purchase
    const [plan] = ok(await api.get(`/invoices?customerId=${jo.id}`)).invoices
    let events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.created", "invoice.created"])
    expect(events[0].data).toMatchObject({ purchase: { id: purchase.id, status: "ACTIVE" }, previous_attributes: null, invoice_ids: [plan.id] })
    expect(events[0].data.purchase).toEqual(purchase)
    expect(events[1].data.invoice).toMatchObject({ id: plan.id, kind: "PLAN", status: "OPEN", total: 10 })
    expect(events[1].triggered_at).toBe("2025-03-10T09:00:00.000Z")
    for (const event of events) await expectRecord(event, customer)

    // A plan change NOW: purchase.changed with the PRORATION invoice, which is created (OPEN) too.
    at("2025-03-13T12:00:00.000Z")
    seen = hook.received.length
    const changed = ok(await api.post(`/purchases/${purchase.id}/change`, { planId: big.id, when: "NOW" }))
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.changed", "invoice.created"])
    expect(events[0].data).toMatchObject({
      change: "PLAN_CHANGED",
      invoice_ids: [changed.invoice.id],
      previous_attributes: { planId: small.id, planName: small.name, cost: 10 }
    })
    expect(events[0].data.purchase).toEqual(changed.purchase)
    expect(events[1].data.invoice).toEqual(changed.invoice)
    for (const event of events) await expectRecord(event, customer)

    // Scheduled for the cycle end, then that removed: two purchase.changed, nothing issued.
    seen = hook.received.length
    ok(await api.post(`/purchases/${purchase.id}/change`, { planId: small.id, when: "CYCLE_END" }))
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.changed"])
    expect(events[0].data).toMatchObject({
      change: "PLAN_CHANGE_SCHEDULED",
      invoice_ids: [],
      previous_attributes: { scheduledChange: null },
      purchase: { planId: big.id, scheduledChange: { planId: small.id } }
    })
    await expectRecord(events[0], customer)
    const scheduled = events[0].data.purchase.scheduledChange
    seen = hook.received.length
    ok(await api.del(`/purchases/${purchase.id}/scheduled-change`))
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.changed"])
    expect(events[0].data).toMatchObject({
      change: "SCHEDULED_CHANGE_REMOVED",
      previous_attributes: { scheduledChange: scheduled },
      purchase: { scheduledChange: null }
    })
    await expectRecord(events[0], customer)

    // Auto-payment on: purchase.changed; set again to the same value: nothing changed, nothing sent.
    seen = hook.received.length
    ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.changed"])
    expect(events[0].data).toMatchObject({ change: "AUTO_PAYMENT_CHANGED", previous_attributes: { autoPayment: false }, purchase: { autoPayment: true } })
    await expectRecord(events[0], customer)
    seen = hook.received.length
    ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    expect(await received(hook, secret, seen)).toEqual([])

    // A payment recorded over HTTP: invoice.paid, the invoice as the answer and GET show it.
    at("2025-03-14T08:00:00.000Z")
    seen = hook.received.length
    const paid = ok(await api.post(`/invoices/${plan.id}/payments`, { reference: "bank 1" }), 201)
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["invoice.paid"])
    expect(events[0].data.invoice).toEqual(paid.invoice)
    expect(events[0].data.invoice).toMatchObject({ status: "PAID", paidAt: "2025-03-14T08:00:00.000Z" })
    expect(events[0].triggered_at).toBe("2025-03-14T08:00:00.000Z")
    await expectRecord(events[0], customer)
    // Paid again: 409, and nothing more is sent.
    expectError(await api.post(`/invoices/${plan.id}/payments`, {}), 409, "invoice_not_open")

    // Voided with the CLI: invoice.voided.
    seen = hook.received.length
    const voided = await app.cli(["invoice", "void", changed.invoice.id, "--json", ...org])
    expect(voided.code, voided.stderr).toBe(0)
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["invoice.voided"])
    expect(events[0].data.invoice).toMatchObject({ id: changed.invoice.id, status: "VOID" })
    await expectRecord(events[0], customer)

    // A plan with nothing to pay in advance: its PLAN invoice is issued PAID (free), so invoice.paid follows
    // invoice.created (the first cycle that moves no wallet, one statement when nobody listens).
    const unit = await makeUnit(api, { flatPrice: 2 })
    const metered = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const al = await makeCustomer(api)
    seen = hook.received.length
    const free = ok(await api.post("/purchases", { customerId: al.id, planId: metered.id }), 201).purchase
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.created", "invoice.created", "invoice.paid"])
    expect(events[1].data.invoice).toMatchObject({ status: "PAID", total: 0 })
    for (const event of events) await expectRecord(event, { id: al.id, externalId: null })

    // Cancelled: purchase.cancelled, also to the endpoint that names only it.
    at("2025-03-15T10:00:00.000Z")
    const narrowSeen = narrow.received.length
    seen = hook.received.length
    const cancelled = ok(await api.post(`/purchases/${free.id}/cancel`)).purchase
    events = await received(hook, secret, seen)
    expect(types(events)).toEqual(["purchase.cancelled"])
    expect(events[0].data).toMatchObject({ previous_attributes: { status: "ACTIVE", cancelledAt: null }, invoice_ids: [] })
    expect(events[0].data.purchase).toEqual(cancelled)
    await expectRecord(events[0], { id: al.id, externalId: null })
    expectError(await api.post(`/purchases/${free.id}/cancel`), 409, "purchase_cancelled")
    const narrowEvents = await received(narrow, narrowSecret, narrowSeen)
    expect(narrowEvents).toEqual([events[0]])
    // Over the whole test, the narrow endpoint got no other lifecycle event.
    expect(narrow.received.map((request) => JSON.parse(request.body).event_type).filter(isLifecycle)).toEqual(["purchase.cancelled"])
    // And nothing was stored for it but what it takes: the outbox keeps no event nobody takes.
    const stored = await query<{ eventType: string; deliveries: string }>(
      app,
      `SELECT e.event_type, count(d.id)::text AS deliveries FROM webhook_events e
       LEFT JOIN webhook_deliveries d ON d.organization_id = e.organization_id AND d.event_id = e.id
       WHERE e.organization_id = $1 AND e.event_type = 'purchase.cancelled' GROUP BY e.event_type`,
      [acme.organizationId]
    )
    expect(stored).toEqual([{ eventType: "purchase.cancelled", deliveries: "2" }])
  })
})

describe("the cycle job", () => {
  it("renewal, DRAFT finalisation and overdue marking, each told once; a payment from the wallet at renewal too", async () => {
    ok(await api.patch("/organization/settings", { invoiceGraceHours: 24, paymentTermsDays: 7 }))
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
    ])
    const prepaid = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 20 }])
    const mo = await makeCustomer(api, { externalId: "mo-1" })
    const kim = await makeCustomer(api, { externalId: "kim-1" })
    const lee = await makeCustomer(api, { externalId: "lee-1" })
    at("2025-05-01T00:00:00.000Z")
    const metered = ok(await api.post("/purchases", { customerId: mo.id, planId: plan.id }), 201).purchase
    const autoPaid = ok(await api.post("/purchases", { customerId: kim.id, planId: prepaid.id }), 201).purchase
    ok(await api.patch(`/purchases/${autoPaid.id}`, { autoPayment: true }))
    const late = ok(await api.post("/purchases", { customerId: lee.id, planId: plan.id }), 201).purchase
    ok(await api.patch(`/purchases/${late.id}`, { autoPayment: true }))
    const [mayPlan] = ok(await api.get(`/invoices?customerId=${mo.id}`)).invoices
    at("2025-05-02T08:00:00.000Z")
    ok(await api.post("/signal/unit", { customerId: mo.id, agentKey: unit.agentKey, quantity: 3, timestamp: "2025-05-02T08:00:00.000Z" }), 202)
    await drain(app)

    // The cycles end 2025-06-01: the renewals, then (the run's next pass) May's PLAN invoice of mo, due
    // 2025-05-08 and unpaid, marked overdue; kim's May invoice was not paid either.
    at("2025-06-01T00:00:00.000Z")
    await drainSender(app)
    let seen = hook.received.length
    await runCycles(app, new Date("2025-06-01T00:00:00.000Z"))
    // The purchase of the test above renews too (its cycles end on the 10th): this test looks at its own customers'.
    const ours = (list: ReadonlyArray<any>) => list.filter((event) => [mo.id, kim.id, lee.id].includes(event.data.customer_id))
    let events = ours(await received(hook, secret, seen))
    const renewed = events.filter((event) => event.event_type === "purchase.renewed")
    expect(renewed.map((event) => event.data.purchase.id).sort()).toEqual([metered.id, autoPaid.id, late.id].sort())
    for (const event of renewed) {
      expect(event.triggered_at).toBe("2025-06-01T00:00:00.000Z")
      expect(event.data.purchase).toMatchObject({ currentPeriodStart: "2025-06-01T00:00:00.000Z", currentPeriodEnd: "2025-07-01T00:00:00.000Z" })
      expect(event.data.previous_attributes).toMatchObject({
        currentPeriodStart: "2025-05-01T00:00:00.000Z",
        currentPeriodEnd: "2025-06-01T00:00:00.000Z"
      })
    }
    const ofMo = events.filter((event) => event.data.customer_id === mo.id)
    expect(types(ofMo)).toEqual(["purchase.renewed", "invoice.created", "invoice.created", "invoice.overdue"])
    const [moRenewed, usageCreated, junePlanCreated, mayOverdue] = ofMo
    expect(moRenewed.data.invoice_ids).toEqual([usageCreated.data.invoice.id, junePlanCreated.data.invoice.id])
    expect(usageCreated.data.invoice).toMatchObject({ kind: "USAGE", status: "DRAFT", number: null, dueDate: null, total: 6 })
    expect(junePlanCreated.data.invoice).toMatchObject({ kind: "PLAN", status: "OPEN", dueDate: "2025-06-08T00:00:00.000Z" })
    expect(mayOverdue.data.invoice).toMatchObject({ id: mayPlan.id, status: "OPEN", overdue: true, overdueAt: "2025-06-01T00:00:00.000Z" })
    for (const event of ofMo) await expectRecord(event, { id: mo.id, externalId: "mo-1" })
    // kim: auto-payment on, the cycle's grant pays the new PLAN invoice from the wallet at issue.
    const ofKim = events.filter((event) => event.data.customer_id === kim.id)
    expect(types(ofKim)).toEqual(["purchase.renewed", "invoice.created", "invoice.paid", "invoice.overdue"])
    expect(ofKim[1].data.invoice).toMatchObject({ kind: "PLAN", status: "PAID", paidAt: "2025-06-01T00:00:00.000Z" })
    expect(ofKim[2].data.invoice).toEqual(ofKim[1].data.invoice)
    for (const event of ofKim) await expectRecord(event, { id: kim.id, externalId: "kim-1" })
    // lee used nothing in May: no USAGE invoice; its new PLAN invoice is paid from the wallet (auto-payment).
    expect(types(events.filter((event) => event.data.customer_id === lee.id)))
      .toEqual(["purchase.renewed", "invoice.created", "invoice.paid", "invoice.overdue"])

    // Late usage of lee's May cycle, inside its grace period: the signal drain makes the cycle's USAGE
    // invoice now, a DRAFT (invoice.created).
    at("2025-06-01T06:00:00.000Z")
    seen = hook.received.length
    ok(await api.post("/signal/unit", { customerId: lee.id, agentKey: unit.agentKey, quantity: 1, timestamp: "2025-05-20T00:00:00.000Z" }), 202)
    await drain(app)
    events = ours(await received(hook, secret, seen))
    expect(types(events)).toEqual(["invoice.created"])
    expect(events[0].data.invoice).toMatchObject({ kind: "USAGE", status: "DRAFT", total: 2, periodStart: "2025-05-01T00:00:00.000Z" })
    expect(events[0].triggered_at).toBe("2025-06-01T06:00:00.000Z")
    await expectRecord(events[0], { id: lee.id, externalId: "lee-1" })
    const leeUsage = events[0].data.invoice.id

    // The grace period ends 2025-06-02: the DRAFT is finalised (OPEN, numbered, due 7 days on).
    at("2025-06-02T03:15:00.000Z")
    seen = hook.received.length
    await runCycles(app, new Date("2025-06-02T03:15:00.000Z"))
    events = ours(await received(hook, secret, seen))
    // lee's is paid from the wallet as it is finalised (auto-payment): finalized, then paid.
    const ofLee = events.filter((event) => event.data.customer_id === lee.id)
    expect(types(ofLee)).toEqual(["invoice.finalized", "invoice.paid"])
    expect(ofLee[0].data.invoice).toMatchObject({ id: leeUsage, status: "PAID", paidAt: "2025-06-02T03:15:00.000Z" })
    for (const event of ofLee) await expectRecord(event, { id: lee.id, externalId: "lee-1" })
    events = events.filter((event) => event.data.customer_id === mo.id)
    expect(types(events)).toEqual(["invoice.finalized"])
    expect(events[0].data.invoice).toMatchObject({
      id: usageCreated.data.invoice.id,
      status: "OPEN",
      number: expect.any(String),
      dueDate: "2025-06-09T03:15:00.000Z"
    })
    expect(events[0].triggered_at).toBe("2025-06-02T03:15:00.000Z")
    await expectRecord(events[0], { id: mo.id, externalId: "mo-1" })

    // Past both due dates: June's PLAN invoice and the USAGE one become overdue, once each.
    at("2025-06-10T00:00:00.000Z")
    seen = hook.received.length
    await runCycles(app, new Date("2025-06-10T00:00:00.000Z"))
    await runCycles(app, new Date("2025-06-11T00:00:00.000Z"))
    events = ours(await received(hook, secret, seen)).filter((event) => event.data.customer_id === mo.id)
    expect(types(events)).toEqual(["invoice.overdue", "invoice.overdue"])
    expect(events.map((event) => event.data.invoice.id).sort()).toEqual([junePlanCreated.data.invoice.id, usageCreated.data.invoice.id].sort())
    for (const event of events) await expectRecord(event, { id: mo.id, externalId: "mo-1" })
  })
})

describe("a change that does not commit", () => {
  it("sends nothing: a cycle run killed before its commit, then the next run sends each event once", async () => {
    ok(await api.patch("/organization/settings", { invoiceGraceHours: 0 }))
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 3 }])
    const customer = await makeCustomer(api)
    at("2025-09-01T00:00:00.000Z")
    const purchase = ok(await api.post("/purchases", { customerId: customer.id, planId: plan.id }), 201).purchase
    const stored = async () =>
      (await query<{ count: string }>(app, "SELECT count(*)::text AS count FROM webhook_events WHERE organization_id = $1", [acme.organizationId]))[0]!.count
    // What the file's earlier tests have due by then, settled first.
    await runCycles(app, new Date("2025-09-30T00:00:00.000Z"))
    await drainSender(app)
    const settled = hook.received.length
    const storedBefore = await stored()

    const end = purchase.currentPeriodEnd
    const killed = await runCli(app, ["cycle", "run", "--now", end, "--json"], { BILLING_FAULT: "cycles.before-commit" })
    expect(killed.signal, describeExit(killed)).toBe("SIGKILL")
    expect(await stored()).toBe(storedBefore)
    expect(await received(hook, secret, settled)).toEqual([])

    const run = await runCli(app, ["cycle", "run", "--now", end, "--json"])
    expect(run.code, describeExit(run)).toBe(0)
    const events = (await received(hook, secret, settled)).filter((event) => event.data.customer_id === customer.id)
    expect(types(events)).toEqual(["purchase.renewed", "invoice.created"])
    expect(events[0].data.purchase.id).toBe(purchase.id)
    for (const event of events) await expectRecord(event, { id: customer.id, externalId: null })
    expect(Number(await stored())).toBeGreaterThan(Number(storedBefore))
  })

  it("sends nothing for a cancellation whose transaction fails after it", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 2 }])
    const customer = await makeCustomer(api)
    const purchase = ok(await api.post("/purchases", { customerId: customer.id, planId: plan.id }), 201).purchase
    await drainSender(app)
    const seen = hook.received.length
    const outcome = await app.run(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const purchases = yield* Purchases
        return yield* purchases.cancel(acme.organizationId as never, PurchaseId.make(purchase.id)).pipe(
          Effect.zipRight(Effect.fail("rolled back after the cancellation" as const)),
          sql.withTransaction,
          Effect.either
        )
      })
    )
    expect(outcome._tag).toBe("Left")
    expect((await purchaseNow(purchase.id)).status).toBe("ACTIVE")
    expect(await received(hook, secret, seen)).toEqual([])
    // The same cancellation committed is told.
    ok(await api.post(`/purchases/${purchase.id}/cancel`))
    expect(types(await received(hook, secret, seen))).toEqual(["purchase.cancelled"])
  })
})

describe("billing trigger", () => {
  it("makes a test lifecycle event about the customer's newest purchase or invoice, as the API shows it", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 4 }])
    const customer = await makeCustomer(api, { externalId: "tr-1" })
    const none = await app.cli(["trigger", "invoice.paid", "--customer", customer.id, "--json", ...org])
    expect(none.code).toBe(2)
    expect(none.stderr).toMatch(/newest invoice/)
    const purchase = ok(await api.post("/purchases", { customerId: customer.id, planId: plan.id }), 201).purchase
    await drainSender(app)
    const seen = hook.received.length
    const triggered = await app.cli(["trigger", "purchase.renewed", "--external-id", "tr-1", "--json", ...org])
    expect(triggered.code, triggered.stderr).toBe(0)
    expect(triggered.json).toMatchObject({
      event: { eventType: "purchase.renewed", test: true, customerId: customer.id, recordId: purchase.id },
      recipients: 1
    })
    await drainSender(app)
    const bodies = hook.received.slice(seen).map((request) => JSON.parse(request.body))
    expect(bodies).toHaveLength(1)
    expect(bodies[0]).toMatchObject({
      id: triggered.json.event.id,
      event_type: "purchase.renewed",
      test: true,
      data: { customer_id: customer.id, external_id: "tr-1", previous_attributes: null, invoice_ids: [] }
    })
    Schema.decodeUnknownSync(LifecycleEventBodySchemas["purchase.renewed"] as Schema.Schema<unknown>, { onExcessProperty: "error" })(bodies[0])
    expect(bodies[0].data.purchase).toEqual(await purchaseNow(purchase.id))
    // An unknown event is refused with the list.
    const unknown = await app.cli(["trigger", "invoice.exploded", ...org])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/invoice\.overdue/)
  })
})
