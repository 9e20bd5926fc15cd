/**
 * Metering on the path production takes: signals sent over HTTP
 * (`POST /signal/credit|unit|wallet`, `/signal/composite/complete`), priced by
 * the worker (the pricing job run in-process until the queue is empty), the
 * cycle job at the cycle end, and what it leaves behind read back over HTTP
 * (usage rows, balances, the wallet ledger, invoices), exact to the decimal.
 *
 * Prices, worked out by hand: a credit of billing-support's `makeCredit` has
 * basePrice 0.00625 (gpt-4o, 2.5 / 10 USD per million input / output tokens)
 * and margin 100, so `n` output tokens are n / 625 credits at a customer cost
 * of n * 0.00002, and `n` input tokens are n / 2500 credits at n * 0.000005.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import {
  buy,
  type Client,
  clientOf,
  makeComposite,
  makeCredit,
  makeCustomer,
  makePlan,
  makeUnit,
  ok,
  runCycles,
  settleOthersBefore
} from "./billing-support.ts"
import { drain, query, sendMany } from "./signals-fixtures.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

const queued = async (path: string, body: Record<string, unknown>) => {
  const sent = await api.post(path, body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.result as { rawId: string; messageId: string }
}

/** A credit signal of `usage` tokens on gpt-4o. */
const sendCredit = (customerId: string, agentKey: string, usage: { inputTokens?: number; outputTokens?: number }, extra: Record<string, unknown> = {}) =>
  queued("/signal/credit", { customerId, agentKey, usage: { model: "gpt-4o", ...usage }, ...extra })

const sendUnit = (customerId: string, agentKey: string, quantity: number, extra: Record<string, unknown> = {}) =>
  queued("/signal/unit", { customerId, agentKey, quantity, ...extra })

/** Prices the queue, then returns the signal `rawId`'s inbox row and its usage row (if any). */
const priced = async (customerId: string, rawId: string) => {
  await drain(app)
  const [signal] = await query<{ status: string; errorStatus: number | null; errorMessage: string | null }>(
    app,
    `SELECT status, error_status, error_message FROM signals WHERE organization_id = $1 AND id = $2`,
    [acme.organizationId, rawId]
  )
  const row = (await usageRows(customerId)).find((r: any) => r.rawId === rawId)
  return { signal: signal!, row }
}

const usageRows = async (customerId: string) => ok(await api.get(`/signal/usage-log?customerId=${customerId}&limit=200`)).usageLogs

/** Sends a signal and prices it: its usage row, or the test stops with the signal's refusal. */
const meterOne = async (customerId: string, send: Promise<{ rawId: string }>) => {
  const { rawId } = await send
  const { row, signal } = await priced(customerId, rawId)
  expect(signal, "processed").toMatchObject({ status: "PROCESSED", errorStatus: null })
  return row
}

const refusal = async (customerId: string, send: Promise<{ rawId: string }>) => {
  const { rawId } = await send
  const { row, signal } = await priced(customerId, rawId)
  expect(row).toBeUndefined()
  expect(signal.status).toBe("FAILED")
  return { status: signal.errorStatus, message: signal.errorMessage }
}

const balances = async (customerId: string) => ok(await api.get(`/customers/${customerId}/balances`))
const spentThisCycle = async (customerId: string) => ok(await api.get(`/customers/${customerId}/plan`)).plan.spentThisCycle
const invoicesOf = async (customerId: string) => ok(await api.get(`/invoices?customerId=${customerId}`)).invoices

/** Ends the purchase's cycle with the cycle job (other purchases of the file settled first). */
const endCycle = async (purchase: { id: string; currentPeriodEnd: string }) => {
  const end = new Date(purchase.currentPeriodEnd)
  await settleOthersBefore(app, api, purchase.id, end)
  expect(await runCycles(app, end)).toBe(1)
  return end
}

describe("metering a signal (HTTP signal, the worker)", () => {
  it("refuses a customer with no active plan and a target not on the plan (422), moving nothing", async () => {
    const credit = await makeCredit(api)
    const customer = await makeCustomer(api)
    expect(await refusal(customer.id, sendCredit(customer.id, credit.agentKey, { outputTokens: 625 })))
      .toEqual({
        status: 422,
        message: expect.stringMatching(
          /^Customer has no active plan at \d{4}-\d\d-\d\dT[\d:.]+Z \(the signal's moment: when it was received\); replay it once/
        )
      })
    const unit = await makeUnit(api)
    await buy(api, customer.id, (await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])).id)
    const notOnPlan = await refusal(customer.id, sendCredit(customer.id, credit.agentKey, { outputTokens: 625 }))
    expect(notOnPlan.status).toBe(422)
    expect(notOnPlan.message).toContain(credit.agentKey)
    expect((await balances(customer.id)).units[0]).toMatchObject({ granted: 1, remaining: 1 })
    expect(await spentThisCycle(customer.id)).toBe(0)
  })

  it("consumes ADVANCE, then refuses what it cannot cover and writes nothing", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    // 18,750 input tokens: 0.046875 USD = 7.5 credits, 0.09375 at the customer price.
    const first = await meterOne(customer.id, sendCredit(customer.id, credit.agentKey, { inputTokens: 18_750 }))
    expect(first).toMatchObject({
      meter: "CREDIT",
      billingMode: "ADVANCE",
      quantity: 7.5,
      providerCost: 0.046875,
      customerCost: 0.09375,
      balance: { remaining: 2.5 }
    })
    // 3 credits (7,500 input tokens) do not fit in the 2.5 left, and there is no ARREAR component.
    const refused = await refusal(customer.id, sendCredit(customer.id, credit.agentKey, { inputTokens: 7_500 }))
    expect(refused.status).toBe(422)
    expect((await balances(customer.id)).credits[0]).toMatchObject({ granted: 10, used: 7.5, remaining: 2.5 })
    expect(await usageRows(customer.id)).toHaveLength(1)
    expect(await spentThisCycle(customer.id)).toBe(0)
  })

  it("overflows to the ARREAR component of the same credit, charging the overflow's share, to the USAGE invoice", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 },
      { type: "CREDIT", billingMode: "ARREAR", creditId: credit.id }
    ])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // 10,000 output tokens: 0.1 USD = 16 credits at 0.2; 10 from ADVANCE, 6 in arrears: 6/16 of 0.2 = 0.075.
    const mixed = await meterOne(customer.id, sendCredit(customer.id, credit.agentKey, { outputTokens: 10_000 }))
    expect(mixed).toMatchObject({ billingMode: "MIXED", quantity: 16, customerCost: 0.2, balance: { remaining: 0 } })
    expect(await spentThisCycle(customer.id)).toBe(0.075)
    // 625 output tokens: 1 credit at 0.0125, all in arrears.
    const next = await meterOne(customer.id, sendCredit(customer.id, credit.agentKey, { outputTokens: 625 }))
    expect(next).toMatchObject({ billingMode: "ARREAR", quantity: 1, customerCost: 0.0125 })
    expect((await balances(customer.id)).credits[0]).toMatchObject({ granted: 10, used: 17, remaining: 0 })
    expect(await spentThisCycle(customer.id)).toBe(0.0875)

    const end = await endCycle(purchase)
    const invoices = await invoicesOf(customer.id)
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "USAGE", "PLAN"])
    // 7 credits in arrears at 0.0125 = 0.0875, rounded to the cent (half away from zero): 0.09.
    expect(invoices[1]).toMatchObject({ status: "OPEN", periodEnd: end.toISOString(), subtotal: 0.09, total: 0.09, totalCents: 9 })
    expect(invoices[1].lines).toEqual([
      expect.objectContaining({ quantity: 7, unitPrice: 0.0125, amount: 0.0875, periodEnd: end.toISOString() })
    ])
  })

  it("prices units on the cycle's cumulative quantity (SLAB); usage of the ended cycle sent after its end on that cycle's quantity", async () => {
    const unit = await makeUnit(api, { pricingType: "SLAB", tiers: [{ upTo: 10, price: 1 }, { upTo: null, price: 0.5 }] })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // 8 at 1; then 2 more at 1 and 2 at 0.5 = 3.
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 8))).toMatchObject({ billingMode: "ARREAR", quantity: 8, customerCost: 8 })
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 4))).toMatchObject({ billingMode: "ARREAR", quantity: 4, customerCost: 3 })
    await endCycle(purchase)
    const usage = (await invoicesOf(customer.id)).find((i: any) => i.kind === "USAGE")
    expect(usage).toMatchObject({ total: 11, totalCents: 1100, lines: [expect.objectContaining({ quantity: 12, amount: 11 })] })
    // A signal sent now belongs to the ended cycle (its moment is before the cycle job's instant): priced
    // on that cycle's quantity, 12 -> 13 at 0.5 (docs/billing.md, "SLAB/VOLUME tiers: on the closed cycle's quantity").
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 1))).toMatchObject({ billingMode: "ARREAR", customerCost: 0.5 })
  })

  it("crosses a VOLUME tier: every unit at the tier holding the cycle's quantity, a step down negative, the invoice line exact", async () => {
    const unit = await makeUnit(api, { pricingType: "VOLUME", tiers: [{ upTo: 10, price: 1.5 }, { upTo: null, price: 1.2 }] })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // Q 0 -> 8: 8 * 1.5 = 12. Q 8 -> 10 (the first tier's inclusive bound): 15 - 12 = 3.
    // Q 10 -> 11.5 (the second tier): 11.5 * 1.2 = 13.8, so this row is 13.8 - 15 = -1.2.
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 8))).toMatchObject({ quantity: 8, customerCost: 12 })
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 2))).toMatchObject({ quantity: 2, customerCost: 3 })
    expect(await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 1.5))).toMatchObject({ quantity: 1.5, customerCost: -1.2 })
    expect(await spentThisCycle(customer.id)).toBe(13.8)

    const end = await endCycle(purchase)
    const invoices = await invoicesOf(customer.id)
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "USAGE", "PLAN"])
    expect(invoices[1]).toMatchObject({ status: "OPEN", subtotal: 13.8, taxTotal: 0, total: 13.8, totalCents: 1380 })
    expect(invoices[1].lines).toEqual([{
      description: expect.any(String),
      componentId: expect.any(String),
      quantity: 11.5,
      unitPrice: null, // a tiered unit has no single price
      amount: 13.8,
      periodStart: purchase.currentPeriodStart,
      periodEnd: end.toISOString()
    }])
  })

  it("debits ARREAR charges from the wallet as they happen with walletFundedArrear, and invoices nothing for them", async () => {
    const unit = await makeUnit(api, { flatPrice: 3 })
    const plan = await makePlan(app, acme, [
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ], { walletFundedArrear: true })
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    expect((await balances(customer.id)).wallet.balance).toBe(5)

    // 2 units at 3 = 6 off the wallet at once: 5 - 6 = -1.
    const row = await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 2))
    expect(row).toMatchObject({ meter: "UNIT", billingMode: "ARREAR", quantity: 2, customerCost: 6 })
    expect((await balances(customer.id)).wallet.balance).toBe(-1)
    let ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.usageLogId])).toEqual([
      ["PURCHASE_GRANT", 5, 5, null],
      ["USAGE_LOG", -6, -1, row.id]
    ])
    // 0.5 more: 1.5 off, -2.5.
    const second = await meterOne(customer.id, sendUnit(customer.id, unit.agentKey, 0.5))
    expect((await balances(customer.id)).wallet.balance).toBe(-2.5)
    expect(await spentThisCycle(customer.id)).toBe(7.5)

    const end = await endCycle(purchase)
    // No USAGE invoice: the wallet paid the charges already. The next cycle grants 5 again: -2.5 + 5 = 2.5.
    expect((await invoicesOf(customer.id)).map((i: any) => [i.kind, i.total])).toEqual([["PLAN", 5], ["PLAN", 5]])
    ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.usageLogId])).toEqual([
      ["PURCHASE_GRANT", 5, 5, null],
      ["USAGE_LOG", -6, -1, row.id],
      ["USAGE_LOG", -1.5, -2.5, second.id],
      ["CYCLE_GRANT", 5, 2.5, null]
    ])
    expect(ledger.balance).toBe(2.5)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.currentPeriodStart).toBe(end.toISOString())
  })

  it("debits a wallet signal's provider cost, below zero, with the usage row on the ledger", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 0.0001 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    // 3 input and 7 output tokens: 3 * 0.0000025 + 7 * 0.00001 = 0.0000775; no margin on the wallet.
    const { rawId } = await queued("/signal/wallet", { customerId: customer.id, usage: { model: "gpt-4o", inputTokens: 3, outputTokens: 7 } })
    const second = await queued("/signal/wallet", { customerId: customer.id, usage: { model: "gpt-4o", outputTokens: 5 } })
    await drain(app)
    const rows = await usageRows(customer.id)
    expect(rows.map((r: any) => [r.rawId, r.meter, r.billingMode, r.quantity, r.providerCost, r.customerCost, r.balance])).toEqual([
      [rawId, "WALLET", "WALLET", 0.0000775, 0.0000775, 0.0000775, { remaining: 0.0000225 }],
      // 5 * 0.00001 = 0.00005: 0.0000225 - 0.00005 = -0.0000275.
      [second.rawId, "WALLET", "WALLET", 0.00005, 0.00005, 0.00005, { remaining: -0.0000275 }]
    ])
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter, e.usageLogId])).toEqual([
      ["PURCHASE_GRANT", 0.0001, 0.0001, null],
      ["USAGE_LOG", -0.0000775, 0.0000225, rows[0].id],
      ["USAGE_LOG", -0.00005, -0.0000275, rows[1].id]
    ])
  })

  it("bills a credit covered only by a composite through the composite, and carries composite debt into the next grant", async () => {
    const credit = await makeCredit(api)
    const other = await makeCredit(api)
    const composite = await makeComposite(api, 2, [credit.id])
    const plan = await makePlan(app, acme, [{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    // 3,125 output tokens: 5 credits recorded at cost 0.03125, billed by the composite (customerCost 0).
    const covered = await meterOne(customer.id, sendCredit(customer.id, credit.agentKey, { outputTokens: 3_125 }))
    expect(covered).toMatchObject({ billingMode: "COMPOSITE", quantity: 5, providerCost: 0.03125, customerCost: 0 })
    // A credit the composite does not cover is not on the plan.
    expect((await refusal(customer.id, sendCredit(customer.id, other.agentKey, { outputTokens: 625 }))).status).toBe(422)

    // Three occurrences, each ready once its tagged credit signal is in: one beyond the pool of 2.
    for (const value of ["o1", "o2", "o3"]) {
      await sendCredit(customer.id, credit.agentKey, { outputTokens: 625 }, { composite: { [composite.refId]: value } })
      const completed = await api.post("/signal/composite/complete", { customerId: customer.id, composite: { [composite.refId]: value } })
      expect(completed.status, JSON.stringify(completed.body)).toBe(200)
    }
    await drain(app)
    const occurrences = (await usageRows(customer.id)).filter((r: any) => r.meter === "COMPOSITE")
    expect(occurrences.map((r: any) => [r.quantity, r.customerCost, r.composite.value])).toEqual([[1, 2, "o1"], [1, 2, "o2"], [1, 2, "o3"]])
    expect((await balances(customer.id)).composites[0]).toMatchObject({ granted: 2, used: 3, remaining: -1, originalGranted: 2 })
    // Nothing in arrears: the plan sells only the ADVANCE pool.
    expect(await spentThisCycle(customer.id)).toBe(0)
    await endCycle(purchase)
    expect((await balances(customer.id)).composites[0]).toMatchObject({ granted: 1, used: 0, remaining: 1, originalGranted: 2 })
  })
})

describe.skipIf(!usesRealPostgres)("parallel metering (needs real PostgreSQL)", () => {
  it("lets exactly the allowance through when 20 signals race for 10 credits, sent at once and drained by 4 workers at once", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    // 625 output tokens: exactly 1 credit each.
    await sendMany(20, 20, () => sendCredit(customer.id, credit.agentKey, { outputTokens: 625 }))
    await Promise.all(Array.from({ length: 4 }, () => drain(app)))
    const signals = await query<{ status: string; errorStatus: number | null; n: string }>(
      app,
      `SELECT status, error_status, count(*)::text AS n FROM signals WHERE organization_id = $1 AND customer_id = $2
       GROUP BY status, error_status ORDER BY status`,
      [acme.organizationId, customer.id]
    )
    expect(signals).toEqual([
      { status: "FAILED", errorStatus: 422, n: "10" },
      { status: "PROCESSED", errorStatus: null, n: "10" }
    ])
    expect(await usageRows(customer.id)).toHaveLength(10)
    expect((await balances(customer.id)).credits[0]).toMatchObject({ used: 10, remaining: 0 })
  })
})
