/**
 * Credit notes (issue 38; docs/billing.md "Credit notes"): the model. A credit
 * note corrects an issued invoice without editing it: it credits an amount of
 * the invoice's total, or named lines of it (with the invoice's taxes on
 * them). On an OPEN invoice it lowers what is due (`appliedTo: AMOUNT_DUE`; at
 * zero the invoice is settled, PAID with no payment); on a PAID invoice the
 * amount goes to the customer's wallet through the ledger (`WALLET`). The
 * invoice keeps its lines and total as issued; its `amountDue` and
 * `creditNotes` say what the notes did. Numbered in their own gap-free
 * sequence per organisation (`CN-000001`, InvoiceNumbers.ts). The rules are
 * CreditNotes.ts.
 */
import { BigDecimal, Schema } from "effect"
import { IdempotencyKey, Money, MoneyInput, strict, Timestamp } from "../schema.ts"

/** Where a credit note's amount went: off what the OPEN invoice asks, or to the customer's wallet (a PAID invoice). */
export const CreditNoteAppliedTo = Schema.Literal("AMOUNT_DUE", "WALLET").annotations({
  description: "AMOUNT_DUE: the invoice was OPEN and the note lowered its `amountDue` (at 0 the invoice became PAID, " +
    "with no payment); WALLET: the invoice was PAID and the amount was credited to the customer's wallet " +
    "(a wallet ledger entry of type ADJUSTMENT naming the invoice, `walletLedgerEntryId`)."
})
export type CreditNoteAppliedTo = typeof CreditNoteAppliedTo.Type

/** An invoice line a credit note credits, and how much of it. */
export const CreditNoteLine = Schema.Struct({
  line: Schema.Int.annotations({
    description: "The invoice line credited: its place in the invoice's `lines`, counted from 1."
  }),
  description: Schema.String.annotations({ description: "The invoice line's description." }),
  amount: Money.annotations({ description: "How much of the line is credited (before tax)." })
})
export type CreditNoteLine = typeof CreditNoteLine.Type

/** A tax a line credit note gives back: the invoice's tax, at its rate, on the lines credited. */
export const CreditNoteTaxLine = Schema.Struct({
  taxId: Schema.String,
  name: Schema.String,
  ratePercent: Money,
  amount: Money
})
export type CreditNoteTaxLine = typeof CreditNoteTaxLine.Type

export const CreditNote = Schema.Struct({
  id: Schema.String,
  number: Schema.String.annotations({
    description: "The number a person quotes (`CN-000001`): sequential and gap-free per workspace, a sequence of " +
      "its own beside the invoices'."
  }),
  invoiceId: Schema.String,
  customerId: Schema.String,
  amount: Money.annotations({
    description: "What the note credits, taxes included, in cents (2 decimal places): what it takes off the " +
      "invoice's `amountDue`, or what it credits to the wallet."
  }),
  reason: Schema.String,
  lines: Schema.Array(CreditNoteLine).annotations({
    description: "The invoice lines credited; empty when the note credits an amount of the whole invoice."
  }),
  taxLines: Schema.Array(CreditNoteTaxLine).annotations({
    description: "The invoice's taxes on the lines credited, each rounded to the cent; empty for an amount."
  }),
  appliedTo: CreditNoteAppliedTo,
  walletLedgerEntryId: Schema.NullOr(Schema.String).annotations({
    description: "The wallet ledger entry that credited the amount (`WALLET`); null for `AMOUNT_DUE`."
  }),
  createdAt: Timestamp
})
export type CreditNote = typeof CreditNote.Type

/** A credit note as stored: its lines and tax lines are jsonb, their amounts decimal strings. */
export const CreditNoteRow = Schema.Struct({
  id: Schema.String,
  number: Schema.String,
  invoiceId: Schema.String,
  customerId: Schema.String,
  amount: Money,
  reason: Schema.String,
  lines: Schema.Array(CreditNoteLine),
  taxLines: Schema.Array(CreditNoteTaxLine),
  appliedTo: CreditNoteAppliedTo,
  walletLedgerId: Schema.NullOr(Schema.String),
  createdAt: Timestamp
})
export type CreditNoteRow = typeof CreditNoteRow.Type

/** A credit note as the API shows it, from its row. */
export const creditNoteFromRow = (row: CreditNoteRow): CreditNote => ({
  id: row.id,
  number: row.number,
  invoiceId: row.invoiceId,
  customerId: row.customerId,
  amount: row.amount,
  reason: row.reason,
  lines: row.lines,
  taxLines: row.taxLines,
  appliedTo: row.appliedTo,
  walletLedgerEntryId: row.walletLedgerId,
  createdAt: row.createdAt
})

/** The most lines one credit note names. */
export const MAX_CREDIT_NOTE_LINES = 500

/** An amount credited: a positive decimal of at most 2 decimal places (cents). */
export const CreditAmount = MoneyInput.pipe(
  Schema.filter(
    (amount) =>
      (BigDecimal.isPositive(amount) && BigDecimal.normalize(amount).scale <= 2) ||
      "must be a positive amount with at most 2 decimal places",
    { jsonSchema: { type: "number", exclusiveMinimum: 0, multipleOf: 0.01 } }
  )
)

export const CreditNoteLineInput = Schema.Struct({
  line: Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(1, { message: () => "must be a whole number from 1" }),
    Schema.lessThanOrEqualTo(100_000, { message: () => "must be at most 100000" })
  ).annotations({ description: "The invoice line to credit: its place in the invoice's `lines`, counted from 1." }),
  amount: Schema.optional(CreditAmount).annotations({
    description: "How much of the line to credit, before tax; left out: all that remains of it (its amount less " +
      "what earlier credit notes credited on it)."
  })
}).annotations(strict)

/** What a credit note asks, in the order its checks go: the body's form here (400), the rest in CreditNotes.ts. */
const bodyRule = (body: {
  readonly amount?: BigDecimal.BigDecimal | undefined
  readonly lines?: ReadonlyArray<{ readonly line: number }> | undefined
}) => {
  if ((body.amount === undefined) === (body.lines === undefined)) {
    return { path: body.amount === undefined ? ["amount"] : ["lines"], message: "send exactly one of amount and lines" }
  }
  const seen = new Set<number>()
  for (const [index, entry] of (body.lines ?? []).entries()) {
    if (seen.has(entry.line)) return { path: ["lines", index, "line"], message: `names line ${entry.line} twice` }
    seen.add(entry.line)
  }
  return true
}

/**
 * `POST /invoices/{id}/credit-notes` and `billing invoice credit`: exactly one
 * of `amount` (that much of the invoice's total, taxes included) and `lines`
 * (named invoice lines, with the invoice's taxes on them), a `reason`, and an
 * optional `idempotencyKey`.
 */
export const CreditNoteCreate = Schema.Struct({
  amount: Schema.optional(CreditAmount).annotations({
    description: "Credit this much of the invoice's total, taxes included: a positive amount with at most 2 " +
      "decimal places. Send this or `lines`."
  }),
  lines: Schema.optional(
    Schema.Array(CreditNoteLineInput).pipe(
      Schema.minItems(1, { message: () => "must name at least one line" }),
      Schema.maxItems(MAX_CREDIT_NOTE_LINES, { message: () => `must name at most ${MAX_CREDIT_NOTE_LINES} lines` })
    )
  ).annotations({
    description: "Credit these invoice lines (each at most once), with the invoice's taxes at their rates on what " +
      "they credit. Send this or `amount`."
  }),
  reason: Schema.String.pipe(
    Schema.filter((text) => text.trim().length > 0 || "must not be empty"),
    Schema.maxLength(500, { message: () => "must be at most 500 characters" })
  ).annotations({ description: "Why the invoice is credited (printed on the invoice's pages and PDF), 1 to 500 characters." }),
  idempotencyKey: Schema.optional(IdempotencyKey.annotations({
    description: "1 to 255 characters, unique among the workspace's credit notes. The same key with the same " +
      "request (same invoice, amount or lines, reason) creates nothing again and answers the first credit note " +
      "(`replayed: true`); the same key with another request is refused (422). A refused request never uses up its key."
  }))
}).annotations(strict).pipe(
  Schema.filter(bodyRule, {
    jsonSchema: { allOf: [{ oneOf: [{ required: ["amount"] }, { required: ["lines"] }] }] }
  }),
  Schema.annotations({ ...strict, identifier: "CreditNoteCreate" })
)
export type CreditNoteCreate = typeof CreditNoteCreate.Type
