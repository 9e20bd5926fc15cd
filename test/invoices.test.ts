import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { buy, type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
/** An organisation that only looks: it never creates anything, so every test may read it empty. */
let otherApi: Client

beforeAll(async () => {
  app = await startTestApp()
  otherApi = clientOf(app, await app.tenant("Other"))
})
afterAll(() => app.close())

/** Taxes apply to every invoice of an organisation, so each test has an organisation of its own. */
const newTenant = async (name = "Acme") => {
  const tenant: Tenant = await app.tenant(name)
  return { tenant, api: clientOf(app, tenant) }
}

/** VAT 20% and City 2.5%: 22.5% in all, in two lines rounded each on its own. */
const withVatAndCity = async (api: Client) => {
  ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
  ok(await api.post("/taxes", { name: "City", ratePercent: 2.5 }), 201)
}

describe("taxes", () => {
  it("creates, reads, updates and lists taxes oldest first, archived included", async () => {
    const { api } = await newTenant()
    const vat = ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
    expect(vat).toEqual({
      created: true,
      tax: { id: expect.stringMatching(/^tax_/), name: "VAT", ratePercent: 20, active: true, createdAt: expect.any(String), updatedAt: expect.any(String) }
    })
    const city = ok(await api.post("/taxes", { name: "City", ratePercent: 2.5 }), 201).tax
    const old = ok(await api.post("/taxes", { name: "Old", ratePercent: 7 }), 201).tax
    const updated = ok(await api.patch(`/taxes/${old.id}`, { active: false }))
    expect(updated).toMatchObject({ updated: true, tax: { id: old.id, active: false, ratePercent: 7 } })
    expect(ok(await api.get(`/taxes/${city.id}`)).tax.name).toBe("City")
    expect(ok(await api.get("/taxes")).taxes.map((t: any) => t.name)).toEqual(["VAT", "City", "Old"])
    expect(ok(await api.get("/taxes?active=true")).taxes.map((t: any) => t.name)).toEqual(["VAT", "City"])
  })

  it("creates and lists taxes from the CLI", async () => {
    const tenant = await app.tenant("Tax CLI")
    const org = ["--json", "--org", tenant.organizationId]
    const created = await app.cli(["tax", "create", "--name", "GST", "--rate", "10", ...org])
    expect(created.code, created.stderr).toBe(0)
    expect(created.json.tax).toMatchObject({ name: "GST", ratePercent: 10, active: true })
    const listed = await app.cli(["tax", "list", "--active", ...org])
    expect(listed.json.taxes.map((t: any) => t.name)).toEqual(["GST"])
  })

  it.each([
    [{ name: "T", ratePercent: 101 }, "invalid_tax_rate"],
    [{ name: "T", ratePercent: -1 }, "invalid_tax_rate"],
    [{ ratePercent: 5 }, "validation_failed"],
    [{ name: "", ratePercent: 5 }, "validation_failed"],
    [{ name: "T", ratePercent: "5" }, "validation_failed"],
    [{ name: "T", ratePercent: 5, country: "PT" }, "validation_failed"]
  ])("refuses %j with 400 %s", async (body, code) => {
    const { api } = await newTenant()
    expectError(await api.post("/taxes", body), 400, code as ErrorCode)
    expect(ok(await api.get("/taxes")).taxes).toEqual([])
  })

  it("answers 404 for unknown and other organisations' taxes, 400 for a bad update", async () => {
    const { api } = await newTenant()
    const tax = ok(await api.post("/taxes", { name: "Mine", ratePercent: 1 }), 201).tax
    expectError(await otherApi.get(`/taxes/${tax.id}`), 404, "tax_not_found")
    expectError(await otherApi.patch(`/taxes/${tax.id}`, { active: false }), 404, "tax_not_found")
    expectError(await api.get("/taxes/tax_nope"), 404, "tax_not_found")
    expectError(await api.patch(`/taxes/${tax.id}`, { ratePercent: 150 }), 400, "invalid_tax_rate")
    expectError(await api.get("/taxes?active=maybe"), 400, "validation_failed")
    expect(ok(await otherApi.get("/taxes")).taxes).toEqual([])
    ok(await api.patch(`/taxes/${tax.id}`, { active: false }))
  })
})

describe("invoices and payments", () => {
  it("adds cent-rounded tax lines to an invoice issued after the taxes exist, and totals to the cent", async () => {
    const { tenant: acme, api } = await newTenant()
    await withVatAndCity(api)
    const unit = await makeUnit(api, { flatPrice: 4.115 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 3 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    // 3 * 4.115 = 12.345 -> 12.35; VAT 2.47; City 0.30875 -> 0.31
    expect(invoice).toMatchObject({ subtotal: 12.35, taxTotal: 2.78, total: 15.13, totalCents: 1513, status: "OPEN", currencyCode: "USD" })
    // Each line bills the invoice's own period.
    expect(invoice.lines).toEqual([{
      description: expect.any(String),
      componentId: expect.any(String),
      quantity: 3,
      unitPrice: null,
      amount: 12.345,
      periodStart: invoice.periodStart,
      periodEnd: invoice.periodEnd
    }])
    expect(invoice.taxLines.map((t: any) => [t.name, t.ratePercent, t.amount])).toEqual([["VAT", 20, 2.47], ["City", 2.5, 0.31]])
    expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice).toEqual(invoice)

    // A tax created afterwards leaves the issued invoice alone.
    ok(await api.post("/taxes", { name: "Late", ratePercent: 50 }), 201)
    expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice.total).toBe(15.13)
  })

  it("mints pay links for OPEN invoices only; an operator payment makes it PAID", async () => {
    const { tenant: acme, api } = await newTenant()
    const unit = await makeUnit(api, { flatPrice: 10 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    const link = ok(await api.post(`/invoices/${invoice.id}/pay-link`))
    expect(link).toEqual({ invoiceId: invoice.id, url: expect.stringContaining(`/pay/${invoice.id}?`), expiresAt: expect.any(String) })
    expect(new Date(link.expiresAt).getTime()).toBeGreaterThan(Date.now())
    expectError(await otherApi.post(`/invoices/${invoice.id}/pay-link`), 404, "invoice_not_found")

    const paid = await app.cli(["invoice", "pay", invoice.id, "--reference", "bank-42", "--json", "--org", acme.organizationId])
    expect(paid.code, paid.stderr).toBe(0)
    expect(paid.json.invoice).toMatchObject({ id: invoice.id, status: "PAID", total: invoice.total })

    expectError(await api.post(`/invoices/${invoice.id}/pay-link`), 409, "invoice_not_open")
    const payments = ok(await api.get(`/payments?customerId=${customer.id}`)).payments
    expect(payments).toEqual([{
      id: expect.stringMatching(/^pay_/),
      invoiceId: invoice.id,
      customerId: customer.id,
      amount: invoice.total,
      method: "MANUAL",
      reference: "bank-42",
      createdAt: expect.any(String)
    }])
    expect(ok(await api.get(`/payments/${payments[0].id}`)).payment).toEqual(payments[0])
    expectError(await otherApi.get(`/payments/${payments[0].id}`), 404, "payment_not_found")
    expect(ok(await otherApi.get("/payments")).payments).toEqual([])

    const again = await app.cli(["invoice", "void", invoice.id, "--json", "--org", acme.organizationId])
    expect(again.code).not.toBe(0)
    expect(again.stderr).toContain("PAID")
  })

  it("pays renewal invoices from the wallet when the purchase has auto-payment on", async () => {
    const { tenant: acme, api } = await newTenant()
    await withVatAndCity(api)
    const plan = await makePlan(app, acme, [{ type: "WALLET", billingMode: "ADVANCE", amount: 50 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    ok(await api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    // 50 + 22.5% taxes = 61.25, paid from the 100 in the wallet.
    expect(invoices.map((i: any) => [i.status, i.total])).toEqual([["OPEN", 61.25], ["PAID", 61.25]])
    const payments = ok(await api.get(`/payments?customerId=${customer.id}`)).payments
    expect(payments).toMatchObject([{ invoiceId: invoices[1].id, method: "WALLET", amount: 61.25 }])
    const ledger = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.at(-1)).toMatchObject({ type: "INVOICE_PAYMENT", delta: -61.25, invoiceId: invoices[1].id, balanceAfter: 38.75 })
  })

  it("lists invoices with pagination and hides other organisations'", async () => {
    const { tenant: acme, api } = await newTenant()
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    for (let i = 0; i < 3; i++) await buy(api, (await makeCustomer(api)).id, plan.id)
    const all = ok(await api.get("/invoices")).invoices
    expect(all).toHaveLength(3)
    const first = ok(await api.get("/invoices?limit=1")).invoices
    expect(first).toHaveLength(1)
    const rest = ok(await api.get(`/invoices?cursor=${first[0].id}`)).invoices
    expect([...first, ...rest].map((i: any) => i.id)).toEqual(all.map((i: any) => i.id))
    expectError(await otherApi.get(`/invoices/${first[0].id}`), 404, "invoice_not_found")
    expect(ok(await otherApi.get("/invoices")).invoices).toEqual([])
    expectError(await api.get("/invoices/inv_nope"), 404, "invoice_not_found")
    expectError(await api.get("/invoices?limit=0"), 400, "validation_failed")
    expectError(await app.request("GET", "/invoices"), 401, "api_key_refused")
  })
})
