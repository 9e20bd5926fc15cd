/**
 * The worker bills every signal in the purchase cycle that contains its moment
 * (docs/signals.md "The worker"), on both databases: a signal whose moment lies
 * in an ended cycle draws that cycle's leftover allowance and charges that
 * cycle's ARREAR (`cycle_balances`), never the current cycle's balances nor its
 * spent this cycle; SLAB tiers count on the ended cycle's quantity; the race (a
 * signal received before the cycle end, priced after the renewal) lands in the
 * old cycle; a moment no purchase covers is the no-active-plan refusal; a
 * moment after the current cycle's end waits QUEUED for the renewal; and late
 * signals queue in a lane of their own that never holds today's signals back.
 *
 * The service's clock is real, so an ended cycle is made by running the cycle
 * job at the purchase's period end (a month ahead): signals sent afterwards,
 * at the real now, then lie in the cycle that ended.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { buy, makeCustomer, makePlan, makeUnit, runCycles } from "./billing-support.ts"
import { client, drain as drainIn, gpt4oBundle, query } from "./signals-fixtures.ts"
import { clientOf } from "./support/Http.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("In time")
})
afterAll(() => app.close())

const api = () => clientOf(app, acme)
const drain = () => drainIn(app)

const unitSignal = async (customerId: string, agentKey: string, quantity: number) => {
  const response = await client(app, acme).post("/signal/unit", { customerId, agentKey, quantity })
  expect(response.status, JSON.stringify(response.body)).toBe(202)
  return response.body.result.rawId as string
}

const signalOf = async (rawId: string) =>
  (await query<{ status: string; errorStatus: number | null; errorMessage: string | null }>(
    app,
    "SELECT status, error_status, error_message FROM signals WHERE organization_id = $1 AND id = $2",
    [acme.organizationId, rawId]
  ))[0]!

const usageOf = async (rawId: string) =>
  (await query<Record<string, unknown>>(
    app,
    `SELECT u.cycle_index, u.occurred_at, u.advance_quantity::text, u.arrear_quantity::text, u.arrear_charge::text,
            u.customer_cost::text, u.billing_mode, u.purchase_id, s.received_at
     FROM usage_log u JOIN signals s ON s.organization_id = u.organization_id AND s.id = u.signal_id
     WHERE u.organization_id = $1 AND u.signal_id = $2`,
    [acme.organizationId, rawId]
  ))

/** Balance rows of the current cycle (purchase_balances) and of an ended cycle (cycle_balances), as text. */
const currentRows = (purchaseId: string) =>
  query<Record<string, string>>(
    app,
    `SELECT billing_mode, granted::text, used::text, remaining::text, cycle_quantity::text, arrear_amount::text
     FROM purchase_balances WHERE organization_id = $1 AND purchase_id = $2 ORDER BY billing_mode`,
    [acme.organizationId, purchaseId]
  )
const endedRows = (purchaseId: string, cycleIndex: number) =>
  query<Record<string, string>>(
    app,
    `SELECT billing_mode, granted::text, used::text, remaining::text, cycle_quantity::text, arrear_amount::text
     FROM cycle_balances WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = $3 ORDER BY billing_mode`,
    [acme.organizationId, purchaseId, cycleIndex]
  )
const spentOf = async (purchaseId: string) =>
  (await query<{ spent: string; cycleIndex: number }>(
    app,
    "SELECT spent_this_cycle::text AS spent, cycle_index FROM purchases WHERE organization_id = $1 AND id = $2",
    [acme.organizationId, purchaseId]
  ))[0]!

const row = (billingMode: string, granted: string, used: string, remaining: string, cycleQuantity: string, arrear: string) => ({
  billingMode,
  granted,
  used,
  remaining,
  cycleQuantity,
  arrearAmount: arrear
})

/** A customer on a plan of a FLAT unit at 2: 10 ADVANCE units, and ARREAR overflow when asked. */
const unitCustomer = async (options: { readonly arrear?: boolean; readonly walletFundedArrear?: boolean } = {}) => {
  const unit = await makeUnit(api(), { flatPrice: 2 })
  const plan = await makePlan(app, acme, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 },
    ...(options.arrear ? [{ type: "UNIT" as const, billingMode: "ARREAR" as const, unitId: unit.id }] : [])
  ])
  const customer = await makeCustomer(api())
  const purchase = await buy(api(), customer.id, plan.id)
  return { unit, customerId: customer.id as string, purchase }
}

/** Ends the purchase's current cycle by running the cycle job at its period end. */
const endCycle = async (purchase: { readonly currentPeriodEnd: string }) => {
  await runCycles(app, new Date(purchase.currentPeriodEnd))
}

describe("a signal whose moment is in an ended cycle", () => {
  it("draws what was left of that cycle's allowance, never the current one, and never counts in spentThisCycle (the race included)", async () => {
    const { unit, customerId, purchase } = await unitCustomer()
    await unitSignal(customerId, unit.agentKey, 3)
    await drain()
    // Received before the cycle's end, priced after the renewal: the race of the issue.
    const raced = await unitSignal(customerId, unit.agentKey, 2)
    await endCycle(purchase)
    expect((await spentOf(purchase.id)).cycleIndex).toBe(1)
    const late = await unitSignal(customerId, unit.agentKey, 4)
    await drain()

    for (const rawId of [raced, late]) expect(await signalOf(rawId)).toMatchObject({ status: "PROCESSED" })
    // The ended cycle 0 had 7 left when it ended; 2 + 4 of it are drawn now.
    expect(await endedRows(purchase.id, 0)).toEqual([row("ADVANCE", "10", "9", "1", "9", "0")])
    // The current cycle's fresh grant is untouched.
    expect(await currentRows(purchase.id)).toEqual([row("ADVANCE", "10", "0", "10", "0", "0")])
    expect(await spentOf(purchase.id)).toEqual({ spent: "0", cycleIndex: 1 })
    const [racedRow] = await usageOf(raced)
    expect(racedRow).toMatchObject({
      cycleIndex: 0,
      advanceQuantity: "2",
      arrearQuantity: "0",
      arrearCharge: "0",
      customerCost: "4",
      billingMode: "ADVANCE",
      purchaseId: purchase.id
    })
    expect(new Date(racedRow!.occurredAt as string).getTime()).toBe(new Date(racedRow!.receivedAt as string).getTime())
    expect((await usageOf(late))[0]).toMatchObject({ cycleIndex: 0, advanceQuantity: "4" })

    // Beyond that cycle's leftover, with no ARREAR component: 422 out of allowance, nothing moved.
    const refused = await unitSignal(customerId, unit.agentKey, 2)
    await drain()
    expect(await signalOf(refused)).toMatchObject({ status: "FAILED", errorStatus: 422 })
    expect((await signalOf(refused)).errorMessage).toContain("Out of allowance")
    expect(await usageOf(refused)).toEqual([])
    expect(await endedRows(purchase.id, 0)).toEqual([row("ADVANCE", "10", "9", "1", "9", "0")])
    expect(await currentRows(purchase.id)).toEqual([row("ADVANCE", "10", "0", "10", "0", "0")])

    // A signal sent after the renewal with no timestamp is on time again once its moment is in the current cycle.
    const today = await query<{ n: number }>(
      app,
      "SELECT count(*)::int AS n FROM usage_log WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = 1",
      [acme.organizationId, purchase.id]
    )
    expect(today[0]!.n).toBe(0)
  })

  it("overflows to that cycle's ARREAR: its arrear_amount grows, the current cycle's and spentThisCycle do not", async () => {
    const { unit, customerId, purchase } = await unitCustomer({ arrear: true })
    await unitSignal(customerId, unit.agentKey, 3)
    await drain()
    await endCycle(purchase)
    const late = await unitSignal(customerId, unit.agentKey, 9)
    await drain()
    expect(await signalOf(late)).toMatchObject({ status: "PROCESSED" })
    expect(await endedRows(purchase.id, 0)).toEqual([
      row("ADVANCE", "10", "10", "0", "10", "0"),
      row("ARREAR", "0", "2", "0", "2", "4")
    ])
    expect(await currentRows(purchase.id)).toEqual([
      row("ADVANCE", "10", "0", "10", "0", "0"),
      row("ARREAR", "0", "0", "0", "0", "0")
    ])
    expect(await spentOf(purchase.id)).toEqual({ spent: "0", cycleIndex: 1 })
    expect((await usageOf(late))[0]).toMatchObject({
      cycleIndex: 0,
      advanceQuantity: "7",
      arrearQuantity: "2",
      arrearCharge: "4",
      customerCost: "18",
      billingMode: "MIXED"
    })
  })

  it("prices a SLAB unit at the tier the ended cycle had reached", async () => {
    const unit = await makeUnit(api(), { pricingType: "SLAB", tiers: [{ upTo: 10, price: 1 }, { upTo: null, price: 0.5 }] })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api())
    const purchase = await buy(api(), customer.id, plan.id)
    await unitSignal(customer.id, unit.agentKey, 8)
    await drain()
    await endCycle(purchase)
    // 2 more at 1 (up to 10), then 2 at 0.5: the ended cycle's tiers; in the new cycle all 4 would cost 4.
    const late = await unitSignal(customer.id, unit.agentKey, 4)
    await drain()
    expect((await usageOf(late))[0]).toMatchObject({ cycleIndex: 0, arrearQuantity: "4", arrearCharge: "3", customerCost: "3" })
    expect(await endedRows(purchase.id, 0)).toEqual([row("ARREAR", "0", "12", "0", "12", "11")])
    expect(await currentRows(purchase.id)).toEqual([row("ARREAR", "0", "0", "0", "0", "0")])
    // An on-time signal of the new cycle still prices from zero.
    const onTime = await unitSignal(customer.id, unit.agentKey, 1)
    await query(app, "UPDATE signals SET occurred_at = $3 WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      onTime,
      new Date(new Date(purchase.currentPeriodEnd).getTime() + 60_000).toISOString()
    ])
    await drain()
    expect((await usageOf(onTime))[0]).toMatchObject({ cycleIndex: 1, arrearCharge: "1" })
  })
})

describe("a late ARREAR charge of a walletFundedArrear plan", () => {
  it("debits the wallet now, leaves that cycle's arrear_amount at zero and spentThisCycle unchanged", async () => {
    const unit = await makeUnit(api(), { flatPrice: 3 })
    const plan = await makePlan(app, acme, [
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ], { walletFundedArrear: true })
    const customer = await makeCustomer(api())
    const purchase = await buy(api(), customer.id, plan.id)
    await unitSignal(customer.id, unit.agentKey, 1)
    await drain()
    await endCycle(purchase)
    const walletBefore = (await api().get(`/customers/${customer.id}/wallet/ledger`)).body.result.entries as Array<any>
    const spentBefore = await spentOf(purchase.id)
    const late = await unitSignal(customer.id, unit.agentKey, 2)
    await drain()
    expect(await signalOf(late)).toMatchObject({ status: "PROCESSED" })
    const [usage] = await usageOf(late)
    expect(usage).toMatchObject({ cycleIndex: 0, arrearQuantity: "2", arrearCharge: "6" })
    const entries = (await api().get(`/customers/${customer.id}/wallet/ledger`)).body.result.entries as Array<any>
    expect(entries.length).toBe(walletBefore.length + 1)
    expect(entries.at(-1)).toMatchObject({ type: "USAGE_LOG", delta: -6, balanceAfter: walletBefore.at(-1).balanceAfter - 6 })
    expect(await spentOf(purchase.id)).toEqual(spentBefore)
    const arrear = (await endedRows(purchase.id, 0)).find((r) => r.billingMode === "ARREAR")
    expect(arrear).toMatchObject({ used: "3", cycleQuantity: "3", arrearAmount: "0" })
    expect((await currentRows(purchase.id)).find((r) => r.billingMode === "ARREAR")).toMatchObject({ used: "0", cycleQuantity: "0" })
  })
})

describe("a signal no cycle can bill yet, or ever", () => {
  it("is refused (422) as no plan active at its moment when no purchase cycle contains it, though a plan is active now", async () => {
    const { unit, customerId, purchase } = await unitCustomer()
    const rawId = await unitSignal(customerId, unit.agentKey, 1)
    // Two days before the purchase began: no cycle of any purchase of the customer contains it.
    await query(app, "UPDATE signals SET occurred_at = received_at - interval '2 days', late = true WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      rawId
    ])
    await drain()
    // Not "Customer has no active plan": one is active now (issue 37's rough edge), none was at the signal's moment.
    expect(await signalOf(rawId)).toMatchObject({
      status: "FAILED",
      errorStatus: 422,
      errorMessage: expect.stringContaining("No plan of the customer was active at the signal's moment")
    })
    expect(await usageOf(rawId)).toEqual([])
    expect(await currentRows(purchase.id)).toEqual([row("ADVANCE", "10", "0", "10", "0", "0")])
  })

  it("waits QUEUED while its moment is at or after the current cycle's end, and is priced in the new cycle after the renewal", async () => {
    const { unit, customerId, purchase } = await unitCustomer()
    // The purchase's current cycle ended a day ago and the cycle job has not run since.
    const billingDate = new Date(Date.now() - 86_400_000)
    const anchor = new Date(billingDate)
    anchor.setUTCMonth(anchor.getUTCMonth() - 1)
    const start = cycleStart(anchor, 0)
    const end = cycleStart(anchor, 1)
    await query(
      app,
      "UPDATE purchases SET billing_date = $3, period_start = $3, period_end = $4 WHERE organization_id = $1 AND id = $2",
      [acme.organizationId, purchase.id, start.toISOString(), end.toISOString()]
    )
    const waiting = await unitSignal(customerId, unit.agentKey, 1)
    // `worker --once`'s drain ends with the signal still queued, nothing written.
    await drain()
    expect(await signalOf(waiting)).toMatchObject({ status: "QUEUED" })
    expect(await usageOf(waiting)).toEqual([])
    await drain()
    expect(await signalOf(waiting)).toMatchObject({ status: "QUEUED" })
    // The renewal: the signal's moment is now in the new cycle.
    await runCycles(app, new Date())
    expect((await spentOf(purchase.id)).cycleIndex).toBe(1)
    await drain()
    expect(await signalOf(waiting)).toMatchObject({ status: "PROCESSED" })
    expect((await usageOf(waiting))[0]).toMatchObject({ cycleIndex: 1, advanceQuantity: "1" })
    expect(await currentRows(purchase.id)).toEqual([row("ADVANCE", "10", "1", "9", "1", "0")])
  })
})

describe("the backfill lane", () => {
  it("prices a signal queued after a backfill larger than a batch within the first two batches", async () => {
    // A database and worker of its own: a worker starts with batches of 100 (docs/signals.md).
    const own = await startTestApp({ ownDatabase: true })
    try {
      const tenant = await own.tenant("Backfill")
      const http = client(own, tenant)
      const ownApi = clientOf(own, tenant)
      const credit = await http.created("/credits", { name: "Lane", agentKey: "lane", marginPercent: 0, modelBundle: gpt4oBundle }, "credit")
      const plan = await makePlan(own, tenant, [{ type: "CREDIT", billingMode: "ARREAR", creditId: credit }])
      const backfiller = await makeCustomer(ownApi)
      const backfilled = await buy(ownApi, backfiller.id, plan.id)
      const today = await makeCustomer(ownApi)
      await buy(ownApi, today.id, plan.id)
      const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
      const count = 450
      for (let sent = 0; sent < count; sent += 150) {
        const response = await http.post("/signal/batch", {
          signals: Array.from({ length: 150 }, () => ({ type: "credit", customerId: backfiller.id, agentKey: "lane", usage }))
        })
        expect(response.status, JSON.stringify(response.body)).toBe(202)
      }
      // Late signals (a moment just after the cycle began), queued before today's one.
      await query(
        own,
        `UPDATE signals SET late = true, occurred_at = (SELECT period_start FROM purchases WHERE organization_id = $1 AND id = $3) + interval '1 second'
         WHERE organization_id = $1 AND customer_id = $2`,
        [tenant.organizationId, backfiller.id, backfilled.id]
      )
      const onTime = await http.post("/signal/credit", { customerId: today.id, agentKey: "lane", usage })
      expect(onTime.status).toBe(202)
      await drainIn(own)
      // One group per batch (a batch's rows share its transaction's processed_at).
      const batches = await query<{ late: boolean; n: number }>(
        own,
        `SELECT late, count(*)::int AS n FROM signals WHERE organization_id = $1 AND status = 'PROCESSED'
         GROUP BY late, processed_at ORDER BY processed_at`,
        [tenant.organizationId]
      )
      expect(batches.reduce((sum, batch) => sum + batch.n, 0)).toBe(count + 1)
      // The backfill took several batches; today's signal was priced in one of the first two, alone in its lane.
      expect(batches.filter((batch) => batch.late).length).toBeGreaterThanOrEqual(2)
      const todayBatch = batches.findIndex((batch) => !batch.late)
      expect(batches[todayBatch]).toEqual({ late: false, n: 1 })
      expect(todayBatch).toBeLessThanOrEqual(1)
      const arrear = await query<{ used: string }>(
        own,
        "SELECT used::text FROM purchase_balances WHERE organization_id = $1 AND purchase_id = $2",
        [tenant.organizationId, backfilled.id]
      )
      // 1.2 credits a call, all in the current cycle (their moments are in it).
      expect(arrear).toEqual([{ used: String(1.2 * count) }])
    } finally {
      await own.close()
    }
  })
})
