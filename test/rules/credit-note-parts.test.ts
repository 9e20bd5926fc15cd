/**
 * What a credit note credits, worked out in memory (src/billing/CreditNotes.ts
 * `creditNoteParts`; docs/billing.md "Credit notes"): an amount of the total,
 * or named lines with the invoice's taxes on them, never beyond what remains,
 * the closing note taking exactly what is left, and the refusals.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import type { CreditNote } from "../../src/billing/CreditNote.ts"
import { creditNoteParts } from "../../src/billing/CreditNotes.ts"
import type { Invoice } from "../../src/billing/Invoice.ts"
import { decimal, toSql } from "../../src/money.ts"

const at = new Date("2025-03-01T00:00:00.000Z")

/** An OPEN invoice of `lines` with one tax of `rate` %, its totals as the service rounds them. */
const invoiceOf = (lines: ReadonlyArray<string>, rate: string, total: string, tax: string, creditNotes: ReadonlyArray<CreditNote> = []): Invoice => ({
  id: "inv_1",
  number: "INV-000001",
  customerId: "cus_1",
  purchaseId: null,
  kind: "PLAN",
  status: "OPEN",
  currencyCode: "USD",
  periodStart: at,
  periodEnd: at,
  lines: lines.map((amount, index) => ({
    description: `Line ${index + 1}`,
    componentId: null,
    quantity: null,
    unitPrice: null,
    amount: decimal(amount),
    periodStart: at,
    periodEnd: at
  })),
  taxLines: [{ taxId: "tax_1", name: "VAT", ratePercent: decimal(rate), amount: decimal(tax) }],
  subtotal: decimal((Number(total) - Number(tax)).toFixed(2)),
  taxTotal: decimal(tax),
  total: decimal(total),
  totalCents: Math.round(Number(total) * 100),
  amountDue: decimal(total),
  issuedAt: at,
  paidAt: null,
  voidedAt: null,
  dueDate: at,
  overdue: false,
  overdueAt: null,
  creditNotes
})

/** A credit note already made of `parts`. */
const noteOf = (parts: { amount: string; lines?: Array<[number, string]>; tax?: string }): CreditNote => ({
  id: "cn_x",
  number: "CN-000001",
  invoiceId: "inv_1",
  customerId: "cus_1",
  amount: decimal(parts.amount),
  reason: "earlier",
  lines: (parts.lines ?? []).map(([line, amount]) => ({ line, description: `Line ${line}`, amount: decimal(amount) })),
  taxLines: parts.tax === undefined ? [] : [{ taxId: "tax_1", name: "VAT", ratePercent: decimal("20"), amount: decimal(parts.tax) }],
  appliedTo: "AMOUNT_DUE",
  walletLedgerEntryId: null,
  createdAt: at
})

const worked = (invoice: Invoice, request: Parameters<typeof creditNoteParts>[1]) => {
  const result = creditNoteParts(invoice, request)
  if (Either.isLeft(result)) return { refused: result.left._tag, message: result.left.message }
  return {
    amount: toSql(result.right.amount),
    lines: result.right.lines.map((line) => [line.line, toSql(line.amount)]),
    taxes: result.right.taxLines.map((tax) => toSql(tax.amount))
  }
}

describe("creditNoteParts", () => {
  // Lines 10.00 and 5.00, VAT 20 %: 15.00 + 3.00 = 18.00.
  const invoice = invoiceOf(["10", "5"], "20", "18", "3")

  it("credits an amount of the total as a whole, up to what remains", () => {
    expect(worked(invoice, { amount: decimal("18") })).toEqual({ amount: "18", lines: [], taxes: [] })
    expect(worked(invoice, { amount: decimal("18.01") })).toMatchObject({ refused: "CreditExceedsRemaining" })
    const credited = invoiceOf(["10", "5"], "20", "18", "3", [noteOf({ amount: "17.5" })])
    expect(worked(credited, { amount: decimal("0.5") })).toMatchObject({ amount: "0.5" })
    expect(worked(credited, { amount: decimal("0.51") })).toMatchObject({
      refused: "CreditExceedsRemaining",
      message: expect.stringContaining("0.50 (its total 18.00 less 17.50 of earlier credit notes)")
    })
  })

  it("credits lines with the invoice's tax on them, in line order, each up to what remains of it", () => {
    expect(worked(invoice, { lines: [{ line: 2 }, { line: 1, amount: decimal("2.5") }] })).toEqual({
      amount: "9",
      lines: [[1, "2.5"], [2, "5"]],
      taxes: ["1.5"]
    })
    const credited = invoiceOf(["10", "5"], "20", "18", "3", [noteOf({ amount: "3", lines: [[1, "2.5"]], tax: "0.5" })])
    expect(worked(credited, { lines: [{ line: 1, amount: decimal("7.51") }] })).toMatchObject({ refused: "CreditExceedsRemaining" })
    expect(worked(credited, { lines: [{ line: 3 }] })).toMatchObject({ refused: "UnknownInvoiceLine" })
  })

  it("lets the note that credits the last of every line take exactly what is left", () => {
    const parts = invoiceOf(["10", "5"], "20", "18", "3", [
      noteOf({ amount: "4", lines: [[1, "3.33"]], tax: "0.67" }),
      noteOf({ amount: "4", lines: [[1, "3.33"]], tax: "0.67" }),
      noteOf({ amount: "4.01", lines: [[1, "3.34"]], tax: "0.67" })
    ])
    expect(worked(parts, { lines: [{ line: 2 }] })).toEqual({ amount: "5.99", lines: [[2, "5"]], taxes: ["0.99"] })
    // After an amount note, no line note closes: line 2 with its tax is more than the 1.00 left.
    const mixed = invoiceOf(["10", "5"], "20", "18", "3", [noteOf({ amount: "5", lines: [[1, "10"]], tax: "2" }), noteOf({ amount: "12" })])
    expect(worked(mixed, { lines: [{ line: 2 }] })).toMatchObject({ refused: "CreditExceedsRemaining" })
  })

  it("refuses lines that come to less than a cent, and lines that are not charges", () => {
    const usage = invoiceOf(["0.000125", "5"], "20", "6", "1")
    expect(worked(usage, { lines: [{ line: 1 }] })).toMatchObject({ refused: "CreditNoteEmpty" })
    const withCredit = invoiceOf(["10", "-3"], "20", "8.4", "1.4")
    expect(worked(withCredit, { lines: [{ line: 2 }] })).toMatchObject({
      refused: "CreditExceedsRemaining",
      message: expect.stringContaining("not a charge")
    })
  })
})
