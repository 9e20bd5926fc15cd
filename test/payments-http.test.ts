/**
 * Recording a payment over HTTP (`POST /invoices/{id}/payments`, issue 27 item 3)
 * and by the CLI (`billing invoice pay`), one service underneath (`Invoices.pay`):
 * the invoice becomes PAID, an idempotency key makes a retry safe, a key reused
 * for another request is 422 and writes nothing, a refused payment never uses up
 * its key.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

/** An organisation with `count` customers, each with one OPEN plan invoice of 10 USD. */
const openInvoices = async (count: number) => {
  const tenant: Tenant = await app.tenant("Payer")
  const api = clientOf(app, tenant)
  const unit = await makeUnit(api, { flatPrice: 10 })
  const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
  const invoices: Array<any> = []
  for (let i = 0; i < count; i++) {
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    invoices.push(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices[0])
  }
  return { tenant, api, invoices }
}

const paymentRows = (tenant: Tenant) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string; invoiceId: string; reference: string | null }>`
      SELECT id, invoice_id, reference FROM payments WHERE organization_id = ${tenant.organizationId} ORDER BY id`))

const pay = (api: Client, invoiceId: string, body: Record<string, unknown>) => api.post(`/invoices/${invoiceId}/payments`, body)

describe("POST /invoices/{id}/payments", () => {
  it("records a payment of the whole total; the invoice becomes PAID", async () => {
    const { tenant, api, invoices: [invoice] } = await openInvoices(1)
    expect(invoice.status).toBe("OPEN")
    const response = await pay(api, invoice.id, { reference: "bank-42" })
    expect(response.body.statusDetail.message).toBe("Payment recorded")
    const paid = ok(response, 201)
    expect(paid).toEqual({
      replayed: false,
      payment: {
        id: expect.stringMatching(/^pay_/),
        invoiceId: invoice.id,
        customerId: invoice.customerId,
        amount: 10,
        method: "MANUAL",
        reference: "bank-42",
        createdAt: expect.any(String)
      },
      invoice: { ...invoice, status: "PAID", paidAt: expect.any(String), amountDue: 0 }
    })
    expect(ok(await api.get(`/payments/${paid.payment.id}`)).payment).toEqual(paid.payment)
    expect(ok(await api.get(`/payments?customerId=${invoice.customerId}`)).payments).toEqual([paid.payment])
    // Without a key, paying again is a clash with the invoice's state.
    expectError(await pay(api, invoice.id, {}), 409, "invoice_not_open")
    expect(await paymentRows(tenant)).toHaveLength(1)
  })

  it("answers a keyed repeat with the first payment and records nothing again", async () => {
    const { tenant, api, invoices: [invoice, other] } = await openInvoices(2)
    const first = ok(await pay(api, invoice.id, { reference: "r-1", idempotencyKey: "pay-1" }), 201)
    const again = await pay(api, invoice.id, { reference: "r-1", idempotencyKey: "pay-1" })
    expect(again.body.statusDetail.message).toMatch(/^Already processed/)
    expect(ok(again, 201)).toEqual({ ...first, replayed: true })

    // The same key for another request: 422, nothing written, the other invoice stays OPEN.
    expectError(await pay(api, invoice.id, { reference: "r-2", idempotencyKey: "pay-1" }), 422, "idempotency_key_reused")
    expectError(await pay(api, other.id, { reference: "r-1", idempotencyKey: "pay-1" }), 422, "idempotency_key_reused")
    expect(ok(await api.get(`/invoices/${other.id}`)).invoice.status).toBe("OPEN")
    expect((await paymentRows(tenant)).map((row) => row.invoiceId)).toEqual([invoice.id])

    // The CLI records through the same service: the key the API used is a replay there too.
    const cli = await app.cli([
      "invoice", "pay", invoice.id, "--reference", "r-1", "--idempotency-key", "pay-1", "--json", "--org", tenant.organizationId
    ])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json).toMatchObject({ replayed: true, payment: { id: first.payment.id }, invoice: { id: invoice.id, status: "PAID" } })
    const reused = await app.cli([
      "invoice", "pay", other.id, "--idempotency-key", "pay-1", "--json", "--org", tenant.organizationId
    ])
    expect(reused.code).not.toBe(0)
    expect(await paymentRows(tenant)).toHaveLength(1)
  })

  it("never uses up a key on a refused payment", async () => {
    const { tenant, api, invoices: [invoice, other] } = await openInvoices(2)
    ok(await pay(api, invoice.id, {}), 201)
    // Refused (the invoice is PAID): the key stays free...
    expectError(await pay(api, invoice.id, { idempotencyKey: "k" }), 409, "invoice_not_open")
    // ... for the request that succeeds.
    const paid = ok(await pay(api, other.id, { idempotencyKey: "k" }), 201)
    expect(paid).toMatchObject({ replayed: false, invoice: { id: other.id, status: "PAID" } })
    expect(await paymentRows(tenant)).toHaveLength(2)
  })

  it("records one payment for identical keyed requests sent together", async () => {
    const { tenant, api, invoices: [invoice] } = await openInvoices(1)
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => pay(api, invoice.id, { reference: "same", idempotencyKey: "together" }))
    )
    const results = answers.map((answer) => ok(answer, 201))
    expect(new Set(results.map((result) => result.payment.id)).size).toBe(1)
    expect(results.filter((result) => !result.replayed)).toHaveLength(1)
    expect(await paymentRows(tenant)).toHaveLength(1)
  })

  it("refuses bad bodies (400), unknown and other organisations' invoices (404), writing nothing", async () => {
    const { tenant, api, invoices: [invoice] } = await openInvoices(1)
    for (
      const body of [
        { reference: "" },
        { reference: "x".repeat(501) },
        { idempotencyKey: "" },
        { idempotencyKey: "k".repeat(256) },
        { amount: 10 },
        { reference: 42 }
      ]
    ) {
      expectError(await pay(api, invoice.id, body), 400, "validation_failed")
    }
    expectError(await pay(api, "inv_nope", {}), 404, "invoice_not_found")
    const other = clientOf(app, await app.tenant("Other"))
    expectError(await pay(other, invoice.id, {}), 404, "invoice_not_found")
    expect(await paymentRows(tenant)).toEqual([])
    expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice.status).toBe("OPEN")
  })
})
