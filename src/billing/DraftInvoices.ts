/**
 * The USAGE invoices of cycles still inside their grace period (DRAFT), kept
 * equal to what the cycle's balance rows (`cycle_balances`) now say: late
 * usage and reversals of such a cycle change its draft's lines and totals
 * (`refreshDrafts`, in the caller's transaction: the signal batch, a
 * reversal). When the grace period ends, the cycle job finalises the drafts
 * (`finalizeDue`): rebuilt once more, then OPEN, or PAID from the wallet per
 * the auto-payment rules, and the cycle FINAL with its charges invoiced (the
 * ledger's `invoiceCycleArrears`, src/ledger/Cycles.ts).
 *
 * Set-based: a fixed number of statements for any number of cycles. Locks in
 * the ledger's order: purchase_cycles, then cycle_balances (both in key
 * order), then the draft invoices, then wallets. A caller that moved a
 * cycle's `cycle_balances` rows must have locked its `purchase_cycles` row
 * first (FOR UPDATE), as the signal batch and the reversal do.
 *
 * A draft's lines: one per ARREAR row of the cycle that charged something
 * (rebuilt every time), then the late lines of earlier FINAL cycles it was
 * issued with (kept as they are: their rows' invoiced_arrear already counts
 * them). Its taxes are the ones it was issued with (its TAX lines' taxes and
 * rates); a draft created here, for a DRAFT cycle that had no usage invoice,
 * takes the organisation's active taxes of the moment.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { groupBy } from "effect/Array"
import { findAll, insertRows, orDie } from "../db/Sql.ts"
import { makeId } from "../ids.ts"
import { invoiceCycleArrears } from "../ledger/Cycles.ts"
import { customerKey, Ledger, type WalletPosting } from "../ledger/Ledger.ts"
import { type Decimal, toSql } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { type IssuedInvoice, LineRow } from "./Invoice.ts"
import { finaliseDrafts } from "./InvoiceNumbers.ts"
import { invoiceTotals, type LineInput, type TaxRate } from "./InvoiceTotals.ts"
import { invoiceRecord, lineRecords } from "./IssuedInvoices.ts"
import { recordLifecycleEvents } from "./LifecycleEvents.ts"
import { arrearLines, type LineComponent } from "./Renewal.ts"
import { currentTime } from "../time.ts"

/** One ended cycle of a purchase. */
export interface CycleKey {
  readonly organizationId: string
  readonly purchaseId: string
  readonly cycleIndex: number
}

const keyOf = (key: CycleKey) => `${key.organizationId}/${key.purchaseId}/${key.cycleIndex}`

/** Distinct keys in key order, as three arrays for `unnest`. */
const keyColumns = (keys: ReadonlyArray<CycleKey>) => {
  const unique = new Map(keys.map((key) => [keyOf(key), key] as const))
  const sorted = [...unique.values()].sort((a, b) =>
    a.organizationId !== b.organizationId
      ? (a.organizationId < b.organizationId ? -1 : 1)
      : a.purchaseId !== b.purchaseId
      ? (a.purchaseId < b.purchaseId ? -1 : 1)
      : a.cycleIndex - b.cycleIndex
  )
  return {
    organizations: sorted.map((key) => key.organizationId),
    purchases: sorted.map((key) => key.purchaseId),
    indexes: sorted.map((key) => key.cycleIndex)
  }
}

/** A DRAFT cycle, locked, with what its invoice needs of its purchase. */
const DraftCycle = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  customerId: Schema.String,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  usageInvoiceId: Schema.NullOr(Schema.String),
  currencyCode: Schema.String,
  autoPayment: Schema.Boolean
})
type DraftCycle = typeof DraftCycle.Type

const draftColumns = `pc.organization_id, pc.purchase_id, pc.cycle_index, pc.customer_id, pc.period_start, pc.period_end,
  pc.usage_invoice_id, coalesce(pc.snapshot, p.snapshot)->>'currencyCode' AS currency_code, p.auto_payment`

/** A balance row of a DRAFT cycle, with its component as the purchase's snapshot names it. */
const CycleBalance = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  componentId: Schema.String,
  billingMode: Schema.String,
  cycleQuantity: Money,
  arrearAmount: Money,
  targetName: Schema.NullOr(Schema.String),
  componentType: Schema.NullOr(Schema.String),
  unitPrice: Schema.NullOr(Money)
})
type CycleBalance = typeof CycleBalance.Type

const InvoiceHead = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  status: Schema.String,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  issuedAt: Timestamp
})

const ScopedLine = Schema.Struct({ organizationId: Schema.String, ...LineRow.fields })

const ActiveTax = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  name: Schema.String,
  ratePercent: Money
})

/** A draft as rebuilt: its invoice (the lines and totals now), and whether it is new. */
interface Rebuilt {
  readonly cycle: DraftCycle
  readonly invoice: IssuedInvoice
  readonly created: boolean
}

/**
 * Rebuilds the drafts of `cycles` (locked DRAFT cycles, in key order): locks
 * their balance rows and invoices, recomputes each draft, and writes the
 * lines and totals (creating the drafts of cycles that have none and now
 * charge something). The rebuilt drafts, for the finalisation to settle.
 */
const rebuild = (sql: SqlClient.SqlClient, cycles: ReadonlyArray<DraftCycle>, now: Date) =>
  Effect.gen(function*() {
    if (cycles.length === 0) return [] as Array<Rebuilt>
    const keys = keyColumns(cycles)
    const balances = yield* findAll(
      CycleBalance,
      sql`SELECT cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id, cb.billing_mode,
                 cb.cycle_quantity, cb.arrear_amount, c.value->>'targetName' AS target_name,
                 c.value->>'type' AS component_type, c.value->>'unitPrice' AS unit_price
          FROM cycle_balances cb
          JOIN purchases p ON p.organization_id = cb.organization_id AND p.id = cb.purchase_id
          -- The plan the cycle was billed under: its own snapshot when the purchase changed plan since.
          JOIN purchase_cycles pc ON pc.organization_id = cb.organization_id AND pc.purchase_id = cb.purchase_id
            AND pc.cycle_index = cb.cycle_index
          LEFT JOIN LATERAL (SELECT e.value FROM jsonb_array_elements(coalesce(pc.snapshot, p.snapshot)->'components') e
                             WHERE e.value->>'id' = cb.component_id LIMIT 1) c ON true
          WHERE (cb.organization_id, cb.purchase_id, cb.cycle_index) IN (
            SELECT * FROM unnest(${keys.organizations}::text[], ${keys.purchases}::text[], ${keys.indexes}::int[]))
          ORDER BY cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id
          FOR UPDATE OF cb`
    )
    const withInvoice = cycles.filter((c) => c.usageInvoiceId !== null)
    const invoiceOrgs = withInvoice.map((c) => c.organizationId)
    const invoiceIds = withInvoice.map((c) => c.usageInvoiceId!)
    const heads = withInvoice.length === 0 ? [] : yield* findAll(
      InvoiceHead,
      sql`SELECT organization_id, id, status, period_start, period_end, issued_at FROM invoices
          WHERE (organization_id, id) IN (SELECT * FROM unnest(${invoiceOrgs}::text[], ${invoiceIds}::text[]))
          ORDER BY organization_id, id FOR UPDATE`
    )
    const lines = withInvoice.length === 0 ? [] : yield* findAll(
      ScopedLine,
      sql`SELECT * FROM invoice_lines
          WHERE (organization_id, invoice_id) IN (SELECT * FROM unnest(${invoiceOrgs}::text[], ${invoiceIds}::text[]))
          ORDER BY organization_id, invoice_id, position`
    )
    const balancesOf: Record<string, ReadonlyArray<CycleBalance>> = groupBy(balances, keyOf)
    const headOf = new Map(heads.map((head) => [`${head.organizationId}/${head.id}`, head] as const))
    const linesOf: Record<string, ReadonlyArray<typeof ScopedLine.Type>> = groupBy(lines, (line) => `${line.organizationId}/${line.invoiceId}`)
    const ownLines = (cycle: DraftCycle) => {
      const rows = balancesOf[keyOf(cycle)] ?? []
      const components = new Map(rows.map((row) => [row.componentId, row] as const))
      const componentOf = (id: string): LineComponent | undefined => {
        const row = components.get(id)
        return row === undefined || row.targetName === null
          ? undefined
          : { targetName: row.targetName, type: row.componentType ?? "", unitPrice: row.unitPrice }
      }
      return arrearLines(componentOf, rows)
    }
    // Cycles that get a draft now: their organisations' active taxes (one statement).
    const creating = cycles.filter((c) => c.usageInvoiceId === null && ownLines(c).length > 0)
    const organizations = [...new Set(creating.map((c) => c.organizationId))].sort()
    const taxes = organizations.length === 0 ? [] : yield* findAll(
      ActiveTax,
      sql`SELECT organization_id, id, name, rate_percent FROM taxes
          WHERE organization_id = ANY(${organizations}::text[]) AND is_active
          ORDER BY organization_id, id`
    )
    const rebuilt: Array<Rebuilt> = []
    for (const cycle of cycles) {
      const own = ownLines(cycle)
      const head = cycle.usageInvoiceId === null ? undefined : headOf.get(`${cycle.organizationId}/${cycle.usageInvoiceId}`)
      if (head === undefined) {
        if (own.length === 0) continue
        const orgTaxes: Array<TaxRate> = taxes.filter((t) => t.organizationId === cycle.organizationId)
        rebuilt.push({
          cycle,
          created: true,
          invoice: {
            organizationId: cycle.organizationId,
            id: makeId("inv"),
            customerId: cycle.customerId,
            purchaseId: cycle.purchaseId,
            kind: "USAGE",
            currencyCode: cycle.currencyCode,
            periodStart: cycle.periodStart,
            periodEnd: cycle.periodEnd,
            cycleIndex: cycle.cycleIndex,
            lines: own,
            totals: invoiceTotals(own, orgTaxes),
            at: now,
            draft: true
          }
        })
        continue
      }
      if (head.status !== "DRAFT") continue // never edit an invoice that is not a draft
      const periodStart = head.periodStart ?? cycle.periodStart
      const periodEnd = head.periodEnd ?? cycle.periodEnd
      const existing = linesOf[`${head.organizationId}/${head.id}`] ?? []
      // Lines of other cycles (late lines it was issued with) stay; the cycle's own are rebuilt.
      const kept: Array<LineInput> = existing
        .filter((line) =>
          line.kind === "LINE" &&
          !(line.cycleIndex === cycle.cycleIndex && line.periodStart !== null &&
            line.periodStart.getTime() === periodStart.getTime())
        )
        .map((line) => ({
          description: line.description,
          componentId: line.componentId,
          quantity: line.quantity,
          unitPrice: line.unitPrice,
          amount: line.amount,
          periodStart: line.periodStart ?? periodStart,
          periodEnd: line.periodEnd ?? periodEnd,
          cycleIndex: line.cycleIndex
        }))
      const issuedTaxes: Array<TaxRate> = existing
        .filter((line) => line.kind === "TAX")
        .map((line) => ({ id: line.taxId ?? "", name: line.description, ratePercent: line.ratePercent ?? BigDecimal.fromBigInt(0n) }))
      const all = [...own, ...kept]
      rebuilt.push({
        cycle,
        created: false,
        invoice: {
          organizationId: head.organizationId,
          id: head.id,
          customerId: cycle.customerId,
          purchaseId: cycle.purchaseId,
          kind: "USAGE",
          currencyCode: cycle.currencyCode,
          periodStart,
          periodEnd,
          cycleIndex: cycle.cycleIndex,
          lines: all,
          totals: invoiceTotals(all, issuedTaxes),
          at: head.issuedAt,
          draft: true
        }
      })
    }
    const created = rebuilt.filter((r) => r.created)
    const updated = rebuilt.filter((r) => !r.created)
    yield* insertRows(sql, "invoices", created.map((r) => invoiceRecord(r.invoice, null)))
    if (updated.length > 0) {
      yield* orDie(sql`DELETE FROM invoice_lines WHERE (organization_id, invoice_id) IN (
          SELECT * FROM unnest(${updated.map((r) => r.invoice.organizationId)}::text[], ${updated.map((r) => r.invoice.id)}::text[]))`)
    }
    yield* insertRows(sql, "invoice_lines", rebuilt.flatMap((r) => lineRecords(r.invoice)))
    if (updated.length > 0) {
      const column = (pick: (r: Rebuilt) => Decimal) => updated.map((r) => toSql(pick(r)))
      yield* orDie(sql`UPDATE invoices AS i SET subtotal = v.subtotal, tax_total = v.tax_total, total = v.total,
            updated_at = ${now}
          FROM unnest(${updated.map((r) => r.invoice.organizationId)}::text[], ${updated.map((r) => r.invoice.id)}::text[],
                      ${column((r) => r.invoice.totals.subtotal)}::numeric[], ${column((r) => r.invoice.totals.taxTotal)}::numeric[],
                      ${column((r) => r.invoice.totals.total)}::numeric[]) AS v(organization_id, id, subtotal, tax_total, total)
          WHERE i.organization_id = v.organization_id AND i.id = v.id`)
    }
    if (created.length > 0) {
      yield* orDie(sql`UPDATE purchase_cycles AS pc SET usage_invoice_id = v.invoice_id
          FROM unnest(${created.map((r) => r.cycle.organizationId)}::text[], ${created.map((r) => r.cycle.purchaseId)}::text[],
                      ${created.map((r) => r.cycle.cycleIndex)}::int[], ${created.map((r) => r.invoice.id)}::text[])
            AS v(organization_id, purchase_id, cycle_index, invoice_id)
          WHERE pc.organization_id = v.organization_id AND pc.purchase_id = v.purchase_id AND pc.cycle_index = v.cycle_index`)
      // A draft made now is an invoice created (LifecycleEvents.ts); none made, no statement.
      yield* recordLifecycleEvents(
        sql,
        created.map((r) => ({ type: "invoice.created" as const, organizationId: r.invoice.organizationId, invoiceId: r.invoice.id, at: now }))
      )
    }
    return rebuilt
  })

/**
 * Rebuilds the DRAFT usage invoice of each named cycle whose status is DRAFT
 * (creating it when the cycle has none yet and now has ARREAR charges);
 * cycles that are FINAL are left alone (their late charges wait for the next
 * usage invoice). Locks the cycles' rows in key order. Runs in the caller's
 * transaction; a fixed number of statements for any number of cycles.
 */
export const refreshDrafts = (sql: SqlClient.SqlClient, cycles: ReadonlyArray<CycleKey>): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (cycles.length === 0) return
    const keys = keyColumns(cycles)
    const drafts = yield* findAll(
      DraftCycle,
      sql`SELECT ${sql.literal(draftColumns)}
          FROM purchase_cycles pc
          JOIN purchases p ON p.organization_id = pc.organization_id AND p.id = pc.purchase_id
          WHERE (pc.organization_id, pc.purchase_id, pc.cycle_index) IN (
            SELECT * FROM unnest(${keys.organizations}::text[], ${keys.purchases}::text[], ${keys.indexes}::int[]))
            AND pc.status = 'DRAFT'
          ORDER BY pc.organization_id, pc.purchase_id, pc.cycle_index
          FOR UPDATE OF pc`
    )
    yield* rebuild(sql, drafts, yield* currentTime)
  }).pipe(Effect.orDie)

/** DRAFT cycles finalised per transaction (`BILLING_CYCLE_BATCH`, like renewals). */
export const FINALIZE_BATCH_SIZE = Math.max(1, Number(process.env.BILLING_CYCLE_BATCH ?? 500))

/**
 * One batch of the cycle job's finalisation, in one transaction: claims up to
 * `limit` DRAFT cycles whose grace period ended at `now` (SKIP LOCKED),
 * rebuilds their drafts from their balance rows, then makes each draft OPEN,
 * or PAID (a total of zero or less; or auto-payment on and the wallet holding
 * the whole total), marks the cycles FINAL and their ARREAR charges invoiced.
 * A DRAFT cycle with no invoice (it never charged anything) just becomes
 * FINAL: anything charged to it later is a late line of the next invoice.
 * The number of cycles finalised; 0 when none is due.
 */
export const finalizeDue = (now: Date, limit: number = FINALIZE_BATCH_SIZE) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    return yield* Effect.gen(function*() {
      const claimed = yield* findAll(
        DraftCycle,
        sql`SELECT ${sql.literal(draftColumns)}
            FROM purchase_cycles pc
            JOIN purchases p ON p.organization_id = pc.organization_id AND p.id = pc.purchase_id
            WHERE pc.status = 'DRAFT' AND pc.finalize_at <= ${now}
            ORDER BY pc.organization_id, pc.purchase_id, pc.cycle_index
            LIMIT ${limit}
            FOR UPDATE OF pc SKIP LOCKED`
      )
      if (claimed.length === 0) return 0
      const rebuilt = yield* rebuild(sql, claimed, now)
      // Auto-payment: the wallets of the customers whose finalised invoice is not free, locked in key order.
      const toPay = rebuilt.filter((r) => r.cycle.autoPayment && BigDecimal.isPositive(r.invoice.totals.total))
      const locked = yield* ledger.lockWallets(toPay.map((r) => r.invoice))
      const balances = new Map([...locked].map(([key, wallet]) => [key, wallet.balance] as const))
      const postings: Array<WalletPosting> = []
      const payments: Array<Record<string, unknown>> = []
      const paid = new Set<string>()
      for (const { invoice } of toPay) {
        const key = customerKey(invoice)
        const balance = balances.get(key)
        if (balance === undefined || !BigDecimal.greaterThanOrEqualTo(balance, invoice.totals.total)) continue
        balances.set(key, BigDecimal.normalize(BigDecimal.subtract(balance, invoice.totals.total)))
        postings.push({
          organizationId: invoice.organizationId,
          customerId: invoice.customerId,
          delta: BigDecimal.negate(invoice.totals.total),
          type: "INVOICE_PAYMENT",
          invoiceId: invoice.id,
          purchaseId: invoice.purchaseId,
          at: now
        })
        payments.push({
          organizationId: invoice.organizationId,
          id: makeId("pay"),
          invoiceId: invoice.id,
          customerId: invoice.customerId,
          amount: toSql(invoice.totals.total),
          method: "WALLET",
          reference: null,
          createdAt: now.toISOString()
        })
        paid.add(`${invoice.organizationId}/${invoice.id}`)
      }
      yield* insertRows(sql, "payments", payments)
      const keys = keyColumns(claimed)
      // Whatever a cycle's draft now holds is invoiced; a cycle without one invoiced nothing.
      yield* invoiceCycleArrears(sql, keys)
      yield* orDie(sql`UPDATE purchase_cycles SET status = 'FINAL'
          WHERE (organization_id, purchase_id, cycle_index) IN (
            SELECT * FROM unnest(${keys.organizations}::text[], ${keys.purchases}::text[], ${keys.indexes}::int[]))`)
      // Last: OPEN or PAID, numbered (the organisations' invoice counters stay locked until the commit).
      const statusOf = (invoice: IssuedInvoice) =>
        invoice.totals.free || paid.has(`${invoice.organizationId}/${invoice.id}`) ? "PAID" as const : "OPEN" as const
      yield* finaliseDrafts(
        sql,
        rebuilt.map(({ invoice }) => ({ organizationId: invoice.organizationId, id: invoice.id, status: statusOf(invoice) })),
        now
      )
      yield* ledger.postToWallets(locked, postings)
      return claimed.length
    }).pipe(sql.withTransaction, Effect.orDie)
  })
