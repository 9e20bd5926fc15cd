/** The JSON a receiver gets, as the types a receiver codes against (no runtime dependencies). */

export const EVENT_TYPES = ["wallet.balance.update", "wallet.balance.drop"] as const
export type EventType = typeof EVENT_TYPES[number]

export interface WalletBalanceEventData {
  readonly customer_id: string
  readonly external_id: string | null
  /** USD, exact decimals as JSON numbers. */
  readonly previous_balance: number
  readonly current_balance: number
  readonly delta: number
  readonly source: "USAGE" | "ADJUSTMENT" | "PURCHASE" | "RECURRING_GRANT"
  readonly usage_log_id: string | null
  /** `wallet.balance.drop` only: the level crossed and whose it was. */
  readonly threshold?: number
  readonly threshold_source?: "CUSTOMER" | "ENDPOINT"
}

export interface WebhookEventBody {
  /** `evt_...`; the same on every attempt and replay of the event. */
  readonly id: string
  readonly event_type: EventType
  /** ISO 8601; orders events, which may arrive out of order or more than once. */
  readonly triggered_at: string
  /** Present (true) only on an event made by `billing trigger`: nothing happened to the wallet. */
  readonly test?: true
  readonly data: WalletBalanceEventData
}
