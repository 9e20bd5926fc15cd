/**
 * The Metering contract (src/billing/Metering.ts) that the signal pipeline
 * uses, exercised the way it is called: inside one transaction per signal.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Metering, type MeterKind, planCoverage } from "../src/billing/Metering.ts"
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
  runCycles
} from "./billing-support.ts"

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
})
afterAll(() => app.close())

const d = (text: string) => BigDecimal.unsafeFromString(text)
const text = (value: BigDecimal.BigDecimal | null) => (value === null ? null : BigDecimal.format(BigDecimal.normalize(value)))

const meterExit = (customerId: string, kind: MeterKind, targetId: string, quantity: string, extra: { customerCost?: string; usageLogId?: string } = {}) =>
  app.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const metering = yield* Metering
    return yield* metering.meter({
      organizationId: acme.organizationId,
      customerId,
      kind,
      targetId,
      quantity: d(quantity),
      ...(extra.customerCost ? { customerCost: d(extra.customerCost) } : {}),
      usageLogId: extra.usageLogId ?? null
    }).pipe(sql.withTransaction, Effect.exit)
  }))

const meter = async (...args: Parameters<typeof meterExit>) => {
  const exit = await meterExit(...args)
  if (Exit.isFailure(exit)) throw new Error(`meter failed: ${JSON.stringify(exit.cause)}`)
  return exit.value
}

const failureStatus = async (...args: Parameters<typeof meterExit>) => {
  const exit = await meterExit(...args)
  expect(Exit.isFailure(exit)).toBe(true)
  return Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as { _tag: string })._tag : "defect"
}

const balances = async (customerId: string) => ok(await api.get(`/customers/${customerId}/balances`))

describe("Metering.meter", () => {
  it("refuses a customer with no active plan (NoActivePlan) and a target not on the plan (NotOnPlan)", async () => {
    const credit = await makeCredit(api)
    const customer = await makeCustomer(api)
    expect(await failureStatus(customer.id, "CREDIT", credit.id, "1", { customerCost: "1" })).toBe("NoActivePlan")
    const unit = await makeUnit(api)
    await buy(api, customer.id, (await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])).id)
    expect(await failureStatus(customer.id, "CREDIT", credit.id, "1", { customerCost: "1" })).toBe("NotOnPlan")
  })

  it("consumes ADVANCE, then refuses what it cannot cover and writes nothing", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const first = await meter(customer.id, "CREDIT", credit.id, "7.5", { customerCost: "0.09375" })
    expect(first.billingMode).toBe("ADVANCE")
    expect(text(first.remaining)).toBe("2.5")
    expect(text(first.customerCost)).toBe("0.09375")
    expect(text(first.arrearCharge)).toBe("0")
    expect(await failureStatus(customer.id, "CREDIT", credit.id, "3", { customerCost: "0.0375" })).toBe("OutOfAllowance")
    expect((await balances(customer.id)).credits[0]).toMatchObject({ granted: 10, used: 7.5, remaining: 2.5 })
  })

  it("overflows to the ARREAR component of the same credit, charging the overflow's share", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 },
      { type: "CREDIT", billingMode: "ARREAR", creditId: credit.id }
    ])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const result = await meter(customer.id, "CREDIT", credit.id, "16", { customerCost: "0.2" })
    expect(result.billingMode).toBe("MIXED")
    expect(text(result.advanceQuantity)).toBe("10")
    expect(text(result.arrearQuantity)).toBe("6")
    expect(text(result.arrearCharge)).toBe("0.075")
    expect(text(result.remaining)).toBe("0")
    const next = await meter(customer.id, "CREDIT", credit.id, "1", { customerCost: "0.0125" })
    expect(next.billingMode).toBe("ARREAR")
    expect(text(next.arrearCharge)).toBe("0.0125")
    expect((await balances(customer.id)).credits[0]).toMatchObject({ granted: 10, used: 17, remaining: 0 })
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(0.0875)
  })

  it("prices units on the cycle's cumulative quantity (SLAB)", async () => {
    const unit = await makeUnit(api, { pricingType: "SLAB", tiers: [{ upTo: 10, price: 1 }, { upTo: null, price: 0.5 }] })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    expect(text((await meter(customer.id, "UNIT", unit.id, "8")).arrearCharge)).toBe("8")
    expect(text((await meter(customer.id, "UNIT", unit.id, "4")).arrearCharge)).toBe("3")
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.find((i: any) => i.kind === "USAGE")).toMatchObject({ total: 11, lines: [expect.objectContaining({ quantity: 12 })] })
    // A new cycle prices from zero again.
    expect(text((await meter(customer.id, "UNIT", unit.id, "1")).arrearCharge)).toBe("1")
  })

  it("debits ARREAR charges from the wallet at once with walletFundedArrear, and invoices nothing for them", async () => {
    const unit = await makeUnit(api, { flatPrice: 3 })
    const plan = await makePlan(app, acme, [
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ], { walletFundedArrear: true })
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    const result = await meter(customer.id, "UNIT", unit.id, "2", { usageLogId: "ulg_test_1" })
    expect(text(result.walletBalance)).toBe("-1")
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.at(-1)).toMatchObject({ type: "USAGE_LOG", delta: -6, balanceAfter: -1, usageLogId: "ulg_test_1" })
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => i.kind)).toEqual(["PLAN", "PLAN"])
    expect((await balances(customer.id)).wallet.balance).toBe(4)
  })

  it("bills a credit covered only by a composite through the composite, and carries composite debt into the next grant", async () => {
    const credit = await makeCredit(api)
    const composite = await makeComposite(api, 2, [credit.id])
    const plan = await makePlan(app, acme, [{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    const covered = await meter(customer.id, "CREDIT", credit.id, "5", { customerCost: "1" })
    expect(covered.billingMode).toBe("COMPOSITE")
    const current = await app.run(Effect.flatMap(Metering, (metering) => metering.currentPurchase(acme.organizationId, customer.id)))
    expect(current._tag).toBe("Some")
    if (current._tag === "Some") {
      expect(current.value.id).toBe(purchase.id)
      expect(planCoverage(current.value.snapshot, "CREDIT", credit.id)).toBe("COMPOSITE")
      expect(planCoverage(current.value.snapshot, "CREDIT", "credit_other")).toBe("NONE")
    }

    for (let i = 0; i < 3; i++) await meter(customer.id, "COMPOSITE", composite.id, "1")
    expect((await balances(customer.id)).composites[0]).toMatchObject({ granted: 2, used: 3, remaining: -1, originalGranted: 2 })
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    expect((await balances(customer.id)).composites[0]).toMatchObject({ granted: 1, used: 0, remaining: 1, originalGranted: 2 })
  })
})

describe("Metering.debitWallet", () => {
  it("debits the provider cost without a plan, below zero, with the usage row on the ledger", async () => {
    const customer = await makeCustomer(api)
    const result = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const metering = yield* Metering
      return yield* metering.debitWallet(acme.organizationId, customer.id, d("0.000123456789"), { usageLogId: "ulg_w" })
        .pipe(sql.withTransaction)
    }))
    expect(text(result.balance)).toBe("-0.000123456789")
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries).toEqual([expect.objectContaining({ type: "USAGE_LOG", usageLogId: "ulg_w", delta: -0.000123456789 })])
  })
})

describe.skipIf(!usesRealPostgres)("parallel metering (needs real PostgreSQL)", () => {
  it("lets exactly the allowance through when 20 signals race for 10 credits", async () => {
    const credit = await makeCredit(api)
    const plan = await makePlan(app, acme, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const exits = await Promise.all(
      Array.from({ length: 20 }, () => meterExit(customer.id, "CREDIT", credit.id, "1", { customerCost: "0.0125" }))
    )
    expect(exits.filter(Exit.isSuccess)).toHaveLength(10)
    expect((await balances(customer.id)).credits[0]).toMatchObject({ used: 10, remaining: 0 })
  })
})
