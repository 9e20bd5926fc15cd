/**
 * The invoices service: reads invoices and payments (lists on the read
 * connection), writes the invoices computed in memory (`writeIssued`, in the
 * caller's transaction), records payments (`pay`, keyed by an optional
 * idempotency key), credits invoices (`credit`, CreditNotes.ts), voids and
 * mints hosted pay links. The model is Invoice.ts, the rows an issued invoice
 * is written as IssuedInvoices.ts, its numbers InvoiceNumbers.ts, its totals
 * InvoiceTotals.ts.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findOne, knownCursor, pageClause, writeTogether } from "../db/Sql.ts"
import { readClient } from "../db/ReadSql.ts"
import { InvoiceNotFound, InvoiceNotOpen, PaymentNotFound } from "../errors.ts"
import { claimKeyIfAny, fingerprintOf } from "../idempotency/Idempotency.ts"
import type { Page } from "../Page.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { toSql } from "../money.ts"
import type { CreditNoteCreate } from "./CreditNote.ts"
import { createCreditNote } from "./CreditNotes.ts"
import {
  amountDueOf,
  InvoiceRow,
  type IssuedInvoice,
  LineRow,
  Payment,
  type PaymentCreate,
  type PaymentRecorded,
  type WalletPayment
} from "./Invoice.ts"
import { assembleInvoice, readCreditNotes, readInvoices } from "./InvoiceReads.ts"
import { recordLifecycleEvents } from "./LifecycleEvents.ts"
import { issuedStatements } from "./IssuedInvoices.ts"
import { invoicePath, PAY_LINK_MINUTES } from "../links/InvoiceLinks.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { currentTime, timeFromNow } from "../time.ts"

const notFound = (id: string) => new InvoiceNotFound({ message: `Invoice ${id} not found` })

export class Invoices extends Effect.Service<Invoices>()("Invoices", {
  dependencies: [SigningKeys.Default, Ledger.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const read = yield* readClient
    const signingKeys = yield* SigningKeys
    const ledger = yield* Ledger

    /**
     * `rows` with their lines and credit notes, read on `on`: the client that
     * read the rows, so that all are of one moment.
     */
    const withLines = (organizationId: OrganizationId, rows: ReadonlyArray<InvoiceRow>, on: SqlClient.SqlClient = sql) =>
      Effect.gen(function*() {
        if (rows.length === 0) return []
        const lines = yield* findAll(
          LineRow,
          on`SELECT * FROM invoice_lines WHERE organization_id = ${organizationId}
                AND ${on.in("invoice_id", rows.map((r) => r.id))} ORDER BY invoice_id, position`
        )
        const notes = yield* readCreditNotes(on, rows.map((row) => ({ organizationId, id: row.id })))
        return rows.map((row) =>
          assembleInvoice(row, lines.filter((line) => line.invoiceId === row.id), notes.get(`${organizationId}/${row.id}`) ?? [])
        )
      })

    const findRow = findByIdOr(sql, InvoiceRow, "invoices", notFound)

    /** `GET /invoices/{id}`: read as the lifecycle events read it (InvoiceReads.ts), so both show the same. */
    const get = Effect.fn("Invoices.get")((organizationId: OrganizationId, id: string) =>
      Effect.flatMap(readInvoices(sql, [{ organizationId, id }]), ([found]) =>
        found === undefined ? Effect.fail(notFound(id)) : Effect.succeed(found.invoice)))

    /** The invoice list tolerates lag: read on the read connection when there is one (docs/operations.md, "Reads off the primary"). */
    const list = Effect.fn("Invoices.list")((organizationId: OrganizationId, query: { readonly customerId?: string | undefined; readonly page: Page }) =>
      Effect.flatMap(
        Effect.zipRight(knownCursor(read, "invoices", organizationId, query.page), findAll(
          InvoiceRow,
          read`SELECT * FROM invoices WHERE organization_id = ${organizationId}
                AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
                ${pageClause(read, query.page)}`
        )),
        (rows) => withLines(organizationId, rows, read)
      ))

    /**
     * Writes invoices computed in memory (`IssuedInvoice`), with their lines and
     * the wallet payments settled for them, in the caller's transaction: three
     * statements for any number of invoices. The wallet postings that paid them
     * go through the ledger, after this (their rows name the invoices).
     */
    const writeIssued = Effect.fn("Invoices.writeIssued")((issued: ReadonlyArray<IssuedInvoice>, payments: ReadonlyArray<WalletPayment>) =>
      Effect.asVoid(writeTogether(sql, issuedStatements(sql, issued, payments))))

    /**
     * The invoice, locked, when it is OPEN; else 409. A DRAFT is neither paid
     * nor voided: the cycle job finalises it when its grace period ends (then
     * it can be paid or voided like any OPEN invoice).
     */
    const openInvoice = (organizationId: OrganizationId, id: string) =>
      Effect.flatMap(findRow(organizationId, id, true), (invoice) =>
        invoice.status === "OPEN"
          ? Effect.succeed(invoice)
          : Effect.fail(
            new InvoiceNotOpen({
              message: invoice.status === "DRAFT"
                ? `Invoice ${id} is a DRAFT (inside its grace period), not OPEN; it becomes OPEN when the cycle job finalises it`
                : `Invoice ${id} is ${invoice.status}, not OPEN`
            })
          ))

    const KeyedPayment = Schema.Struct({ id: Schema.String, fingerprint: Schema.NullOr(Schema.String) })
    const findKeyed = (organizationId: OrganizationId, key: string) =>
      findOne(
        KeyedPayment,
        sql`SELECT id, fingerprint FROM payments WHERE organization_id = ${organizationId} AND idempotency_key = ${key}`
      )

    /** The answer to a key used before: the first payment again. */
    const firstPayment = (organizationId: OrganizationId, stored: typeof KeyedPayment.Type) =>
      Effect.gen(function*() {
        const payment = yield* Effect.orDie(getPayment(organizationId, stored.id))
        return { replayed: true, payment, invoice: yield* Effect.orDie(get(organizationId, payment.invoiceId)) } satisfies PaymentRecorded
      })

    /**
     * Records a payment received outside the service for an OPEN invoice, which
     * becomes PAID (all that is due: the total less its credit notes; method MANUAL). With an `idempotencyKey`
     * (unique per workspace among payments) a repeat of the same request (same
     * invoice, same reference) records nothing and answers the first payment;
     * the same key with another request is `IdempotencyKeyReused`. The invoice
     * is locked first, so two identical requests are answered one after the
     * other: the second finds the first's key (a replay), not a PAID invoice.
     * The payment row is the key's record: inserted before the status is
     * checked, and rolled back with the transaction when the invoice is not OPEN.
     */
    const pay = Effect.fn("Invoices.pay")(function*(organizationId: OrganizationId, id: string, input: PaymentCreate = {}) {
        const invoice = yield* findRow(organizationId, id, true)
        // What is due: the total less the credit notes that lowered it (read under the invoice's lock).
        const due = amountDueOf(invoice, yield* Effect.map(readCreditNotes(sql, [{ organizationId, id }]), (notes) =>
          notes.get(`${organizationId}/${id}`) ?? []))
        const reference = input.reference ?? null
        const fingerprint = fingerprintOf([id, reference])
        const key = input.idempotencyKey
        const at = yield* currentTime
        const paymentId = makeId("pay")
        const insertPayment = sql`INSERT INTO payments ${
          sql.insert({
            organizationId,
            id: paymentId,
            invoiceId: invoice.id,
            customerId: invoice.customerId,
            amount: toSql(due),
            method: "MANUAL",
            reference,
            idempotencyKey: key ?? null,
            fingerprint: key === undefined ? null : fingerprint,
            createdAt: at
          })
        } ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id`
        const first = yield* claimKeyIfAny(
          key,
          fingerprint,
          insertPayment,
          findKeyed(organizationId, key ?? "").pipe(
            Effect.map((stored) => Option.getOrThrow(stored)),
            Effect.map((stored) => ({ ...stored, fingerprint: stored.fingerprint ?? "" }))
          )
        )
        if (Option.isSome(first)) return yield* firstPayment(organizationId, first.value)
        if (invoice.status !== "OPEN") {
          return yield* new InvoiceNotOpen({
            message: invoice.status === "DRAFT"
              ? `Invoice ${id} is a DRAFT (inside its grace period), not OPEN; it becomes OPEN when the cycle job finalises it`
              : `Invoice ${id} is ${invoice.status}, not OPEN`
          })
        }
        yield* sql`UPDATE invoices SET status = 'PAID', paid_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${invoice.id}`
        yield* recordLifecycleEvents(sql, [{ type: "invoice.paid", organizationId, invoiceId: invoice.id, at }])
        return {
          replayed: false,
          payment: yield* Effect.orDie(getPayment(organizationId, paymentId)),
          invoice: yield* get(organizationId, id)
        } satisfies PaymentRecorded
      }, sql.withTransaction, dieOnSqlError)

    /**
     * Credits an OPEN or PAID invoice with a credit note (CreditNotes.ts), in
     * one transaction: the note, its money (a PAID invoice's through the
     * ledger, to the wallet), the invoice settled when nothing is left due, the
     * events. Keyed by an optional idempotency key like `pay`.
     */
    const credit = Effect.fn("Invoices.credit")(function*(organizationId: OrganizationId, id: string, request: CreditNoteCreate) {
        return yield* createCreditNote(sql, ledger, organizationId, id, request)
      }, sql.withTransaction, dieOnSqlError)

    /** An invoice's credit notes, oldest first; an unknown invoice, or another organisation's, is 404. */
    const creditNotes = Effect.fn("Invoices.creditNotes")((organizationId: OrganizationId, id: string) =>
      Effect.map(get(organizationId, id), (invoice) => invoice.creditNotes))

    const voidInvoice = Effect.fn("Invoices.voidInvoice")(function*(organizationId: OrganizationId, id: string) {
        yield* openInvoice(organizationId, id)
        const at = yield* currentTime
        yield* sql`UPDATE invoices SET status = 'VOID', voided_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        yield* recordLifecycleEvents(sql, [{ type: "invoice.voided", organizationId, invoiceId: id, at }])
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /**
     * A hosted pay link at `origin` for an OPEN invoice, signed so the hosted
     * page can trust it (src/links/InvoiceLinks.ts); not OPEN is 409.
     */
    const payLink = Effect.fn("Invoices.payLink")(function*(organizationId: OrganizationId, id: string, origin: string) {
        const invoice = yield* findRow(organizationId, id)
        if (invoice.status !== "OPEN") {
          return yield* new InvoiceNotOpen({ message: `Invoice ${id} is ${invoice.status}; a pay link needs an OPEN invoice` })
        }
        const expiresAt = yield* timeFromNow(PAY_LINK_MINUTES * 60_000)
        const path = invoicePath(yield* signingKeys.secretOf(organizationId), {
          org: organizationId,
          customerId: invoice.customerId,
          invoiceId: id,
          exp: expiresAt.getTime()
        })
        return { invoiceId: id, url: `${origin}${path}`, expiresAt }
      })

    /** A customer's latest invoices, newest first (the portal's list). */
    const latestOfCustomer = Effect.fn("Invoices.latestOfCustomer")((organizationId: OrganizationId, customerId: string, limit: number) =>
      Effect.flatMap(
        findAll(
          InvoiceRow,
          sql`SELECT * FROM invoices WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
              ORDER BY id DESC LIMIT ${limit}`
        ),
        (rows) => withLines(organizationId, rows)
      ))

    /** The payment list, like the invoice list, on the read connection when there is one. */
    const listPayments = Effect.fn("Invoices.listPayments")((organizationId: OrganizationId, query: { readonly customerId?: string | undefined; readonly page: Page }) =>
      Effect.zipRight(knownCursor(read, "payments", organizationId, query.page), findAll(
        Payment,
        read`SELECT * FROM payments WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              ${pageClause(read, query.page)}`
      )))

    const findPayment = findByIdOr(sql, Payment, "payments", (id) => new PaymentNotFound({ message: `Payment ${id} not found` }))
    const getPayment = Effect.fn("Invoices.getPayment")((organizationId: OrganizationId, id: string) => findPayment(organizationId, id))

    return {
      writeIssued,
      list,
      get,
      latestOfCustomer,
      pay,
      credit,
      creditNotes,
      voidInvoice,
      payLink,
      listPayments,
      getPayment
    } as const
  })
}) {}
