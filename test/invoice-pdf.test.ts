/**
 * Invoice PDFs (issue 38 item 4), read back as a person's tools read them:
 * Debian's `pdftotext` (poppler-utils; `.ci/run` installs it) turns each PDF
 * into text, and the invoice's number, lines, taxes, totals and dates in it
 * are compared with the invoice's JSON, through the API
 * (`GET /invoices/{id}/pdf`), the hosted invoice page's link
 * (`/pay/{id}/pdf?token=`) and the CLI (`billing invoice pdf ID --out FILE`).
 * What no one else may read is refused: another organisation's invoice, an
 * unknown id, a tampered, foreign or expired link.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createBillingClient } from "../client/src/index.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { buy, type Client, clientOf, expectError, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { signedWith, tampered } from "./portal-fixtures.ts"
import { drain } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let api: Client
let other: Tenant
let otherApi: Client
let origin: string
let folder: string
/** Acme's OPEN plan invoice: three lines, two taxes. */
let invoice: any
let customer: any
/** The other organisation's invoice. */
let foreignInvoice: any

const BILLING_EMAIL = "accounts@acme-ai.example"
const ADDRESS = ["Acme AI Ltd", "1 Quay Street", "Dublin D02 XY45", "Ireland"]

beforeAll(async () => {
  if (!hasPdfToText()) throw new Error("pdftotext is missing: run scripts/apt-install.sh poppler-utils (.ci/run does)")
  app = await startTestApp()
  origin = new URL(app.baseUrl).origin
  folder = mkdtempSync(join(tmpdir(), "invoice-pdf-"))
  acme = await app.tenant("Acme AI Ltd")
  api = clientOf(app, acme)
  await app.run(Effect.flatMap(Organizations, (organizations) =>
    organizations.updateSettings(acme.organizationId, {
      paymentInstructions: "IBAN IE29 AIBK 9311 5212 3456 78\nQuote the invoice number.",
      billingContact: { email: BILLING_EMAIL, addressLines: ADDRESS }
    })))
  ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
  ok(await api.post("/taxes", { name: "City", ratePercent: 2.5 }), 201)
  const seats = await makeUnit(api, { flatPrice: 4.115 })
  const storage = await makeUnit(api, { flatPrice: 0.125 })
  const plan = await makePlan(app, acme, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: seats.id, quantity: 3 },
    { type: "UNIT", billingMode: "ADVANCE", unitId: storage.id, quantity: 7 }
  ], { priceAdjustment: 1.5 })
  customer = await makeCustomer(api, {
    name: "Jörg's Robots",
    email: "ap@robots.example",
    legalName: "Jörg Roboter GmbH",
    addressLine1: "Hauptstraße 5",
    city: "Berlin",
    pincode: "10115",
    country: "Germany",
    taxId: "DE123456789"
  })
  await buy(api, customer.id, plan.id)
  invoice = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices[0]
  expect(invoice).toMatchObject({ status: "OPEN", kind: "PLAN" })
  expect(invoice.lines).toHaveLength(3)

  other = await app.tenant("Other Org")
  otherApi = clientOf(app, other)
  const otherUnit = await makeUnit(otherApi, { flatPrice: 7 })
  const otherPlan = await makePlan(app, other, [{ type: "UNIT", billingMode: "ADVANCE", unitId: otherUnit.id, quantity: 1 }])
  const stranger = await makeCustomer(otherApi)
  await buy(otherApi, stranger.id, otherPlan.id)
  foreignInvoice = ok(await otherApi.get(`/invoices?customerId=${stranger.id}`)).invoices[0]
})

afterAll(async () => {
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
  await app?.close()
})

function hasPdfToText() {
  try {
    execFileSync("pdftotext", ["-v"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

let files = 0
/** The PDF's text as `pdftotext -layout` reads it (columns kept on their lines). */
const textOf = (bytes: Uint8Array) => {
  const file = join(folder, `read-${files++}.pdf`)
  writeFileSync(file, bytes)
  return execFileSync("pdftotext", ["-layout", "-enc", "UTF-8", file, "-"], { encoding: "utf8" })
}

/** The PDF's pages, as `pdfinfo` counts them. */
const pagesOf = (bytes: Uint8Array) => {
  const file = join(folder, `info-${files++}.pdf`)
  writeFileSync(file, bytes)
  return Number(/Pages:\s+(\d+)/.exec(execFileSync("pdfinfo", [file], { encoding: "utf8" }))![1])
}

/**
 * An amount as the PDF prints it: the JSON number's own digits (the API's exact decimal), padded to
 * two decimal places. The JSON text is what `JSON.parse` read, so `String` gives it back digit for digit.
 */
const printed = (amount: number) => {
  const text = String(amount)
  expect(text, "an amount in exponent form").not.toMatch(/e/i)
  const point = text.indexOf(".")
  return point < 0 ? `${text}.00` : text.length - point - 1 < 2 ? `${text}0` : text
}

const day = (iso: string) => iso.slice(0, 10)

/** Every line of the text holding `needle`, for messages. */
const linesWith = (text: string, needle: string) => text.split("\n").filter((line) => line.includes(needle))

/** The PDF's text holds what the invoice's JSON says: number, lines, taxes, totals, dates, both parties. */
const expectInvoiceIn = (text: string, json: any) => {
  expect(text).toContain(json.number)
  expect(text).toContain(json.status)
  expect(text).toContain(day(json.issuedAt))
  expect(text).toContain(`${day(json.periodStart)} to ${day(json.periodEnd)}`)
  if (json.dueDate !== null && json.dueDate !== undefined) expect(text).toContain(day(json.dueDate))
  for (const line of json.lines) {
    const row = linesWith(text, line.description)
    expect(row, `no line for ${line.description} in:\n${text}`).toHaveLength(1)
    // The amount is the row's last column; the quantity stands before it.
    expect(row[0]!.trim().endsWith(printed(line.amount)), row[0]).toBe(true)
    if (line.quantity !== null) expect(row[0]).toContain(` ${line.quantity} `)
    // A unit price the line carries is printed; one it lacks comes from the plan, as on the hosted page, never "-".
    if (line.unitPrice !== null) expect(row[0]).toContain(printed(line.unitPrice))
    else if (line.quantity !== null) expect(row[0]).not.toMatch(/\s-\s/)
  }
  expect(linesWith(text, "Subtotal")[0]!.trim().endsWith(printed(json.subtotal))).toBe(true)
  for (const tax of json.taxLines) {
    const row = linesWith(text, `${tax.name} (${tax.ratePercent}%)`)
    expect(row, `no tax line ${tax.name} in:\n${text}`).toHaveLength(1)
    expect(row[0]!.trim().endsWith(printed(tax.amount)), row[0]).toBe(true)
  }
  const total = linesWith(text, `Total ${json.currencyCode}`)
  expect(total, text).toHaveLength(1)
  expect(total[0]!.trim().endsWith(printed(json.total)), total[0]).toBe(true)
  // Who bills whom: the organisation's billing contact, the customer's legal name, address and tax number.
  expect(text).toContain("Acme AI Ltd")
  expect(text).toContain(BILLING_EMAIL)
  expect(text).toContain("1 Quay Street")
  expect(text).toContain("Jörg Roboter GmbH")
  expect(text).toContain("Hauptstraße 5")
  expect(text).toContain("Tax ID: DE123456789")
}

/** A PDF through HTTP: its status, headers and bytes (the test app's `request` reads bodies as text). */
const download = async (path: string, key: string | null = acme.apiKey) => {
  const response = await fetch(path.startsWith("http") ? path : `${app.baseUrl}${path}`, {
    headers: key === null ? {} : { authorization: `Bearer ${key}` }
  })
  const bytes = new Uint8Array(await response.arrayBuffer())
  const body = response.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(new TextDecoder().decode(bytes)) : undefined
  return { status: response.status, headers: response.headers, bytes, body, text: new TextDecoder().decode(bytes) }
}

const hostedLinkOf = async (invoiceId: string) => {
  const link = ok(await api.post(`/invoices/${invoiceId}/pay-link`))
  const url = new URL(link.url)
  return { page: `${origin}${url.pathname}${url.search}`, pdf: `${origin}${url.pathname}/pdf${url.search}`, token: url.searchParams.get("token")! }
}

describe("GET /invoices/{id}/pdf", () => {
  it("answers the invoice as a PDF whose text holds its number, lines, taxes, totals, dates and both parties", async () => {
    const answer = await download(`/invoices/${invoice.id}/pdf`)
    expect(answer.status, answer.text.slice(0, 300)).toBe(200)
    expect(answer.headers.get("content-type")).toBe("application/pdf")
    expect(answer.headers.get("content-disposition")).toBe(`attachment; filename="${invoice.number}.pdf"`)
    expect(answer.headers.get("cache-control")).toBe("private, no-store")
    expect(new TextDecoder().decode(answer.bytes.slice(0, 5))).toBe("%PDF-")
    expect(pagesOf(answer.bytes)).toBe(1)
    const text = textOf(answer.bytes)
    expectInvoiceIn(text, ok(await api.get(`/invoices/${invoice.id}`)).invoice)
    // OPEN: how to pay, with the organisation's instructions and the number to quote.
    expect(text).toContain("How to pay")
    expect(text).toContain("IBAN IE29 AIBK 9311 5212 3456 78")
    expect(text).toContain(`Please quote ${invoice.number}`)
    // The same invoice renders the same bytes: the document is dated by the invoice, not by the request.
    expect((await download(`/invoices/${invoice.id}/pdf`)).bytes).toEqual(answer.bytes)
  })

  it("prints a PAID invoice as paid, and a long invoice over several pages, every line on one of them", async () => {
    const tenant = await app.tenant("Many Lines Co")
    const many = clientOf(app, tenant)
    const units = []
    // Prices of six decimal places, written as JSON numbers with those digits: 0.000125, 0.00025, ...
    for (let i = 0; i < 40; i++) units.push(await makeUnit(many, { flatPrice: Number((0.000125 * (i + 1)).toFixed(6)) }))
    const plan = await makePlan(app, tenant, units.map((unit, i) => ({ type: "UNIT" as const, billingMode: "ADVANCE" as const, unitId: unit.id, quantity: i + 1 })))
    const buyer = await makeCustomer(many)
    await buy(many, buyer.id, plan.id)
    const [long] = ok(await many.get(`/invoices?customerId=${buyer.id}`)).invoices
    ok(await many.post(`/invoices/${long.id}/payments`, { reference: "bank-7" }), 201)
    const paid = ok(await many.get(`/invoices/${long.id}`)).invoice
    expect(paid.status).toBe("PAID")
    const answer = await download(`/invoices/${long.id}/pdf`, tenant.apiKey)
    expect(answer.status).toBe(200)
    expect(pagesOf(answer.bytes)).toBeGreaterThan(1)
    const text = textOf(answer.bytes)
    expect(text).toContain(`PAID on ${day(paid.paidAt)}`)
    expect(text).toContain("Nothing is due.")
    expect(text).not.toContain("How to pay")
    for (const line of paid.lines) {
      const row = linesWith(text, line.description)
      expect(row, line.description).toHaveLength(1)
      expect(row[0]!.trim().endsWith(printed(line.amount)), row[0]).toBe(true)
    }
    expect(linesWith(text, "Total USD")[0]!.trim().endsWith(printed(paid.total))).toBe(true)
    expect(text).toMatch(/Page 1 of \d/)
  })

  it("states a DRAFT is not final (no number, no due date, named by its id) and a VOID one that nothing is due", async () => {
    const tenant = await app.tenant("Drafts Co")
    const drafts = clientOf(app, tenant)
    const settings = await app.cli(["org", "settings", "--invoice-grace-hours", "48", "--org", tenant.organizationId, "--json"])
    expect(settings.code, settings.stderr).toBe(0)
    const unit = await makeUnit(drafts, { flatPrice: 0.75 })
    const plan = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ])
    const buyer = await makeCustomer(drafts)
    const purchase = await buy(drafts, buyer.id, plan.id)
    expect((await drafts.post("/signal/unit", { customerId: buyer.id, agentKey: unit.agentKey, quantity: 5 })).status).toBe(202)
    await drain(app)
    const run = await app.cli(["cycle", "run", "--now", new Date(new Date(purchase.currentPeriodEnd).getTime() + 60_000).toISOString(), "--json"])
    expect(run.code, run.stderr).toBe(0)
    const invoices = ok(await drafts.get(`/invoices?customerId=${buyer.id}`)).invoices as Array<any>
    const draft = invoices.find((i) => i.status === "DRAFT")
    expect(draft, JSON.stringify(invoices)).toMatchObject({ kind: "USAGE", number: null })
    const answer = await download(`/invoices/${draft.id}/pdf`, tenant.apiKey)
    expect(answer.status).toBe(200)
    expect(answer.headers.get("content-disposition")).toBe(`attachment; filename="${draft.id}.pdf"`)
    const text = textOf(answer.bytes)
    expect(text).toContain("DRAFT (not final)")
    expect(text).toContain("(none: given when final)")
    expect(text).toContain("when final")
    expect(text).toContain("This invoice is a draft")
    expect(linesWith(text, "Total USD")[0]!.trim().endsWith(printed(draft.total))).toBe(true)
    expect(text).not.toContain("How to pay")

    const open = invoices.find((i) => i.status === "OPEN")
    const voided = await app.cli(["invoice", "void", open.id, "--org", tenant.organizationId, "--json"])
    expect(voided.code, voided.stderr).toBe(0)
    const voidText = textOf((await download(`/invoices/${open.id}/pdf`, tenant.apiKey)).bytes)
    expect(voidText).toContain(`VOID since ${day(voided.json.invoice.voidedAt)}`)
    expect(voidText).toContain("This invoice was voided")
    expect(voidText).not.toContain("How to pay")
  })

  it("marks an overdue invoice overdue, with its due date", async () => {
    const tenant = await app.tenant("Late Payers Co")
    const late = clientOf(app, tenant)
    const unit = await makeUnit(late, { flatPrice: 9.99 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }])
    const buyer = await makeCustomer(late)
    await buy(late, buyer.id, plan.id)
    const [due] = ok(await late.get(`/invoices?customerId=${buyer.id}`)).invoices
    expect(due.dueDate).not.toBeNull()
    // The cycle job, a second after the due date (payment terms 0: due when issued), marks it overdue.
    await runCycles(app, new Date(Date.parse(due.dueDate) + 1000))
    const overdue = ok(await late.get(`/invoices/${due.id}`)).invoice
    expect(overdue).toMatchObject({ status: "OPEN", overdue: true })
    const text = textOf((await download(`/invoices/${due.id}/pdf`, tenant.apiKey)).bytes)
    expect(text).toContain("OPEN, OVERDUE")
    expect(text).toContain(`It was due on ${day(overdue.dueDate)} and is overdue.`)
    expect(linesWith(text, "Due")[0]).toContain(day(overdue.dueDate))
  })

  it("is 404 in the envelope for another organisation's invoice and for an id that names nothing", async () => {
    expectError(await download(`/invoices/${foreignInvoice.id}/pdf`), 404, "invoice_not_found")
    expectError(await download(`/invoices/${invoice.id}/pdf`, other.apiKey), 404, "invoice_not_found")
    expectError(await download("/invoices/inv_nope/pdf"), 404, "invoice_not_found")
    expectError(await download("/invoices/not%20an%20id/pdf"), 404, "invoice_not_found")
    expectError(await download(`/invoices/${invoice.id}/pdf`, null), 401, "api_key_refused")
  })
})

describe("the typed client's invoices.pdf", () => {
  it("answers the PDF's bytes, and throws the envelope's 404 for an unknown invoice", async () => {
    const client = createBillingClient({ baseUrl: origin, apiKey: acme.apiKey, retry: { retries: 0 } })
    const bytes: Uint8Array = await client.invoices.pdf({ id: invoice.id })
    expect(bytes).toBeInstanceOf(Uint8Array)
    expect(bytes).toEqual((await download(`/invoices/${invoice.id}/pdf`)).bytes)
    await expect(client.invoices.pdf({ id: "inv_nope" })).rejects.toMatchObject({ status: 404, code: "invoice_not_found" })
  })
})

describe("the hosted invoice page's PDF", () => {
  it("opens with the page's own signed link, no API key, and reads as the API's PDF", async () => {
    const link = await hostedLinkOf(invoice.id)
    const answer = await download(link.pdf, null)
    expect(answer.status, answer.text.slice(0, 300)).toBe(200)
    expect(answer.headers.get("content-type")).toBe("application/pdf")
    expect(answer.headers.get("content-disposition")).toBe(`inline; filename="${invoice.number}.pdf"`)
    expect(answer.headers.get("cache-control")).toBe("no-store")
    expect(answer.headers.get("referrer-policy")).toBe("no-referrer")
    expectInvoiceIn(textOf(answer.bytes), ok(await api.get(`/invoices/${invoice.id}`)).invoice)
    expect(answer.bytes).toEqual((await download(`/invoices/${invoice.id}/pdf`)).bytes)
  })

  it("is linked from the hosted page", async () => {
    const link = await hostedLinkOf(invoice.id)
    const page = await fetch(link.page)
    const html = await page.text()
    expect(page.status).toBe(200)
    const href = /href="([^"]*\/pdf\?token=[^"]*)"/.exec(html)?.[1]?.replaceAll("&amp;", "&")
    expect(href, "no PDF link on the hosted page").toBeDefined()
    const answer = await download(new URL(href!, link.page).toString(), null)
    expect(answer.status).toBe(200)
    expect(textOf(answer.bytes)).toContain(invoice.number)
  })

  it("refuses a tampered, foreign, edited or expired link with the HTML refusal page, and a link that names nothing with 404", async () => {
    const link = await hostedLinkOf(invoice.id)
    const refused = async (url: string, status: number, title: RegExp) => {
      const answer = await download(url, null)
      expect(answer.status, answer.text.slice(0, 300)).toBe(status)
      expect(answer.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(answer.text).toMatch(title)
      expect(answer.text).not.toContain(invoice.number)
    }
    await refused(`${origin}/pay/${invoice.id}/pdf?token=${encodeURIComponent(tampered(link.token))}`, 401, /not valid/)
    await refused(`${origin}/pay/${invoice.id}/pdf`, 401, /not valid/)
    // The link of one invoice on another's path: the path is not signed, the token's invoice is.
    await refused(`${origin}/pay/${foreignInvoice.id}/pdf?token=${encodeURIComponent(link.token)}`, 401, /not valid/)
    // Signed by the other organisation but claiming Acme's invoice.
    const forged = await signedWith(app, other.organizationId, "pl", {
      org: acme.organizationId,
      customerId: customer.id,
      invoiceId: invoice.id,
      exp: Date.now() + 60_000
    })
    await refused(`${origin}/pay/${invoice.id}/pdf?token=${encodeURIComponent(forged)}`, 401, /not valid/)
    const expired = await signedWith(app, acme.organizationId, "pl", {
      org: acme.organizationId,
      customerId: customer.id,
      invoiceId: invoice.id,
      exp: Date.now() - 1000
    })
    await refused(`${origin}/pay/${invoice.id}/pdf?token=${encodeURIComponent(expired)}`, 401, /expired/)
    // Genuinely signed, but naming an invoice that does not exist, or one of another customer.
    const nothing = await signedWith(app, acme.organizationId, "pl", {
      org: acme.organizationId,
      customerId: customer.id,
      invoiceId: "inv_nope",
      exp: Date.now() + 60_000
    })
    await refused(`${origin}/pay/inv_nope/pdf?token=${encodeURIComponent(nothing)}`, 404, /Not found/)
    const elsewhere = await signedWith(app, acme.organizationId, "pl", {
      org: acme.organizationId,
      customerId: "cus_someone_else",
      invoiceId: invoice.id,
      exp: Date.now() + 60_000
    })
    await refused(`${origin}/pay/${invoice.id}/pdf?token=${encodeURIComponent(elsewhere)}`, 404, /Not found/)
  })
})

describe("billing invoice pdf", () => {
  it("writes the PDF to --out, the same document the API answers", async () => {
    const file = join(folder, "cli.pdf")
    const run = await app.cli(["invoice", "pdf", invoice.id, "--out", file, "--org", acme.organizationId, "--json"])
    expect(run.code, run.stderr).toBe(0)
    const bytes = new Uint8Array(readFileSync(file))
    expect(run.json).toEqual({ invoiceId: invoice.id, number: invoice.number, status: "OPEN", file, bytes: bytes.byteLength })
    expectInvoiceIn(textOf(bytes), ok(await api.get(`/invoices/${invoice.id}`)).invoice)
    expect(bytes).toEqual((await download(`/invoices/${invoice.id}/pdf`)).bytes)

    const viewed = await app.cli(["invoice", "pdf", invoice.id, "--out", join(folder, "view.pdf"), "--org", acme.organizationId])
    expect(viewed.code, viewed.stderr).toBe(0)
    expect(viewed.stdout).toContain(`Invoice ${invoice.number} written as a PDF`)
    expect(viewed.stdout).toContain(join(folder, "view.pdf"))
  })

  it("writes the same PDF from the real binary (the compiled build where it is current, with PDFKit and the fonts bundled or found)", async () => {
    const file = join(folder, "spawned.pdf")
    const run = await app.spawnCli(["invoice", "pdf", invoice.id, "--out", file, "--org", acme.organizationId, "--json"])
    expect(run.code, run.stderr).toBe(0)
    expect(run.json).toMatchObject({ invoiceId: invoice.id, number: invoice.number, file })
    expect(new Uint8Array(readFileSync(file))).toEqual((await download(`/invoices/${invoice.id}/pdf`)).bytes)
  })

  it("writes nothing for another organisation's invoice or an unknown id (exit 4), and needs --out (exit 2)", async () => {
    const file = join(folder, "never.pdf")
    const foreign = await app.cli(["invoice", "pdf", foreignInvoice.id, "--out", file, "--org", acme.organizationId])
    expect(foreign.code).toBe(4)
    expect(foreign.stderr).toContain(`Invoice ${foreignInvoice.id} not found`)
    const unknown = await app.cli(["invoice", "pdf", "inv_nope", "--out", file, "--org", acme.organizationId, "--json"])
    expect(unknown.code).toBe(4)
    expect(JSON.parse(unknown.stderr).statusDetail.code).toBe("invoice_not_found")
    expect(existsSync(file)).toBe(false)
    const noOut = await app.cli(["invoice", "pdf", invoice.id, "--org", acme.organizationId])
    expect(noOut.code).toBe(2)
    expect(noOut.stderr).toContain("--out")
    const badFolder = await app.cli(["invoice", "pdf", invoice.id, "--out", join(folder, "missing", "x.pdf"), "--org", acme.organizationId])
    expect(badFolder.code).toBe(2)
    expect(badFolder.stderr).toContain("cannot write")
  })
})
