/**
 * Credit notes, the rules (issue 38; docs/billing.md "Credit notes"; the model
 * is CreditNote.ts). `creditNoteParts` works a note out in memory, pure, from the
 * invoice as the API shows it (its lines, taxes and earlier notes);
 * `createCreditNote` writes one in the caller's transaction: the invoice row
 * locked first (a twin request waits there), a keyed repeat answered, the
 * status checked (OPEN or PAID), the note worked out, its number taken
 * (InvoiceNumbers.ts), a PAID invoice's amount credited to the wallet through
 * the ledger (src/ledger/CreditNotes.ts), the row written (its key claimed,
 * `claimKeyIfAny`), an OPEN invoice with nothing left due made PAID, and the
 * lifecycle events (`credit_note.created`, then `invoice.paid` when it settled
 * the invoice) written to the outbox. A refusal writes nothing.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Either, Option, Schema } from "effect"
import { findAll, findOne } from "../db/Sql.ts"
import {
  CreditExceedsRemaining,
  CreditNoteEmpty,
  InvoiceNotCreditable,
  InvoiceNotFound,
  UnknownInvoiceLine
} from "../errors.ts"
import { claimKeyIfAny, fingerprintOf, replay } from "../idempotency/Idempotency.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { creditNoteToWallet } from "../ledger/CreditNotes.ts"
import type { Ledger } from "../ledger/Ledger.ts"
import { type Decimal, HUNDRED, roundTo, sum, toSql, ZERO } from "../money.ts"
import { currentTime } from "../time.ts"
import type { CreditNoteCreate, CreditNoteLine, CreditNoteTaxLine } from "./CreditNote.ts"
import type { CreditNoteCreated, Invoice } from "./Invoice.ts"
import { takeCreditNoteNumber } from "./InvoiceNumbers.ts"
import { readInvoices } from "./InvoiceReads.ts"
import { type LifecycleEvent, recordLifecycleEvents } from "./LifecycleEvents.ts"

/** A credit note worked out, before it has an id, a number or a home for its money. */
export interface CreditNoteParts {
  readonly amount: Decimal
  readonly lines: ReadonlyArray<CreditNoteLine>
  readonly taxLines: ReadonlyArray<CreditNoteTaxLine>
}

export type CreditNoteRefusal = CreditExceedsRemaining | UnknownInvoiceLine | CreditNoteEmpty

const { greaterThan, isPositive, isZero, subtract } = BigDecimal

/** A decimal as the API sends it: its digits, never in exponent form. */
const text = (value: Decimal) => BigDecimal.format(BigDecimal.normalize(value))

/** An amount in cents as a person reads it: two decimal places (`4.5` -> `4.50`). */
const money = (value: Decimal) => {
  const digits = text(roundTo(value, 2))
  const point = digits.indexOf(".")
  return point < 0 ? `${digits}.00` : digits.length - point === 2 ? `${digits}0` : digits
}

/** What the invoice's credit notes have credited on each of its lines (by place, from 1). */
const creditedByLine = (invoice: Invoice) => {
  const credited = new Map<number, Decimal>()
  for (const note of invoice.creditNotes) {
    for (const line of note.lines) credited.set(line.line, BigDecimal.sum(credited.get(line.line) ?? ZERO, line.amount))
  }
  return credited
}

/** What remains to credit of an invoice: its total less its credit notes. */
export const remainingToCredit = (invoice: Pick<Invoice, "total" | "creditNotes">): Decimal =>
  BigDecimal.normalize(subtract(invoice.total, sum(invoice.creditNotes.map((note) => note.amount))))

/**
 * The credit note `request` makes against `invoice` (as the API shows it, its
 * earlier notes included), or why not. An `amount` is that much of the total,
 * taxes included. `lines` credit named lines (their place in `lines`, from 1),
 * each at most what remains of it (its amount less what earlier notes credited
 * on it; all of that when no amount is given); their sum is rounded to the
 * cent like an invoice's subtotal, and each of the invoice's taxes is given
 * back at its rate on it, rounded to the cent. The note that credits the last
 * of every line of an invoice credited by lines alone takes exactly what is
 * left (the subtotal and each tax less the earlier notes'), so notes that
 * credit a whole invoice line by line add up to its total to the cent, however
 * they round. Never more than what remains of the invoice (its total less
 * every earlier note): `CreditExceedsRemaining`.
 */
export const creditNoteParts = (
  invoice: Invoice,
  request: Pick<CreditNoteCreate, "amount" | "lines">
): Either.Either<CreditNoteParts, CreditNoteRefusal> => {
  const reference = invoice.number ?? invoice.id
  const remaining = remainingToCredit(invoice)
  const beyond = (amount: Decimal) =>
    new CreditExceedsRemaining({
      message: `A credit note of ${money(amount)} is more than remains to credit on invoice ${reference}: ${
        money(remaining)
      } (its total ${money(invoice.total)} less ${money(subtract(invoice.total, remaining))} of earlier credit notes)`
    })
  if (request.amount !== undefined) {
    const amount = BigDecimal.normalize(request.amount)
    return greaterThan(amount, remaining) ? Either.left(beyond(amount)) : Either.right({ amount, lines: [], taxLines: [] })
  }
  const credited = creditedByLine(invoice)
  const lines: Array<CreditNoteLine> = []
  for (const asked of request.lines ?? []) {
    const line = invoice.lines[asked.line - 1]
    if (line === undefined) {
      return Either.left(
        new UnknownInvoiceLine({
          message: `Invoice ${reference} has no line ${asked.line}: its lines are 1 to ${invoice.lines.length}`
        })
      )
    }
    const left = BigDecimal.normalize(subtract(line.amount, credited.get(asked.line) ?? ZERO))
    if (!isPositive(left)) {
      return Either.left(
        new CreditExceedsRemaining({
          message: `Nothing remains to credit on line ${asked.line} of invoice ${reference} (${line.description}): ` +
            `its amount ${text(line.amount)} is ${isPositive(line.amount) ? "credited already" : "not a charge"}`
        })
      )
    }
    const amount = asked.amount === undefined ? left : BigDecimal.normalize(asked.amount)
    if (greaterThan(amount, left)) {
      return Either.left(
        new CreditExceedsRemaining({
          message: `A credit of ${text(amount)} on line ${asked.line} of invoice ${reference} (${line.description}) ` +
            `is more than remains of it: ${text(left)} (its amount ${text(line.amount)} less ${
              text(subtract(line.amount, left))
            } of earlier credit notes)`
        })
      )
    }
    lines.push({ line: asked.line, description: line.description, amount })
  }
  lines.sort((a, b) => a.line - b.line)
  const creditedNow = new Map(lines.map((line) => [line.line, line.amount] as const))
  // The note that credits the last of every line, on an invoice only line notes credited: what is left, exactly.
  const closing = invoice.creditNotes.every((note) => note.lines.length > 0) &&
    invoice.lines.every((line) => !BigDecimal.isNegative(line.amount)) &&
    invoice.lines.every((line, index) =>
      isZero(subtract(line.amount, BigDecimal.sum(credited.get(index + 1) ?? ZERO, creditedNow.get(index + 1) ?? ZERO)))
    )
  const taxLines: Array<CreditNoteTaxLine> = []
  let subtotal: Decimal
  if (closing) {
    const earlierTax = (taxId: string) =>
      sum(invoice.creditNotes.flatMap((note) => note.taxLines.filter((tax) => tax.taxId === taxId).map((tax) => tax.amount)))
    const earlierSubtotals = sum(invoice.creditNotes.map((note) =>
      subtract(note.amount, sum(note.taxLines.map((tax) => tax.amount)))
    ))
    subtotal = BigDecimal.normalize(subtract(invoice.subtotal, earlierSubtotals))
    for (const tax of invoice.taxLines) {
      taxLines.push({ ...tax, amount: BigDecimal.normalize(subtract(tax.amount, earlierTax(tax.taxId))) })
    }
  } else {
    subtotal = roundTo(sum(lines.map((line) => line.amount)), 2)
    for (const tax of invoice.taxLines) {
      taxLines.push({
        ...tax,
        amount: roundTo(BigDecimal.unsafeDivide(BigDecimal.multiply(subtotal, tax.ratePercent), HUNDRED), 2)
      })
    }
  }
  const amount = BigDecimal.normalize(BigDecimal.sum(subtotal, sum(taxLines.map((tax) => tax.amount))))
  if (!isPositive(amount)) {
    return Either.left(
      new CreditNoteEmpty({
        message: `The lines named credit ${text(sum(lines.map((line) => line.amount)))}, less than a cent: a credit ` +
          "note credits whole cents (credit an amount instead, or more lines)"
      })
    )
  }
  if (greaterThan(amount, remaining)) return Either.left(beyond(amount))
  return Either.right({ amount, lines, taxLines })
}

/** What makes two credit note requests the same: the invoice, what is credited and why. */
export const creditNoteFingerprint = (invoiceId: string, request: CreditNoteCreate) =>
  fingerprintOf([
    invoiceId,
    request.amount === undefined ? null : toSql(request.amount),
    request.lines?.map((line) => [line.line, line.amount === undefined ? null : toSql(line.amount)]) ?? null,
    request.reason
  ])

const LockedInvoice = Schema.Struct({ id: Schema.String, status: Schema.String })
const KeyedNote = Schema.Struct({ id: Schema.String, invoiceId: Schema.String, fingerprint: Schema.String })

const notFound = (id: string) => new InvoiceNotFound({ message: `Invoice ${id} not found` })

/**
 * Credits invoice `invoiceId` of the organisation as `request` asks, in the
 * caller's transaction (see the module's comment for the steps). Refusals, each
 * writing nothing: unknown or another organisation's invoice 404; (a keyed
 * repeat answers here, or is `IdempotencyKeyReused` for another request); a
 * DRAFT or VOID invoice `InvoiceNotCreditable` (409); a line it does not have
 * `UnknownInvoiceLine`, more than remains `CreditExceedsRemaining`, less than a
 * cent `CreditNoteEmpty` (422).
 */
export const createCreditNote = (
  sql: SqlClient.SqlClient,
  ledger: Ledger,
  organizationId: OrganizationId,
  invoiceId: string,
  request: CreditNoteCreate
) =>
  Effect.gen(function*() {
    const [locked] = yield* findAll(
      LockedInvoice,
      sql`SELECT id, status FROM invoices WHERE organization_id = ${organizationId} AND id = ${invoiceId} FOR UPDATE`
    )
    if (locked === undefined) return yield* notFound(invoiceId)
    const key = request.idempotencyKey
    const fingerprint = creditNoteFingerprint(invoiceId, request)
    const keyed = (k: string) =>
      findOne(
        KeyedNote,
        sql`SELECT id, invoice_id, fingerprint FROM credit_notes WHERE organization_id = ${organizationId}
              AND idempotency_key = ${k}`
      )
    const answerOf = (noteId: string, noteInvoiceId: string, replayed: boolean) =>
      Effect.map(readInvoices(sql, [{ organizationId, id: noteInvoiceId }]), ([found]): CreditNoteCreated => {
        const invoice = found!.invoice
        return { replayed, creditNote: invoice.creditNotes.find((note) => note.id === noteId)!, invoice }
      })
    if (key !== undefined) {
      // The invoice is locked: a twin of this request on it waited above, and finds the first's note here.
      const stored = yield* keyed(key)
      if (Option.isSome(stored)) {
        const first = yield* Either.match(replay(key, { fingerprint: stored.value.fingerprint, answer: stored.value }, fingerprint), {
          onLeft: Effect.fail,
          onRight: Effect.succeed
        })
        return yield* answerOf(first.id, first.invoiceId, true)
      }
    }
    if (locked.status !== "OPEN" && locked.status !== "PAID") {
      return yield* new InvoiceNotCreditable({
        message: locked.status === "DRAFT"
          ? `Invoice ${invoiceId} is a DRAFT (inside its grace period): it is not final, so there is nothing to credit yet`
          : `Invoice ${invoiceId} is VOID: nothing is owed on it, so there is nothing to credit`
      })
    }
    const [found] = yield* readInvoices(sql, [{ organizationId, id: invoiceId }])
    const invoice = found!.invoice
    const parts = yield* Either.match(creditNoteParts(invoice, request), { onLeft: Effect.fail, onRight: Effect.succeed })
    const at = yield* currentTime
    const id = makeId("cn")
    const taken = yield* takeCreditNoteNumber(sql, organizationId)
    // A PAID invoice's credit goes to the customer's wallet, through the ledger, after the counter (the lock order).
    const walletLedgerId = invoice.status === "PAID"
      ? (yield* creditNoteToWallet(ledger, {
        organizationId,
        customerId: invoice.customerId,
        invoiceId,
        invoiceNumber: invoice.number ?? invoiceId,
        creditNoteNumber: taken.number,
        amount: parts.amount,
        at
      })).ledgerId
      : null
    const insert = sql`INSERT INTO credit_notes ${
      sql.insert({
        organizationId,
        id,
        sequenceNumber: taken.sequence,
        number: taken.number,
        invoiceId,
        customerId: invoice.customerId,
        amount: toSql(parts.amount),
        reason: request.reason,
        lines: JSON.stringify(parts.lines.map((line) => ({ ...line, amount: toSql(line.amount) }))),
        taxLines: JSON.stringify(parts.taxLines.map((tax) => ({ ...tax, ratePercent: toSql(tax.ratePercent), amount: toSql(tax.amount) }))),
        appliedTo: walletLedgerId === null ? "AMOUNT_DUE" : "WALLET",
        walletLedgerId,
        idempotencyKey: key ?? null,
        fingerprint: key === undefined ? null : fingerprint,
        createdAt: at
      })
    } ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id`
    // A key new to this invoice (above) but taken meanwhile by a note of another invoice: another request, 422.
    const first = yield* claimKeyIfAny(key, fingerprint, insert, Effect.map(keyed(key ?? ""), Option.getOrThrow))
    if (Option.isSome(first)) return yield* Effect.die(new Error(`idempotency key ${key} of invoice ${invoiceId} taken twice`))
    // Nothing left due on an OPEN invoice: settled, PAID now, with no payment (no money came in).
    const settled = invoice.status === "OPEN" && !isPositive(subtract(invoice.amountDue, parts.amount))
    if (settled) {
      yield* sql`UPDATE invoices SET status = 'PAID', paid_at = ${at}, updated_at = ${at}
          WHERE organization_id = ${organizationId} AND id = ${invoiceId}`
    } else {
      yield* sql`UPDATE invoices SET updated_at = ${at} WHERE organization_id = ${organizationId} AND id = ${invoiceId}`
    }
    const events: Array<LifecycleEvent> = [{ type: "credit_note.created", organizationId, creditNoteId: id, invoiceId, at }]
    if (settled) events.push({ type: "invoice.paid", organizationId, invoiceId, at })
    yield* recordLifecycleEvents(sql, events)
    return yield* answerOf(id, invoiceId, false)
  })
