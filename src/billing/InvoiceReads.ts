/**
 * Stored invoices read back as the API shows them: the invoice row with its
 * lines and tax lines (`assembleInvoice`), one invoice or a set of them across
 * organisations (`readInvoices`). `GET /invoices/{id}` (Invoices.get) and the
 * lifecycle events (LifecycleEvents.ts), which carry the invoice "as the API
 * shows it", read through here, so the two cannot drift apart.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { ZERO } from "../money.ts"
import { type Invoice, InvoiceRow, LineRow } from "./Invoice.ts"
import { cents } from "./InvoiceTotals.ts"

/** Whether an invoice is overdue now: OPEN, and marked overdue by the cycle job (DueDates.ts). */
export const isOverdue = (invoice: { readonly status: string; readonly overdueAt: Date | null }) =>
  invoice.status === "OPEN" && invoice.overdueAt !== null

/** An invoice as the API answers it, from its row and its lines (LINE and TAX rows, in position order). */
export const assembleInvoice = (row: InvoiceRow, lines: ReadonlyArray<typeof LineRow.Type>): Invoice => ({
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
  totalCents: cents(row.total)
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
 * in two statements for any number of them (none for none); a key that names
 * nothing is left out. In the order of `keys`.
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
    const keyOf = (organizationId: string, id: string) => `${organizationId}/${id}`
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
      return [{ organizationId, invoice: assembleInvoice(invoice, linesOf.get(keyOf(organizationId, row.id)) ?? []) }]
    })
  })
