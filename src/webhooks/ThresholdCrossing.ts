/**
 * What a threshold event says: a prepaid balance that reached a share of its
 * grant. The shape lives on the webhooks floor, which the ledger (above it)
 * fills in and the outbox (here) turns into `balance.threshold` events; the
 * rule deciding which thresholds a move reaches is the ledger's
 * (src/ledger/Thresholds.ts).
 */
import type { Decimal } from "../money.ts"

/** The used shares, in percent of the cycle's grant, that raise an event. */
export const USED_THRESHOLDS = [50, 80, 100] as const
export type UsedThreshold = typeof USED_THRESHOLDS[number]

/** How the API names a balance's kind: the plan's `PRICING_METRIC` component is a composite. */
export type BalanceKind = "CREDIT" | "OUTCOME" | "UNIT" | "COMPOSITE"

/** A prepaid balance that reached `threshold` % used of what was granted this cycle, with its values just after. */
export interface ThresholdCrossing {
  readonly organizationId: string
  readonly customerId: string
  readonly externalId: string | null
  readonly purchaseId: string
  readonly componentId: string
  readonly balanceType: BalanceKind
  readonly balanceId: string
  readonly cycleIndex: number
  readonly periodStart: Date
  readonly periodEnd: Date
  readonly threshold: UsedThreshold
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
  /** The usage-log row whose move reached it; null for an adjustment. */
  readonly usageLogId: string | null
  readonly at: Date
}
