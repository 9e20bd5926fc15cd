/**
 * Invoices and payments. A purchase issues a PLAN invoice at every cycle start
 * (the plan cost) and a USAGE invoice at a cycle end when ARREAR usage was
 * charged. Lines keep exact decimals; the invoice rounds its subtotal to cents,
 * each active tax is a cent-rounded line on that subtotal, and the total is
 * their sum, so the totals always add up to the cent.
 *
 * States: OPEN -> PAID (a payment) or OPEN -> VOID (an operator, or the
 * purchase's cancellation). A zero-total invoice is issued PAID.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option, Schema } from "effect"
import { createHmac } from "node:crypto"
import { dieOnSqlError, findAll, findByIdOr, findOne } from "../db/Sql.ts"
import { Conflict, NotFound } from "../errors.ts"
import type { Page } from "../http/Pagination.ts"
import { makeId, randomToken } from "../ids.ts"
import { type Decimal, HUNDRED, roundTo, sum, toSql, ZERO } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { SigningKeys } from "../portal/SigningKeys.ts"
import { Taxes } from "./Taxes.ts"
import { Wallets } from "./Wallets.ts"

export const InvoiceStatus = Schema.Literal("OPEN", "PAID", "VOID")

class InvoiceRow extends Schema.Class<InvoiceRow>("InvoiceRow")({
  id: Schema.String,
  customerId: Schema.String,
  purchaseId: Schema.NullOr(Schema.String),
  kind: Schema.Literal("PLAN", "USAGE"),
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

const LineRow = Schema.Struct({
  invoiceId: Schema.String,
  position: Schema.Number,
  kind: Schema.Literal("LINE", "TAX"),
  description: Schema.String,
  quantity: Schema.NullOr(Money),
  unitPrice: Schema.NullOr(Money),
  amount: Money,
  componentId: Schema.NullOr(Schema.String),
  taxId: Schema.NullOr(Schema.String),
  ratePercent: Schema.NullOr(Money)
})

export const InvoiceLine = Schema.Struct({
  description: Schema.String,
  componentId: Schema.NullOr(Schema.String),
  quantity: Schema.NullOr(Money),
  unitPrice: Schema.NullOr(Money),
  amount: Money
})

export const TaxLine = Schema.Struct({
  taxId: Schema.String,
  name: Schema.String,
  ratePercent: Money,
  amount: Money
})

export const Invoice = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  purchaseId: Schema.NullOr(Schema.String),
  kind: Schema.Literal("PLAN", "USAGE"),
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

export interface LineInput {
  readonly description: string
  readonly componentId: string | null
  readonly quantity: Decimal | null
  readonly unitPrice: Decimal | null
  readonly amount: Decimal
}

export interface IssueInput {
  readonly customerId: string
  readonly purchaseId: string
  readonly kind: "PLAN" | "USAGE"
  readonly currencyCode: string
  readonly periodStart: Date
  readonly periodEnd: Date
  readonly lines: ReadonlyArray<LineInput>
  readonly autoPayment: boolean
  readonly at: Date
}

const cents = (amount: Decimal) => BigDecimal.unsafeToNumber(roundTo(BigDecimal.multiply(amount, HUNDRED), 0))

const notFound = (id: string) => new NotFound({ message: `Invoice ${id} not found` })

/** Minutes a hosted pay link stays valid. */
const PAY_LINK_MINUTES = 60 * 24

export class Invoices extends Effect.Service<Invoices>()("Invoices", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const taxes = yield* Taxes
    const wallets = yield* Wallets
    const signingKeys = yield* SigningKeys

    const assemble = (row: InvoiceRow, lines: ReadonlyArray<typeof LineRow.Type>): Invoice => ({
      ...row,
      lines: lines.filter((l) => l.kind === "LINE").map((l) => ({
        description: l.description,
        componentId: l.componentId,
        quantity: l.quantity,
        unitPrice: l.unitPrice,
        amount: l.amount
      })),
      taxLines: lines.filter((l) => l.kind === "TAX").map((l) => ({
        taxId: l.taxId ?? "",
        name: l.description,
        ratePercent: l.ratePercent ?? ZERO,
        amount: l.amount
      })),
      totalCents: cents(row.total)
    })

    const withLines = (organizationId: string, rows: ReadonlyArray<InvoiceRow>) =>
      Effect.gen(function*() {
        if (rows.length === 0) return []
        const lines = yield* findAll(
          LineRow,
          sql`SELECT * FROM invoice_lines WHERE organization_id = ${organizationId}
                AND ${sql.in("invoice_id", rows.map((r) => r.id))} ORDER BY invoice_id, position`
        )
        return rows.map((row) => assemble(row, lines.filter((line) => line.invoiceId === row.id)))
      })

    const findRow = findByIdOr(sql, InvoiceRow, "invoices", notFound)

    const get = (organizationId: string, id: string) =>
      Effect.map(Effect.flatMap(findRow(organizationId, id), (row) => withLines(organizationId, [row])), (list) => list[0]!)

    const list = (organizationId: string, query: { readonly customerId?: string | undefined; readonly page: Page }) =>
      Effect.flatMap(
        findAll(
          InvoiceRow,
          sql`SELECT * FROM invoices WHERE organization_id = ${organizationId}
                AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
                AND (${query.page.cursor ?? null}::text IS NULL OR id > ${query.page.cursor ?? null})
              ORDER BY id LIMIT ${query.page.limit}`
        ),
        (rows) => withLines(organizationId, rows)
      )

    const recordPayment = (
      organizationId: string,
      invoice: InvoiceRow,
      method: "MANUAL" | "WALLET",
      reference: string | null,
      at: Date
    ) =>
      Effect.gen(function*() {
        const id = makeId("pay")
        yield* sql`INSERT INTO payments ${
          sql.insert({
            organizationId,
            id,
            invoiceId: invoice.id,
            customerId: invoice.customerId,
            amount: toSql(invoice.total),
            method,
            reference,
            createdAt: at
          })
        }`
        yield* sql`UPDATE invoices SET status = 'PAID', paid_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${invoice.id}`
        return id
      })

    /**
     * Issues an invoice in the caller's transaction: the lines, a cent-rounded
     * line per active tax, and, with auto-payment on, payment from the wallet
     * when it holds the total.
     */
    const issue = (organizationId: string, input: IssueInput) =>
      Effect.gen(function*() {
        const id = makeId("inv")
        const subtotal = roundTo(sum(input.lines.map((line) => line.amount)), 2)
        const applicable = yield* taxes.list(organizationId, true)
        const taxAmounts = applicable.map((tax) => ({
          tax,
          amount: roundTo(BigDecimal.unsafeDivide(BigDecimal.multiply(subtotal, tax.ratePercent), HUNDRED), 2)
        }))
        const taxTotal = sum(taxAmounts.map((t) => t.amount))
        const total = BigDecimal.normalize(BigDecimal.sum(subtotal, taxTotal))
        const free = !BigDecimal.isPositive(total)
        yield* sql`INSERT INTO invoices ${
          sql.insert({
            organizationId,
            id,
            customerId: input.customerId,
            purchaseId: input.purchaseId,
            kind: input.kind,
            status: free ? "PAID" : "OPEN",
            currencyCode: input.currencyCode,
            periodStart: input.periodStart,
            periodEnd: input.periodEnd,
            subtotal: toSql(subtotal),
            taxTotal: toSql(taxTotal),
            total: toSql(total),
            issuedAt: input.at,
            paidAt: free ? input.at : null,
            createdAt: input.at,
            updatedAt: input.at
          })
        }`
        const lineRows = [
          ...input.lines.map((line, index) => ({
            organizationId,
            invoiceId: id,
            position: index,
            kind: "LINE",
            description: line.description,
            quantity: line.quantity === null ? null : toSql(line.quantity),
            unitPrice: line.unitPrice === null ? null : toSql(line.unitPrice),
            amount: toSql(line.amount),
            componentId: line.componentId,
            taxId: null,
            ratePercent: null
          })),
          ...taxAmounts.map(({ amount, tax }, index) => ({
            organizationId,
            invoiceId: id,
            position: input.lines.length + index,
            kind: "TAX",
            description: tax.name,
            quantity: null,
            unitPrice: null,
            amount: toSql(amount),
            componentId: null,
            taxId: tax.id,
            ratePercent: toSql(tax.ratePercent)
          }))
        ]
        if (lineRows.length > 0) yield* sql`INSERT INTO invoice_lines ${sql.insert(lineRows)}`
        if (!free && input.autoPayment) {
          const wallet = yield* wallets.lock(organizationId, input.customerId)
          if (BigDecimal.greaterThanOrEqualTo(wallet.balance, total)) {
            const invoice = yield* findRow(organizationId, id)
            yield* wallets.move(organizationId, input.customerId, BigDecimal.negate(total), {
              type: "INVOICE_PAYMENT",
              invoiceId: id,
              purchaseId: input.purchaseId,
              at: input.at
            })
            yield* recordPayment(organizationId, invoice, "WALLET", null, input.at)
          }
        }
        return id
      })

    /** Voids the purchase's OPEN invoices, in the caller's transaction. */
    const voidOpenOfPurchase = (organizationId: string, purchaseId: string, at: Date) =>
      sql`UPDATE invoices SET status = 'VOID', voided_at = ${at}, updated_at = ${at}
          WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId} AND status = 'OPEN'`

    const openInvoice = (organizationId: string, id: string) =>
      Effect.flatMap(findRow(organizationId, id, true), (invoice) =>
        invoice.status === "OPEN"
          ? Effect.succeed(invoice)
          : Effect.fail(new Conflict({ message: `Invoice ${id} is ${invoice.status}, not OPEN` })))

    /** An operator records a payment received outside the service; the invoice becomes PAID. */
    const pay = (organizationId: string, id: string, reference: string | null) =>
      Effect.gen(function*() {
        const invoice = yield* openInvoice(organizationId, id)
        yield* recordPayment(organizationId, invoice, "MANUAL", reference, new Date())
        return yield* get(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    const voidInvoice = (organizationId: string, id: string) =>
      Effect.gen(function*() {
        yield* openInvoice(organizationId, id)
        const at = new Date()
        yield* sql`UPDATE invoices SET status = 'VOID', voided_at = ${at}, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* get(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    /** A hosted pay link for an OPEN invoice, signed so the pay page can trust it; not OPEN is 409. */
    const payLink = (organizationId: string, id: string) =>
      Effect.gen(function*() {
        const invoice = yield* findRow(organizationId, id)
        if (invoice.status !== "OPEN") {
          return yield* new Conflict({ message: `Invoice ${id} is ${invoice.status}; a pay link needs an OPEN invoice` })
        }
        const expiresAt = new Date(Date.now() + PAY_LINK_MINUTES * 60_000)
        const nonce = randomToken(8)
        const payload = `${organizationId}.${id}.${expiresAt.getTime()}.${nonce}`
        const signature = createHmac("sha256", yield* signingKeys.secretOf(organizationId)).update(payload).digest("hex")
        const base = (process.env.BILLING_PUBLIC_URL ?? "http://localhost:8787").replace(/\/+$/, "")
        const url = `${base}/pay/${id}?expires=${expiresAt.getTime()}&nonce=${nonce}&signature=${signature}`
        return { invoiceId: id, url, expiresAt }
      })

    const listPayments = (organizationId: string, query: { readonly customerId?: string | undefined; readonly page: Page }) =>
      findAll(
        Payment,
        sql`SELECT * FROM payments WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              AND (${query.page.cursor ?? null}::text IS NULL OR id > ${query.page.cursor ?? null})
            ORDER BY id LIMIT ${query.page.limit}`
      )

    const getPayment = (organizationId: string, id: string) =>
      Effect.flatMap(
        findOne(Payment, sql`SELECT * FROM payments WHERE organization_id = ${organizationId} AND id = ${id}`),
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: `Payment ${id} not found` })),
          onSome: Effect.succeed
        })
      )

    return { issue, voidOpenOfPurchase, list, get, pay, voidInvoice, payLink, listPayments, getPayment } as const
  })
}) {}
