/**
 * Invoice arithmetic with no database (src/billing/InvoiceTotals.ts): totals
 * to the cent, taxes on the rounded subtotal, and the order in which a batch
 * of finalised invoices takes its numbers.
 */
import { describe, expect, it } from "vitest"
import { invoiceTotals, type LineInput, numberOrder, type TaxRate } from "../../src/billing/InvoiceTotals.ts"
import { makeId } from "../../src/ids.ts"
import { d, text } from "./fixtures.ts"

const line = (amount: string): LineInput => ({ description: "x", componentId: null, quantity: null, unitPrice: null, amount: d(amount) })
const tax = (id: string, ratePercent: string): TaxRate => ({ id, name: `Tax ${id}`, ratePercent: d(ratePercent) })

const totalsText = (lines: ReadonlyArray<string>, taxes: ReadonlyArray<TaxRate> = []) => {
  const totals = invoiceTotals(lines.map(line), taxes)
  return {
    subtotal: text(totals.subtotal),
    taxes: totals.taxes.map((t) => [t.tax.id, text(t.amount)]),
    taxTotal: text(totals.taxTotal),
    total: text(totals.total),
    free: totals.free
  }
}

describe("invoiceTotals", () => {
  it("rounds the subtotal to cents, each tax on it to cents, and adds them up", () => {
    expect(totalsText(["10.005", "0.001"], [tax("a", "7.5"), tax("b", "20")])).toEqual({
      subtotal: "10.01",
      // 7.5 % of 10.01 = 0.75075; 20 % = 2.002
      taxes: [["a", "0.75"], ["b", "2"]],
      taxTotal: "2.75",
      total: "12.76",
      free: false
    })
  })

  it("rounds half a cent away from zero, both ways", () => {
    expect(totalsText(["0.005"]).subtotal).toBe("0.01")
    expect(totalsText(["-0.005"]).subtotal).toBe("-0.01")
    expect(totalsText(["0.1"], [tax("a", "5")]).taxes).toEqual([["a", "0.01"]])
    expect(totalsText(["-0.1"], [tax("a", "5")]).taxes).toEqual([["a", "-0.01"]])
  })

  it("taxes the rounded subtotal, not the exact sum of the lines", () => {
    // 0.008 rounds to 0.01; half of 0.01 is 0.005, a cent; half of 0.008 would round to nothing
    expect(totalsText(["0.004", "0.004"], [tax("a", "50")])).toMatchObject({ subtotal: "0.01", taxes: [["a", "0.01"]], total: "0.02" })
  })

  it("is free at zero or below, not from one cent up", () => {
    expect(totalsText([]).free).toBe(true)
    expect(totalsText(["0"]).free).toBe(true)
    expect(totalsText(["0.004"])).toMatchObject({ subtotal: "0", total: "0", free: true })
    expect(totalsText(["-3", "1"])).toMatchObject({ total: "-2", free: true })
    expect(totalsText(["0.005"])).toMatchObject({ total: "0.01", free: false })
  })

  it("has no tax lines when no tax is active", () => {
    expect(totalsText(["12"])).toEqual({ subtotal: "12", taxes: [], taxTotal: "0", total: "12", free: false })
  })
})

describe("numberOrder", () => {
  it("numbers each organisation's invoices of a batch in id order, the last one taking the counter's new last number", () => {
    const order = numberOrder([
      { organizationId: "org_b", id: "inv_3" },
      { organizationId: "org_a", id: "inv_2" },
      { organizationId: "org_b", id: "inv_1" },
      { organizationId: "org_a", id: "inv_5" },
      { organizationId: "org_a", id: "inv_4" }
    ])
    expect(order.organizations).toEqual(["org_a", "org_b"])
    expect(order.taken).toEqual([3, 2])
    const offsets = [["org_a", "inv_2"], ["org_a", "inv_4"], ["org_a", "inv_5"], ["org_b", "inv_1"], ["org_b", "inv_3"]]
      .map(([organizationId, id]) => order.offsetOf({ organizationId: organizationId!, id: id! }))
    expect(offsets).toEqual([-2, -1, 0, -1, 0])
  })

  it("gives no number to an invoice outside the batch, even one whose id another organisation's invoice has", () => {
    const order = numberOrder([{ organizationId: "org_a", id: "inv_1" }])
    expect(order.offsetOf({ organizationId: "org_b", id: "inv_1" })).toBeNull()
    expect(order.offsetOf({ organizationId: "org_a", id: "inv_2" })).toBeNull()
    expect(order.offsetOf({ organizationId: "org_a", id: "inv_1" })).toBe(0)
  })

  it("takes nothing for an empty batch", () => {
    const order = numberOrder([])
    expect(order.organizations).toEqual([])
    expect(order.taken).toEqual([])
  })

  it("follows creation order: ids made later sort later", () => {
    const made = Array.from({ length: 5 }, () => makeId("inv"))
    const order = numberOrder([...made].reverse().map((id) => ({ organizationId: "org_a", id })))
    expect(made.map((id) => order.offsetOf({ organizationId: "org_a", id }))).toEqual([-4, -3, -2, -1, 0])
  })
})
