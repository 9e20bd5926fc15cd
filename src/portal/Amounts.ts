/**
 * The figures the customer's pages show that are worked out rather than read:
 * what remains to pay of an invoice, the active holds added up per balance
 * and named as the plan names it, and the unit price an invoice line shows
 * when it carries none. Pure functions of what PortalView.ts read.
 */
import { BigDecimal } from "effect"
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

/**
 * What an invoice line's unit price column shows: the price it carries; a
 * FLAT or VOLUME unit's price per unit, read from the purchase's plan
 * snapshot (usage lines of units carry `unitPrice: null`, a unit's price
 * depending on its pricing type); "tiered" for a graduated (SLAB) unit, whose
 * units are priced by tier; nothing for a line that is a flat amount.
 */
export type UnitPriceShown =
  | { readonly _tag: "Price"; readonly price: Decimal }
  | { readonly _tag: "Tiered" }
  | { readonly _tag: "None" }

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

/**
 * The unit price a line shows when it carries none: a unit's usage or
 * prepaid line (quantity, no unit price) priced FLAT shows the flat price per
 * unit, VOLUME the price of the tier its quantity falls in (every unit at that
 * price, so quantity times it is the amount), SLAB "tiered". The component is
 * the purchase's plan snapshot's, found by the line's `componentId`.
 */
export const unitPriceShown = (
  line: Pick<Invoice["lines"][number], "componentId" | "quantity" | "unitPrice">,
  components: ReadonlyArray<SnapshotComponent>
): UnitPriceShown => {
  if (line.unitPrice !== null) return { _tag: "Price", price: line.unitPrice }
  if (line.quantity === null) return { _tag: "None" }
  const component = components.find((c) => c.id === line.componentId)
  if (component === undefined || component.type !== "UNIT") return { _tag: "None" }
  switch (component.pricingType ?? "FLAT") {
    case "FLAT":
      return component.flatPrice === null ? { _tag: "None" } : { _tag: "Price", price: component.flatPrice }
    case "VOLUME": {
      const quantity = line.quantity
      const tier = component.tiers.find((t) => t.upTo === null || BigDecimal.lessThanOrEqualTo(quantity, t.upTo))
      return tier === undefined ? { _tag: "None" } : { _tag: "Price", price: tier.price }
    }
    case "SLAB":
      return { _tag: "Tiered" }
  }
}

