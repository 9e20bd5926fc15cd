/**
 * Invoice numbers, the one place they are taken: an invoice gets its number
 * when it is finalised (issued OPEN or PAID, or a DRAFT made OPEN or PAID), in
 * that transaction, from its organisation's counter row (`numbering`;
 * docs/billing.md "Invoice numbers"). The database refuses a final invoice
 * without a number (migrations/0019_invoice_numbers.sql). The order a batch
 * takes its numbers in is pure (InvoiceTotals.ts `numberOrder`); the issued
 * invoices' INSERTs take theirs through `numberedInsert` (IssuedInvoices.ts),
 * the DRAFTs made final through `finaliseDrafts`. The same statements fix the
 * invoices' due dates (DueDates.ts `termsIntervalSql`): a number and a due date are
 * both given when an invoice becomes final. Credit notes take theirs from a
 * sequence of their own by the same mechanism (`takeCreditNoteNumber`).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, NamedWrite, recordsetOf } from "../db/Sql.ts"
import { termsIntervalSql } from "./DueDates.ts"
import { type LifecycleEvent, recordLifecycleEvents } from "./LifecycleEvents.ts"
import { type NumberedInvoice, numberOrder } from "./InvoiceTotals.ts"

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
 * last number, the prefix and the organisation's payment terms (for the due
 * dates, `termsIntervalSql`). Each invoice's number is the new last number
 * plus its `offset` (0 for the organisation's last one here, -1 for the one
 * before, ...): the invoices of one organisation in id order, that is
 * creation order. The counter row stays locked until the transaction commits:
 * finalisations of one organisation queue behind it, which is what keeps the
 * numbers gap-free (a rolled-back transaction gives its numbers back). So it
 * is taken by the last writes of a transaction, for a whole batch at once.
 */
export const numbering = (sql: SqlClient.SqlClient, finals: ReadonlyArray<NumberedInvoice>) => {
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
          (SELECT o.invoice_number_prefix FROM organizations o WHERE o.id = c.organization_id) AS prefix,
          (SELECT o.payment_terms_days FROM organizations o WHERE o.id = c.organization_id) AS payment_terms_days`
  )
  return {
    counter,
    /** The invoice's offset from its organisation's new last number; null when it is not finalised here. */
    offsetOf
  }
}

/**
 * The INSERT of invoice rows whose `sequence_number` holds their offset,
 * numbered from the counter's clause; the final ones (numbered) due from their
 * issue time plus their terms (`termsIntervalSql`), the DRAFTs not yet.
 */
export const numberedInsert = (sql: SqlClient.SqlClient, rows: ReadonlyArray<Record<string, unknown>>) => {
  const { columns, json } = recordsetOf(rows)
  const sequence = "n.last_number + r.sequence_number"
  const selected = columns.map((column) =>
    column === "sequence_number"
      ? `CASE WHEN r.sequence_number IS NULL THEN NULL ELSE ${sequence} END`
      : `r."${column}"`
  )
  const due = `r.issued_at + ${termsIntervalSql("r.organization_id", "r.customer_id", "n.payment_terms_days")}`
  return sql`INSERT INTO invoices (${sql.literal(columns.map((column) => `"${column}"`).join(", "))}, number, due_date)
    SELECT ${sql.literal(selected.join(", "))},
      CASE WHEN r.sequence_number IS NULL THEN NULL ELSE ${sql.literal(numberText("n.prefix", sequence))} END,
      CASE WHEN r.sequence_number IS NULL THEN NULL ELSE ${sql.literal(due)} END
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
 * status, their numbers (`numbering`) and their due dates, `at` plus
 * their terms (`termsIntervalSql`), then writes their lifecycle events
 * (`invoice.finalized`, and `invoice.paid` for the PAID ones; one statement
 * more when nobody listens). Meant to be among the last writes
 * of the caller's transaction: the counter rows stay locked until it commits.
 */
export const finaliseDrafts = (sql: SqlClient.SqlClient, finals: ReadonlyArray<Finalised>, at: Date) => {
  if (finals.length === 0) return Effect.void
  const { counter, offsetOf } = numbering(sql, finals)
  const sequence = "n.last_number + v.offset_by"
  const finalised = sql`WITH ${sql.literal(NUMBERS)} AS (${counter!.statement})
      UPDATE invoices AS i SET status = v.status,
        paid_at = CASE WHEN v.status = 'PAID' THEN ${at}::timestamptz ELSE NULL END, updated_at = ${at},
        sequence_number = ${sql.literal(sequence)}, number = ${sql.literal(numberText("n.prefix", sequence))},
        due_date = ${at}::timestamptz + ${sql.literal(termsIntervalSql("i.organization_id", "i.customer_id", "n.payment_terms_days"))}
      FROM unnest(${finals.map((f) => f.organizationId)}::text[], ${finals.map((f) => f.id)}::text[],
                  ${finals.map((f) => f.status)}::text[], ${finals.map((f) => offsetOf(f)!)}::bigint[])
        AS v(organization_id, id, status, offset_by)
      JOIN ${sql.literal(NUMBERS)} n ON n.organization_id = v.organization_id
      WHERE i.organization_id = v.organization_id AND i.id = v.id AND i.status = 'DRAFT'
      RETURNING i.id`
  // A number taken for an invoice that is not a DRAFT any more would be a gap: the transaction dies instead.
  return Effect.flatMap(Effect.orDie(finalised), (rows) =>
    rows.length === finals.length
      ? recordLifecycleEvents(sql, finalisedEvents(finals, at))
      : Effect.die(new Error(`finalised ${rows.length} of ${finals.length} DRAFT invoices: the others were not DRAFT`)))
}

/**
 * The events of DRAFTs made final (LifecycleEvents.ts): `invoice.finalized`
 * for each, then `invoice.paid` for each made PAID; written in the
 * finalisation's transaction, nothing read unless an endpoint subscribes.
 */
const finalisedEvents = (finals: ReadonlyArray<Finalised>, at: Date): Array<LifecycleEvent> =>
  finals.flatMap((final): Array<LifecycleEvent> => {
    const key = { organizationId: final.organizationId, invoiceId: final.id, at }
    return final.status === "PAID"
      ? [{ type: "invoice.finalized", ...key }, { type: "invoice.paid", ...key }]
      : [{ type: "invoice.finalized", ...key }]
  })

/** The prefix of every credit note number (`CN-000001`); fixed, unlike the invoices' (docs/billing.md "Credit notes"). */
export const CREDIT_NOTE_PREFIX = "CN-"

const TakenNumber = Schema.Struct({ sequence: Schema.String, number: Schema.String })

/**
 * The next credit note number of the organisation, taken in the caller's
 * transaction from its counter row (`credit_note_counters`), as invoice
 * numbers are (`numbering`): one upsert moves the counter on and returns the
 * place in the sequence (as text: a bigint) and the number. The row stays
 * locked until the transaction commits, so the organisation's notes are
 * numbered one after the other, and a note rolled back gives its number back:
 * the sequence has no gaps. A sequence of its own, so credit notes leave the
 * invoices' sequence gap-free too.
 */
export const takeCreditNoteNumber = (sql: SqlClient.SqlClient, organizationId: string) =>
  Effect.map(
    findAll(
      TakenNumber,
      sql`INSERT INTO credit_note_counters AS c (organization_id, last_number) VALUES (${organizationId}, 1)
          ON CONFLICT (organization_id) DO UPDATE SET last_number = c.last_number + 1
          RETURNING c.last_number::text AS sequence,
            ${sql.literal(numberText(`'${CREDIT_NOTE_PREFIX}'`, "c.last_number"))} AS number`
    ),
    ([taken]) => taken!
  )
