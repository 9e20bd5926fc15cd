/**
 * An invoice computed in memory (`IssuedInvoice`) on its way out: the
 * invoices and invoice_lines rows it is written as, the INSERTs that write a
 * batch of them with the wallet payments that settled them at issue (the
 * final ones numbered in the same statement, InvoiceNumbers.ts), and the
 * answer it is shown as before it is read back. Pure but for the statements,
 * which run in the caller's transaction.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal } from "effect"
import { insertRowsStatement } from "../db/Sql.ts"
import { toSql } from "../money.ts"
import { amountDueOf, type Invoice, type IssuedInvoice, type WalletPayment } from "./Invoice.ts"
import { numberedInsert, numbering } from "./InvoiceNumbers.ts"
import { cents } from "./InvoiceTotals.ts"

/**
 * When an issued invoice is PAID at issue, if it is: a DRAFT never; a free one
 * (a total of zero or less) at its issue; else when a wallet payment settled
 * it (`paidAt`), if one did. Its status (`invoiceRecord`) and its
 * `invoice.paid` event (StepWriter.ts `stepEvents`) both follow it.
 */
export const paidAtIssue = (invoice: IssuedInvoice, paidAt: Date | null): Date | null =>
  invoice.draft === true ? null : invoice.totals.free ? invoice.at : paidAt

/** The invoices row of an issued invoice; `paidAt` when a payment settled it at issue. */
export const invoiceRecord = (invoice: IssuedInvoice, paidAt: Date | null): Record<string, unknown> => {
  const at = invoice.at.toISOString()
  const paid = paidAtIssue(invoice, paidAt)?.toISOString() ?? null
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

/**
 * The INSERTs of issued invoices, their lines and the wallet payments that
 * settled them at issue, for `writeTogether` (undefined where there are none).
 * The invoices issued final (all but DRAFTs) take their numbers here
 * (`numbering`, InvoiceNumbers.ts): the counter's upsert goes with the
 * INSERTs, in the same statement.
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

/**
 * An invoice computed in memory, in the shape the API answers a stored one
 * with: the same status and totals `invoiceRecord` writes, the lines and tax
 * lines as `lineRecords` writes them. The answer of a plan change (its
 * PRORATION invoice, as written: `number` and `dueDate` are the ones its INSERT
 * gave it) and the upcoming invoices (never written, so never numbered nor due:
 * `number` and `dueDate` null). Just issued, it is not overdue.
 */
export const issuedInvoiceJson = (
  invoice: IssuedInvoice,
  paidAt: Date | null,
  number: string | null,
  dueDate: Date | null = null
): Invoice => {
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
    amountDue: amountDueOf({ status: record.status as string, total: invoice.totals.total }, []),
    issuedAt: invoice.at,
    paidAt: record.paidAt === null ? null : new Date(record.paidAt as string),
    voidedAt: null,
    dueDate,
    overdue: false,
    overdueAt: null,
    creditNotes: []
  }
}
