import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, makeCredit, makeCustomer, makePlan, makeUnit, ok, ownTestApp, runCycles, settleOthersBefore } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

/** An instant in UTC; `month` is 1-based, a day past the month's end is not allowed. */
const utc = (year: number, month: number, day: number, hour = 0) => {
  const date = new Date(Date.UTC(year, month - 1, day, hour))
  if (date.getUTCDate() !== day) throw new Error(`${year}-${month} has no day ${day}`)
  return date
}

/** The last day of a month by the calendar's own rule, not by the code under test. */
const lastDayOf = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate()

/**
 * The first `month`/`day` at `hour` UTC more than a day after `now`: the service refuses a
 * billingDate in the past, so a purchase scheduled on a month's end must be in the future
 * whenever the suite runs.
 */
const nextDate = (now: Date, month: number, day: number, hour = 0) => {
  for (let year = now.getUTCFullYear(); ; year++) {
    if (day > lastDayOf(year, month)) continue // Feb 29 outside a leap year
    const candidate = utc(year, month, day, hour)
    if (candidate.getTime() > now.getTime() + 86_400_000) return candidate
  }
}

describe("cycle arithmetic", () => {
  // Fixed past anchors: pure arithmetic, no clock involved.
  it.each([
    ["2023-01-31T10:00:00.000Z", 1, "2023-02-28T10:00:00.000Z"],
    ["2023-01-31T10:00:00.000Z", 2, "2023-03-31T10:00:00.000Z"],
    ["2024-01-31T00:00:00.000Z", 1, "2024-02-29T00:00:00.000Z"],
    ["2024-02-29T12:00:00.000Z", 12, "2025-02-28T12:00:00.000Z"],
    ["2020-02-29T12:00:00.000Z", 48, "2024-02-29T12:00:00.000Z"],
    ["2023-03-31T00:00:00.000Z", 1, "2023-04-30T00:00:00.000Z"],
    ["2023-12-15T08:30:00.000Z", 1, "2024-01-15T08:30:00.000Z"],
    ["2023-08-31T00:00:00.000Z", 6, "2024-02-29T00:00:00.000Z"],
    // Century years: 1900 is not a leap year, 2000 is.
    ["1900-01-29T00:00:00.000Z", 1, "1900-02-28T00:00:00.000Z"],
    ["2000-01-30T00:00:00.000Z", 1, "2000-02-29T00:00:00.000Z"]
  ])("from %s, cycle %i starts %s", (anchor, index, expected) => {
    expect(cycleStart(new Date(anchor), index).toISOString()).toBe(expected)
  })
})

/** Sends one signal over HTTP and prices the queue with the worker; the signal's usage row. */
const meter = async (route: "credit" | "unit", body: Record<string, unknown>) => {
  const sent = await api.post(`/signal/${route}`, body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
  const rows = ok(await api.get(`/signal/usage-log?customerId=${body.customerId}&limit=200`)).usageLogs
  const row = rows.find((r: any) => r.rawId === sent.body.result.rawId)
  expect(row, "priced").toBeDefined()
  return row
}

describe("the cycle job", () => {
  it("activates a scheduled purchase on its date and renews on the anchor day, month after month", async () => {
    // It runs the job at instants months apart, each counted: a database of its own.
    const { app, tenant: acme, api } = await ownTestApp()
    const unit = await makeUnit(api, { flatPrice: 4 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    // The next Jan 31 (10:00 UTC): the anchor day is the month's last, so February clamps it.
    const anchor = nextDate(new Date(), 1, 31, 10)
    const year = anchor.getUTCFullYear()
    const february = utc(year, 2, lastDayOf(year, 2), 10) // the 28th, or the 29th in a leap year
    const march = utc(year, 3, 31, 10) // back on the 31st: counted from the anchor, not from February
    const april = utc(year, 4, 30, 10)
    const purchase = await buy(api, customer.id, plan.id, { billingDate: anchor.toISOString() })
    expect(purchase.status).toBe("SCHEDULED")

    expect(await runCycles(app, new Date(anchor.getTime() - 1000))).toBe(0)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.status).toBe("SCHEDULED")

    expect(await runCycles(app, anchor)).toBe(1)
    let current = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(current).toMatchObject({
      status: "ACTIVE",
      currentPeriodStart: anchor.toISOString(),
      currentPeriodEnd: february.toISOString()
    })
    // The same instant again changes nothing.
    expect(await runCycles(app, anchor)).toBe(0)

    // Late by two months: both renewals are caught up, each on its own anchor day.
    const aprilFirst = utc(year, 4, 1)
    expect(await runCycles(app, aprilFirst)).toBe(2)
    current = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(current.currentPeriodStart).toBe(march.toISOString())
    expect(current.currentPeriodEnd).toBe(april.toISOString())
    expect(await runCycles(app, aprilFirst)).toBe(0)

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => [i.kind, i.periodStart, i.total])).toEqual([
      ["PLAN", anchor.toISOString(), 8],
      ["PLAN", february.toISOString(), 8],
      ["PLAN", march.toISOString(), 8]
    ])
    const currentPlan = ok(await api.get(`/customers/${customer.id}/plan`)).plan
    expect(currentPlan).toMatchObject({ status: "ACTIVE", billingDate: march.toISOString(), cost: 8 })
  })

  it("invoices ARREAR usage at the cycle end, rolls ADVANCE over or lets it expire", async () => {
    const credit = await makeCredit(api)
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100, rollover: true },
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10, rollover: false },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)

    // 18,750 output tokens on gpt-4o: 0.1875 USD = 30 credits (basePrice 0.00625) at 0.375.
    const chat = await meter("credit", { customerId: customer.id, agentKey: credit.agentKey, usage: { model: "gpt-4o", outputTokens: 18_750 } })
    expect(chat).toMatchObject({ billingMode: "ADVANCE", quantity: 30, customerCost: 0.375, balance: { remaining: 70 } })
    // 10 prepaid units, then 3.5 in arrears at 2 each: 27 of usage, 7 of it in arrears.
    const overflow = await meter("unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 13.5 })
    expect(overflow).toMatchObject({ billingMode: "MIXED", quantity: 13.5, customerCost: 27, balance: { remaining: 0 } })
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(7)

    const end = new Date(purchase.currentPeriodEnd)
    await settleOthersBefore(app, api, purchase.id, end)
    expect(await runCycles(app, end)).toBe(1)

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "USAGE", "PLAN"])
    const usage = invoices[1]
    expect(usage).toMatchObject({ status: "OPEN", total: 7, totalCents: 700, periodEnd: end.toISOString() })
    expect(usage.lines).toEqual([expect.objectContaining({ quantity: 3.5, unitPrice: null, amount: 7, periodStart: purchase.currentPeriodStart, periodEnd: end.toISOString() })])

    const balances = ok(await api.get(`/customers/${customer.id}/balances`))
    expect(balances.credits[0]).toMatchObject({ granted: 170, used: 0, remaining: 170 })
    expect(balances.units[0]).toMatchObject({ granted: 10, remaining: 10 })
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(0)
  })

  it("credits the recurring wallet grant at every cycle start, with the plan's wallet amount", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }])
    const customer = await makeCustomer(api)
    const grant = ok(await api.put(`/customers/${customer.id}/recurring-grant`, { kind: "wallet", quantity: 2.5 }))
    expect(grant).toEqual({ customerId: customer.id, recurringGrant: { kind: "wallet", quantity: 2.5 } })
    const purchase = await buy(api, customer.id, plan.id)
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).wallet.balance).toBe(12.5)
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.balance).toBe(25)
    expect(ledger.entries.map((e: any) => [e.type, e.delta, e.balanceAfter])).toEqual([
      ["PURCHASE_GRANT", 10, 10],
      ["RECURRING_GRANT", 2.5, 12.5],
      ["CYCLE_GRANT", 10, 22.5],
      ["RECURRING_GRANT", 2.5, 25]
    ])
  })

  it("runs from the CLI: billing cycle run --now and billing worker --once --now", async () => {
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 1 }])
    const customer = await makeCustomer(api)
    // The next May 31: a month-end anchor that renews on June 30.
    const anchor = nextDate(new Date(), 5, 31)
    const june = utc(anchor.getUTCFullYear(), 6, 30)
    const purchase = await buy(api, customer.id, plan.id, { billingDate: anchor.toISOString() })
    expect(purchase.status).toBe("SCHEDULED")
    const first = await app.cli(["cycle", "run", "--now", anchor.toISOString(), "--json"])
    expect(first.code, first.stderr).toBe(0)
    // Other tests' purchases are renewed up to that instant too.
    expect(first.json.handled).toBeGreaterThanOrEqual(1)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase).toMatchObject({
      status: "ACTIVE",
      currentPeriodStart: anchor.toISOString(),
      currentPeriodEnd: june.toISOString()
    })
    expect(await runCycles(app, anchor)).toBe(0)
    const worker = await app.cli(["worker", "--once", "--now", june.toISOString(), "--json"])
    expect(worker.code, worker.stderr).toBe(0)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.currentPeriodStart).toBe(june.toISOString())
  })
})
