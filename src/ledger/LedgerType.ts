/** Why a wallet moved: the ledger row's type, and the webhook source it is reported as. */
import { Schema } from "effect"

export const LedgerType = Schema.Literal(
  "PURCHASE_GRANT",
  "CYCLE_GRANT",
  "RECURRING_GRANT",
  "ADJUSTMENT",
  "USAGE_LOG",
  "INVOICE_PAYMENT",
  "PLAN_CHANGE"
)
export type LedgerType = typeof LedgerType.Type

export const ledgerSource: Record<LedgerType, "USAGE" | "ADJUSTMENT" | "PURCHASE" | "RECURRING_GRANT"> = {
  PURCHASE_GRANT: "PURCHASE",
  CYCLE_GRANT: "PURCHASE",
  RECURRING_GRANT: "RECURRING_GRANT",
  ADJUSTMENT: "ADJUSTMENT",
  USAGE_LOG: "USAGE",
  INVOICE_PAYMENT: "PURCHASE",
  PLAN_CHANGE: "PURCHASE"
}
