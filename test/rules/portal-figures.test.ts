/**
 * The figures the customer's pages work out (src/portal/Amounts.ts) and where
 * the usage chart puts its day labels (src/portal/Chart.ts): the holds added
 * up and named, the unit price an invoice line shows when it carries none, and
 * day labels that never touch and never run past the drawing's edges.
 */
import { describe, expect, it } from "vitest"
import { amountDueOf as invoiceAmountDue } from "../../src/billing/Invoice.ts"
import { decimal, toSql } from "../../src/money.ts"
import type { SnapshotComponent } from "../../src/pricing/PlanSnapshot.ts"
import { unitPriceShown } from "../../src/billing/LineUnitPrice.ts"
import { amountDueOf, heldAmounts } from "../../src/portal/Amounts.ts"
import { chartLayouts, labelledDays } from "../../src/portal/Chart.ts"

const at = (minutes: number) => new Date(Date.UTC(2025, 0, 1, 0, minutes))

describe("heldAmounts", () => {
  const components = [
    { type: "CREDIT", targetId: "cr_chat", targetName: "Assistant credits" },
    { type: "UNIT", targetId: "unit_pages", targetName: "Pages parsed" }
  ] as const

  it("adds up the holds per balance, names them as the plan does, wallet first, the latest end kept", () => {
    const held = heldAmounts([
      { meter: "UNIT", targetId: "unit_pages", amount: decimal(2.5), expiresAt: at(10) },
      { meter: "CREDIT", targetId: "cr_chat", amount: decimal(0.1), expiresAt: at(30) },
      { meter: "WALLET", targetId: null, amount: decimal(1.5), expiresAt: at(5) },
      { meter: "CREDIT", targetId: "cr_chat", amount: decimal(0.1), expiresAt: at(20) }
    ], components)
    expect(held.map((h) => [h.meter, h.name, toSql(h.amount), h.until.toISOString(), h.holds])).toEqual([
      ["WALLET", "Wallet", "1.5", at(5).toISOString(), 1],
      ["CREDIT", "Assistant credits", "0.2", at(30).toISOString(), 2],
      ["UNIT", "Pages parsed", "2.5", at(10).toISOString(), 1]
    ])
  })

  it("keeps the meter's word for a target the plan no longer names, apart from the named one", () => {
    const held = heldAmounts([
      { meter: "CREDIT", targetId: "cr_gone", amount: decimal(3), expiresAt: at(1) },
      { meter: "CREDIT", targetId: "cr_chat", amount: decimal(1), expiresAt: at(1) }
    ], components)
    expect(held.map((h) => [h.name, toSql(h.amount)])).toEqual([["Assistant credits", "1"], ["Credits", "3"]])
    expect(heldAmounts([], components)).toEqual([])
  })
})

describe("unitPriceShown", () => {
  const unit = (pricing: Partial<SnapshotComponent>): SnapshotComponent => ({
    id: "pc_unit",
    type: "UNIT",
    billingMode: "ARREAR",
    targetId: "unit_1",
    targetName: "Pages",
    agentKey: "pages",
    quantity: null,
    amount: null,
    rollover: false,
    unitPrice: null,
    pricingType: "FLAT",
    flatPrice: decimal(0.02),
    tiers: [],
    charge: decimal(0),
    steps: [],
    covers: { credits: [], outcomes: [], units: [] },
    ...pricing
  })
  const tiers = [
    { upTo: decimal(100), price: decimal(0.05) },
    { upTo: decimal(1000), price: decimal(0.03) },
    { upTo: null, price: decimal(0.01) }
  ]
  const line = (quantity: number | null, unitPrice: number | null = null, componentId: string | null = "pc_unit") => ({
    componentId,
    quantity: quantity === null ? null : decimal(quantity),
    unitPrice: unitPrice === null ? null : decimal(unitPrice)
  })
  const shown = (value: ReturnType<typeof unitPriceShown>) => (value._tag === "Price" ? toSql(value.price) : value._tag)

  it("shows the price a line carries, whatever its component", () => {
    expect(shown(unitPriceShown(line(3, 0.0125, "pc_other"), []))).toBe("0.0125")
  })

  it("shows a FLAT unit's flat price and a VOLUME unit's price of the tier its quantity falls in", () => {
    expect(shown(unitPriceShown(line(465), [unit({})]))).toBe("0.02")
    const volume = [unit({ pricingType: "VOLUME", flatPrice: null, tiers })]
    expect(shown(unitPriceShown(line(100), volume))).toBe("0.05")
    expect(shown(unitPriceShown(line(101), volume))).toBe("0.03")
    expect(shown(unitPriceShown(line(5000), volume))).toBe("0.01")
    // A unit snapshotted before it had a pricing type is FLAT.
    expect(shown(unitPriceShown(line(2), [unit({ pricingType: null })]))).toBe("0.02")
  })

  it("says tiered for a graduated unit, and shows nothing for a flat amount or a component it cannot find", () => {
    expect(shown(unitPriceShown(line(465), [unit({ pricingType: "SLAB", flatPrice: null, tiers })]))).toBe("Tiered")
    expect(shown(unitPriceShown(line(null), [unit({})]))).toBe("None")
    expect(shown(unitPriceShown(line(3), []))).toBe("None")
    expect(shown(unitPriceShown(line(3, null, null), [unit({})]))).toBe("None")
    expect(shown(unitPriceShown(line(3), [unit({ type: "CREDIT" })]))).toBe("None")
    expect(shown(unitPriceShown(line(3), [unit({ flatPrice: null })]))).toBe("None")
  })
})

describe("amountDueOf", () => {
  it("is the invoice's amountDue: the total less the credit notes that lowered it while OPEN, 0 once settled", () => {
    expect(toSql(amountDueOf({ amountDue: decimal(40) }))).toBe("40")
    const note = (amount: number, appliedTo: "AMOUNT_DUE" | "WALLET") => ({ amount: decimal(amount), appliedTo })
    expect(toSql(invoiceAmountDue({ status: "OPEN", total: decimal(99) }, []))).toBe("99")
    expect(toSql(invoiceAmountDue({ status: "OPEN", total: decimal(99) }, [note(40, "AMOUNT_DUE"), note(9.5, "AMOUNT_DUE")]))).toBe("49.5")
    expect(toSql(invoiceAmountDue({ status: "DRAFT", total: decimal(12.5) }, []))).toBe("12.5")
    expect(toSql(invoiceAmountDue({ status: "PAID", total: decimal(99) }, [note(5, "WALLET")]))).toBe("0")
    expect(toSql(invoiceAmountDue({ status: "VOID", total: decimal(99) }, [note(5, "AMOUNT_DUE")]))).toBe("0")
  })
})

describe("labelledDays", () => {
  it("spaces the labels by their width and a gap, and none runs past an edge", () => {
    for (const layout of chartLayouts) {
      for (const days of [1, 7, 28, 31, 62]) {
        const left = 50
        const band = (layout.width - left - 8) / days
        const labelWidth = 45
        const indices = labelledDays(days, band, left, layout.width, labelWidth)
        expect(indices.length).toBeGreaterThan(0)
        const centres = indices.map((index) => left + index * band + band / 2)
        for (let i = 1; i < centres.length; i++) expect(centres[i]! - centres[i - 1]!).toBeGreaterThanOrEqual(labelWidth + 10)
        for (const centre of centres) {
          expect(centre - labelWidth / 2).toBeGreaterThanOrEqual(0)
          expect(centre + labelWidth / 2).toBeLessThanOrEqual(layout.width)
        }
      }
    }
    expect(labelledDays(0, 10, 50, 330, 45)).toEqual([])
  })
})
