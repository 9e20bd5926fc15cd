/**
 * The unit price an invoice line shows (the hosted page, the portal, the PDF):
 * the one it carries, or, for a unit's line that carries none, the price read
 * from the purchase's plan snapshot.
 */
import { BigDecimal } from "effect"
import type { Decimal } from "../money.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import type { Invoice } from "./Invoice.ts"

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
