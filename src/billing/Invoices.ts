/**
 * Invoices and payments. A purchase issues a PLAN invoice at every cycle start
 * (the plan cost) and a USAGE invoice at a cycle end when ARREAR usage was
 * charged. Lines keep exact decimals; the invoice rounds its subtotal to cents,
 * each active tax is a cent-rounded line on that subtotal, and the total is
 * their sum, so the totals always add up to the cent.
 *
 * States: DRAFT -> OPEN or PAID (the cycle job finalises a cycle-end USAGE
 * invoice when the organisation's grace period ends; DraftInvoices.ts);
 * OPEN -> PAID (a payment) or OPEN -> VOID (an operator). A zero-total invoice
 * is issued PAID. A DRAFT is never paid, voided or given a pay link (409).
 * Each line carries the period it bills: the invoice's, or an earlier cycle's
 * for a late line (docs/billing.md "Late usage and the grace period").
 *
 * Numbers: an invoice gets its number when it is finalised (issued OPEN or
 * PAID, or a DRAFT made OPEN or PAID), in that transaction, from its
 * organisation's counter row (`numbering`, below: the one place numbers are
 * taken; docs/billing.md "Invoice numbers"). The database refuses a final
 * invoice without a number (migrations/0019_invoice_numbers.sql).
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Either, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findOne, insertRowsStatement, knownCursor, NamedWrite, pageClause, recordsetOf, writeTogether } from "../db/Sql.ts"
import { readClient } from "../db/ReadSql.ts"
import { InvoiceNotFound, InvoiceNotOpen, PaymentNotFound } from "../errors.ts"
import { fingerprintOf, replay } from "../idempotency/Idempotency.ts"
import type { Page } from "../Page.ts"
import { CustomerId, makeId, type OrganizationId } from "../ids.ts"
import { type Decimal, HUNDRED, roundTo, toSql, ZERO } from "../money.ts"
import { type InvoiceTotals, type LineInput, type NumberedInvoice, numberOrder } from "./InvoiceTotals.ts"
import { IdempotencyKey, Money, strict, Timestamp } from "../schema.ts"
import { invoicePath, PAY_LINK_MINUTES } from "../links/InvoiceLinks.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { currentTime, timeFromNow } from "../time.ts"

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

class InvoiceRow extends Schema.Class<InvoiceRow>("InvoiceRow")({
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
  voidedAt: Schema.NullOr(Timestamp)
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
  issuedAt: Timestamp,
  paidAt: Schema.NullOr(Timestamp),
  voidedAt: Schema.NullOr(Timestamp)
})
export type Invoice = typeof Invoice.Type

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
 * invoice (its `total`); there are no partial payments.
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

export { invoiceTotals, type InvoiceTotals, type LineInput, type TaxRate } from "./InvoiceTotals.ts"

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

/** The invoices row of an issued invoice; `paidAt` when a payment settled it at issue. */
export const invoiceRecord = (invoice: IssuedInvoice, paidAt: Date | null): Record<string, unknown> => {
  const at = invoice.at.toISOString()
  const paid = invoice.draft === true ? null : invoice.totals.free ? at : paidAt === null ? null : paidAt.toISOString()
  return {
    organizationId: invoice.organizationId,
    id: invoice.id,
    customerId: invoice.customerId,
    purchaseId: invoice.purchaseId,
    kind: invoice.kind,
    status: invoice.draft === true ? "DRAFT" : paid === null ? "OPEN" : "PAID",
    currencyCode: invoice.currencyCode,
    periodStart: invoice.periodStart.toISOString(),
    periodEnd: invoice.periodEnd.toISOString(),
    subtotal: toSql(invoice.totals.subtotal),
    taxTotal: toSql(invoice.totals.taxTotal),
    total: toSql(invoice.totals.total),
    issuedAt: at,
    paidAt: paid,
    createdAt: at,
    updatedAt: at
  }
}

/** The text of invoice number `sequence` under `prefix` (SQL expressions): at least six digits. */
const numberText = (prefix: string, sequence: string) =>
  `${prefix} || lpad((${sequence})::text, greatest(6, length((${sequence})::text)), '0')`

/** The name of the counter's WITH clause, which the numbered writes read. */
const NUMBERS = "invoice_numbers"

/**
 * Numbers for the invoices being finalised, the one place they are taken: one
 * upsert of the organisations' counter rows (`invoice_counters`), each moved
 * on by how many of its invoices are finalised here, in organisation order (so
 * two transactions never wait on each other's counters), returning the new
 * last number and the prefix. Each invoice's number is the new last number
 * plus its `offset` (0 for the organisation's last one here, -1 for the one
 * before, ...): the invoices of one organisation in id order, that is
 * creation order. The counter row stays locked until the transaction commits:
 * finalisations of one organisation queue behind it, which is what keeps the
 * numbers gap-free (a rolled-back transaction gives its numbers back). So it
 * is taken by the last writes of a transaction, for a whole batch at once.
 */
const numbering = (sql: SqlClient.SqlClient, finals: ReadonlyArray<NumberedInvoice>) => {
  const { organizations, taken, offsetOf } = numberOrder(finals)
  const counter = organizations.length === 0 ? undefined : new NamedWrite(
    NUMBERS,
    sql`INSERT INTO invoice_counters AS c (organization_id, last_number)
        SELECT organization_id, taken
        FROM unnest(${organizations}::text[], ${taken}::bigint[])
          AS v(organization_id, taken)
        ORDER BY organization_id
        ON CONFLICT (organization_id) DO UPDATE SET last_number = c.last_number + EXCLUDED.last_number
        RETURNING c.organization_id, c.last_number,
          (SELECT o.invoice_number_prefix FROM organizations o WHERE o.id = c.organization_id) AS prefix`
  )
  return {
    counter,
    /** The invoice's offset from its organisation's new last number; null when it is not finalised here. */
    offsetOf
  }
}

/**
 * The INSERTs of issued invoices, their lines and the wallet payments that
 * settled them at issue, for `writeTogether` (undefined where there are none).
 * The invoices issued final (all but DRAFTs) take their numbers here
 * (`numbering`): the counter's upsert goes with the INSERTs, in the same
 * statement.
 */
export const issuedStatements = (
  sql: SqlClient.SqlClient,
  issued: ReadonlyArray<IssuedInvoice>,
  payments: ReadonlyArray<WalletPayment>
) => {
  const paid = new Map(payments.map((payment) => [payment.invoiceId, payment] as const))
  const { counter, offsetOf } = numbering(sql, issued.filter((invoice) => invoice.draft !== true))
  const rows = issued.map((invoice) => ({
    ...invoiceRecord(invoice, paid.get(invoice.id)?.at ?? null),
    sequenceNumber: invoice.draft === true ? null : offsetOf(invoice)
  }))
  return [
    counter,
    counter === undefined ? insertRowsStatement(sql, "invoices", rows) : numberedInsert(sql, rows),
    insertRowsStatement(sql, "invoice_lines", issued.flatMap(lineRecords)),
    insertRowsStatement(sql, "payments", payments.map((payment) => ({
      organizationId: payment.organizationId,
      id: payment.id,
      invoiceId: payment.invoiceId,
      customerId: payment.customerId,
      amount: toSql(payment.amount),
      method: "WALLET",
      reference: null,
      createdAt: payment.at.toISOString()
    })))
  ]
}

/** The INSERT of invoice rows whose `sequence_number` holds their offset, numbered from the counter's clause. */
const numberedInsert = (sql: SqlClient.SqlClient, rows: ReadonlyArray<Record<string, unknown>>) => {
  const { columns, json } = recordsetOf(rows)
  const sequence = "n.last_number + r.sequence_number"
  const selected = columns.map((column) =>
    column === "sequence_number"
      ? `CASE WHEN r.sequence_number IS NULL THEN NULL ELSE ${sequence} END`
      : `r."${column}"`
  )
  return sql`INSERT INTO invoices (${sql.literal(columns.map((column) => `"${column}"`).join(", "))}, number)
    SELECT ${sql.literal(selected.join(", "))},
      CASE WHEN r.sequence_number IS NULL THEN NULL ELSE ${sql.literal(numberText("n.prefix", sequence))} END
    FROM json_populate_recordset(NULL::invoices, ${json}::json) r
    LEFT JOIN ${sql.literal(NUMBERS)} n ON n.organization_id = r.organization_id`
}

/** How a DRAFT is finalised: OPEN, or PAID at `at` (free, or paid from the wallet). */
export interface Finalised {
  readonly organizationId: string
  readonly id: string
  readonly status: "OPEN" | "PAID"
}

/**
 * Finalises DRAFT invoices (locked by the caller) in one statement: their
 * status, and their numbers (`numbering`). Meant to be among the last writes
 * of the caller's transaction: the counter rows stay locked until it commits.
 */
export const finaliseDrafts = (sql: SqlClient.SqlClient, finals: ReadonlyArray<Finalised>, at: Date) => {
  if (finals.length === 0) return Effect.void
  const { counter, offsetOf } = numbering(sql, finals)
  const sequence = "n.last_number + v.offset_by"
  const finalised = sql`WITH ${sql.literal(NUMBERS)} AS (${counter!.statement})
      UPDATE invoices AS i SET status = v.status,
        paid_at = CASE WHEN v.status = 'PAID' THEN ${at}::timestamptz ELSE NULL END, updated_at = ${at},
        sequence_number = ${sql.literal(sequence)}, number = ${sql.literal(numberText("n.prefix", sequence))}
      FROM unnest(${finals.map((f) => f.organizationId)}::text[], ${finals.map((f) => f.id)}::text[],
                  ${finals.map((f) => f.status)}::text[], ${finals.map((f) => offsetOf(f)!)}::bigint[])
        AS v(organization_id, id, status, offset_by)
      JOIN ${sql.literal(NUMBERS)} n ON n.organization_id = v.organization_id
      WHERE i.organization_id = v.organization_id AND i.id = v.id AND i.status = 'DRAFT'
      RETURNING i.id`
  // A number taken for an invoice that is not a DRAFT any more would be a gap: the transaction dies instead.
  return Effect.flatMap(Effect.orDie(finalised), (rows) =>
    rows.length === finals.length
      ? Effect.void
      : Effect.die(new Error(`finalised ${rows.length} of ${finals.length} DRAFT invoices: the others were not DRAFT`)))
}

/** The invoice_lines rows: the lines in order, then one TAX line per tax. */
export const lineRecords = (
  invoice: Pick<IssuedInvoice, "organizationId" | "id" | "lines" | "totals" | "periodStart" | "periodEnd" | "cycleIndex">
): Array<Record<string, unknown>> => [
  ...invoice.lines.map((line, index) => ({
    organizationId: invoice.organizationId,
    invoiceId: invoice.id,
    position: index,
    kind: "LINE",
    description: line.description,
    quantity: line.quantity === null ? null : toSql(line.quantity),
    unitPrice: line.unitPrice === null ? null : toSql(line.unitPrice),
    amount: toSql(line.amount),
    componentId: line.componentId,
    taxId: null,
    ratePercent: null,
    periodStart: (line.periodStart ?? invoice.periodStart).toISOString(),
    periodEnd: (line.periodEnd ?? invoice.periodEnd).toISOString(),
    cycleIndex: line.cycleIndex !== undefined ? line.cycleIndex : invoice.cycleIndex ?? null
  })),
  ...invoice.totals.taxes.map(({ amount, tax }, index) => ({
    organizationId: invoice.organizationId,
    invoiceId: invoice.id,
    position: invoice.lines.length + index,
    kind: "TAX",
    description: tax.name,
    quantity: null,
    unitPrice: null,
    amount: toSql(amount),
    componentId: null,
    taxId: tax.id,
    ratePercent: toSql(tax.ratePercent),
    periodStart: invoice.periodStart.toISOString(),
    periodEnd: invoice.periodEnd.toISOString(),
    cycleIndex: invoice.cycleIndex ?? null
  }))
]

const cents = (amount: Decimal) => BigDecimal.unsafeToNumber(roundTo(BigDecimal.multiply(amount, HUNDRED), 0))

/**
 * An invoice computed in memory, in the shape the API answers a stored one
 * with: the same status and totals `invoiceRecord` writes, the lines and tax
 * lines as `lineRecords` writes them. The answer of a plan change (its
 * PRORATION invoice, as written: `number` is the one its INSERT took) and the
 * upcoming invoices (never written, so never numbered: `number` null).
 */
export const issuedInvoiceJson = (invoice: IssuedInvoice, paidAt: Date | null, number: string | null): Invoice => {
  const record = invoiceRecord(invoice, paidAt)
  return {
    id: invoice.id,
    number,
    customerId: invoice.customerId,
    purchaseId: invoice.purchaseId,
    kind: invoice.kind,
    status: record.status as Invoice["status"],
    currencyCode: invoice.currencyCode,
    periodStart: invoice.periodStart,
    periodEnd: invoice.periodEnd,
    lines: invoice.lines.map((line) => ({
      description: line.description,
      componentId: line.componentId,
      quantity: line.quantity === null ? null : BigDecimal.normalize(line.quantity),
      unitPrice: line.unitPrice === null ? null : BigDecimal.normalize(line.unitPrice),
      amount: BigDecimal.normalize(line.amount),
      periodStart: line.periodStart ?? invoice.periodStart,
      periodEnd: line.periodEnd ?? invoice.periodEnd
    })),
    taxLines: invoice.totals.taxes.map(({ amount, tax }) => ({
      taxId: tax.id,
      name: tax.name,
      ratePercent: tax.ratePercent,
      amount
    })),
    subtotal: invoice.totals.subtotal,
    taxTotal: invoice.totals.taxTotal,
    total: invoice.totals.total,
    totalCents: cents(invoice.totals.total),
    issuedAt: invoice.at,
    paidAt: record.paidAt === null ? null : new Date(record.paidAt as string),
    voidedAt: null
  }
}

const notFound = (id: string) => new InvoiceNotFound({ message: `Invoice ${id} not found` })

export class Invoices extends Effect.Service<Invoices>()("Invoices", {
  dependencies: [SigningKeys.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const read = yield* readClient
    const signingKeys = yield* SigningKeys

    const assemble = (row: InvoiceRow, lines: ReadonlyArray<typeof LineRow.Type>): Invoice => ({
      ...row,
      lines: lines.filter((l) => l.kind === "LINE").map((l) => ({
        description: l.description,
        componentId: l.componentId,
        quantity: l.quantity,
        unitPrice: l.unitPrice,
        amount: l.amount,
        periodStart: l.periodStart ?? row.periodStart,
        periodEnd: l.periodEnd ?? row.periodEnd
      })),
      taxLines: lines.filter((l) => l.kind === "TAX").map((l) => ({
        taxId: l.taxId ?? "",
        name: l.description,
        ratePercent: l.ratePercent ?? ZERO,
        amount: l.amount
      })),
      totalCents: cents(row.total)
    })

    /** `rows` with their lines, read on `on`: the client that read the rows, so that both are of one moment. */
    const withLines = (organizationId: OrganizationId, rows: ReadonlyArray<InvoiceRow>, on: SqlClient.SqlClient = sql) =>
      Effect.gen(function*() {
        if (rows.length === 0) return []
        const lines = yield* findAll(
          LineRow,
          on`SELECT * FROM invoice_lines WHERE organization_id = ${organizationId}
                AND ${on.in("invoice_id", rows.map((r) => r.id))} ORDER BY invoice_id, position`
        )
        return rows.map((row) => assemble(row, lines.filter((line) => line.invoiceId === row.id)))
      })

    const findRow = findByIdOr(sql, InvoiceRow, "invoices", notFound)

    const get = Effect.fn("Invoices.get")((organizationId: OrganizationId, id: string) =>
      Effect.map(Effect.flatMap(findRow(organizationId, id), (row) => withLines(organizationId, [row])), (list) => list[0]!))

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

    /** The answer to a key used before: the first payment again, or 422 when the key named another request. */
    const replayed = (organizationId: OrganizationId, key: string, stored: typeof KeyedPayment.Type, fingerprint: string) =>
      Effect.gen(function*() {
        const answer = replay(key, { fingerprint: stored.fingerprint ?? "", answer: stored.id }, fingerprint)
        if (Either.isLeft(answer)) return yield* answer.left
        const payment = yield* Effect.orDie(getPayment(organizationId, stored.id))
        return { replayed: true, payment, invoice: yield* Effect.orDie(get(organizationId, payment.invoiceId)) } satisfies PaymentRecorded
      })

    /**
     * Records a payment received outside the service for an OPEN invoice, which
     * becomes PAID (the whole total; method MANUAL). With an `idempotencyKey`
     * (unique per workspace among payments) a repeat of the same request (same
     * invoice, same reference) records nothing and answers the first payment;
     * the same key with another request is `IdempotencyKeyReused`. The invoice
     * is locked first, so two identical requests are answered one after the
     * other: the second finds the first's key (a replay), not a PAID invoice.
     */
    const pay = Effect.fn("Invoices.pay")(function*(organizationId: OrganizationId, id: string, input: PaymentCreate = {}) {
        const invoice = yield* findRow(organizationId, id, true)
        const reference = input.reference ?? null
        const fingerprint = fingerprintOf([id, reference])
        const key = input.idempotencyKey
        if (key !== undefined) {
          const stored = yield* findKeyed(organizationId, key)
          if (Option.isSome(stored)) return yield* replayed(organizationId, key, stored.value, fingerprint)
        }
        if (invoice.status !== "OPEN") {
          return yield* new InvoiceNotOpen({
            message: invoice.status === "DRAFT"
              ? `Invoice ${id} is a DRAFT (inside its grace period), not OPEN; it becomes OPEN when the cycle job finalises it`
              : `Invoice ${id} is ${invoice.status}, not OPEN`
          })
        }
        const at = yield* currentTime
        const paymentId = makeId("pay")
        const inserted = yield* sql`INSERT INTO payments ${
          sql.insert({
            organizationId,
            id: paymentId,
            invoiceId: invoice.id,
            customerId: invoice.customerId,
            amount: toSql(invoice.total),
            method: "MANUAL",
            reference,
            idempotencyKey: key ?? null,
            fingerprint: key === undefined ? null : fingerprint,
            createdAt: at
          })
        } ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id`
        if (inserted.length === 0 && key !== undefined) {
          // The same key committed meanwhile for another invoice (this one is locked): a different request.
          const stored = yield* findKeyed(organizationId, key)
          return yield* replayed(organizationId, key, Option.getOrThrow(stored), fingerprint)
        }
        yield* sql`UPDATE invoices SET status = 'PAID', paid_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${invoice.id}`
        return {
          replayed: false,
          payment: yield* Effect.orDie(getPayment(organizationId, paymentId)),
          invoice: yield* get(organizationId, id)
        } satisfies PaymentRecorded
      }, sql.withTransaction, dieOnSqlError)

    const voidInvoice = Effect.fn("Invoices.voidInvoice")(function*(organizationId: OrganizationId, id: string) {
        yield* openInvoice(organizationId, id)
        const at = yield* currentTime
        yield* sql`UPDATE invoices SET status = 'VOID', voided_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${id}`
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

    return { writeIssued, list, get, latestOfCustomer, pay, voidInvoice, payLink, listPayments, getPayment } as const
  })
}) {}
