import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { Metering } from "../src/billing/Metering.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, makeCredit, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

const iso = (text: string) => new Date(text).toISOString()

describe("cycle arithmetic", () => {
  it.each([
    ["2027-01-31T10:00:00.000Z", 1, "2027-02-28T10:00:00.000Z"],
    ["2027-01-31T10:00:00.000Z", 2, "2027-03-31T10:00:00.000Z"],
    ["2028-01-31T00:00:00.000Z", 1, "2028-02-29T00:00:00.000Z"],
    ["2028-02-29T12:00:00.000Z", 12, "2029-02-28T12:00:00.000Z"],
    ["2028-02-29T12:00:00.000Z", 48, "2032-02-29T12:00:00.000Z"],
    ["2027-03-31T00:00:00.000Z", 1, "2027-04-30T00:00:00.000Z"],
    ["2027-12-15T08:30:00.000Z", 1, "2028-01-15T08:30:00.000Z"],
    ["2027-08-31T00:00:00.000Z", 6, "2028-02-29T00:00:00.000Z"],
    ["2100-01-29T00:00:00.000Z", 1, "2100-02-28T00:00:00.000Z"]
  ])("from %s, cycle %i starts %s", (anchor, index, expected) => {
    expect(cycleStart(new Date(anchor), index).toISOString()).toBe(expected)
  })
})

/** Meters through the contract the signal pipeline uses, in one transaction. */
const meter = (customerId: string, kind: "CREDIT" | "UNIT", targetId: string, quantity: string, customerCost?: string) =>
  app.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const metering = yield* Metering
    return yield* metering.meter({
      organizationId: acme.organizationId,
      customerId,
      kind,
      targetId,
      quantity: BigDecimal.unsafeFromString(quantity),
      ...(customerCost ? { customerCost: BigDecimal.unsafeFromString(customerCost) } : {}),
      usageLogId: null
    }).pipe(sql.withTransaction)
  }))

describe("the cycle job", () => {
  it("activates a scheduled purchase on its date and renews on the anchor day, month after month", async () => {
    const unit = await makeUnit(api, { flatPrice: 4 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id, { billingDate: "2027-01-31T10:00:00.000Z" })
    expect(purchase.status).toBe("SCHEDULED")

    expect(await runCycles(app, new Date("2027-01-31T09:59:59Z"))).toBe(0)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.status).toBe("SCHEDULED")

    expect(await runCycles(app, new Date("2027-01-31T10:00:00Z"))).toBe(1)
    let current = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(current).toMatchObject({
      status: "ACTIVE",
      currentPeriodStart: iso("2027-01-31T10:00:00Z"),
      currentPeriodEnd: iso("2027-02-28T10:00:00Z")
    })
    // The same instant again changes nothing.
    expect(await runCycles(app, new Date("2027-01-31T10:00:00Z"))).toBe(0)

    // Late by two months: both renewals are caught up, each on its own anchor day.
    expect(await runCycles(app, new Date("2027-04-01T00:00:00Z"))).toBe(2)
    current = ok(await api.get(`/purchases/${purchase.id}`)).purchase
    expect(current.currentPeriodStart).toBe(iso("2027-03-31T10:00:00Z"))
    expect(current.currentPeriodEnd).toBe(iso("2027-04-30T10:00:00Z"))
    expect(await runCycles(app, new Date("2027-04-01T00:00:00Z"))).toBe(0)

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => [i.kind, i.periodStart, i.total])).toEqual([
      ["PLAN", iso("2027-01-31T10:00:00Z"), 8],
      ["PLAN", iso("2027-02-28T10:00:00Z"), 8],
      ["PLAN", iso("2027-03-31T10:00:00Z"), 8]
    ])
    const currentPlan = ok(await api.get(`/customers/${customer.id}/plan`)).plan
    expect(currentPlan).toMatchObject({ status: "ACTIVE", billingDate: iso("2027-03-31T10:00:00Z"), cost: 8 })
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

    await meter(customer.id, "CREDIT", credit.id, "30", "0.375")
    // 10 prepaid units, then 3.5 in arrears at 2 each.
    const overflow = await meter(customer.id, "UNIT", unit.id, "13.5")
    expect(overflow.billingMode).toBe("MIXED")
    expect(BigDecimal.format(overflow.arrearCharge)).toBe("7")
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(7)

    const end = new Date(purchase.currentPeriodEnd)
    expect(await runCycles(app, end)).toBe(1)

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "USAGE", "PLAN"])
    const usage = invoices[1]
    expect(usage).toMatchObject({ status: "OPEN", total: 7, totalCents: 700, periodEnd: end.toISOString() })
    expect(usage.lines).toEqual([expect.objectContaining({ quantity: 3.5, amount: 7 })])

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
    const purchase = await buy(api, customer.id, plan.id, { billingDate: "2030-05-31T00:00:00.000Z" })
    const first = await app.cli(["cycle", "run", "--now", "2030-05-31T00:00:00Z", "--json"])
    expect(first.code, first.stderr).toBe(0)
    // Earlier tests' purchases are renewed up to that instant too.
    expect(first.json.handled).toBeGreaterThanOrEqual(1)
    expect(await runCycles(app, new Date("2030-05-31T00:00:00Z"))).toBe(0)
    const worker = await app.cli(["worker", "--once", "--now", "2030-06-30T00:00:00Z", "--json"])
    expect(worker.code, worker.stderr).toBe(0)
    expect(ok(await api.get(`/purchases/${purchase.id}`)).purchase.currentPeriodStart).toBe(iso("2030-06-30T00:00:00Z"))
  }, 120_000)
})
