/**
 * Invoice totals and taxes with no database: `invoiceTotals` and `cents`
 * (src/billing/InvoiceTotals.ts), the tax bodies' schemas (src/billing/Taxes.ts)
 * and how a step's invoice takes its totals (`renewal`, src/billing/Renewal.ts).
 *
 * The rules pinned (docs/billing.md, "Decisions" > "Invoices, payments, taxes"):
 * lines keep exact decimals; the subtotal is rounded to cents, half away from
 * zero; each tax active at issue time is its own cent-rounded line on the
 * subtotal; the total is subtotal + taxes; `totalCents` is the total in cents;
 * a zero-total invoice is issued PAID (`free`, never auto-paid); no amount is a
 * negative zero ("Cycles"); the taxes of a PRORATION invoice apply to a
 * negative subtotal too ("Changing plans" > "NOW").
 * test/rules/invoice-totals.test.ts holds the first cases and the numbering order.
 */
import { describe, expect, it } from "@effect/vitest"
import { BigDecimal, Either, FastCheck as fc, Schema } from "effect"
import { cents, invoiceTotals, type LineInput, type TaxRate } from "../../src/billing/InvoiceTotals.ts"
import { renewal } from "../../src/billing/Renewal.ts"
import { Tax, TaxCreate, TaxUpdate } from "../../src/billing/Taxes.ts"
import { at, component, d, ids, plan, purchase, state, text } from "./fixtures.ts"

const line = (amount: string): LineInput => ({ description: "x", componentId: null, quantity: null, unitPrice: null, amount: d(amount) })
const tax = (id: string, ratePercent: string): TaxRate => ({ id, name: `Tax ${id}`, ratePercent: d(ratePercent) })
const totalsOf = (amounts: ReadonlyArray<string>, taxes: ReadonlyArray<TaxRate> = []) => {
  const t = invoiceTotals(amounts.map(line), taxes)
  return { subtotal: text(t.subtotal), taxes: t.taxes.map((x) => [x.tax.id, text(x.amount)]), taxTotal: text(t.taxTotal), total: text(t.total), free: t.free }
}

describe("invoiceTotals: each tax its own cent-rounded line on the subtotal (docs/billing.md \"Invoices, payments, taxes\")", () => {
  it("rounds each tax on its own: two 5 % taxes on 0.10 are a cent each, where one 10 % tax would be one cent", () => {
    expect(totalsOf(["0.1"], [tax("a", "5"), tax("b", "5")])).toEqual({
      subtotal: "0.1",
      taxes: [["a", "0.01"], ["b", "0.01"]],
      taxTotal: "0.02",
      total: "0.12",
      free: false
    })
    expect(totalsOf(["0.1"], [tax("c", "10")])).toMatchObject({ taxes: [["c", "0.01"]], total: "0.11" })
  })

  it("keeps the taxes in the order given (oldest first), each with its tax", () => {
    const later = tax("z", "20")
    const older = tax("y", "7")
    const totals = invoiceTotals([line("100")], [later, older])
    expect(totals.taxes.map((t) => [t.tax, text(t.amount)])).toEqual([[later, "20"], [older, "7"]])
  })

  it("has a line for a tax at 0 % (it is active), and doubles the subtotal at 100 %, the bounds a rate may take", () => {
    expect(totalsOf(["19.99"], [tax("zero", "0"), tax("all", "100")])).toEqual({
      subtotal: "19.99",
      taxes: [["zero", "0"], ["all", "19.99"]],
      taxTotal: "19.99",
      total: "39.98",
      free: false
    })
  })

  it("applies a fractional rate exactly, rounding only the tax line", () => {
    // 8.875 % of 100 = 8.875 -> 8.88; of 99.99 = 8.8741125 -> 8.87
    expect(totalsOf(["100"], [tax("ny", "8.875")]).taxes).toEqual([["ny", "8.88"]])
    expect(totalsOf(["99.99"], [tax("ny", "8.875")]).taxes).toEqual([["ny", "8.87"]])
    // 0.001 % of 499.99 = 0.0049999 -> 0; of 500 = 0.005 -> 0.01
    expect(totalsOf(["499.99"], [tax("tiny", "0.001")]).taxes).toEqual([["tiny", "0"]])
    expect(totalsOf(["500"], [tax("tiny", "0.001")]).taxes).toEqual([["tiny", "0.01"]])
  })

  it("taxes a negative subtotal (a PRORATION invoice's net credit) negative, half a cent away from zero", () => {
    expect(totalsOf(["-10.02", "5.01"], [tax("vat", "10")])).toEqual({
      subtotal: "-5.01",
      taxes: [["vat", "-0.5"]],
      taxTotal: "-0.5",
      total: "-5.51",
      free: true
    })
    // 10 % of -0.05 = -0.005 -> -0.01
    expect(totalsOf(["-0.05"], [tax("vat", "10")])).toMatchObject({ taxes: [["vat", "-0.01"]], total: "-0.06" })
  })
})

describe("invoiceTotals: lines keep exact decimals; only the subtotal is rounded", () => {
  it("adds sub-cent lines exactly before rounding: a thousand lines of 0.0004 are 0.40, not 0", () => {
    expect(totalsOf(Array.from({ length: 1000 }, () => "0.0004"))).toMatchObject({ subtotal: "0.4", total: "0.4" })
    expect(totalsOf(["0.333333333333", "0.333333333333", "0.333333333333"]).subtotal).toBe("1")
    // what floats get wrong: 0.1 + 0.2
    expect(totalsOf(["0.1", "0.2"]).subtotal).toBe("0.3")
  })

  it("rounds at the half cent exactly, to 12 places of usage", () => {
    expect(totalsOf(["0.004999999999"]).subtotal).toBe("0")
    expect(totalsOf(["0.005000000000"]).subtotal).toBe("0.01")
    expect(totalsOf(["-0.004999999999"]).subtotal).toBe("0")
    expect(totalsOf(["-0.005"]).subtotal).toBe("-0.01")
    expect(totalsOf(["10.004999999999", "0.000000000001"]).subtotal).toBe("10.01")
    expect(totalsOf(["2.675"]).subtotal).toBe("2.68") // a float would make 2.67 of it
  })

  it("is free at zero, below zero and when the subtotal rounds to zero; a cent is not free", () => {
    expect(totalsOf(["0.004"], [tax("vat", "100")])).toMatchObject({ subtotal: "0", taxes: [["vat", "0"]], total: "0", free: true })
    expect(totalsOf(["-0.004"])).toMatchObject({ subtotal: "0", total: "0", free: true })
    expect(totalsOf(["0.005"], [tax("vat", "100")])).toMatchObject({ subtotal: "0.01", taxes: [["vat", "0.01"]], total: "0.02", free: false })
  })

  it("never answers a negative zero", () => {
    const t = invoiceTotals([line("-0.004")], [tax("vat", "20")])
    for (const amount of [t.subtotal, t.taxes[0]!.amount, t.taxTotal, t.total]) {
      expect(BigDecimal.isNegative(amount)).toBe(false)
      expect(text(amount)).toBe("0")
    }
  })
})

/** Rounds `n / divisor` half away from zero: the test's own integer arithmetic. */
const roundDiv = (n: bigint, divisor: bigint) => {
  const magnitude = n < 0n ? -n : n
  const q = magnitude / divisor + ((magnitude % divisor) * 2n >= divisor ? 1n : 0n)
  return n < 0n ? -q : q
}
/** Cents as the decimal text the service prints (normalised). */
const centsText = (c: bigint) => text(BigDecimal.make(c, 2))
/** An amount in units of 10^-12 as a decimal. */
const micro12 = (v: bigint) => BigDecimal.make(v, 12)

describe("invoiceTotals: totals against the rule worked in integers (a property, fixed seed)", () => {
  it("subtotal = round2(sum of lines), tax = round2(subtotal x rate / 100) each, total = their sum, free iff total <= 0", () => {
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: -50_000_000_000_000n, max: 50_000_000_000_000n }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 4 }),
        (lineUnits, rates) => {
          const lines = lineUnits.map((v): LineInput => ({ description: "x", componentId: null, quantity: null, unitPrice: null, amount: micro12(v) }))
          const taxes = rates.map((r, i): TaxRate => ({ id: `t${i}`, name: "t", ratePercent: BigDecimal.make(BigInt(r), 3) }))
          const totals = invoiceTotals(lines, taxes)
          const subtotal = roundDiv(lineUnits.reduce((a, b) => a + b, 0n), 10_000_000_000n)
          const taxCents = rates.map((r) => roundDiv(subtotal * BigInt(r), 100_000n))
          const total = taxCents.reduce((a, b) => a + b, subtotal)
          expect({
            subtotal: text(totals.subtotal),
            taxes: totals.taxes.map((t) => text(t.amount)),
            taxTotal: text(totals.taxTotal),
            total: text(totals.total),
            free: totals.free
          }).toEqual({
            subtotal: centsText(subtotal),
            taxes: taxCents.map(centsText),
            taxTotal: centsText(total - subtotal),
            total: centsText(total),
            free: total <= 0n
          })
        }
      ),
      { seed: 20_260_039, numRuns: 300 }
    )
  })
})

describe("cents: totalCents, the total in whole cents", () => {
  it("is exact where a float is not, and negative for a net credit", () => {
    expect(cents(d("12.76"))).toBe(1276)
    expect(cents(d("0.29"))).toBe(29) // 0.29 * 100 is 28.999999999999996 in floats
    expect(cents(d("1.15"))).toBe(115) // 114.99999999999999
    expect(cents(d("-5.51"))).toBe(-551)
    expect(cents(d("1234567.89"))).toBe(123456789)
    expect(cents(d("0"))).toBe(0)
  })

  it("rounds a fraction of a cent half away from zero, and never gives -0", () => {
    expect(cents(d("0.005"))).toBe(1)
    expect(cents(d("-0.005"))).toBe(-1)
    expect(cents(d("0.0049"))).toBe(0)
    expect(Object.is(cents(d("-0.0049")), 0)).toBe(true)
  })

  it("answers an invoice's total: subtotal and tax lines in cents add up to it", () => {
    const t = invoiceTotals([line("10.005"), line("0.001")], [tax("a", "7.5"), tax("b", "20")])
    expect(cents(t.total)).toBe(1276)
    expect(cents(t.subtotal) + t.taxes.reduce((sum, x) => sum + cents(x.amount), 0)).toBe(cents(t.total))
  })
})

describe("tax bodies (src/billing/Taxes.ts)", () => {
  const create = Schema.decodeUnknownEither(TaxCreate)
  const update = Schema.decodeUnknownEither(TaxUpdate)

  it("takes a rate as a JSON number, kept as the exact decimal it prints as", () => {
    const decoded = create({ name: "NY sales tax", ratePercent: 8.875 })
    expect(Either.isRight(decoded) && text(decoded.right.ratePercent)).toBe("8.875")
    const tiny = create({ name: "Tiny", ratePercent: 0.001 })
    expect(Either.isRight(tiny) && text(tiny.right.ratePercent)).toBe("0.001")
  })

  it("refuses a rate written as a string on the API, an unknown field and an empty name", () => {
    expect(Either.isLeft(create({ name: "VAT", ratePercent: "20" }))).toBe(true)
    expect(Either.isLeft(create({ name: "VAT", ratePercent: 20, active: true }))).toBe(true)
    expect(Either.isLeft(create({ name: "", ratePercent: 20 }))).toBe(true)
    expect(Either.isLeft(update({ rate: 5 }))).toBe(true)
    expect(Either.isRight(update({ active: false }))).toBe(true)
  })

  it("reads a stored rate (NUMERIC text) as its normalised decimal", () => {
    const row = Schema.decodeUnknownSync(Tax)({
      id: "tax_1",
      name: "VAT",
      ratePercent: "20.000",
      active: true,
      createdAt: "2025-01-01T00:00:00Z",
      updatedAt: "2025-01-01T00:00:00Z"
    })
    expect(text(row.ratePercent)).toBe("20")
  })
})

describe("a step's invoice takes its totals from its lines and the active taxes (src/billing/Renewal.ts `issue`)", () => {
  const bought = (charge: string, taxes: ReadonlyArray<TaxRate>) =>
    renewal(
      state(
        purchase(plan("p", [component("c1", { quantity: "1", charge })]), {
          status: "SCHEDULED",
          billingDate: at("2025-01-31T10:00:00Z"),
          periodStart: null,
          periodEnd: null,
          autoPayment: true
        }),
        [],
        { taxes }
      ),
      ids()
    )

  it("asks no auto-payment of a PLAN invoice whose subtotal rounds to zero: it is issued PAID", () => {
    const step = bought("0.004", [tax("vat", "20")])
    expect([text(step.invoices[0]!.totals.total), step.invoices[0]!.totals.free]).toEqual(["0", true])
    expect(step.walletSteps.map((s) => s._tag)).toEqual(["RecurringGrant"])
  })

  it("auto-pays a cent: half a cent of charge rounds up to one, taxed on the rounded subtotal", () => {
    const step = bought("0.005", [tax("vat", "50")])
    // subtotal 0.01; 50 % of it is 0.005 -> 0.01
    expect(step.invoices[0]!.totals.taxes.map((t) => text(t.amount))).toEqual(["0.01"])
    expect([text(step.invoices[0]!.totals.total), step.invoices[0]!.totals.free]).toEqual(["0.02", false])
    expect(step.walletSteps.map((s) => s._tag)).toEqual(["RecurringGrant", "AutoPay"])
  })
})
