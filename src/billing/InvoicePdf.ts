/**
 * An invoice as a PDF: a pure function from an invoice's view (the invoice as
 * the API shows it, who issues it, who it is billed to) to the bytes of an A4
 * document, rendered by PDFKit (docs/billing.md "PDF"). Nothing here reads the
 * database or the clock: the same view gives the same bytes (the document's
 * creation date is the invoice's last change, not the moment it is rendered).
 *
 * Amounts are printed from their exact decimals, digit for digit as the API
 * sends them, only padded to two decimal places (`15.1` prints `15.10`, a usage
 * line's `0.000125` stays `0.000125`): never through a float, never rounded.
 * Dates are UTC calendar dates (`2026-01-31`), as the document says.
 *
 * The text is set in DejaVu Sans (the `dejavu-fonts-ttf` package), embedded as
 * a subset with its Unicode map, so names in Latin, Greek or Cyrillic scripts
 * print as typed and `pdftotext` (or a screen reader, or a copy and paste)
 * reads back the same characters. PDFKit and the fonts are loaded on the first
 * render only: no other command or request pays for them.
 */
import { BigDecimal, Effect } from "effect"
import { createRequire } from "node:module"
import type { Invoice } from "./Invoice.ts"
import type { UnitPriceShown } from "./LineUnitPrice.ts"

/** A party of the invoice: its name and the lines under it (contact, address, tax number). */
export interface InvoicePdfParty {
  readonly name: string
  readonly lines: ReadonlyArray<string>
}

/**
 * A credit note as the PDF lists it: those that lowered what is due under the
 * totals, every one with its reason under "Credit notes".
 */
export interface InvoicePdfCreditNote {
  readonly number: string
  readonly issuedAt: Date
  readonly amount: BigDecimal.BigDecimal
  readonly reason: string | null
  /** AMOUNT_DUE: taken off what the invoice asks; WALLET: credited to the customer's wallet (a PAID invoice). */
  readonly appliedTo: "AMOUNT_DUE" | "WALLET"
}

/** What one invoice's PDF shows, built by `InvoicePdfs` (InvoicePdfs.ts) from the invoice, its organisation and its customer. */
export interface InvoicePdfView {
  readonly invoice: Invoice
  /** Each line's unit price as the hosted page shows it (src/billing/LineUnitPrice.ts), in the lines' order. */
  readonly unitPrices: ReadonlyArray<UnitPriceShown>
  /** The date payment is due: the invoice's `dueDate` (null while DRAFT). */
  readonly dueDate: Date | null
  /** The invoice is OPEN and past its due date (the invoice's `overdue`). */
  readonly overdue: boolean
  /** Credit notes against the invoice, oldest first. */
  readonly creditNotes: ReadonlyArray<InvoicePdfCreditNote>
  /** What is left to pay of an OPEN invoice when credit notes lowered it; null prints no line of its own. */
  readonly amountDue: BigDecimal.BigDecimal | null
  /** The organisation that issues the invoice: its name and billing contact (e-mail, postal address). */
  readonly seller: InvoicePdfParty
  /** The customer: legal name (or name), e-mail, postal address, tax number. */
  readonly billedTo: InvoicePdfParty
  /** The organisation's payment instructions, printed on an OPEN invoice; null when it has none. */
  readonly paymentInstructions: string | null
}

// --- text of values -----------------------------------------------------------------------------

/** A decimal's digits, never in exponent form, with no trailing zeros (as the API's JSON number reads). */
export const plainDecimal = (value: BigDecimal.BigDecimal): string => {
  const { scale, value: digits } = BigDecimal.normalize(value)
  const negative = digits < 0n
  const absolute = (negative ? -digits : digits).toString()
  let text: string
  if (scale <= 0) {
    text = absolute + "0".repeat(-scale)
  } else if (scale >= absolute.length) {
    text = `0.${"0".repeat(scale - absolute.length)}${absolute}`
  } else {
    text = `${absolute.slice(0, absolute.length - scale)}.${absolute.slice(absolute.length - scale)}`
  }
  return negative ? `-${text}` : text
}

/** An amount as printed: `plainDecimal` with at least two decimal places (`15.1` -> `15.10`, `12.345` stays). */
export const amountText = (value: BigDecimal.BigDecimal): string => {
  const text = plainDecimal(value)
  const point = text.indexOf(".")
  if (point < 0) return `${text}.00`
  return text.length - point - 1 < 2 ? `${text}0` : text
}

/** A UTC calendar date: `2026-01-31`. */
export const dateText = (date: Date): string => date.toISOString().slice(0, 10)

const periodText = (start: Date | null, end: Date | null) =>
  start === null || end === null ? null : `${dateText(start)} to ${dateText(end)}`

const titleOf = (invoice: Invoice) =>
  invoice.kind === "PLAN" ? "Plan invoice" : invoice.kind === "PRORATION" ? "Plan change invoice" : "Usage invoice"

/** The invoice's status as the document states it. */
const statusText = (view: InvoicePdfView) => {
  const { invoice } = view
  switch (invoice.status) {
    case "DRAFT":
      return "DRAFT (not final)"
    case "OPEN":
      return view.overdue ? "OPEN, OVERDUE" : "OPEN"
    case "PAID":
      return invoice.paidAt === null ? "PAID" : `PAID on ${dateText(invoice.paidAt)}`
    case "VOID":
      return invoice.voidedAt === null ? "VOID" : `VOID since ${dateText(invoice.voidedAt)}`
  }
}

/** A file name for the invoice: its number (or id), with nothing a header or a file system would choke on. */
export const invoicePdfFileName = (invoice: Pick<Invoice, "id" | "number">) =>
  `${(invoice.number ?? invoice.id).replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[.-]+/, "") || "invoice"}.pdf`

// --- layout -------------------------------------------------------------------------------------

/** The fonts' files, found from here as any package is (from the sources, or from the compiled doors in dist/). */
const fontFiles = () => {
  const packageFiles = createRequire(import.meta.url)
  return {
    regular: packageFiles.resolve("dejavu-fonts-ttf/ttf/DejaVuSans.ttf"),
    bold: packageFiles.resolve("dejavu-fonts-ttf/ttf/DejaVuSans-Bold.ttf")
  }
}

const PAGE = { width: 595.28, height: 841.89, margin: 50 } as const
const LEFT = PAGE.margin
const RIGHT = PAGE.width - PAGE.margin
const BOTTOM = PAGE.height - PAGE.margin - 24
const INK = "#16181d"
const MUTED = "#555d6b"
const RULE = "#c9ced6"
const OVERDUE = "#b3261e"
/** The invoice's facts, top right: their labels, and their values right-aligned to the margin. */
const FACTS_X = 298
const FACTS_VALUE_X = 380

/** The lines table's columns: description, quantity, unit price, amount (right-aligned numbers). */
const COLUMNS = [
  { header: "Description", x: LEFT, width: 235, align: "left" },
  { header: "Quantity", x: LEFT + 240, width: 70, align: "right" },
  { header: "Unit price", x: LEFT + 315, width: 85, align: "right" },
  { header: "Amount", x: LEFT + 405, width: RIGHT - LEFT - 405, align: "right" }
] as const

type Doc = PDFKit.PDFDocument

/**
 * The last time the invoice changed (voided, paid, issued, or credited): the
 * document's creation date, so the same invoice renders the same bytes.
 */
const changedAt = (view: InvoicePdfView) => {
  const { invoice } = view
  const changed = invoice.voidedAt ?? invoice.paidAt ?? invoice.issuedAt
  const credited = view.creditNotes.reduce((latest, note) => Math.max(latest, note.issuedAt.getTime()), changed.getTime())
  return new Date(credited)
}

const render = async (view: InvoicePdfView): Promise<Uint8Array> => {
  const { default: PDFDocument } = await import("pdfkit")
  const fonts = fontFiles()
  const { invoice } = view
  const currency = invoice.currencyCode
  const reference = invoice.number ?? "(none: given when final)"
  const doc: Doc = new PDFDocument({
    size: "A4",
    margin: PAGE.margin,
    font: fonts.regular,
    bufferPages: true,
    displayTitle: true,
    lang: "en",
    info: {
      Title: `${titleOf(invoice)} ${invoice.number ?? invoice.id}`,
      Author: view.seller.name,
      Subject: `${titleOf(invoice)} ${invoice.number ?? invoice.id} for ${view.billedTo.name}`,
      Creator: "billing",
      Producer: "billing (PDFKit)",
      CreationDate: changedAt(view),
      ModDate: changedAt(view)
    }
  })
  const chunks: Array<Buffer> = []
  doc.on("data", (chunk: Buffer) => chunks.push(chunk))
  const ended = new Promise<void>((resolve, reject) => {
    doc.on("end", resolve)
    doc.on("error", reject)
  })

  const text = (value: string, x: number, y: number, options: PDFKit.Mixins.TextOptions & { readonly bold?: boolean; readonly size?: number; readonly color?: string } = {}) => {
    const { bold, color, size, ...rest } = options
    doc.font(bold === true ? fonts.bold : fonts.regular).fontSize(size ?? 9.5).fillColor(color ?? INK)
    doc.text(value, x, y, { lineBreak: rest.width !== undefined, ...rest })
    return doc.y
  }
  /** A number in a column: on one line, right-aligned, the type made smaller until it fits (never wrapped, never cut). */
  const figure = (value: string, x: number, y: number, width: number, options: { readonly bold?: boolean; readonly size?: number } = {}) => {
    let size = options.size ?? 9.5
    doc.font(options.bold === true ? fonts.bold : fonts.regular)
    while (size > 5 && doc.fontSize(size).widthOfString(value) > width) size -= 0.5
    return text(value, x, y + ((options.size ?? 9.5) - size) / 2, { ...options, size, width, align: "right", lineBreak: false })
  }
  const heightOf = (value: string, width: number, options: { readonly bold?: boolean; readonly size?: number } = {}) => {
    doc.font(options.bold === true ? fonts.bold : fonts.regular).fontSize(options.size ?? 9.5)
    return doc.heightOfString(value, { width })
  }
  const rule = (y: number, color = RULE, width = 0.75) => {
    doc.moveTo(LEFT, y).lineTo(RIGHT, y).lineWidth(width).strokeColor(color).stroke()
  }

  // Header: the seller on the left, the invoice's facts on the right.
  let y: number = PAGE.margin
  const sellerEnd = (() => {
    let at = text(view.seller.name, LEFT, y, { bold: true, size: 15, width: FACTS_X - LEFT - 15 })
    for (const line of view.seller.lines) at = text(line, LEFT, at + 1, { color: MUTED, width: FACTS_X - LEFT - 15 })
    return at
  })()
  text(titleOf(invoice).toUpperCase(), FACTS_X, y, { bold: true, size: 15, width: RIGHT - FACTS_X, align: "right" })
  const facts: Array<readonly [string, string]> = [
    ["Invoice number", reference],
    ["Status", statusText(view)],
    ["Issued", dateText(invoice.issuedAt)],
    ["Due", view.dueDate === null ? (invoice.status === "DRAFT" ? "when final" : "-") : dateText(view.dueDate)]
  ]
  const period = periodText(invoice.periodStart, invoice.periodEnd)
  if (period !== null) facts.push(["Period", period])
  facts.push(["Currency", currency])
  let factsY = y + 24
  for (const [label, value] of facts) {
    text(label, FACTS_X, factsY, { color: MUTED, width: FACTS_VALUE_X - FACTS_X, lineBreak: false })
    const alarm = view.overdue && (label === "Status" || label === "Due")
    factsY = Math.max(factsY + 13, text(value, FACTS_VALUE_X, factsY, {
      bold: label === "Invoice number" || label === "Due" || alarm,
      color: alarm ? OVERDUE : INK,
      width: RIGHT - FACTS_VALUE_X,
      align: "right"
    }))
  }
  y = Math.max(sellerEnd, factsY) + 18

  // Billed to.
  text("BILLED TO", LEFT, y, { bold: true, size: 8, color: MUTED })
  y = text(view.billedTo.name, LEFT, y + 12, { bold: true, width: 270 })
  for (const line of view.billedTo.lines) y = text(line, LEFT, y + 1, { width: 270 })
  y += 20

  // The lines, with their header repeated on each page they run onto.
  const tableHeader = (at: number) => {
    for (const column of COLUMNS) {
      const header = column.header === "Amount" ? `Amount (${currency})` : column.header
      text(header, column.x, at, { bold: true, size: 8.5, color: MUTED, width: column.width, align: column.align })
    }
    rule(at + 13, INK, 0.75)
    return at + 19
  }
  y = tableHeader(y)
  const differentPeriod = (line: Invoice["lines"][number]) =>
    line.periodStart !== null && line.periodEnd !== null &&
    (line.periodStart.getTime() !== invoice.periodStart?.getTime() || line.periodEnd.getTime() !== invoice.periodEnd?.getTime())
  for (const [index, line] of invoice.lines.entries()) {
    const note = differentPeriod(line) ? `Period ${periodText(line.periodStart, line.periodEnd)}` : null
    const height = heightOf(line.description, COLUMNS[0].width) + (note === null ? 0 : heightOf(note, COLUMNS[0].width, { size: 8 }) + 1)
    if (y + height > BOTTOM) {
      doc.addPage()
      y = tableHeader(PAGE.margin)
    }
    let end = text(line.description, COLUMNS[0].x, y, { width: COLUMNS[0].width })
    if (note !== null) end = text(note, COLUMNS[0].x, end + 1, { size: 8, color: MUTED, width: COLUMNS[0].width })
    figure(line.quantity === null ? "-" : plainDecimal(line.quantity), COLUMNS[1].x, y, COLUMNS[1].width)
    const unitPrice = view.unitPrices[index] ?? { _tag: "None" }
    figure(
      unitPrice._tag === "Price" ? amountText(unitPrice.price) : unitPrice._tag === "Tiered" ? "tiered" : "-",
      COLUMNS[2].x,
      y,
      COLUMNS[2].width
    )
    figure(amountText(line.amount), COLUMNS[3].x, y, COLUMNS[3].width)
    y = end + 5
    rule(y - 2.5)
  }
  if (invoice.lines.length === 0) {
    y = text("No lines.", LEFT, y, { color: MUTED }) + 6
  }

  // Totals, right-aligned under the amounts.
  const loweringNotes = view.creditNotes.filter((note) => note.appliedTo === "AMOUNT_DUE")
  const afterNotes = loweringNotes.reduce((left, note) => BigDecimal.subtract(left, note.amount), invoice.total)
  const totals: Array<{ readonly label: string; readonly value: string; readonly strong?: boolean }> = [
    { label: "Subtotal", value: amountText(invoice.subtotal) },
    ...invoice.taxLines.map((tax) => ({ label: `${tax.name} (${plainDecimal(tax.ratePercent)}%)`, value: amountText(tax.amount) })),
    { label: `Total ${currency}`, value: amountText(invoice.total), strong: true },
    // The notes that lowered what is due, then what is left: the amount due while OPEN.
    ...loweringNotes.map((note) => ({
      label: `Credit note ${note.number} (${dateText(note.issuedAt)})`,
      value: amountText(BigDecimal.negate(note.amount))
    })),
    ...(loweringNotes.length === 0 ? [] : [{
      label: `${view.amountDue === null ? "After credit notes" : "Amount due"} ${currency}`,
      value: amountText(view.amountDue ?? afterNotes),
      strong: true
    }])
  ]
  const totalsHeight = totals.length * 15 + 10
  if (y + totalsHeight > BOTTOM) {
    doc.addPage()
    y = PAGE.margin
  }
  y += 6
  for (const total of totals) {
    if (total.strong === true) {
      doc.moveTo(330, y - 2).lineTo(RIGHT, y - 2).lineWidth(1).strokeColor(INK).stroke()
    }
    text(total.label, 280, y + 1, { bold: total.strong, width: 200, align: "right" })
    figure(total.value, COLUMNS[3].x - 20, y + 1, COLUMNS[3].width + 20, { bold: total.strong === true })
    y += 15
  }
  y += 14

  // What the customer does next.
  const paragraphs: Array<{ readonly heading: string; readonly body: string }> = []
  if (view.creditNotes.length > 0) {
    paragraphs.push({
      heading: "Credit notes",
      body: view.creditNotes.map((note) =>
        `${note.number} of ${dateText(note.issuedAt)}: ${amountText(note.amount)} ${currency} ${
          note.appliedTo === "WALLET" ? "credited to your wallet" : "taken off the amount due"
        }.${note.reason === null ? "" : ` ${note.reason}`}`
      ).join("\n")
    })
  }
  if (invoice.status === "OPEN") {
    const due = view.dueDate === null ? "" : view.overdue ? ` It was due on ${dateText(view.dueDate)} and is overdue.` : ` It is due on ${dateText(view.dueDate)}.`
    const amount = view.amountDue === null ? "" : ` The amount due is ${amountText(view.amountDue)} ${currency}.`
    paragraphs.push({
      heading: "How to pay",
      body: `Please quote ${reference} with your payment.${amount}${due}` +
        (view.paymentInstructions === null ? ` Contact ${view.seller.name} for how to pay.` : `\n${view.paymentInstructions}`)
    })
  } else if (invoice.status === "DRAFT") {
    paragraphs.push({
      heading: "Draft",
      body: "This invoice is a draft: usage of its period that arrives late may still change it. It cannot be paid " +
        `yet; ${view.seller.name} will issue it when it is final.`
    })
  } else if (invoice.status === "PAID") {
    const on = invoice.paidAt === null ? "" : ` on ${dateText(invoice.paidAt)}`
    // Settled by credit notes alone: nothing was paid.
    const settledByNotes = loweringNotes.length > 0 && !BigDecimal.isPositive(afterNotes)
    paragraphs.push({ heading: "Paid", body: settledByNotes ? `Settled by credit notes${on}. Nothing is due.` : `Paid in full${on}. Nothing is due.` })
  } else {
    paragraphs.push({ heading: "Void", body: `This invoice was voided${invoice.voidedAt === null ? "" : ` on ${dateText(invoice.voidedAt)}`}. Nothing is due.` })
  }
  for (const paragraph of paragraphs) {
    const height = 14 + heightOf(paragraph.body, RIGHT - LEFT)
    if (y + height > BOTTOM) {
      doc.addPage()
      y = PAGE.margin
    }
    text(paragraph.heading, LEFT, y, { bold: true, size: 10.5 })
    y = text(paragraph.body, LEFT, y + 15, { width: RIGHT - LEFT }) + 12
  }

  // Every page's footer: which invoice, which page.
  const pages = doc.bufferedPageRange()
  for (let page = 0; page < pages.count; page++) {
    doc.switchToPage(pages.start + page)
    const footer = `${invoice.number ?? invoice.id} \u00b7 ${view.seller.name} \u00b7 Dates in UTC \u00b7 Page ${page + 1} of ${pages.count}`
    // Below the bottom margin: PDFKit would start a new page for text placed there unless the margin allows it.
    doc.page.margins.bottom = 0
    text(footer, LEFT, PAGE.height - PAGE.margin + 8, { size: 7.5, color: MUTED, width: RIGHT - LEFT, align: "center" })
  }
  doc.end()
  await ended
  const bytes = Buffer.concat(chunks)
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

/** The PDF of an invoice's view. A failure to render is a defect: the view is always printable. */
export const invoicePdf = (view: InvoicePdfView): Effect.Effect<Uint8Array> =>
  Effect.promise(() => render(view)).pipe(Effect.withSpan("InvoicePdf.render"))
