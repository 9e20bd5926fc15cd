/**
 * Stored invoices read back as the API shows them: the invoice row with its
 * lines and tax lines, its credit notes and the amount due they leave
 * (`assembleInvoice`), one invoice or a set of them across organisations
 * (`readInvoices`; `readCreditNotes` the notes of a set of invoices).
 * `GET /invoices/{id}` (Invoices.get) and the lifecycle events
 * (LifecycleEvents.ts), which carry the invoice "as the API shows it", read
 * through here, so the two cannot drift apart.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { ZERO } from "../money.ts"
import { type CreditNote, creditNoteFromRow, CreditNoteRow } from "./CreditNote.ts"
import { amountDueOf, type Invoice, InvoiceRow, LineRow } from "./Invoice.ts"
import { cents } from "./InvoiceTotals.ts"

/** Whether an invoice is overdue now: OPEN, and marked overdue by the cycle job (DueDates.ts). */
export const isOverdue = (invoice: { readonly status: string; readonly overdueAt: Date | null }) =>
  invoice.status === "OPEN" && invoice.overdueAt !== null

/**
 * An invoice as the API answers it, from its row, its lines (LINE and TAX
 * rows, in position order) and its credit notes (oldest first).
 */
export const assembleInvoice = (
  row: InvoiceRow,
  lines: ReadonlyArray<typeof LineRow.Type>,
  creditNotes: ReadonlyArray<CreditNote> = []
): Invoice => ({
  ...row,
  overdue: isOverdue(row),
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
  totalCents: cents(row.total),
  amountDue: amountDueOf(row, creditNotes),
  creditNotes
})

const ScopedCreditNoteRow = Schema.Struct({ organizationId: Schema.String, ...CreditNoteRow.fields })

const keyOf = (organizationId: string, id: string) => `${organizationId}/${id}`

/**
 * The credit notes of the invoices `invoices` names (organisation and id),
 * oldest first, by invoice (`organizationId/invoiceId`): one statement for any
 * number of invoices (none for none), each probing the notes' index by its key.
 */
export const readCreditNotes = (
  sql: SqlClient.SqlClient,
  invoices: ReadonlyArray<{ readonly organizationId: string; readonly id: string }>
): Effect.Effect<ReadonlyMap<string, ReadonlyArray<CreditNote>>> =>
  Effect.gen(function*() {
    const notesOf = new Map<string, Array<CreditNote>>()
    if (invoices.length === 0) return notesOf
    const rows = yield* findAll(
      ScopedCreditNoteRow,
      sql`SELECT n.organization_id, n.id, n.number, n.invoice_id, n.customer_id, n.amount, n.reason, n.lines,
                 n.tax_lines, n.applied_to, n.wallet_ledger_id, n.created_at
          FROM unnest(${invoices.map((key) => key.organizationId)}::text[], ${invoices.map((key) => key.id)}::text[])
            AS k(organization_id, id)
          CROSS JOIN LATERAL (SELECT * FROM credit_notes r
                              WHERE r.organization_id = k.organization_id AND r.invoice_id = k.id OFFSET 0) n
          ORDER BY n.organization_id, n.invoice_id, n.sequence_number`
    )
    for (const { organizationId, ...row } of rows) {
      const key = keyOf(organizationId, row.invoiceId)
      const list = notesOf.get(key)
      if (list === undefined) notesOf.set(key, [creditNoteFromRow(row)])
      else list.push(creditNoteFromRow(row))
    }
    return notesOf
  })

const ScopedInvoiceRow = Schema.Struct({ organizationId: Schema.String, ...InvoiceRow.fields })
const ScopedLineRow = Schema.Struct({ organizationId: Schema.String, ...LineRow.fields })

/** An invoice as the API shows it, with the organisation it belongs to. */
export interface ScopedInvoice {
  readonly organizationId: string
  readonly invoice: Invoice
}

/**
 * The invoices `keys` names (organisation and id), as the API shows them,
 * in three statements for any number of them (none for none): the rows, their
 * lines, their credit notes; a key that names nothing is left out. In the
 * order of `keys`.
 */
export const readInvoices = (
  sql: SqlClient.SqlClient,
  keys: ReadonlyArray<{ readonly organizationId: string; readonly id: string }>
): Effect.Effect<ReadonlyArray<ScopedInvoice>> =>
  Effect.gen(function*() {
    if (keys.length === 0) return []
    const unique = [...new Map(keys.map((key) => [`${key.organizationId}/${key.id}`, key] as const)).values()]
    const organizations = unique.map((key) => key.organizationId)
    const ids = unique.map((key) => key.id)
    // Each key probes its rows by their keys (a LATERAL of its own): joined by key, the planner's guess of
    // 100 rows for any unnest could read a large table whole for one invoice.
    const rows = yield* findAll(
      ScopedInvoiceRow,
      sql`SELECT i.* FROM unnest(${organizations}::text[], ${ids}::text[]) AS k(organization_id, id)
          CROSS JOIN LATERAL (SELECT * FROM invoices r WHERE r.organization_id = k.organization_id AND r.id = k.id OFFSET 0) i`
    )
    if (rows.length === 0) return []
    const lines = yield* findAll(
      ScopedLineRow,
      sql`SELECT l.* FROM unnest(${rows.map((row) => row.organizationId)}::text[], ${rows.map((row) => row.id)}::text[])
            AS k(organization_id, id)
          CROSS JOIN LATERAL (SELECT * FROM invoice_lines r
                              WHERE r.organization_id = k.organization_id AND r.invoice_id = k.id OFFSET 0) l
          ORDER BY l.organization_id, l.invoice_id, l.position`
    )
    const notesOf = yield* readCreditNotes(sql, rows)
    const linesOf = new Map<string, Array<typeof ScopedLineRow.Type>>()
    for (const line of lines) {
      const key = keyOf(line.organizationId, line.invoiceId)
      const list = linesOf.get(key)
      if (list === undefined) linesOf.set(key, [line])
      else list.push(line)
    }
    const rowOf = new Map(rows.map((row) => [keyOf(row.organizationId, row.id), row] as const))
    return keys.flatMap((key) => {
      const row = rowOf.get(keyOf(key.organizationId, key.id))
      if (row === undefined) return []
      const { organizationId, ...invoice } = row
      const found = keyOf(organizationId, row.id)
      return [{ organizationId, invoice: assembleInvoice(invoice, linesOf.get(found) ?? [], notesOf.get(found) ?? []) }]
    })
  })
