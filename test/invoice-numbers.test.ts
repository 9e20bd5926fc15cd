/**
 * Invoice numbers (issue 27, docs/billing.md "Invoice numbers"): every
 * finalised invoice gets the next number of its organisation, gap-free, in
 * the transaction that finalises it; a DRAFT has none until then; the prefix
 * is an organisation setting (API and CLI). On real PostgreSQL, purchases,
 * refused purchases, cycle renewals in several lanes and draft finalisations
 * all at once still number 1..n without a gap or a duplicate.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { finalizeDue } from "../src/billing/DraftInvoices.ts"
import { renewDue } from "../src/billing/CycleJob.ts"
import { cycleStart } from "../src/billing/Cycle.ts"
import { buy, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, ownTestApp, runCycles } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

/** The organisation's invoices as the database holds them, by number. */
const numbersOf = (test: TestApp, organizationId: string) =>
  test.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string; status: string; sequenceNumber: string | null; number: string | null }>`
      SELECT id, status, sequence_number, number FROM invoices WHERE organization_id = ${organizationId}
      ORDER BY sequence_number NULLS LAST, id`))

const counterOf = (test: TestApp, organizationId: string) =>
  test.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ lastNumber: string }>`SELECT last_number FROM invoice_counters WHERE organization_id = ${organizationId}`))

/** Numbers 1..n, each once, every final invoice numbered, every DRAFT not; the counter at n. */
const expectGapFree = async (test: TestApp, organizationId: string, prefix = "INV-") => {
  const rows = await numbersOf(test, organizationId)
  const final = rows.filter((row) => row.status !== "DRAFT")
  expect(final.map((row) => Number(row.sequenceNumber))).toEqual(final.map((_, index) => index + 1))
  for (const row of final) expect(row.number).toBe(`${prefix}${String(row.sequenceNumber).padStart(6, "0")}`)
  expect(rows.filter((row) => row.status === "DRAFT").every((row) => row.number === null && row.sequenceNumber === null)).toBe(true)
  const [counter] = await counterOf(test, organizationId)
  expect(Number(counter?.lastNumber ?? 0)).toBe(final.length)
  return final.length
}

describe("invoice numbers", () => {
  it("number each organisation's invoices from INV-000001, shown by the API and the CLI", async () => {
    const tenant = await app.tenant("Numbers")
    const other = await app.tenant("Numbers elsewhere")
    const api = clientOf(app, tenant)
    const otherApi = clientOf(app, other)
    const plan = await makePlan(app, tenant, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }], { priceAdjustment: 5 })
    const otherPlan = await makePlan(app, other, [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }])
    const numbers: Array<string> = []
    for (let i = 0; i < 3; i++) {
      const customer = await makeCustomer(api)
      await buy(api, customer.id, plan.id)
      const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
      numbers.push(invoice.number)
      expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice.number).toBe(invoice.number)
    }
    expect(numbers).toEqual(["INV-000001", "INV-000002", "INV-000003"])
    // Another organisation counts on its own.
    const stranger = await makeCustomer(otherApi)
    await buy(otherApi, stranger.id, otherPlan.id)
    expect(ok(await otherApi.get(`/invoices?customerId=${stranger.id}`)).invoices[0].number).toBe("INV-000001")
    await expectGapFree(app, tenant.organizationId)

    const org = ["--org", tenant.organizationId]
    const listed = await app.cli(["invoice", "list", "--oldest", "--json", ...org])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.json.invoices.map((invoice: any) => invoice.number)).toEqual(numbers)
    const shown = await app.cli(["invoice", "show", listed.json.invoices[1].id, ...org])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/number\s+INV-000002/)
    const table = await app.cli(["invoice", "list", ...org])
    expect(table.stdout).toMatch(/^NUMBER\s+ID\s/m)
    expect(table.stdout).toContain("INV-000003")
  })

  it("number the invoices a renewal batch issues in the order it created them", async () => {
    const { api, app: own, tenant } = await ownTestApp("Batch order")
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(own, tenant, [
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
    ])
    const customers = []
    for (let i = 0; i < 3; i++) customers.push(await makeCustomer(api))
    const purchases = []
    for (const customer of customers) purchases.push(await buy(api, customer.id, plan.id))
    for (const customer of customers) ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 1 }), 202)
    await drain(own)
    // The purchases' first PLAN invoices took 1..3. One run of the cycle job renews all three in one
    // transaction: each renewal issues its ended cycle's USAGE invoice, then the next cycle's PLAN invoice.
    const end = Math.max(...purchases.map((p: any) => cycleStart(new Date(p.billingDate), 1).getTime()))
    await runCycles(own, new Date(end + 1000))
    const renewed = (await numbersOf(own, tenant.organizationId)).filter((row) => Number(row.sequenceNumber) > 3)
    expect(renewed).toHaveLength(6)
    // Numbered in creation order (ids are time-ordered): 4..9 when read by id.
    const byId = [...renewed].sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(byId.map((row) => Number(row.sequenceNumber))).toEqual([4, 5, 6, 7, 8, 9])
    const kinds = async (customerId: string) =>
      ok(await api.get(`/invoices?customerId=${customerId}`)).invoices
        .filter((invoice: any) => invoice.number !== null && Number(invoice.number.slice(4)) > 3)
        .sort((a: any, b: any) => (a.number < b.number ? -1 : 1))
        .map((invoice: any) => invoice.kind)
    for (const customer of customers) expect(await kinds(customer.id)).toEqual(["USAGE", "PLAN"])
    await expectGapFree(own, tenant.organizationId)
  })

  it("number a free invoice (issued PAID) like any other", async () => {
    const tenant = await app.tenant("Free numbers")
    const api = clientOf(app, tenant)
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    expect(plan.cost).toBe(0)
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoice).toMatchObject({ status: "PAID", total: 0, number: "INV-000001" })
  })

  it("share one settings route pair with every other setting: GET/PATCH /organization/settings, and the CLI's one command", async () => {
    const tenant = await app.tenant("One settings route")
    const api = clientOf(app, tenant)
    const changed = ok(await api.patch("/organization/settings", {
      invoiceNumberPrefix: "ONE-",
      rateLimits: { reads: { perSecond: 500, burst: 1000 } },
      paymentInstructions: "IBAN FR76 0000"
    }))
    expect(changed).toMatchObject({
      updated: true,
      organization: {
        id: tenant.organizationId,
        invoiceNumberPrefix: "ONE-",
        paymentInstructions: "IBAN FR76 0000",
        rateLimits: { reads: { perSecond: 500, burst: 1000, source: "ORGANIZATION" } }
      }
    })
    const read = ok(await api.get("/organization/settings")).organization
    expect(read).toEqual(changed.organization)
    // null clears the payment instructions, as "" does.
    expect(ok(await api.patch("/organization/settings", { paymentInstructions: null })).organization.paymentInstructions).toBeNull()
    // The CLI's settings command shows the same settings, every flag on one command.
    const cli = await app.cli([
      "org", "settings", "--invoice-number-prefix", "TWO-", "--rate-limit-reads", "default", "--json", "--org", tenant.organizationId
    ])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json.organization).toMatchObject({
      invoiceNumberPrefix: "TWO-",
      rateLimits: { reads: { source: "DEFAULT" } }
    })
    const after = ok(await api.get("/organization/settings")).organization
    expect(Object.keys(cli.json.organization).sort()).toEqual(Object.keys(after).sort())
    // No second route: /organization is no route at all.
    expectError(await api.get("/organization"), 404, "route_not_found")
  })

  it("leave a DRAFT unnumbered until the cycle job finalises it; a new prefix (API or CLI) applies from then on", async () => {
    const { api, app: own, tenant } = await ownTestApp("Drafts")
    ok(await api.patch("/organization/settings", { invoiceGraceHours: 24 }))
    const unit = await makeUnit(api, { flatPrice: 2 })
    const plan = await makePlan(own, tenant, [
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 5 }
    ])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 3 }), 202)
    await drain(own)
    const end = cycleStart(new Date(purchase.billingDate), 1)
    await runCycles(own, new Date(end.getTime() + 1000))
    const afterEnd = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    const draft = afterEnd.find((invoice: any) => invoice.kind === "USAGE")
    expect(draft).toMatchObject({ status: "DRAFT", number: null, total: 6 })
    expect(afterEnd.filter((invoice: any) => invoice.kind === "PLAN").map((invoice: any) => invoice.number)).toEqual(["INV-000001", "INV-000002"])

    // A bad prefix is refused by both doors and changes nothing.
    expectError(await api.patch("/organization/settings", { invoiceNumberPrefix: "INV 2026" }), 400, "invalid_organization_settings")
    const refused = await own.cli(["org", "settings", "--invoice-number-prefix", "x".repeat(21), "--org", tenant.organizationId])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/invoice number prefix must be 0 to 20 characters/)
    expect(ok(await api.get("/organization/settings")).organization.invoiceNumberPrefix).toBe("INV-")

    const changed = ok(await api.patch("/organization/settings", { invoiceNumberPrefix: "ACME-2026/" }))
    expect(changed).toMatchObject({ updated: true, organization: { invoiceNumberPrefix: "ACME-2026/", invoiceGraceHours: 24 } })
    await runCycles(own, new Date(end.getTime() + 25 * 3_600_000))
    const finalised = ok(await api.get(`/invoices/${draft.id}`)).invoice
    expect(finalised).toMatchObject({ status: "OPEN", number: "ACME-2026/000003" })
    // Numbers already given never change.
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.map((invoice: any) => invoice.number).sort())
      .toEqual(["ACME-2026/000003", "INV-000001", "INV-000002"])

    const set = await own.cli(["org", "settings", "--invoice-number-prefix", "", "--json", "--org", tenant.organizationId])
    expect(set.code, set.stderr).toBe(0)
    expect(set.json.organization.invoiceNumberPrefix).toBe("")
    await runCycles(own, new Date(cycleStart(new Date(purchase.billingDate), 2).getTime() + 1000))
    const third = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices.filter((i: any) => i.kind === "PLAN")
    expect(third.map((invoice: any) => invoice.number)).toContain("000004")
  })
})

describe.skipIf(!usesRealPostgres)("invoice numbers under concurrency (needs real PostgreSQL)", () => {
  it("purchases, refused purchases, renewals in four lanes and draft finalisations at once: 1..n, no gap, no duplicate", async () => {
    const { api, app: own, tenant } = await ownTestApp("Concurrent numbers")
    ok(await api.patch("/organization/settings", { invoiceGraceHours: 1 }))
    const unit = await makeUnit(api, { flatPrice: 0.5 })
    const plan = await makePlan(own, tenant, [
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 3 }
    ], { priceAdjustment: 2 })
    const customers = await Promise.all(Array.from({ length: 24 }, () => makeCustomer(api)))
    // Every customer buys at once, and a third of them twice: the second is refused (409) in the
    // statement that took its invoice's number, which goes back to the counter.
    const attempts = await Promise.all(customers.flatMap((customer, index) =>
      (index % 3 === 0 ? [0, 1] : [0]).map(() => api.post("/purchases", { customerId: customer.id, planId: plan.id }))
    ))
    expect(attempts.filter((answer) => answer.status === 201)).toHaveLength(24)
    expect(attempts.filter((answer) => answer.status === 409)).toHaveLength(8)
    expect(await expectGapFree(own, tenant.organizationId)).toBe(24)
    const purchases = attempts.filter((answer) => answer.status === 201).map((answer) => answer.body.result.purchase)
    await Promise.all(customers.map((customer) =>
      api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 2 })
    ))
    await drain(own)

    // The cycle end: four lanes of small batches renew the purchases (24 PLAN invoices numbered, 24 USAGE drafts
    // not), while four cancellations end theirs (each a final USAGE invoice, numbered).
    const end = new Date(Math.max(...purchases.map((p: any) => cycleStart(new Date(p.billingDate), 1).getTime())) + 1000)
    const lanes = own.run(Effect.all(
      Array.from({ length: 4 }, () =>
        Effect.iterate(-1, { while: (last) => last !== 0, body: () => renewDue(end, 3) })),
      { concurrency: "unbounded" }
    ))
    await Promise.all([lanes])
    const afterRenewals = await expectGapFree(own, tenant.organizationId)
    expect(afterRenewals).toBe(48)

    // Past the grace period: four lanes finalise the drafts two at a time while purchases are cancelled.
    const later = new Date(end.getTime() + 2 * 3_600_000)
    const finalising = own.run(Effect.all(
      Array.from({ length: 4 }, () => Effect.iterate(-1, { while: (last) => last !== 0, body: () => finalizeDue(later, 2) })),
      { concurrency: "unbounded" }
    ))
    const cancelling = Promise.all(purchases.slice(0, 4).map((p: any) => api.post(`/purchases/${p.id}/cancel`)))
    await Promise.all([finalising, cancelling])
    const total = await expectGapFree(own, tenant.organizationId)
    const rows = await numbersOf(own, tenant.organizationId)
    expect(rows.filter((row) => row.status === "DRAFT")).toEqual([])
    expect(total).toBe(rows.length)
    expect(total).toBeGreaterThanOrEqual(72)
  })
})
