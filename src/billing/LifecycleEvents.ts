/**
 * The lifecycle events of purchases, invoices and credit notes (issue 38;
 * docs/webhooks.md "Lifecycle events"): `purchase.created|changed|cancelled|renewed`,
 * `invoice.created|finalized|paid|voided|overdue` and `credit_note.created`. Whoever makes the change
 * names its events here (`recordLifecycleEvents`), in the transaction that
 * makes it, after its last write: the events go through the webhook outbox
 * (src/webhooks/Outbox.ts), so an event exists exactly when its change
 * committed, and is signed, delivered and retried like every event.
 *
 * Each event's `data` names the customer (`customer_id`, `external_id`) and
 * carries the record as the API shows it at that moment: the purchase of
 * `GET /purchases/{id}` (`toPurchaseJson`), the invoice of `GET /invoices/{id}`
 * with its lines and credit notes (`readInvoices`, the reader `Invoices.get`
 * uses), encoded as the API encodes them; a credit note's event carries the
 * note (from its invoice's `creditNotes`) and its invoice. Purchase events add `previous_attributes` (the fields
 * the change altered, with their values before it), `invoice_ids` (the
 * invoices the change issued) and, on `purchase.changed`, `change`.
 *
 * Cheap when nobody listens: the events are opt-in, and an event no endpoint
 * subscribes to is not stored. A call names its events as small descriptors
 * (ids and instants); one statement finds the endpoints of their
 * organisations subscribed to any of their types, and nothing more happens
 * when there are none. Only the events of organisations with a subscribed
 * endpoint have their records read and encoded: up to five statements more
 * (purchases, invoices with their lines and credit notes, customers), then one for the events
 * and their deliveries, whatever their number. So a cycle batch of 500
 * renewals costs one statement more when nobody listens, never one a purchase.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { makeId } from "../ids.ts"
import { currentTime } from "../time.ts"
import type { PurchaseChangeKind } from "../webhooks/EventBody.ts"
import { type OutboxEvent, subscribedEndpoints, writeEvents } from "../webhooks/Outbox.ts"
import type { LifecycleEventType } from "../webhooks/Webhook.ts"
import { CreditNote } from "./CreditNote.ts"
import { Invoice } from "./Invoice.ts"
import { readInvoices } from "./InvoiceReads.ts"
import { PurchaseJson, PurchaseRow, toPurchaseJson } from "./Purchase.ts"

export type PurchaseEventType = Extract<LifecycleEventType, `purchase.${string}`>
export type InvoiceEventType = Extract<LifecycleEventType, `invoice.${string}`>
export type CreditNoteEventType = Extract<LifecycleEventType, `credit_note.${string}`>
export type { PurchaseChangeKind }

/** A purchase as it stood before a change: a row with a purchase's fields (a locked row, a `PurchaseRow`). */
export type PurchaseBefore = Parameters<typeof toPurchaseJson>[0]

/** A purchase's event, as its change names it. */
export interface PurchaseEvent {
  readonly type: PurchaseEventType
  readonly organizationId: string
  readonly purchaseId: string
  /** When the change happened (`triggered_at`): the request's instant, or the cycle boundary a renewal is at. */
  readonly at: Date
  /** The purchase before the change, for `previous_attributes`; none for a new purchase. */
  readonly before?: PurchaseBefore | undefined
  /** The invoices the change issued, in issue order. */
  readonly invoiceIds?: ReadonlyArray<string> | undefined
  /** `purchase.changed`: what changed. */
  readonly change?: PurchaseChangeKind | undefined
}

/** An invoice's event, as its change names it. */
export interface InvoiceEvent {
  readonly type: InvoiceEventType
  readonly organizationId: string
  readonly invoiceId: string
  readonly at: Date
}

/** A credit note's event: the note and the invoice it credits, as they stand after it. */
export interface CreditNoteEvent {
  readonly type: CreditNoteEventType
  readonly organizationId: string
  readonly creditNoteId: string
  readonly invoiceId: string
  readonly at: Date
}

export type LifecycleEvent = PurchaseEvent | InvoiceEvent | CreditNoteEvent

const isPurchaseEvent = (event: LifecycleEvent): event is PurchaseEvent => "purchaseId" in event
const isCreditNoteEvent = (event: LifecycleEvent): event is CreditNoteEvent => "creditNoteId" in event

const ScopedPurchase = Schema.Struct({ organizationId: Schema.String, ...PurchaseRow.fields })
const CustomerIds = Schema.Struct({ organizationId: Schema.String, id: Schema.String, externalId: Schema.NullOr(Schema.String) })

const encodePurchase = Schema.encodeSync(PurchaseJson)
const encodeInvoice = Schema.encodeSync(Invoice)
const encodeCreditNote = Schema.encodeSync(CreditNote)

/** The fields of `after` whose value differs from `before`'s, with `before`'s values (Stripe's `previous_attributes`). */
const previousAttributes = (before: Record<string, unknown>, after: Record<string, unknown>) => {
  const previous: Record<string, unknown> = {}
  for (const key of Object.keys(after)) {
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) previous[key] = before[key] ?? null
  }
  return previous
}

const keyOf = (organizationId: string, id: string) => `${organizationId}/${id}`

/**
 * The outbox events of `events`, their records read now (in the caller's
 * transaction, after its writes): the purchases (one statement), the invoices
 * with their lines and credit notes (three; a credit note is read with its
 * invoice) and their customers' externalIds (one).
 */
const describe = (sql: SqlClient.SqlClient, events: ReadonlyArray<LifecycleEvent>, test = false) =>
  Effect.gen(function*() {
    const purchaseKeys = new Map<string, { organizationId: string; id: string }>()
    const invoiceKeys = new Map<string, { organizationId: string; id: string }>()
    for (const event of events) {
      if (isPurchaseEvent(event)) purchaseKeys.set(keyOf(event.organizationId, event.purchaseId), { organizationId: event.organizationId, id: event.purchaseId })
      else invoiceKeys.set(keyOf(event.organizationId, event.invoiceId), { organizationId: event.organizationId, id: event.invoiceId })
    }
    const purchaseList = [...purchaseKeys.values()]
    const purchases = purchaseList.length === 0 ? [] : yield* findAll(
      ScopedPurchase,
      sql`SELECT p.* FROM unnest(${purchaseList.map((key) => key.organizationId)}::text[], ${purchaseList.map((key) => key.id)}::text[])
            AS k(organization_id, id)
          CROSS JOIN LATERAL (SELECT * FROM purchases r WHERE r.organization_id = k.organization_id AND r.id = k.id OFFSET 0) p`
    )
    const invoices = yield* readInvoices(sql, [...invoiceKeys.values()])
    const purchaseOf = new Map(purchases.map((row) => [keyOf(row.organizationId, row.id), row] as const))
    const invoiceOf = new Map(invoices.map((found) => [keyOf(found.organizationId, found.invoice.id), found.invoice] as const))
    const customerKeys = new Map<string, { organizationId: string; id: string }>()
    for (const row of purchases) customerKeys.set(keyOf(row.organizationId, row.customerId), { organizationId: row.organizationId, id: row.customerId })
    for (const found of invoices) {
      customerKeys.set(keyOf(found.organizationId, found.invoice.customerId), { organizationId: found.organizationId, id: found.invoice.customerId })
    }
    const customerList = [...customerKeys.values()]
    const customers = customerList.length === 0 ? [] : yield* findAll(
      CustomerIds,
      sql`SELECT c.organization_id, c.id, c.external_id
          FROM unnest(${customerList.map((key) => key.organizationId)}::text[], ${customerList.map((key) => key.id)}::text[])
            AS k(organization_id, id)
          CROSS JOIN LATERAL (SELECT * FROM customers r WHERE r.organization_id = k.organization_id AND r.id = k.id OFFSET 0) c`
    )
    const externalIdOf = new Map(customers.map((row) => [keyOf(row.organizationId, row.id), row.externalId] as const))
    // Encoded once a record, however many of the events carry it.
    const encodedPurchases = new Map<string, Record<string, unknown>>()
    const encodedInvoices = new Map<string, Record<string, unknown>>()
    return events.map((event): OutboxEvent => {
      if (isPurchaseEvent(event)) {
        const key = keyOf(event.organizationId, event.purchaseId)
        const row = purchaseOf.get(key)
        if (row === undefined) throw new Error(`lifecycle event ${event.type}: purchase ${key} not found`)
        let purchase = encodedPurchases.get(key)
        if (purchase === undefined) {
          purchase = encodePurchase(toPurchaseJson(row)) as Record<string, unknown>
          encodedPurchases.set(key, purchase)
        }
        const previous = event.before === undefined
          ? null
          : previousAttributes(encodePurchase(toPurchaseJson(event.before)) as Record<string, unknown>, purchase)
        return {
          organizationId: event.organizationId,
          eventType: event.type,
          customerId: row.customerId,
          at: event.at,
          test,
          data: {
            customer_id: row.customerId,
            external_id: externalIdOf.get(keyOf(event.organizationId, row.customerId)) ?? null,
            purchase,
            previous_attributes: previous,
            invoice_ids: event.invoiceIds ?? [],
            ...(event.type === "purchase.changed" ? { change: event.change ?? "PLAN_CHANGED" } : {})
          }
        }
      }
      const key = keyOf(event.organizationId, event.invoiceId)
      const invoice = invoiceOf.get(key)
      if (invoice === undefined) throw new Error(`lifecycle event ${event.type}: invoice ${key} not found`)
      let encoded = encodedInvoices.get(key)
      if (encoded === undefined) {
        encoded = encodeInvoice(invoice) as Record<string, unknown>
        encodedInvoices.set(key, encoded)
      }
      const customer = {
        customer_id: invoice.customerId,
        external_id: externalIdOf.get(keyOf(event.organizationId, invoice.customerId)) ?? null
      }
      if (isCreditNoteEvent(event)) {
        const note = invoice.creditNotes.find((candidate) => candidate.id === event.creditNoteId)
        if (note === undefined) throw new Error(`lifecycle event ${event.type}: credit note ${event.creditNoteId} not found`)
        return {
          organizationId: event.organizationId,
          eventType: event.type,
          customerId: invoice.customerId,
          at: event.at,
          test,
          data: { ...customer, credit_note: encodeCreditNote(note), invoice: encoded }
        }
      }
      return {
        organizationId: event.organizationId,
        eventType: event.type,
        customerId: invoice.customerId,
        at: event.at,
        test,
        data: { ...customer, invoice: encoded }
      }
    })
  }).pipe(Effect.orDie)

/**
 * Writes the lifecycle events of a change, in its transaction, after its
 * last write (the records are read as they now stand), in the order given:
 * to every endpoint of the event's organisation enabled and subscribed to
 * its type now; an event nobody takes is not stored. One statement when
 * nobody listens (none for no events); the records of the organisations
 * that have listeners are read and encoded, and the events and deliveries
 * written, in up to six more.
 */
export const recordLifecycleEvents = (sql: SqlClient.SqlClient, events: ReadonlyArray<LifecycleEvent>): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (events.length === 0) return
    const organizations = [...new Set(events.map((event) => event.organizationId))]
    const types = [...new Set(events.map((event) => event.type))]
    const endpoints = yield* subscribedEndpoints(sql, organizations, types)
    if (endpoints.length === 0) return
    const taken = new Set(endpoints.flatMap((endpoint) => endpoint.events.map((type) => `${endpoint.organizationId} ${type}`)))
    const wanted = events.filter((event) => taken.has(`${event.organizationId} ${event.type}`))
    if (wanted.length === 0) return
    yield* writeEvents(sql, yield* describe(sql, wanted), endpoints)
  })

/**
 * `billing trigger <lifecycle event>`: a test event of that type (`"test":
 * true`) about the customer's newest purchase (a `purchase.*` type), newest
 * invoice (an `invoice.*` type) or newest credit note (`credit_note.*`, with
 * its invoice), as the API shows it now, nothing changed
 * (`previous_attributes` null, `invoice_ids` empty). It goes to every enabled
 * endpoint and live listen session subscribed to the type, through the same
 * deliveries as a real event; none stores nothing. `recordId` null: the
 * customer has no such record, and nothing was made.
 */
export const testLifecycleEvent = (
  sql: SqlClient.SqlClient,
  organizationId: string,
  eventType: LifecycleEventType,
  customerId: string
) =>
  Effect.gen(function*() {
    const kind = eventType.startsWith("purchase.")
      ? "purchases" as const
      : eventType.startsWith("credit_note.")
      ? "credit_notes" as const
      : "invoices" as const
    const [newest] = yield* findAll(
      Schema.Struct({ id: Schema.String, invoiceId: Schema.NullOr(Schema.String) }),
      sql`SELECT id, ${sql.literal(kind === "credit_notes" ? "invoice_id" : "NULL::text AS invoice_id")}
          FROM ${sql(kind)} WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
          ORDER BY id DESC LIMIT 1`
    )
    if (newest === undefined) return { id: null, eventType, recipients: 0, recordId: null }
    const endpoints = yield* subscribedEndpoints(sql, [organizationId], [eventType])
    if (endpoints.length === 0) return { id: makeId("evt"), eventType, recipients: 0, recordId: newest.id }
    const at = yield* currentTime
    const event: LifecycleEvent = kind === "purchases"
      ? { type: eventType as PurchaseEventType, organizationId, purchaseId: newest.id, at }
      : kind === "credit_notes"
      ? { type: eventType as CreditNoteEventType, organizationId, creditNoteId: newest.id, invoiceId: newest.invoiceId!, at }
      : { type: eventType as InvoiceEventType, organizationId, invoiceId: newest.id, at }
    const [id] = yield* writeEvents(sql, yield* describe(sql, [event], true), endpoints)
    return { id: id ?? null, eventType, recipients: endpoints.length, recordId: newest.id }
  }).pipe(sql.withTransaction, Effect.orDie)
