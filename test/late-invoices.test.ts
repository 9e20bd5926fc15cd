/**
 * Issue 22, invoices: every ended cycle recorded (`purchase_cycles`,
 * `cycle_balances`), the grace period with DRAFT usage invoices (never
 * payable, refreshed from the cycle's rows, finalised by the cycle job), and
 * late usage of a FINAL cycle billed on the customer's next USAGE invoice as
 * lines of their own, the finalised invoice left byte for byte as it was.
 *
 * ARREAR usage goes in through the doors (POST /signal/unit, then the worker);
 * the cycle job runs at chosen instants (`billing cycle run --now`). Late usage
 * of an ended cycle is written to its `cycle_balances` row directly where a
 * test is about the invoices, not the intake (test/usage-in-time-*.test.ts
 * send it as timestamped signals).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { refreshDrafts } from "../src/billing/DraftInvoices.ts"
import { buy, type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { portalTokenOf } from "./portal-fixtures.ts"
import { drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const HOUR = 3_600_000

/** A tenant of its own with `graceHours`, set through the CLI, and a plan: 10 prepaid units (no rollover), ARREAR units at 2. */
const world = async (graceHours: number) => {
  const tenant = await app.tenant("Late")
  const api = clientOf(app, tenant)
  // Payment terms of a year: no invoice falls overdue (docs/billing.md "Due dates and overdue") while these
  // tests hold a finalised invoice unchanged, byte for byte, a cycle later.
  const settings = await app.cli([
    "org", "settings", "--invoice-grace-hours", String(graceHours), "--payment-terms-days", "365", "--org", tenant.organizationId, "--json"
  ])
  expect(settings.code, settings.stderr).toBe(0)
  expect(settings.json.organization.invoiceGraceHours).toBe(graceHours)
  const unit = await makeUnit(api, { flatPrice: 2 })
  const plan = await makePlan(app, tenant, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10, rollover: false },
    { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
  ])
  return { tenant, api, unit, plan }
}

type World = Awaited<ReturnType<typeof world>>

/** A customer on the plan; `units` sent as a signal and priced by the worker (10 prepaid first, the rest at 2). */
const customerUsing = async (w: World, units: number) => {
  const customer = await makeCustomer(w.api)
  const purchase = await buy(w.api, customer.id, w.plan.id)
  if (units > 0) await send(w, customer.id, units)
  return { customer, purchase, end: new Date(purchase.currentPeriodEnd) }
}

const send = async (w: World, customerId: string, quantity: number) => {
  const sent = await w.api.post("/signal/unit", { customerId, agentKey: w.unit.agentKey, quantity })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
}

const cycleRun = async (now: Date) => {
  const result = await app.cli(["cycle", "run", "--now", now.toISOString(), "--json"])
  expect(result.code, result.stderr).toBe(0)
  return result.json.handled as number
}

const invoicesOf = async (api: Client, customerId: string) =>
  ok(await api.get(`/invoices?customerId=${customerId}&limit=200`)).invoices as Array<any>

const usageInvoices = async (api: Client, customerId: string) =>
  (await invoicesOf(api, customerId)).filter((invoice) => invoice.kind === "USAGE")

const cyclesOf = (tenant: Tenant, purchaseId: string) =>
  query<any>(
    app,
    `SELECT cycle_index, status, usage_invoice_id, period_start, period_end, finalize_at FROM purchase_cycles
     WHERE organization_id = $1 AND purchase_id = $2 ORDER BY cycle_index`,
    [tenant.organizationId, purchaseId]
  )

const cycleBalancesOf = (tenant: Tenant, purchaseId: string, cycleIndex: number) =>
  query<any>(
    app,
    `SELECT billing_mode, granted::text, used::text, remaining::text, cycle_quantity::text, arrear_amount::text,
            invoiced_arrear::text
     FROM cycle_balances WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = $3
     ORDER BY billing_mode`,
    [tenant.organizationId, purchaseId, cycleIndex]
  )

/**
 * Late ARREAR usage of an ended cycle (`units` at 2; negative: a reversal), as
 * the worker's closed-cycle pricing leaves the cycle's row: this file tests the
 * invoices, test/usage-in-time-*.test.ts the pricing.
 */
const addLateArrear = (tenant: Tenant, purchaseId: string, cycleIndex: number, units: number) =>
  query(
    app,
    `UPDATE cycle_balances SET arrear_amount = arrear_amount + $4::numeric, cycle_quantity = cycle_quantity + $5::numeric,
       used = used + $5::numeric
     WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = $3 AND billing_mode = 'ARREAR'`,
    [tenant.organizationId, purchaseId, cycleIndex, String(units * 2), String(units)]
  )

/**
 * ARREAR usage of a purchase's current cycle after its first: a signal sent now
 * belongs to cycle 0 (the cycle job ran at a later chosen instant), so the
 * later cycle's row is written as the worker's on-time pricing leaves it.
 */
const addCurrentArrear = (tenant: Tenant, purchaseId: string, units: number) =>
  query(
    app,
    `UPDATE purchase_balances SET arrear_amount = arrear_amount + $3::numeric, cycle_quantity = cycle_quantity + $4::numeric,
       used = used + $4::numeric
     WHERE organization_id = $1 AND purchase_id = $2 AND billing_mode = 'ARREAR'`,
    [tenant.organizationId, purchaseId, String(units * 2), String(units)]
  )

/** An invoice's rows as stored: the invoices row and its lines, every column as text. */
const storedRows = (tenant: Tenant, invoiceId: string) =>
  query<any>(
    app,
    `SELECT (SELECT row_to_json(i)::text FROM invoices i WHERE i.organization_id = $1 AND i.id = $2) AS invoice,
            (SELECT json_agg(l ORDER BY l.position)::text FROM invoice_lines l
              WHERE l.organization_id = $1 AND l.invoice_id = $2) AS lines`,
    [tenant.organizationId, invoiceId]
  )

const refresh = (tenant: Tenant, purchaseId: string, cycleIndex: number) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    refreshDrafts(sql, [{ organizationId: tenant.organizationId, purchaseId, cycleIndex }]).pipe(sql.withTransaction)))

const iso = (value: unknown) => new Date(value as string).toISOString()

describe("the cycle end records the ended cycle", () => {
  it("grace 0: the USAGE invoice is OPEN as today, the cycle FINAL with its charges invoiced and what expired", async () => {
    const w = await world(0)
    // 14 units: 10 prepaid, 4 in arrears at 2 = 8.
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)

    const [usage] = await usageInvoices(w.api, customer.id)
    expect(usage).toMatchObject({ status: "OPEN", total: 8, periodStart: purchase.currentPeriodStart, periodEnd: end.toISOString() })
    // Every line bills a period: the invoice's own.
    expect(usage.lines).toEqual([expect.objectContaining({ amount: 8, periodStart: usage.periodStart, periodEnd: usage.periodEnd })])
    for (const invoice of await invoicesOf(w.api, customer.id)) {
      for (const line of invoice.lines) expect([line.periodStart, line.periodEnd]).toEqual([invoice.periodStart, invoice.periodEnd])
    }

    const cycles = await cyclesOf(w.tenant, purchase.id)
    expect(cycles).toHaveLength(1)
    expect(cycles[0]).toMatchObject({ cycleIndex: 0, status: "FINAL", usageInvoiceId: usage.id })
    expect([iso(cycles[0].periodStart), iso(cycles[0].periodEnd), iso(cycles[0].finalizeAt)])
      .toEqual([purchase.currentPeriodStart, end.toISOString(), end.toISOString()])
    // The prepaid row: 10 granted, 10 used, nothing expired. The ARREAR row: 8 charged and invoiced.
    expect(await cycleBalancesOf(w.tenant, purchase.id, 0)).toEqual([
      { billingMode: "ADVANCE", granted: "10", used: "10", remaining: "0", cycleQuantity: "10", arrearAmount: "0", invoicedArrear: "0" },
      { billingMode: "ARREAR", granted: "0", used: "4", remaining: "0", cycleQuantity: "4", arrearAmount: "8", invoicedArrear: "8" }
    ])
  })

  it("records the allowance that expired (no rollover) as what late usage may still draw", async () => {
    const w = await world(0)
    const { customer, purchase, end } = await customerUsing(w, 3)
    await cycleRun(end)
    // 3 of 10 used, no rollover: 7 expired; nothing in arrears, so no USAGE invoice.
    expect(await usageInvoices(w.api, customer.id)).toEqual([])
    expect((await cyclesOf(w.tenant, purchase.id))[0]).toMatchObject({ status: "FINAL", usageInvoiceId: null })
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[0]).toMatchObject({ billingMode: "ADVANCE", remaining: "7", used: "3" })
  })
})

describe("the grace period: DRAFT usage invoices", () => {
  it("issues the USAGE invoice DRAFT: no pay link, no payment, no void, not auto-paid, shown as a draft", async () => {
    const w = await world(48)
    const { customer, purchase, end } = await customerUsing(w, 14)
    ok(await w.api.patch(`/purchases/${purchase.id}`, { autoPayment: true }))
    ok(await w.api.post(`/customers/${customer.id}/wallet/adjust`, { delta: 100 }))
    await cycleRun(end)

    const [draft] = await usageInvoices(w.api, customer.id)
    expect(draft).toMatchObject({ status: "DRAFT", total: 8, paidAt: null })
    const cycle = (await cyclesOf(w.tenant, purchase.id))[0]
    expect(cycle).toMatchObject({ status: "DRAFT", usageInvoiceId: draft.id })
    expect(iso(cycle.finalizeAt)).toBe(new Date(end.getTime() + 48 * HOUR).toISOString())
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "8", invoicedArrear: "0" })

    // Never payable: no pay link, no payment recorded, not voided; the wallet paid the PLAN invoice only.
    expectError(await w.api.post(`/invoices/${draft.id}/pay-link`), 409, "invoice_not_open")
    const pay = await app.cli(["invoice", "pay", draft.id, "--org", w.tenant.organizationId, "--json"])
    expect(pay.code).not.toBe(0)
    expect(pay.stderr + pay.stdout).toMatch(/DRAFT/)
    const voided = await app.cli(["invoice", "void", draft.id, "--org", w.tenant.organizationId, "--json"])
    expect(voided.code).not.toBe(0)
    const ledger = ok(await w.api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(ledger.entries.filter((e: any) => e.invoiceId === draft.id)).toEqual([])
    expect(ok(await w.api.get(`/invoices/${draft.id}`)).invoice).toEqual(draft)

    // Listed and shown as a draft: a visible badge, no way to pay.
    const { url } = await portalTokenOf(w.api, customer.id)
    const portal = await (await fetch(url)).text()
    expect(portal).toContain(`<span class="badge DRAFT">Draft</span>`)
    const href = [...portal.matchAll(/href="(\/pay\/[^"]+)"/g)].map((m) => m[1]!.replaceAll("&amp;", "&"))
      .find((link) => link.includes(draft.id))
    expect(href).toBeDefined()
    const page = await (await fetch(`${new URL(url).origin}${href}`)).text()
    expect(page).toContain(`<span class="badge DRAFT">Draft</span>`)
    expect(page).toContain(`data-testid="invoice-draft"`)
    expect(page).not.toContain("How to pay")
    expect(page).not.toContain("Amount due")
  })

  it("refreshDrafts rebuilds a draft's lines and totals from the cycle's rows, with the taxes it was issued with", async () => {
    const w = await world(48)
    const vat = ok(await w.api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201).tax
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)
    const [draft] = await usageInvoices(w.api, customer.id)
    expect(draft).toMatchObject({ status: "DRAFT", subtotal: 8, taxTotal: 1.6, total: 9.6 })

    // The tax changes after the draft was issued: the draft keeps the rate it was issued with.
    ok(await w.api.patch(`/taxes/${vat.id}`, { ratePercent: 10 }))
    ok(await w.api.post("/taxes", { name: "City", ratePercent: 5 }), 201)
    await addLateArrear(w.tenant, purchase.id, 0, 2.25)
    await refresh(w.tenant, purchase.id, 0)
    const refreshed = ok(await w.api.get(`/invoices/${draft.id}`)).invoice
    expect(refreshed).toMatchObject({ status: "DRAFT", subtotal: 12.5, taxTotal: 2.5, total: 15, issuedAt: draft.issuedAt })
    expect(refreshed.lines).toEqual([expect.objectContaining({ quantity: 6.25, amount: 12.5, periodStart: draft.periodStart })])
    expect(refreshed.taxLines.map((t: any) => [t.name, t.ratePercent, t.amount])).toEqual([["VAT", 20, 2.5]])
  })

  it("refreshDrafts creates the draft of a DRAFT cycle that had no charges, and leaves FINAL cycles alone", async () => {
    const w = await world(24)
    const { customer, purchase, end } = await customerUsing(w, 2)
    await cycleRun(end)
    expect(await usageInvoices(w.api, customer.id)).toEqual([])
    expect((await cyclesOf(w.tenant, purchase.id))[0]).toMatchObject({ status: "DRAFT", usageInvoiceId: null })

    await addLateArrear(w.tenant, purchase.id, 0, 3)
    await refresh(w.tenant, purchase.id, 0)
    const [draft] = await usageInvoices(w.api, customer.id)
    expect(draft).toMatchObject({ status: "DRAFT", total: 6, periodStart: purchase.currentPeriodStart })
    expect((await cyclesOf(w.tenant, purchase.id))[0]).toMatchObject({ status: "DRAFT", usageInvoiceId: draft.id })

    // Finalised: OPEN (no auto-payment), the cycle FINAL, its charges invoiced.
    await cycleRun(new Date(end.getTime() + 24 * HOUR - 1))
    expect(ok(await w.api.get(`/invoices/${draft.id}`)).invoice.status).toBe("DRAFT")
    await cycleRun(new Date(end.getTime() + 24 * HOUR))
    const final = ok(await w.api.get(`/invoices/${draft.id}`)).invoice
    expect(final).toMatchObject({ status: "OPEN", total: 6 })
    expect((await cyclesOf(w.tenant, purchase.id))[0]).toMatchObject({ status: "FINAL" })
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "6", invoicedArrear: "6" })
    ok(await w.api.post(`/invoices/${draft.id}/pay-link`))

    // A FINAL cycle's draft is never touched again: more late usage waits for the next usage invoice.
    const before = await storedRows(w.tenant, draft.id)
    await addLateArrear(w.tenant, purchase.id, 0, 1)
    await refresh(w.tenant, purchase.id, 0)
    expect(await storedRows(w.tenant, draft.id)).toEqual(before)
  })

  it("the cycle job finalises due drafts: PAID from the wallet with auto-payment, else OPEN", async () => {
    const w = await world(48)
    const paying = await customerUsing(w, 14)
    ok(await w.api.patch(`/purchases/${paying.purchase.id}`, { autoPayment: true }))
    ok(await w.api.post(`/customers/${paying.customer.id}/wallet/adjust`, { delta: 100 }))
    const owing = await customerUsing(w, 13)
    await cycleRun(paying.end)
    await cycleRun(owing.end)
    const [paid] = await usageInvoices(w.api, paying.customer.id)
    const [open] = await usageInvoices(w.api, owing.customer.id)
    expect([paid.status, open.status]).toEqual(["DRAFT", "DRAFT"])
    const walletBefore = ok(await w.api.get(`/customers/${paying.customer.id}/balances`)).wallet.balance

    const due = new Date(Math.max(paying.end.getTime(), owing.end.getTime()) + 48 * HOUR)
    await cycleRun(due)
    const paidNow = ok(await w.api.get(`/invoices/${paid.id}`)).invoice
    expect(paidNow).toMatchObject({ status: "PAID", total: 8, paidAt: due.toISOString() })
    expect(ok(await w.api.get(`/customers/${paying.customer.id}/balances`)).wallet.balance).toBe(walletBefore - 8)
    const payments = ok(await w.api.get(`/payments?customerId=${paying.customer.id}`)).payments
    expect(payments.filter((p: any) => p.invoiceId === paid.id)).toEqual([expect.objectContaining({ method: "WALLET", amount: 8 })])
    expect(ok(await w.api.get(`/invoices/${open.id}`)).invoice).toMatchObject({ status: "OPEN", total: 6, paidAt: null })
    for (const p of [paying, owing]) {
      expect((await cyclesOf(w.tenant, p.purchase.id))[0]).toMatchObject({ status: "FINAL" })
    }
    // Nothing more to finalise: the same instant again does nothing to them.
    await cycleRun(due)
    expect(ok(await w.api.get(`/invoices/${paid.id}`)).invoice).toEqual(paidNow)
  })
})

describe("late usage of a FINAL cycle", () => {
  it("is billed on the next USAGE invoice as a line with its cycle's period; the finalised invoice is unchanged", async () => {
    const w = await world(0)
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)
    const [first] = await usageInvoices(w.api, customer.id)
    expect(first).toMatchObject({ status: "OPEN", total: 8 })
    const firstJson = JSON.stringify(ok(await w.api.get(`/invoices/${first.id}`)).invoice)
    const firstRows = await storedRows(w.tenant, first.id)

    // 3 more units of cycle 0 arrive late (6 at 2); cycle 1 charges nothing.
    await addLateArrear(w.tenant, purchase.id, 0, 3)
    const second = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
    await cycleRun(new Date(second.currentPeriodEnd))
    const usage = await usageInvoices(w.api, customer.id)
    expect(usage).toHaveLength(2)
    const late = usage.find((invoice) => invoice.id !== first.id)
    expect(late).toMatchObject({ status: "OPEN", total: 6, periodStart: second.currentPeriodStart })
    expect(late.lines).toEqual([{
      description: expect.stringMatching(/late usage/),
      componentId: expect.any(String),
      quantity: null,
      unitPrice: null,
      amount: 6,
      periodStart: purchase.currentPeriodStart,
      periodEnd: end.toISOString()
    }])
    expect(late.lines[0].description).toContain(purchase.currentPeriodStart.slice(0, 10))
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "14", invoicedArrear: "14" })
    const lineCycle = await query<any>(
      app,
      "SELECT cycle_index FROM invoice_lines WHERE organization_id = $1 AND invoice_id = $2 AND kind = 'LINE'",
      [w.tenant.organizationId, late.id]
    )
    expect(lineCycle).toEqual([{ cycleIndex: 0 }])

    // The finalised invoice: byte for byte as it was, in the API and in its rows.
    expect(JSON.stringify(ok(await w.api.get(`/invoices/${first.id}`)).invoice)).toBe(firstJson)
    expect(await storedRows(w.tenant, first.id)).toEqual(firstRows)

    // The CLI shows the late line's period.
    const shown = await app.cli(["invoice", "show", late.id, "--org", w.tenant.organizationId])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain(`period ${purchase.currentPeriodStart} to ${end.toISOString()}`)
    const json = await app.cli(["invoice", "show", late.id, "--org", w.tenant.organizationId, "--json"])
    expect(json.json.invoice.lines[0]).toMatchObject({ periodStart: purchase.currentPeriodStart, periodEnd: end.toISOString() })
    // And so does the hosted page, beside the line; the invoice's own lines show none.
    const link = ok(await w.api.post(`/invoices/${late.id}/pay-link`))
    const page = await (await fetch(link.url)).text()
    expect([...page.matchAll(/data-testid="line-period"/g)]).toHaveLength(1)
    expect(page).toContain("How to pay")
    const hosted = await (await fetch(ok(await w.api.post(`/invoices/${first.id}/pay-link`)).url)).text()
    expect(hosted).not.toContain(`data-testid="line-period"`)

    // Billed once: a further cycle end bills nothing more of it.
    const third = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
    await cycleRun(new Date(third.currentPeriodEnd))
    expect(await usageInvoices(w.api, customer.id)).toHaveLength(2)
  })

  it("a lower charge (a reversal) is a credit line; a cancellation issues it with the cycle's own usage", async () => {
    const w = await world(0)
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)
    const [first] = await usageInvoices(w.api, customer.id)
    const firstRows = await storedRows(w.tenant, first.id)
    await addLateArrear(w.tenant, purchase.id, 0, -1)

    // Cycle 1: 3 units in arrears = 6; then the purchase is cancelled.
    await addCurrentArrear(w.tenant, purchase.id, 3)
    ok(await w.api.post(`/purchases/${purchase.id}/cancel`))
    const usage = await usageInvoices(w.api, customer.id)
    const last = usage.find((invoice) => invoice.id !== first.id)
    expect(last).toMatchObject({ status: "OPEN", total: 4 })
    expect(last.lines.map((l: any) => [l.amount, l.periodStart])).toEqual([[6, last.periodStart], [-2, purchase.currentPeriodStart]])
    expect(last.lines[1].description).toMatch(/late usage credit/)
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "6", invoicedArrear: "6" })
    expect(await storedRows(w.tenant, first.id)).toEqual(firstRows)
    // The cancellation recorded cycle 1 too.
    expect((await cyclesOf(w.tenant, purchase.id)).map((c: any) => [c.cycleIndex, c.status])).toEqual([[0, "FINAL"], [1, "FINAL"]])
  })

  it("a credit larger than the invoice it would go on waits, never lost to a negative total", async () => {
    const w = await world(0)
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)
    await addLateArrear(w.tenant, purchase.id, 0, -2)
    const second = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
    await cycleRun(new Date(second.currentPeriodEnd))
    // Cycle 1 charged nothing: the credit waits.
    expect(await usageInvoices(w.api, customer.id)).toHaveLength(1)
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "4", invoicedArrear: "8" })
    // Cycle 2 charges 10: the credit goes on it.
    await addCurrentArrear(w.tenant, purchase.id, 5)
    const third = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
    await cycleRun(new Date(third.currentPeriodEnd))
    const usage = await usageInvoices(w.api, customer.id)
    expect(usage).toHaveLength(2)
    expect(usage[1]).toMatchObject({ total: 6 })
    expect(usage[1].lines.map((l: any) => l.amount)).toEqual([10, -4])
  })

  it("late lines of FINAL cycles go on a DRAFT invoice too, and survive its refresh", async () => {
    const w = await world(0)
    const { customer, purchase, end } = await customerUsing(w, 14)
    await cycleRun(end)
    await addLateArrear(w.tenant, purchase.id, 0, 1)
    const settings = await app.cli(["org", "settings", "--invoice-grace-hours", "12", "--org", w.tenant.organizationId, "--json"])
    expect(settings.code, settings.stderr).toBe(0)
    await addCurrentArrear(w.tenant, purchase.id, 1)
    const second = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
    const secondEnd = new Date(second.currentPeriodEnd)
    await cycleRun(secondEnd)
    const draft = (await usageInvoices(w.api, customer.id)).find((invoice) => invoice.status === "DRAFT")
    expect(draft.lines.map((l: any) => [l.amount, l.periodStart])).toEqual([[2, second.currentPeriodStart], [2, purchase.currentPeriodStart]])
    await addLateArrear(w.tenant, purchase.id, 1, 2)
    await refresh(w.tenant, purchase.id, 1)
    const refreshed = ok(await w.api.get(`/invoices/${draft.id}`)).invoice
    expect(refreshed.lines.map((l: any) => [l.amount, l.periodStart])).toEqual([[6, second.currentPeriodStart], [2, purchase.currentPeriodStart]])
    expect(refreshed.total).toBe(8)
    await cycleRun(new Date(secondEnd.getTime() + 12 * HOUR))
    expect(ok(await w.api.get(`/invoices/${draft.id}`)).invoice).toMatchObject({ status: "OPEN", total: 8 })
    expect((await cycleBalancesOf(w.tenant, purchase.id, 1))[1]).toMatchObject({ arrearAmount: "6", invoicedArrear: "6" })
    expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "10", invoicedArrear: "10" })
  })

  describe("through the doors: a signal sent after the cycle job ran at a later instant belongs to the ended cycle", () => {
    // The cycle job ran at the cycle's end, a month ahead; a signal sent now (no timestamp) happened now,
    // inside cycle 0, which has ended: it is late usage of cycle 0.
    it("a FINAL cycle: billed on the next usage invoice as a late line; the finalised invoice unchanged", async () => {
      const w = await world(0)
      const { customer, purchase, end } = await customerUsing(w, 14)
      await cycleRun(end)
      const [first] = await usageInvoices(w.api, customer.id)
      const firstJson = JSON.stringify(ok(await w.api.get(`/invoices/${first.id}`)).invoice)
      const firstRows = await storedRows(w.tenant, first.id)

      await send(w, customer.id, 3)
      expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "14", invoicedArrear: "8" })
      // Not in the current cycle: its spend and balances are untouched.
      expect(ok(await w.api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(0)

      const second = ok(await w.api.get(`/purchases/${purchase.id}`)).purchase
      await cycleRun(new Date(second.currentPeriodEnd))
      const late = (await usageInvoices(w.api, customer.id)).find((invoice) => invoice.id !== first.id)
      expect(late).toMatchObject({ status: "OPEN", total: 6 })
      expect(late.lines).toEqual([expect.objectContaining({
        amount: 6,
        description: expect.stringContaining("late usage"),
        periodStart: purchase.currentPeriodStart,
        periodEnd: end.toISOString()
      })])
      expect(JSON.stringify(ok(await w.api.get(`/invoices/${first.id}`)).invoice)).toBe(firstJson)
      expect(await storedRows(w.tenant, first.id)).toEqual(firstRows)
    })

    it("a DRAFT cycle: the signal batch refreshes the draft's lines and totals", async () => {
      const w = await world(48)
      const { customer, purchase, end } = await customerUsing(w, 14)
      await cycleRun(end)
      const [draft] = await usageInvoices(w.api, customer.id)
      expect(draft).toMatchObject({ status: "DRAFT", total: 8 })

      await send(w, customer.id, 3)
      const refreshed = ok(await w.api.get(`/invoices/${draft.id}`)).invoice
      expect(refreshed).toMatchObject({ status: "DRAFT", total: 14 })
      expect(refreshed.lines).toEqual([expect.objectContaining({ quantity: 7, amount: 14, periodStart: purchase.currentPeriodStart })])

      await cycleRun(new Date(end.getTime() + 48 * HOUR))
      expect(ok(await w.api.get(`/invoices/${draft.id}`)).invoice).toMatchObject({ status: "OPEN", total: 14 })
      expect((await cycleBalancesOf(w.tenant, purchase.id, 0))[1]).toMatchObject({ arrearAmount: "14", invoicedArrear: "14" })
    })
  })
})
