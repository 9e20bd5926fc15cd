/**
 * Due dates and overdue (issue 38, docs/billing.md "Due dates and overdue").
 *
 * An invoice's `due_date` is fixed when it becomes final, in the statement
 * that finalises it: issued OPEN or PAID (`numberedInsert`) or a DRAFT made
 * OPEN or PAID when its grace period ends (`finaliseDrafts`), both in
 * InvoiceNumbers.ts: the moment it became final plus the customer's payment
 * terms, or else the organisation's, in whole days of 24 hours
 * (`termsIntervalSql`). A DRAFT has none; a PAID or VOID invoice keeps the one it was given.
 *
 * The cycle job marks OPEN invoices whose due date has passed overdue, once,
 * when something is still due on them (credit notes may have lowered their
 * `amountDue` to 0: CreditNotes.ts settles such an invoice PAID, and the
 * claim checks it too) (`markOverdue`): one statement a batch claims and
 * marks them (SKIP LOCKED, and the mark re-checked in the UPDATE, so two runs
 * at once mark each invoice once), and the events that tell of it are written
 * in the same transaction (`overdueInvoiceEvents`).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { recordLifecycleEvents } from "./LifecycleEvents.ts"

/**
 * The SQL expression of an invoice's payment terms as an interval, what its
 * due date adds to the moment it becomes final: the terms of the customer
 * `customerId` of organisation `organizationId` (expressions naming columns),
 * or else `organizationTerms` (an expression: the organisation's terms), in
 * whole days of 24 hours, so a due date is the same instant whatever the
 * session's time zone and its daylight-saving changes.
 */
export const termsIntervalSql = (organizationId: string, customerId: string, organizationTerms: string) =>
  `coalesce((SELECT cu.payment_terms_days FROM customers cu
      WHERE cu.organization_id = ${organizationId} AND cu.id = ${customerId}), ${organizationTerms}, 0) * interval '24 hours'`

const DAY_MS = 24 * 60 * 60 * 1000

/**
 * The due date an invoice computed in memory would be given if it became
 * final as it is (`termsIntervalSql`'s rule, in memory): its issue time plus
 * `termsDays` whole days of 24 hours; none for a DRAFT. For the upcoming
 * invoices, which are never written.
 */
export const projectedDueDate = (invoice: { readonly at: Date; readonly draft?: boolean | undefined }, termsDays: number) =>
  invoice.draft === true ? null : new Date(invoice.at.getTime() + termsDays * DAY_MS)

const Terms = Schema.Struct({ days: Schema.Number })

/** The payment terms in force for a customer, in days: its own, or else its organisation's. */
export const paymentTermsOf = (sql: SqlClient.SqlClient, organizationId: string, customerId: string) =>
  Effect.map(
    findAll(
      Terms,
      sql`SELECT coalesce(cu.payment_terms_days, o.payment_terms_days, 0) AS days
          FROM organizations o
          LEFT JOIN customers cu ON cu.organization_id = o.id AND cu.id = ${customerId}
          WHERE o.id = ${organizationId}`
    ),
    (rows) => rows[0]?.days ?? 0
  )

/** Whether an invoice is overdue now: OPEN, and marked overdue by the cycle job (kept beside the invoice reads). */
export { isOverdue } from "./InvoiceReads.ts"

/**
 * An invoice the cycle job has just marked overdue, by its key: all its event
 * needs (LifecycleEvents.ts reads the invoice itself, only when an endpoint
 * subscribes). Read back whole, a burst of thousands of due invoices at a
 * worker's start parsed every invoice's dates and amounts for nothing, in the
 * drain's window (docs/benchmarks.md "The drain's own work at 4,096 customers").
 */
export const OverdueInvoice = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String
})
export type OverdueInvoice = typeof OverdueInvoice.Type

/** OPEN invoices marked overdue per transaction (`BILLING_CYCLE_BATCH`, like renewals). */
export const OVERDUE_BATCH_SIZE = Math.max(1, Number(process.env.BILLING_CYCLE_BATCH ?? 500))

/**
 * The `invoice.overdue` events of the invoices `markOverdue` has just marked,
 * written to the webhook outbox in its transaction (`at`: the cycle job's
 * now), one an invoice, to the endpoints subscribed to it
 * (LifecycleEvents.ts: nobody subscribed, one statement; nothing marked, none).
 */
export const overdueInvoiceEvents = (
  sql: SqlClient.SqlClient,
  marked: ReadonlyArray<OverdueInvoice>,
  at: Date
): Effect.Effect<void> =>
  recordLifecycleEvents(
    sql,
    marked.map((invoice) => ({ type: "invoice.overdue" as const, organizationId: invoice.organizationId, invoiceId: invoice.id, at }))
  )

/**
 * One batch of the cycle job's overdue marking, in one transaction: up to
 * `limit` OPEN invoices whose due date is before `now`, with something still
 * due (the total more than its credit notes), and that are not marked yet,
 * claimed and marked (`overdue_at = now`) by one statement, and the events of
 * the ones marked. An invoice locked by another transaction (a
 * payment, a void, another run of the job) is skipped and left to the next
 * batch, which finds it PAID, VOID or marked; the UPDATE checks the mark
 * again, so however many runs go at once an invoice is marked once. The
 * invoices marked, by key; none when nothing is due.
 */
export const markOverdue = (now: Date, limit: number = OVERDUE_BATCH_SIZE) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* Effect.gen(function*() {
      const marked = yield* findAll(
        OverdueInvoice,
        sql`WITH due AS (
              SELECT i.ctid AS row_ctid FROM invoices i
              WHERE status = 'OPEN' AND overdue_at IS NULL AND due_date < ${now}
                -- Something still due: credit notes may have taken it all (such an invoice is settled PAID).
                AND i.total > coalesce((SELECT sum(n.amount) FROM credit_notes n
                                        WHERE n.organization_id = i.organization_id AND n.invoice_id = i.id
                                          AND n.applied_to = 'AMOUNT_DUE'), 0)
              ORDER BY due_date, organization_id, id
              LIMIT ${limit}
              FOR UPDATE SKIP LOCKED
            )
            -- Each row by the ctid its lock above found (a TID scan): joined to the CTE by key, the planner
            -- (which guesses one row for it) compared every due invoice with every claimed one, half a second a
            -- batch at 4,096 due (docs/benchmarks.md "A balance move read every balance row").
            UPDATE invoices AS i SET overdue_at = ${now}, updated_at = ${now}
            FROM due
            WHERE i.ctid = due.row_ctid
              AND i.status = 'OPEN' AND i.overdue_at IS NULL
            RETURNING i.organization_id, i.id`
      )
      yield* overdueInvoiceEvents(sql, marked, now)
      return marked
    }).pipe(sql.withTransaction, Effect.orDie)
  })

/**
 * `markOverdue` a batch a transaction until a batch marks fewer than `limit`
 * (the rest, if any, is locked by other transactions: the next run takes it).
 * How many invoices were marked.
 */
export const markAllOverdue = (now: Date, limit: number = OVERDUE_BATCH_SIZE): Effect.Effect<number, never, SqlClient.SqlClient> =>
  Effect.flatMap(markOverdue(now, limit), (marked) =>
    marked.length < limit ? Effect.succeed(marked.length) : Effect.map(markAllOverdue(now, limit), (more) => marked.length + more))
