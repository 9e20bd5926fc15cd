/**
 * The figures the customer's pages show that are worked out rather than read:
 * what remains to pay of an invoice, the active holds added up per balance
 * and named as the plan names it, and the unit price an invoice line shows
 * when it carries none. Pure functions of what PortalView.ts read.
 */
import type { Invoice } from "../billing/Invoice.ts"
import type { CheckMeter } from "../entitlements/Entitlement.ts"
import { type Decimal, sum } from "../money.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"

/**
 * One active hold (HELD, not expired), named for the customer: the allowance
 * it keeps back (its name on the plan) or the wallet, in that balance's unit.
 */
export interface HeldAmount {
  readonly meter: CheckMeter
  /** The allowance's name on the plan ("Assistant credits"), or "Wallet". */
  readonly name: string
  readonly amount: Decimal
  /** When the latest of these holds releases itself unless settled or released first. */
  readonly until: Date
  readonly holds: number
}

/** What remains to pay of an invoice: its `amountDue` (the total less its credit notes while OPEN). */
export const amountDueOf = (invoice: Pick<Invoice, "amountDue">): Decimal => invoice.amountDue

const componentTypeOf: Record<CheckMeter, SnapshotComponent["type"]> = {
  CREDIT: "CREDIT",
  OUTCOME: "OUTCOME",
  UNIT: "UNIT",
  WALLET: "WALLET"
}
const meterOrder: ReadonlyArray<CheckMeter> = ["WALLET", "CREDIT", "OUTCOME", "UNIT"]

/**
 * The active holds added up per balance they keep back, named as the plan
 * names that balance (the hold's target on the purchase's snapshot), the
 * wallet first. A hold whose target the plan no longer names (a plan change
 * since) keeps the meter's word.
 */
export const heldAmounts = (
  holds: ReadonlyArray<{ readonly meter: CheckMeter; readonly targetId: string | null; readonly amount: Decimal; readonly expiresAt: Date }>,
  components: ReadonlyArray<Pick<SnapshotComponent, "type" | "targetId" | "targetName">>
): Array<HeldAmount> => {
  const fallback: Record<CheckMeter, string> = { CREDIT: "Credits", OUTCOME: "Outcomes", UNIT: "Units", WALLET: "Wallet" }
  const groups = new Map<string, { meter: CheckMeter; name: string; amounts: Array<Decimal>; until: Date }>()
  for (const hold of holds) {
    const name = hold.meter === "WALLET"
      ? "Wallet"
      : components.find((c) => c.type === componentTypeOf[hold.meter] && c.targetId === hold.targetId)?.targetName ??
        fallback[hold.meter]
    const key = `${hold.meter}/${hold.targetId ?? ""}`
    const group = groups.get(key)
    if (group === undefined) groups.set(key, { meter: hold.meter, name, amounts: [hold.amount], until: hold.expiresAt })
    else {
      group.amounts.push(hold.amount)
      if (hold.expiresAt > group.until) group.until = hold.expiresAt
    }
  }
  return [...groups.values()]
    .map((group) => ({ meter: group.meter, name: group.name, amount: sum(group.amounts), until: group.until, holds: group.amounts.length }))
    .sort((a, b) => meterOrder.indexOf(a.meter) - meterOrder.indexOf(b.meter) || a.name.localeCompare(b.name))
}
