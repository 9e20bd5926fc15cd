/**
 * The invoice model: the rows an invoice and its lines are stored as, the
 * invoice and payment the API answers, the payment a product or an operator
 * records, and an invoice computed in memory before it is written
 * (`IssuedInvoice`). A purchase issues a PLAN invoice at every cycle start
 * (the plan cost), a USAGE invoice at a cycle end when ARREAR usage was
 * charged, and a PRORATION invoice for a plan change NOW. Lines keep exact
 * decimals; the invoice rounds its subtotal to cents, each active tax is a
 * cent-rounded line on that subtotal, and the total is their sum
 * (InvoiceTotals.ts), so the totals always add up to the cent.
 *
 * States: DRAFT -> OPEN or PAID (the cycle job finalises a cycle-end USAGE
 * invoice when the organisation's grace period ends; DraftInvoices.ts);
 * OPEN -> PAID (a payment) or OPEN -> VOID (an operator). A zero-total invoice
 * is issued PAID. A DRAFT is never paid, voided or given a pay link (409).
 * Each line carries the period it bills: the invoice's, or an earlier cycle's
 * for a late line (docs/billing.md "Late usage and the grace period").
 * A final invoice has a due date and may be marked overdue (DueDates.ts).
 * An OPEN or PAID invoice may be credited (CreditNote.ts): its lines and total
 * stay as issued, its `amountDue` and `creditNotes` say what the notes did.
 */
import { BigDecimal, Schema } from "effect"
import { CustomerId } from "../ids.ts"
import { type Decimal, sum, ZERO } from "../money.ts"
import { IdempotencyKey, Money, strict, Timestamp } from "../schema.ts"
import { CreditNote, type CreditNoteAppliedTo } from "./CreditNote.ts"
import type { InvoiceTotals, LineInput } from "./InvoiceTotals.ts"

/**
 * DRAFT: a cycle-end USAGE invoice inside the organisation's grace period;
 * late usage of its cycle still changes it, nothing can pay or void it, and
 * the cycle job finalises it (OPEN, or PAID) when the grace period ends.
 */
export const InvoiceStatus = Schema.Literal("DRAFT", "OPEN", "PAID", "VOID")

/** An invoice's number: its organisation's prefix and its place in the sequence; null while DRAFT. */
export const InvoiceNumber = Schema.NullOr(Schema.String).annotations({
  description: "The number a person quotes (`INV-000042`): sequential and gap-free per organisation, " +
    "given when the invoice is finalised; null while it is a DRAFT."
})

/**
 * PLAN: a cycle start's plan cost; USAGE: an ended cycle's ARREAR usage (and late lines); PRORATION: a plan
 * change NOW (the old plan's unused share credited, the new plan's share charged, the old plan's usage so far).
 */
export const InvoiceKind = Schema.Literal("PLAN", "USAGE", "PRORATION")
export type InvoiceKind = typeof InvoiceKind.Type

/**
 * When payment is due: the moment the invoice became final (issued OPEN or
 * PAID, or a DRAFT finalised when its grace period ended) plus the customer's
 * payment terms, or the organisation's, in whole days of 24 hours (DueDates.ts,
 * docs/billing.md "Due dates and overdue"). Null while DRAFT; a PAID or VOID
 * invoice keeps the one it was given.
 */
export const DueDate = Schema.NullOr(Timestamp).annotations({
  description: "When payment is due (ISO 8601): the moment the invoice became final plus the customer's payment " +
    "terms (or the workspace's), in whole days. Null while DRAFT (it becomes final when its grace period ends); " +
    "kept as it is once the invoice is PAID or VOID."
})

export class InvoiceRow extends Schema.Class<InvoiceRow>("InvoiceRow")({
  id: Schema.String,
  number: InvoiceNumber,
  customerId: CustomerId,
  purchaseId: Schema.NullOr(Schema.String),
  kind: InvoiceKind,
  status: InvoiceStatus,
  currencyCode: Schema.String,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  subtotal: Money,
  taxTotal: Money,
  total: Money,
  issuedAt: Timestamp,
  paidAt: Schema.NullOr(Timestamp),
  voidedAt: Schema.NullOr(Timestamp),
  dueDate: Schema.NullOr(Timestamp),
  overdueAt: Schema.NullOr(Timestamp)
}) {}

export const LineRow = Schema.Struct({
  invoiceId: Schema.String,
  position: Schema.Number,
  kind: Schema.Literal("LINE", "TAX"),
  description: Schema.String,
  quantity: Schema.NullOr(Money),
  unitPrice: Schema.NullOr(Money),
  amount: Money,
  componentId: Schema.NullOr(Schema.String),
  taxId: Schema.NullOr(Schema.String),
  ratePercent: Schema.NullOr(Money),
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  cycleIndex: Schema.NullOr(Schema.Number)
})

export const InvoiceLine = Schema.Struct({
  description: Schema.String,
  componentId: Schema.NullOr(Schema.String),
  quantity: Schema.NullOr(Money),
  unitPrice: Schema.NullOr(Money),
  amount: Money,
  periodStart: Schema.NullOr(Timestamp).annotations({
    description: "Start of the period the line bills (ISO 8601): the invoice's, or an earlier cycle's for a late line."
  }),
  periodEnd: Schema.NullOr(Timestamp).annotations({
    description: "End of the period the line bills (ISO 8601): the invoice's, or an earlier cycle's for a late line."
  })
})

export const TaxLine = Schema.Struct({
  taxId: Schema.String,
  name: Schema.String,
  ratePercent: Money,
  amount: Money
})

export const Invoice = Schema.Struct({
  id: Schema.String,
  number: InvoiceNumber,
  customerId: Schema.String,
  purchaseId: Schema.NullOr(Schema.String),
  kind: InvoiceKind,
  status: InvoiceStatus,
  currencyCode: Schema.String,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  lines: Schema.Array(InvoiceLine),
  taxLines: Schema.Array(TaxLine),
  subtotal: Money,
  taxTotal: Money,
  total: Money,
  totalCents: Schema.Number,
  amountDue: Money.annotations({
    description: "What remains to pay: while OPEN, the total less its credit notes (and payments: an OPEN " +
      "invoice has none, a payment pays all that is due and makes it PAID); a DRAFT's total (what it will ask when " +
      "final); 0 once PAID or VOID. The `total` stays as issued."
  }),
  issuedAt: Timestamp,
  paidAt: Schema.NullOr(Timestamp),
  voidedAt: Schema.NullOr(Timestamp),
  dueDate: DueDate,
  overdue: Schema.Boolean.annotations({
    description: "true while the invoice is OPEN and the cycle job has marked it overdue (its `dueDate` passed " +
      "unpaid); false once it is paid or voided, and for every other invoice."
  }),
  overdueAt: Schema.NullOr(Timestamp).annotations({
    description: "When the cycle job marked the invoice overdue (once); kept after it is paid or voided, so a " +
      "late payment shows. Null when it never was."
  }),
  creditNotes: Schema.Array(CreditNote).annotations({
    description: "The credit notes against the invoice, oldest first (`POST /invoices/{id}/credit-notes`)."
  })
})
export type Invoice = typeof Invoice.Type

/**
 * What remains to pay of an invoice (its `amountDue`): while OPEN, its total
 * less the credit notes that lowered it (an OPEN invoice has no payment: a
 * payment pays what is due and makes it PAID), never below 0; a DRAFT's total;
 * nothing once PAID or VOID.
 */
export const amountDueOf = (
  invoice: { readonly status: string; readonly total: Decimal },
  creditNotes: ReadonlyArray<{ readonly amount: Decimal; readonly appliedTo: CreditNoteAppliedTo }>
): Decimal => {
  if (invoice.status === "DRAFT") return invoice.total
  if (invoice.status !== "OPEN") return ZERO
  const credited = sum(creditNotes.filter((note) => note.appliedTo === "AMOUNT_DUE").map((note) => note.amount))
  return BigDecimal.normalize(BigDecimal.max(BigDecimal.subtract(invoice.total, credited), ZERO))
}

export class Payment extends Schema.Class<Payment>("Payment")({
  id: Schema.String,
  invoiceId: Schema.String,
  customerId: Schema.String,
  amount: Money,
  method: Schema.Literal("MANUAL", "WALLET"),
  reference: Schema.NullOr(Schema.String),
  createdAt: Timestamp
}) {}

/**
 * A payment received outside the service, recorded by an operator (`billing
 * invoice pay`) or a product (`POST /invoices/{id}/payments`): both doors decode
 * it with this schema and call `Invoices.pay`. A payment settles the whole
 * invoice: all that is due (its `amountDue`: the total less its credit notes);
 * there are no partial payments.
 */
export const PaymentCreate = Schema.Struct({
  reference: Schema.optional(
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "must not be empty" }),
      Schema.maxLength(500, { message: () => "must be at most 500 characters" })
    ).annotations({ description: "The payment's reference (a bank transfer's id, a cheque number), 1 to 500 characters." })
  ),
  idempotencyKey: Schema.optional(IdempotencyKey.annotations({
    description: "1 to 255 characters, unique among the workspace's payments. The same key with the same request " +
      "(same invoice, same reference) records nothing again and answers the first payment (`replayed: true`); the " +
      "same key with a different request is refused (422). A refused payment never uses up its key."
  }))
}).annotations(strict)
export type PaymentCreate = typeof PaymentCreate.Type

/** What recording a payment answers: the payment, the invoice it paid, and whether it was a keyed repeat. */
export const PaymentRecorded = Schema.Struct({
  replayed: Schema.Boolean.annotations({
    description: "true when the `idempotencyKey` was used before with this request: nothing was recorded again."
  }),
  payment: Payment,
  invoice: Invoice
})
export type PaymentRecorded = typeof PaymentRecorded.Type

/** What creating a credit note answers: the note, the invoice it credits as it is now, and whether it was a keyed repeat. */
export const CreditNoteCreated = Schema.Struct({
  replayed: Schema.Boolean.annotations({
    description: "true when the `idempotencyKey` was used before with this request: nothing was created again."
  }),
  creditNote: CreditNote,
  invoice: Invoice
})
export type CreditNoteCreated = typeof CreditNoteCreated.Type

/** An invoice computed in memory, ready to be written (`Invoices.writeIssued`). */
export interface IssuedInvoice {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly purchaseId: string
  readonly kind: InvoiceKind
  readonly currencyCode: string
  readonly periodStart: Date
  readonly periodEnd: Date
  readonly lines: ReadonlyArray<LineInput>
  readonly totals: InvoiceTotals
  /** Issue time. */
  readonly at: Date
  /** The purchase cycle the invoice bills (its lines' cycle_index unless a line says otherwise). */
  readonly cycleIndex?: number | null
  /** Issued DRAFT (inside the grace period): never paid at issue, whatever its total. */
  readonly draft?: boolean
}

/** A wallet payment of a whole invoice (auto-payment). */
export interface WalletPayment {
  readonly organizationId: string
  readonly id: string
  readonly invoiceId: string
  readonly customerId: string
  readonly amount: Decimal
  readonly at: Date
}
