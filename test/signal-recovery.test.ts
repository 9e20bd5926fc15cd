/**
 * The recovery path of a PENDING signal (docs/signals.md "A signal that
 * waited"), end to end: signals sent over HTTP by an externalId no customer
 * holds, the customer created or given the externalId over HTTP, a plan bought
 * over HTTP, `billing signal replay` as a child process, the worker run
 * in-process, and what it left read back over HTTP (the signal, the usage log,
 * the balances). A signal without a timestamp of its own is billed at the
 * moment it was last queued again, in whichever order the customer and the
 * plan came; one with its own timestamp keeps it, and a refusal names it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, type Client, clientOf, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { runCli } from "./support/Cli.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

let counter = 0
const externalIdOf = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}`

/** A FLAT unit at 2 a unit, sold 10 a cycle in advance. */
const unitPlan = async () => {
  const unit = await makeUnit(api, { flatPrice: 2 })
  const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 }])
  return { unit, plan }
}

const sendUnit = async (body: Record<string, unknown>) => {
  const sent = await api.post("/signal/unit", body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.result.rawId as string
}

const signalOf = async (rawId: string) => ok(await api.get(`/signals/${rawId}`)).signal

/** `billing signal replay RAW_ID`: through the bin as a child process, or the same program in this process (quicker). */
const replay = async (rawId: string, how: "child" | "in-process") => {
  const args = ["signal", "replay", rawId, "--org", acme.organizationId, "--json"]
  const exit = how === "child" ? await runCli(app, args) : await app.cli(args)
  expect(exit.code, `${exit.stdout}\n${exit.stderr}`).toBe(0)
  expect(exit.json.replayed.map((signal: { id: string; status: string }) => [signal.id, signal.status])).toEqual([[rawId, "QUEUED"]])
}

const usageOf = async (customerId: string) => ok(await api.get(`/signal/usage-log?customerId=${customerId}`)).usageLogs
const unitBalanceOf = async (customerId: string) => ok(await api.get(`/customers/${customerId}/balances`)).units[0]

describe("a PENDING signal without a timestamp is priced once its customer exists and holds a plan", () => {
  it("customer created with the externalId, then a plan, then `billing signal replay`: priced at the replay's moment", async () => {
    const { unit, plan } = await unitPlan()
    const externalId = externalIdOf("first-customer")
    const rawId = await sendUnit({ externalId, agentKey: unit.agentKey, quantity: 3 })
    await drain(app)
    expect(await signalOf(rawId)).toMatchObject({ status: "PENDING", requeuedAt: null, error: { status: 404, code: "customer_not_found" } })

    // The customer arrives: its pending signal goes back to the queue at once; with no plan yet it is refused.
    const customer = await makeCustomer(api, { externalId })
    const requeued = await signalOf(rawId)
    expect(requeued.status).toBe("QUEUED")
    expect(requeued.requeuedAt).not.toBeNull()
    await drain(app)
    const refused = await signalOf(rawId)
    expect(refused).toMatchObject({ status: "FAILED", customerId: customer.id, occurredAt: null, requeuedAt: requeued.requeuedAt })
    expect(refused.error).toEqual({
      status: 422,
      code: "no_active_plan",
      message: `Customer has no active plan at ${requeued.requeuedAt} (the signal's moment: when it was last queued again); ` +
        "replay it once the customer has a plan: a signal without a timestamp of its own is billed at the moment of its replay"
    })

    const purchase = await buy(api, customer.id, plan.id)
    await replay(rawId, "child")
    const replayed = await signalOf(rawId)
    expect(replayed).toMatchObject({ status: "QUEUED", error: null })
    expect(Date.parse(replayed.requeuedAt)).toBeGreaterThanOrEqual(Date.parse(purchase.currentPeriodStart))
    await drain(app)

    const priced = await signalOf(rawId)
    expect(priced).toMatchObject({ status: "PROCESSED", error: null, requeuedAt: replayed.requeuedAt })
    const [row] = await usageOf(customer.id)
    expect(row).toMatchObject({
      id: priced.usageLogId,
      rawId,
      meter: "UNIT",
      quantity: 3,
      customerCost: 6,
      billingMode: "ADVANCE",
      balance: { remaining: 7 },
      purchaseId: purchase.id,
      // The usage's moment is the replay's.
      timestamp: replayed.requeuedAt
    })
    expect(await unitBalanceOf(customer.id)).toMatchObject({ granted: 10, remaining: 7 })
  })

  it("customer created without it, a plan bought, the externalId set by PATCH: requeued and priced with no replay", async () => {
    const { unit, plan } = await unitPlan()
    const externalId = externalIdOf("patched-customer")
    const rawId = await sendUnit({ externalId, agentKey: unit.agentKey, quantity: 4 })
    await drain(app)
    expect((await signalOf(rawId)).status).toBe("PENDING")

    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.patch(`/customers/${customer.id}`, { externalId }))
    const requeued = await signalOf(rawId)
    expect(requeued.status).toBe("QUEUED")
    expect(Date.parse(requeued.requeuedAt)).toBeGreaterThanOrEqual(Date.parse(purchase.currentPeriodStart))
    await drain(app)

    expect(await signalOf(rawId)).toMatchObject({ status: "PROCESSED", customerId: customer.id, error: null })
    expect(await usageOf(customer.id)).toMatchObject([
      { rawId, quantity: 4, customerCost: 8, billingMode: "ADVANCE", balance: { remaining: 6 }, timestamp: requeued.requeuedAt }
    ])
    expect(await unitBalanceOf(customer.id)).toMatchObject({ granted: 10, remaining: 6 })
  })
})

describe("a signal with a timestamp of its own keeps its moment", () => {
  it("usage timed before the purchase stays refused after the replay: no_plan_at_signal_time, naming its moment and the cycle", async () => {
    const { unit, plan } = await unitPlan()
    const externalId = externalIdOf("timed")
    const timestamp = new Date(Date.now() - 10 * 60_000).toISOString()
    const rawId = await sendUnit({ externalId, agentKey: unit.agentKey, quantity: 2, timestamp })
    await drain(app)
    const customer = await makeCustomer(api, { externalId })
    await drain(app)
    expect((await signalOf(rawId)).error.message).toBe(
      `Customer has no active plan at ${timestamp} (the signal's moment: its timestamp)`
    )

    const purchase = await buy(api, customer.id, plan.id)
    await replay(rawId, "in-process")
    await drain(app)
    const refused = await signalOf(rawId)
    expect(refused).toMatchObject({ status: "FAILED", occurredAt: timestamp, usageLogId: null })
    // The customer holds a plan now: "no active plan" would contradict what it sees; no plan was active *then*.
    expect(refused.error).toEqual({
      status: 422,
      code: "no_plan_at_signal_time",
      message: `No plan of the customer was active at the signal's moment, ${timestamp} (its timestamp): ` +
        `its plan's current cycle is ${purchase.currentPeriodStart} to ${purchase.currentPeriodEnd}; ` +
        "usage from before the plan is not billed by it"
    })
    expect(await usageOf(customer.id)).toEqual([])
    expect(await unitBalanceOf(customer.id)).toMatchObject({ granted: 10, remaining: 10 })
  })
})

describe("a refusal in a cycle names the cycle", () => {
  it("out of allowance: the cycle's period and the signal's moment, the code unchanged", async () => {
    const { unit, plan } = await unitPlan()
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    const rawId = await sendUnit({ customerId: customer.id, agentKey: unit.agentKey, quantity: 11 })
    await drain(app)
    const refused = await signalOf(rawId)
    expect(refused.status).toBe("FAILED")
    expect(refused.error).toEqual({
      status: 422,
      code: "out_of_allowance",
      message: `Out of allowance: unit ${unit.id} has no prepaid balance left for this usage, in the cycle ` +
        `${purchase.currentPeriodStart} to ${purchase.currentPeriodEnd} ` +
        `(the signal's moment: ${refused.receivedAt}, when it was received)`
    })
    expect(await unitBalanceOf(customer.id)).toMatchObject({ granted: 10, remaining: 10 })
  })
})
