/** The JSON a receiver gets, as the types a receiver codes against (no runtime dependencies). */

/**
 * The lifecycle events of purchases, invoices and credit notes (issue 38;
 * docs/webhooks.md "Lifecycle events"): each carries its record as the API
 * shows it, under the key its type begins with (`purchase`, `invoice`,
 * `credit_note`, which carries its invoice too). Written by billing
 * (src/billing/LifecycleEvents.ts), opt-in like every addition. A new one is a
 * line here (its record is read by the reader of its prefix).
 */
export const LIFECYCLE_EVENT_TYPES = [
  "purchase.created",
  "purchase.changed",
  "purchase.cancelled",
  "purchase.renewed",
  "invoice.created",
  "invoice.finalized",
  "invoice.paid",
  "invoice.voided",
  "invoice.overdue",
  "credit_note.created"
] as const
export type LifecycleEventType = typeof LIFECYCLE_EVENT_TYPES[number]

export const EVENT_TYPES = [
  "wallet.balance.update",
  "wallet.balance.drop",
  "wallet.balance.recovered",
  "balance.threshold.crossed",
  "signal.refused",
  ...LIFECYCLE_EVENT_TYPES
] as const
export type EventType = typeof EVENT_TYPES[number]

/**
 * What an endpoint (or a listen session) gets when it names no events: the
 * spec's two wallet events. The others are subscribed to by name.
 */
export const DEFAULT_EVENT_TYPES: ReadonlyArray<EventType> = ["wallet.balance.update", "wallet.balance.drop"]

export interface WalletBalanceEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** USD, exact decimals as JSON numbers. */
  readonly previous_balance: number
  readonly current_balance: number
  readonly delta: number
  readonly source: "USAGE" | "ADJUSTMENT" | "PURCHASE" | "RECURRING_GRANT"
  readonly usage_log_id: string | null
  /** `wallet.balance.drop` and `wallet.balance.recovered` only: the level crossed and whose it was. */
  readonly threshold?: number
  readonly threshold_source?: "CUSTOMER" | "ENDPOINT"
}

/** `balance.threshold.crossed`: a prepaid balance reached a share of what was granted this cycle. */
export interface BalanceThresholdEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** The kind of balance and the catalogue id of what it meters (`creditId`, `outcomeId`, `unitId`, `compositeId`). */
  readonly balance_type: "CREDIT" | "OUTCOME" | "UNIT" | "COMPOSITE"
  readonly balance_id: string
  readonly purchase_id: string
  /** Percent of `granted` used: 50, 80 or 100. */
  readonly threshold: 50 | 80 | 100
  /** In the balance's own quantity (credits, outcomes, units, occurrences), exact decimals, just after the move. */
  readonly granted: number
  readonly used: number
  readonly remaining: number
  readonly cycle_index: number
  readonly period_start: string
  readonly period_end: string
  readonly source: "USAGE" | "ADJUSTMENT"
  readonly usage_log_id: string | null
}

/**
 * `signal.refused`: the worker refused a signal it had accepted (202): it ended
 * FAILED and bills nothing until it is replayed. The same facts as
 * `GET /signals/{rawId}`.
 */
export interface SignalRefusedEventData {
  /** The signal's id, as its 202 returned it. */
  readonly raw_id: string
  readonly message_id: string
  /** The route it was sent to: CREDIT, OUTCOME, OUTCOME_COMPLETE, UNIT, WALLET or COMPOSITE_COMPLETE. */
  readonly route: string
  readonly status: "FAILED"
  /** The customer, when one was found; null when the signal named none the workspace has. */
  readonly customer_id: string | null
  readonly external_id: string | null
  readonly agent_key: string | null
  readonly idempotency_key: string | null
  /** ISO 8601: when the signal was accepted, and when its usage happened (its `timestamp`; null: at intake). */
  readonly received_at: string
  readonly occurred_at: string | null
  /** Why: the status and code an error answer would carry (docs/api.md "Error codes"), and the message. */
  readonly error: { readonly status: number; readonly code: string; readonly message: string }
}

/**
 * A record as the API shows it (camelCase, amounts as JSON numbers, instants
 * as ISO 8601): the purchase of `GET /purchases/{id}`, the invoice of
 * `GET /invoices/{id}`. The OpenAPI document's `webhooks` section has each
 * one's whole schema.
 */
export interface ApiRecord {
  readonly id: string
  readonly customerId: string
  readonly status: string
  readonly [field: string]: unknown
}

/**
 * What a purchase change was, on `purchase.changed`: the plan changed at once
 * (`POST /purchases/{id}/change` with `NOW`, or any change of a SCHEDULED
 * purchase), a change scheduled for the cycle end (`CYCLE_END`), that
 * scheduled change removed, or the auto-payment setting changed.
 */
export type PurchaseChangeKind = "PLAN_CHANGED" | "PLAN_CHANGE_SCHEDULED" | "SCHEDULED_CHANGE_REMOVED" | "AUTO_PAYMENT_CHANGED"

/** `purchase.created`, `purchase.changed`, `purchase.cancelled`, `purchase.renewed`. */
export interface PurchaseEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** The purchase just after the change, as `GET /purchases/{id}` answered it then. */
  readonly purchase: ApiRecord
  /** The purchase's fields the change altered, with their values before it (camelCase); null for a new purchase. */
  readonly previous_attributes: Readonly<Record<string, unknown>> | null
  /** The invoices the change issued, in issue order (each told by its own `invoice.created`). */
  readonly invoice_ids: ReadonlyArray<string>
  /** `purchase.changed` only. */
  readonly change?: PurchaseChangeKind
}

/** `invoice.created`, `invoice.finalized`, `invoice.paid`, `invoice.voided`, `invoice.overdue`. */
export interface InvoiceEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** The invoice just after the change, with its lines, as `GET /invoices/{id}` answered it then. */
  readonly invoice: ApiRecord
}

/** `credit_note.created`: the credit note, and the invoice it credits as it stands after it. */
export interface CreditNoteEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** The credit note, as `GET /invoices/{id}/credit-notes` lists it. */
  readonly credit_note: {
    readonly id: string
    readonly number: string
    readonly invoiceId: string
    readonly customerId: string
    readonly [field: string]: unknown
  }
  /** The invoice the note credits, just after it (its `amountDue`, its `creditNotes`), as `GET /invoices/{id}` answered it then. */
  readonly invoice: ApiRecord
}

interface EventBodyOf<T extends EventType, D> {
  /** `evt_...`; the same on every attempt and replay of the event. */
  readonly id: string
  readonly event_type: T
  /** ISO 8601; orders events, which may arrive out of order or more than once. */
  readonly triggered_at: string
  /** Present (true) only on an event made by `billing trigger`: nothing happened to the balance. */
  readonly test?: true
  readonly data: D
}

export type WebhookEventBody =
  | EventBodyOf<"wallet.balance.update" | "wallet.balance.drop" | "wallet.balance.recovered", WalletBalanceEventData>
  | EventBodyOf<"balance.threshold.crossed", BalanceThresholdEventData>
  | EventBodyOf<"signal.refused", SignalRefusedEventData>
  | EventBodyOf<Extract<LifecycleEventType, `purchase.${string}`>, PurchaseEventData>
  | EventBodyOf<Extract<LifecycleEventType, `invoice.${string}`>, InvoiceEventData>
  | EventBodyOf<Extract<LifecycleEventType, `credit_note.${string}`>, CreditNoteEventData>
