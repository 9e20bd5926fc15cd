/**
 * Credit notes (issue 38 item 2, docs/billing.md "Credit notes"), through the
 * doors a user uses: `POST /invoices/{id}/credit-notes` and `billing invoice
 * credit` on OPEN invoices (the amount due lowered exactly, the invoice settled
 * PAID at zero and never marked overdue) and on PAID ones (the amount credited
 * to the wallet through the ledger: its ledger row and its webhook event);
 * refusals writing nothing (beyond what remains, unknown lines, DRAFT and
 * VOID invoices, another organisation's); the numbers gap-free under
 * concurrent notes; idempotency keys; the `credit_note.created` event signed
 * and of its documented shape; the PDF's text; the hosted page and the portal.
 *
 * A database of the file's own: the cycle job (overdue marks, a DRAFT) serves
 * every organisation.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LifecycleEventBodySchemas } from "../src/billing/LifecycleEventSchemas.ts"
import { verifyWebhookSignature } from "../src/index.ts"
import { type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { portalTokenOf } from "./portal-fixtures.ts"
import { drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

let app: TestApp
let acme: Tenant
let api: Client
let org: ReadonlyArray<string>
let plan: { readonly id: string }
let folder: string
/** Subscribed to credit notes, invoice payments and wallet updates. */
let hook: Receiver
let secret: string

beforeAll(async () => {
  process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "0"
  app = await startTestApp({ ownDatabase: true })
  folder = mkdtempSync(join(tmpdir(), "credit-notes-"))
  acme = await app.tenant("Credit Co")
  api = clientOf(app, acme)
  org = ["--org", acme.organizationId]
  ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
  // Two prepaid lines: 10.00 and 2 x 2.50; VAT 20 %: a total of 18.00.
  const seats = await makeUnit(api, { flatPrice: 10 })
  const storage = await makeUnit(api, { flatPrice: 2.5 })
  plan = await makePlan(app, acme, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: seats.id, quantity: 1 },
    { type: "UNIT", billingMode: "ADVANCE", unitId: storage.id, quantity: 2 }
  ])
  hook = await startReceiver()
  const endpoint = ok(
    await api.post("/webhook-endpoints", { url: hook.url, events: ["credit_note.created", "invoice.paid", "wallet.balance.update"] }),
    201
  ).endpoint
  secret = endpoint.secret
})
afterAll(async () => {
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
  await hook?.close()
  await app?.close()
})

/** A new customer of Acme with its OPEN plan invoice of 18.00 (lines 10.00 and 5.00, VAT 3.00). */
const openInvoice = async (client: Client = api) => {
  const customer = await makeCustomer(client)
  ok(await client.post("/purchases", { customerId: customer.id, planId: plan.id }), 201)
  const [invoice] = ok(await client.get(`/invoices?customerId=${customer.id}`)).invoices
  expect(invoice).toMatchObject({ status: "OPEN", total: 18, amountDue: 18, creditNotes: [] })
  return { customer, invoice }
}

const credit = (invoiceId: string, body: Record<string, unknown>, client: Client = api) =>
  client.post(`/invoices/${invoiceId}/credit-notes`, body)

const invoiceNow = async (id: string) => ok(await api.get(`/invoices/${id}`)).invoice

/** Acme's credit notes as stored, in number order. */
const storedNotes = () =>
  query<{ number: string; invoiceId: string; amount: string; appliedTo: string }>(
    app,
    `SELECT number, invoice_id, amount::text, applied_to FROM credit_notes WHERE organization_id = $1 ORDER BY sequence_number`,
    [acme.organizationId]
  )

const paymentsOf = (invoiceId: string) =>
  query<{ amount: string }>(app, `SELECT amount::text FROM payments WHERE organization_id = $1 AND invoice_id = $2`, [
    acme.organizationId,
    invoiceId
  ])

/** The credit note numbers taken so far: the last one's place in the sequence. */
const lastNumber = async () => {
  const rows = await query<{ lastNumber: string }>(
    app,
    `SELECT last_number::text FROM credit_note_counters WHERE organization_id = $1`,
    [acme.organizationId]
  )
  return Number(rows[0]?.lastNumber ?? 0)
}

const numberOf = (n: number) => `CN-${String(n).padStart(6, "0")}`

/** The lifecycle events `hook` got from request `from` on, each signed, of its documented shape. */
const received = async (from: number) => {
  await drainSender(app)
  return hook.received.slice(from).map((request) => {
    expect(verifyWebhookSignature(secret, request.headers["x-service-signature"] as string, request.body)).toBe(true)
    const body = JSON.parse(request.body)
    expect(request.headers["x-service-event-type"]).toBe(body.event_type)
    const schema = (LifecycleEventBodySchemas as Record<string, Schema.Schema.AnyNoContext>)[body.event_type]
    if (schema !== undefined) Schema.decodeUnknownSync(schema as Schema.Schema<unknown>, { onExcessProperty: "error" })(body)
    return body
  }).sort((a, b) => (a.id < b.id ? -1 : 1))
}

describe("a credit note on an OPEN invoice", () => {
  it("lowers the amount due exactly, by an amount or by lines with their tax; settles the invoice at zero", async () => {
    const { customer, invoice } = await openInvoice()
    const before = await lastNumber()
    await drainSender(app)
    const seen = hook.received.length

    // 4.50 of the total: the amount due is 13.50, the total stays as issued.
    const first = credit(invoice.id, { amount: 4.5, reason: "Seat billed twice" })
    const created = ok(await first, 201)
    expect((await first).body.statusDetail.message).toBe("Credit note created")
    expect(created.replayed).toBe(false)
    expect(created.creditNote).toEqual({
      id: expect.stringMatching(/^cn_/),
      number: numberOf(before + 1),
      invoiceId: invoice.id,
      customerId: customer.id,
      amount: 4.5,
      reason: "Seat billed twice",
      lines: [],
      taxLines: [],
      appliedTo: "AMOUNT_DUE",
      walletLedgerEntryId: null,
      createdAt: expect.any(String)
    })
    expect(created.invoice).toEqual({ ...invoice, amountDue: 13.5, creditNotes: [created.creditNote] })
    expect(await invoiceNow(invoice.id)).toEqual(created.invoice)
    expect(ok(await api.get(`/invoices/${invoice.id}/credit-notes`)).creditNotes).toEqual([created.creditNote])
    expect(ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices).toEqual([created.invoice])

    // Line 2 whole (5.00) with its VAT (1.00): 6.00 more; line 1 in part (2.50 and 0.50 VAT).
    const second = ok(await credit(invoice.id, { lines: [{ line: 2 }], reason: "Storage not used" }), 201)
    expect(second.creditNote).toMatchObject({
      number: numberOf(before + 2),
      amount: 6,
      lines: [{ line: 2, description: invoice.lines[1].description, amount: 5 }],
      taxLines: [{ taxId: invoice.taxLines[0].taxId, name: "VAT", ratePercent: 20, amount: 1 }]
    })
    expect(second.invoice.amountDue).toBe(7.5)
    const third = ok(await credit(invoice.id, { lines: [{ line: 1, amount: 2.5 }], reason: "Discount agreed" }), 201)
    expect(third.creditNote).toMatchObject({ amount: 3, lines: [{ line: 1, amount: 2.5 }], taxLines: [{ amount: 0.5 }] })
    expect(third.invoice).toMatchObject({ status: "OPEN", total: 18, amountDue: 4.5 })

    // Refused, each writing nothing: beyond what remains (4.50), a line with nothing left, a line it does not have.
    const stored = await storedNotes()
    expectError(await credit(invoice.id, { amount: 4.51, reason: "too much" }), 422, "credit_exceeds_remaining")
    expectError(await credit(invoice.id, { lines: [{ line: 2, amount: 0.01 }], reason: "again" }), 422, "credit_exceeds_remaining")
    expectError(await credit(invoice.id, { lines: [{ line: 1, amount: 7.51 }], reason: "more than the line" }), 422, "credit_exceeds_remaining")
    expectError(await credit(invoice.id, { lines: [{ line: 3 }], reason: "no such line" }), 422, "unknown_invoice_line")
    expect(await storedNotes()).toEqual(stored)
    expect(await lastNumber()).toBe(before + 3)
    expect(await invoiceNow(invoice.id)).toEqual(third.invoice)

    // Line 1's last 7.50 with its VAT is 9.00: more than the 4.50 left (the first note credited no line).
    expectError(await credit(invoice.id, { lines: [{ line: 1 }], reason: "the rest of line 1" }), 422, "credit_exceeds_remaining")
    expect(await lastNumber()).toBe(before + 3)

    // The rest, 4.50: nothing is due; the invoice is PAID with no payment.
    const last = ok(await credit(invoice.id, { amount: 4.5, reason: "Waived" }), 201)
    expect(last.creditNote).toMatchObject({ number: numberOf(before + 4), amount: 4.5, lines: [] })
    expect(last.invoice).toMatchObject({ status: "PAID", total: 18, amountDue: 0, paidAt: last.creditNote.createdAt })
    expect(last.invoice.creditNotes.map((note: { number: string }) => note.number)).toEqual(
      [1, 2, 3, 4].map((n) => numberOf(before + n))
    )
    expect(await paymentsOf(invoice.id)).toEqual([])
    expectError(await credit(invoice.id, { amount: 0.01, reason: "nothing left" }), 422, "credit_exceeds_remaining")
    // Nothing is due, so nothing is paid either.
    expectError(await api.post(`/invoices/${invoice.id}/payments`, {}), 409, "invoice_not_open")

    // The events: each note, then invoice.paid when the last settled it; signed, the records as GET shows them.
    const events = await received(seen)
    expect(events.map((event) => event.event_type)).toEqual([
      "credit_note.created",
      "credit_note.created",
      "credit_note.created",
      "credit_note.created",
      "invoice.paid"
    ])
    const now = await invoiceNow(invoice.id)
    expect(events[3].data).toEqual({ customer_id: customer.id, external_id: null, credit_note: last.creditNote, invoice: now })
    expect(events[0].data.credit_note).toEqual(created.creditNote)
    expect(events[0].data.invoice).toEqual(created.invoice)
    expect(events[4].data.invoice).toEqual(now)
  })

  it("credits a whole invoice line by line to its total, to the cent, however the notes round", async () => {
    const { invoice } = await openInvoice()
    // Line 1 (10.00) in three parts: each note's VAT rounds up (0.666, 0.666, 0.668 -> 0.67), 2.01 in all of 2.00.
    const parts = []
    for (const amount of [3.33, 3.33, 3.34]) {
      parts.push(ok(await credit(invoice.id, { lines: [{ line: 1, amount }], reason: "In parts" }), 201).creditNote)
    }
    expect(parts.map((note) => note.amount)).toEqual([4, 4, 4.01])
    expect((await invoiceNow(invoice.id)).amountDue).toBe(5.99)
    // The note that credits the last of every line takes exactly what is left: 5.00 and the VAT's last 0.99.
    const closing = ok(await credit(invoice.id, { lines: [{ line: 2 }], reason: "The rest" }), 201)
    expect(closing.creditNote).toMatchObject({ amount: 5.99, lines: [{ line: 2, amount: 5 }], taxLines: [{ amount: 0.99 }] })
    expect(closing.invoice).toMatchObject({ status: "PAID", total: 18, amountDue: 0 })
  })

  it("leaves a payment to pay what is due, and the overdue mark to what is still owed", async () => {
    const { invoice } = await openInvoice()
    const settled = await openInvoice()
    const owed = await openInvoice()
    ok(await credit(invoice.id, { amount: 3, reason: "Goodwill" }), 201)
    ok(await credit(settled.invoice.id, { amount: 18, reason: "Billed in error" }), 201)
    ok(await credit(owed.invoice.id, { amount: 17.99, reason: "Nearly all" }), 201)

    // A payment records the amount due, not the total.
    const paid = ok(await api.post(`/invoices/${invoice.id}/payments`, { reference: "bank-7" }), 201)
    expect(paid.payment.amount).toBe(15)
    expect(paid.invoice).toMatchObject({ status: "PAID", total: 18, amountDue: 0 })

    // The cycle job after the due dates: the invoice credited to zero was settled and is not marked; one cent owed is.
    await runCycles(app, new Date(Date.now() + 60_000))
    expect(await invoiceNow(settled.invoice.id)).toMatchObject({ status: "PAID", amountDue: 0, overdue: false, overdueAt: null })
    expect(await invoiceNow(owed.invoice.id)).toMatchObject({ status: "OPEN", amountDue: 0.01, overdue: true })
  })
})

describe("a credit note on a PAID invoice", () => {
  it("credits the wallet through the ledger: its ledger row, its event, exactly; never beyond what was paid", async () => {
    const { customer, invoice } = await openInvoice()
    ok(await api.post(`/invoices/${invoice.id}/payments`, { reference: "wire" }), 201)
    const walletBefore = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    await drainSender(app)
    const seen = hook.received.length

    const created = ok(await credit(invoice.id, { lines: [{ line: 2, amount: 1.25 }], reason: "Storage outage" }), 201)
    expect(created.creditNote).toMatchObject({
      amount: 1.5,
      lines: [{ line: 2, amount: 1.25 }],
      taxLines: [{ amount: 0.25 }],
      appliedTo: "WALLET",
      walletLedgerEntryId: expect.stringMatching(/^wle_/)
    })
    // The invoice is as it was: PAID, its total, nothing due; the note is listed on it.
    expect(created.invoice).toMatchObject({ status: "PAID", total: 18, amountDue: 0 })
    expect(created.invoice.creditNotes).toEqual([created.creditNote])

    const wallet = ok(await api.get(`/customers/${customer.id}/wallet/ledger`))
    expect(wallet.balance).toBe(walletBefore.balance + 1.5)
    const entry = wallet.entries.find((row: { id: string }) => row.id === created.creditNote.walletLedgerEntryId)
    expect(entry).toMatchObject({
      type: "ADJUSTMENT",
      delta: 1.5,
      balanceAfter: wallet.balance,
      invoiceId: invoice.id,
      notes: `Credit note ${created.creditNote.number} on ${invoice.number}`
    })

    const events = await received(seen)
    expect(events.map((event) => event.event_type)).toEqual(["wallet.balance.update", "credit_note.created"])
    expect(events[0].data).toMatchObject({ customer_id: customer.id, delta: 1.5, source: "ADJUSTMENT", current_balance: wallet.balance })
    expect(events[1].data.credit_note).toEqual(created.creditNote)

    // What remains to credit is what was paid less the note: 16.50; more is 422 and moves nothing.
    expectError(await credit(invoice.id, { amount: 16.51, reason: "too much" }), 422, "credit_exceeds_remaining")
    expect(ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).balance).toBe(wallet.balance)
    const rest = ok(await credit(invoice.id, { amount: 16.5, reason: "Refund the rest" }), 201)
    expect(ok(await api.get(`/customers/${customer.id}/wallet/ledger`)).balance).toBe(wallet.balance + 16.5)
    expect(rest.invoice.creditNotes.map((note: { amount: number }) => note.amount)).toEqual([1.5, 16.5])

    // `billing trigger credit_note.created`: a test event about the customer's newest note, with its invoice.
    await drainSender(app)
    const before = hook.received.length
    const none = await app.cli(["trigger", "credit_note.created", "--customer", (await makeCustomer(api)).id, "--json", ...org])
    expect(none.code).toBe(2)
    expect(none.stderr).toMatch(/newest credit note/)
    const triggered = await app.cli(["trigger", "credit_note.created", "--customer", customer.id, "--json", ...org])
    expect(triggered.code, triggered.stderr).toBe(0)
    expect(triggered.json).toMatchObject({ event: { eventType: "credit_note.created", test: true, recordId: rest.creditNote.id }, recipients: 1 })
    const [test] = await received(before)
    expect(test).toMatchObject({ event_type: "credit_note.created", test: true })
    expect(test.data).toEqual({ customer_id: customer.id, external_id: null, credit_note: rest.creditNote, invoice: await invoiceNow(invoice.id) })
  })
})

describe("refusals", () => {
  it("DRAFT and VOID invoices are 409, another organisation's or an unknown one 404, bad bodies 400: nothing written", async () => {
    const { invoice } = await openInvoice()
    const voided = await app.cli(["invoice", "void", invoice.id, "--json", ...org])
    expect(voided.code, voided.stderr).toBe(0)
    const stored = await storedNotes()
    expectError(await credit(invoice.id, { amount: 1, reason: "void" }), 409, "invoice_not_creditable")

    const other = await app.tenant("Other Co")
    const otherApi = clientOf(app, other)
    expectError(await credit(invoice.id, { amount: 1, reason: "not mine" }, otherApi), 404, "invoice_not_found")
    expectError(await otherApi.get(`/invoices/${invoice.id}/credit-notes`), 404, "invoice_not_found")
    expectError(await credit("inv_nope", { amount: 1, reason: "unknown" }), 404, "invoice_not_found")

    const open = (await openInvoice()).invoice
    for (
      const body of [
        {},
        { reason: "neither" },
        { amount: 1, lines: [{ line: 1 }], reason: "both" },
        { amount: 0, reason: "zero" },
        { amount: -1, reason: "negative" },
        { amount: 1.005, reason: "half a cent" },
        { amount: 1 },
        { amount: 1, reason: "" },
        { amount: 1, reason: "   " },
        { amount: 1, reason: "x".repeat(501) },
        { lines: [], reason: "no lines" },
        { lines: [{ line: 0 }], reason: "line 0" },
        { lines: [{ line: 1.5 }], reason: "half a line" },
        { lines: [{ line: 1 }, { line: 1 }], reason: "twice" },
        { lines: [{ line: 1, amount: 0.001 }], reason: "a tenth of a cent" },
        { lines: [{ line: 1, extra: true }], reason: "unknown field" },
        { amount: "1", reason: "a string" },
        { amount: 1, reason: "key", idempotencyKey: "" },
        { amount: 1, reason: "unknown", memo: "x" }
      ]
    ) {
      expectError(await credit(open.id, body), 400, "validation_failed")
    }
    expect(await storedNotes()).toEqual(stored)
    expect(await invoiceNow(open.id)).toMatchObject({ status: "OPEN", amountDue: 18, creditNotes: [] })
  })
})

describe("numbers and idempotency", () => {
  it("numbers notes gap-free, in one sequence, when they are created at once", async () => {
    const invoices = await Promise.all([1, 2, 3].map(() => openInvoice()))
    const before = await lastNumber()
    // Three invoices at once, and two notes on one invoice at once.
    const answers = await Promise.all([
      ...invoices.map(({ invoice }) => credit(invoice.id, { amount: 1, reason: "together" })),
      credit(invoices[0]!.invoice.id, { amount: 2, reason: "together, same invoice" }),
      credit(invoices[0]!.invoice.id, { amount: 3, reason: "together, same invoice" })
    ])
    const numbers = answers.map((answer) => ok(answer, 201).creditNote.number).sort()
    expect(numbers).toEqual([1, 2, 3, 4, 5].map((n) => numberOf(before + n)))
    expect(await lastNumber()).toBe(before + 5)
    expect((await invoiceNow(invoices[0]!.invoice.id)).amountDue).toBe(12)
  })

  it("answers a keyed repeat with the first note; another request under the key is 422; a refusal keeps the key free", async () => {
    const { invoice } = await openInvoice()
    const another = await openInvoice()
    const first = ok(await credit(invoice.id, { amount: 2, reason: "Keyed", idempotencyKey: "cn-1" }), 201)
    const again = await credit(invoice.id, { amount: 2, reason: "Keyed", idempotencyKey: "cn-1" })
    expect(again.body.statusDetail.message).toMatch(/^Already processed/)
    expect(ok(again, 201)).toEqual({ ...first, replayed: true })
    const stored = await storedNotes()
    expectError(await credit(invoice.id, { amount: 3, reason: "Keyed", idempotencyKey: "cn-1" }), 422, "idempotency_key_reused")
    expectError(await credit(invoice.id, { amount: 2, reason: "Other", idempotencyKey: "cn-1" }), 422, "idempotency_key_reused")
    expectError(await credit(another.invoice.id, { amount: 2, reason: "Keyed", idempotencyKey: "cn-1" }), 422, "idempotency_key_reused")
    expect(await storedNotes()).toEqual(stored)

    // Refused (beyond what remains): the key stays free for the request that succeeds.
    expectError(await credit(another.invoice.id, { amount: 99, reason: "too much", idempotencyKey: "cn-2" }), 422, "credit_exceeds_remaining")
    ok(await credit(another.invoice.id, { amount: 1, reason: "fine", idempotencyKey: "cn-2" }), 201)

    // Identical keyed requests at once: one note, the others replay it; a repeat after the invoice was settled too.
    const settling = await openInvoice()
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => credit(settling.invoice.id, { amount: 18, reason: "All", idempotencyKey: "cn-3" }))
    )
    const results = answers.map((answer) => ok(answer, 201))
    expect(new Set(results.map((result) => result.creditNote.id)).size).toBe(1)
    expect(results.filter((result) => !result.replayed)).toHaveLength(1)
    const repeat = ok(await credit(settling.invoice.id, { amount: 18, reason: "All", idempotencyKey: "cn-3" }), 201)
    expect(repeat).toMatchObject({ replayed: true, invoice: { status: "PAID", amountDue: 0 } })
  })
})

describe("the CLI", () => {
  it("credits by amount and by lines, shows the notes on the invoice, refuses what the API refuses", async () => {
    const { invoice } = await openInvoice()
    const byAmount = await app.cli(["invoice", "credit", invoice.id, "--amount", "1.10", "--reason", "CLI goodwill", "--json", ...org])
    expect(byAmount.code, byAmount.stderr).toBe(0)
    expect(byAmount.json).toMatchObject({ replayed: false, creditNote: { amount: 1.1, appliedTo: "AMOUNT_DUE" }, invoice: { amountDue: 16.9 } })
    const byLines = await app.cli([
      "invoice", "credit", invoice.id, "--line", "1=2.50", "--line", "2", "--reason", "CLI lines", "--idempotency-key", "cli-1", "--json", ...org
    ])
    expect(byLines.code, byLines.stderr).toBe(0)
    // 2.50 + 5.00 = 7.50, VAT 1.50: 9.00.
    expect(byLines.json.creditNote).toMatchObject({ amount: 9, lines: [{ line: 1, amount: 2.5 }, { line: 2, amount: 5 }] })
    expect(byLines.json.invoice.amountDue).toBe(7.9)
    // The same key over HTTP is a replay of the CLI's note.
    expect(ok(await credit(invoice.id, { lines: [{ line: 1, amount: 2.5 }, { line: 2 }], reason: "CLI lines", idempotencyKey: "cli-1" }), 201))
      .toMatchObject({ replayed: true, creditNote: { id: byLines.json.creditNote.id } })

    const shown = await app.cli(["invoice", "show", invoice.id, ...org])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain(byAmount.json.creditNote.number)
    expect(shown.stdout).toContain(byLines.json.creditNote.number)
    expect(shown.stdout).toMatch(/amount due\s+7\.9 USD/)
    const listed = await app.cli(["invoice", "credit-notes", invoice.id, "--json", ...org])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.json.creditNotes).toEqual((await invoiceNow(invoice.id)).creditNotes)

    const beyond = await app.cli(["invoice", "credit", invoice.id, "--amount", "7.91", "--reason", "too much", ...org])
    expect(beyond.code).toBe(6)
    expect(beyond.stderr).toMatch(/more than remains/)
    const neither = await app.cli(["invoice", "credit", invoice.id, "--reason", "neither", ...org])
    expect(neither.code).toBe(2)
    expect((await invoiceNow(invoice.id)).creditNotes).toHaveLength(2)
  })
})

describe("the documents", () => {
  it("the PDF prints the notes and the amount due; the hosted page and the portal list them", async () => {
    const { customer, invoice } = await openInvoice()
    const note = ok(await credit(invoice.id, { lines: [{ line: 2 }], reason: "Storage not used" }), 201).creditNote

    const pdf = await fetch(`${app.baseUrl}/invoices/${invoice.id}/pdf`, { headers: { authorization: `Bearer ${acme.apiKey}` } })
    expect(pdf.status).toBe(200)
    const file = join(folder, "credited.pdf")
    writeFileSync(file, new Uint8Array(await pdf.arrayBuffer()))
    const text = execFileSync("pdftotext", ["-layout", "-enc", "UTF-8", file, "-"], { encoding: "utf8" })
    const lineOf = (needle: string) => text.split("\n").find((line) => line.includes(needle)) ?? ""
    expect(lineOf(`Credit note ${note.number}`).trim()).toMatch(/-6\.00$/)
    expect(lineOf("Amount due").trim()).toMatch(/12\.00$/)
    expect(lineOf("Total USD").trim()).toMatch(/18\.00$/)
    expect(text).toContain("Storage not used")

    // The hosted page: the note under the total, and the amount due.
    const link = ok(await api.post(`/invoices/${invoice.id}/pay-link`)).url
    const page = await (await fetch(link)).text()
    expect(page).toContain(note.number)
    expect(page).toContain("Storage not used")
    expect(page).toMatch(/data-testid="amount-due">\$12\.00</)

    // The portal: the note among the invoices, and what is owed.
    const portal = await (await fetch((await portalTokenOf(api, customer.id)).url)).text()
    expect(portal).toContain(note.number)
    expect(portal).toMatch(/data-testid="owed-total">\$12\.00</)
  })
})

describe("the cycle job's DRAFT", () => {
  it("is not credited until it is final (409)", async () => {
    const tenant = await app.tenant("Grace Co")
    const client = clientOf(app, tenant)
    ok(await client.patch("/organization/settings", { invoiceGraceHours: 24 }))
    const unit = await makeUnit(client, { flatPrice: 2 })
    const metered = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(client)
    const purchase = ok(await client.post("/purchases", { customerId: customer.id, planId: metered.id }), 201).purchase
    ok(await client.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 3 }), 202)
    await drain(app)
    await runCycles(app, new Date(new Date(purchase.currentPeriodEnd).getTime() + 1000))
    const draft = ok(await client.get(`/invoices?customerId=${customer.id}`)).invoices.find((i: { status: string }) => i.status === "DRAFT")
    expect(draft).toMatchObject({ kind: "USAGE", total: 6, amountDue: 6 })
    expectError(await credit(draft.id, { amount: 1, reason: "draft" }, client), 409, "invoice_not_creditable")
  })
})
