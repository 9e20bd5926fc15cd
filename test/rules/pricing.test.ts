/**
 * The edges of the price rules (src/pricing/Pricing.ts) that the worked
 * examples of test/pricing.test.ts do not reach: which weight check speaks
 * first, a free bundle with no tokens per credit, tiers that do not ascend,
 * quantities at or below zero, a volume price past the last bounded tier.
 */
import { describe, expect, it } from "vitest"
import {
  bundleWeightProblem,
  chargeCredit,
  type ModelRates,
  tierProblem,
  type UnitPricing,
  unitCharge,
  unitTotal
} from "../../src/pricing/Pricing.ts"
import { d, text } from "./fixtures.ts"

const rates: ModelRates = { input: d("2"), output: d("6"), cacheRead: null, cacheWrite: null }
const item = (a: string, input: string, output: string, cache: string, cacheWrite: string) => ({
  modelId: "m",
  averageTokensPerLLMCall: d(a),
  input: d(input),
  output: d(output),
  cache: d(cache),
  cacheWrite: d(cacheWrite)
})

describe("bundle weights", () => {
  it("refuses a weight above 100 as out of range, before adding them up", () => {
    expect(bundleWeightProblem(item("10", "150", "0", "0", "0"), rates)).toBe(
      "weights input, output, cache and cacheWrite must each be a whole number from 0 to 100"
    )
  })

  it("refuses a negative weight even when the weights add up to 100", () => {
    expect(bundleWeightProblem(item("10", "-10", "100", "10", "0"), rates)).toBe(
      "weights input, output, cache and cacheWrite must each be a whole number from 0 to 100"
    )
  })

  it("takes 0 and 100 as weights", () => {
    expect(bundleWeightProblem(item("10", "100", "0", "0", "0"), rates)).toBeUndefined()
    expect(bundleWeightProblem(item("10", "0", "0", "100", "0"), rates)).toBeUndefined()
  })

  it("says when the weights do not add up to 100", () => {
    expect(bundleWeightProblem(item("10", "50", "49", "0", "0"), rates)).toBe("weights input + output + cache + cacheWrite must add up to 100")
  })

  it("needs tokens per call above zero", () => {
    expect(bundleWeightProblem(item("0", "60", "40", "0", "0"), rates)).toBe("averageTokensPerLLMCall must be above 0")
    expect(bundleWeightProblem(item("-5", "60", "40", "0", "0"), rates)).toBe("averageTokensPerLLMCall must be above 0")
    expect(bundleWeightProblem(item("0.5", "60", "40", "0", "0"), rates)).toBeUndefined()
  })

  it("names the model that has no cache-write rate", () => {
    expect(bundleWeightProblem(item("10", "60", "30", "0", "10"), rates)).toBe("model m has no cache-write rate, so cacheWrite must be 0")
  })
})

describe("credit charges", () => {
  const usage = { inputTokens: d("1000"), outputTokens: d("500"), cacheTokens: d("0"), cacheWriteTokens: d("0") }

  it("uses no credits for a free bundle without tokens per credit", () => {
    const charge = chargeCredit(usage, rates, { basePrice: d("0"), tokensPerCredit: d("0"), marginPercent: d("50") })
    // 1000 × 2 + 500 × 6 per million = 0.005, plus half
    expect([text(charge.providerCost), text(charge.creditsUsed), text(charge.customerCost)]).toEqual(["0.005", "0", "0.0075"])
  })

  it("rounds the customer's cost to 12 places, half away from zero", () => {
    const charge = chargeCredit(
      { inputTokens: d("1"), outputTokens: d("0"), cacheTokens: d("0"), cacheWriteTokens: d("0") },
      { ...rates, input: d("0.000001") },
      { basePrice: d("1"), tokensPerCredit: d("1"), marginPercent: d("50") }
    )
    // 1e-12 × 1.5 = 1.5e-12
    expect(text(charge.customerCost)).toBe("0.000000000002")
  })
})

describe("tiers", () => {
  it("refuses a negative price, a first bound of zero and a bound that does not ascend", () => {
    expect(tierProblem([{ upTo: null, price: d("-1") }])).toBe("tier prices must be 0 or more")
    expect(tierProblem([{ upTo: d("10"), price: d("-0.01") }, { upTo: null, price: d("1") }])).toBe("tier prices must be 0 or more")
    expect(tierProblem([{ upTo: d("0"), price: d("1") }, { upTo: null, price: d("1") }])).toBe("tier upTo values must be above 0 and ascending")
    expect(tierProblem([{ upTo: d("5"), price: d("1") }, { upTo: d("5"), price: d("1") }, { upTo: null, price: d("1") }]))
      .toBe("tier upTo values must be above 0 and ascending")
    expect(tierProblem([{ upTo: d("5"), price: d("0") }, { upTo: d("6"), price: d("0") }, { upTo: null, price: d("0") }])).toBeUndefined()
  })

  it("says which bound is wrong", () => {
    expect(tierProblem([{ upTo: d("10"), price: d("1") }])).toBe("the last tier must have upTo null")
    expect(tierProblem([{ upTo: null, price: d("1") }, { upTo: null, price: d("1") }])).toBe("only the last tier may have upTo null")
    expect(tierProblem([])).toBe("tiers must hold at least one tier")
  })
})

describe("unit totals at the edges", () => {
  const tiers = [{ upTo: d("10"), price: d("1") }, { upTo: d("20"), price: d("0.5") }]
  const flat: UnitPricing = { pricingType: "FLAT", flatPrice: d("3"), tiers: [] }

  it("charges nothing for no units or fewer", () => {
    expect(text(unitTotal(flat, d("-2")))).toBe("0")
    expect(text(unitTotal({ pricingType: "SLAB", flatPrice: null, tiers }, d("-2")))).toBe("0")
    expect(text(unitTotal({ pricingType: "VOLUME", flatPrice: null, tiers }, d("-2")))).toBe("0")
  })

  it("charges nothing for a FLAT unit without a price", () => {
    expect(text(unitTotal({ ...flat, flatPrice: null }, d("4")))).toBe("0")
  })

  it("prices nothing past the last bounded tier when no tier is unbounded", () => {
    expect(text(unitTotal({ pricingType: "VOLUME", flatPrice: null, tiers }, d("25")))).toBe("0")
    expect(text(unitTotal({ pricingType: "VOLUME", flatPrice: null, tiers }, d("20")))).toBe("10")
    expect(text(unitTotal({ pricingType: "SLAB", flatPrice: null, tiers }, d("25")))).toBe("15")
    expect(text(unitTotal({ pricingType: "SLAB", flatPrice: null, tiers }, d("5")))).toBe("5")
  })

  it("charges a signal the difference of the cycle's totals", () => {
    expect(text(unitCharge(flat, d("2"), d("1.5")))).toBe("4.5")
    expect(text(unitCharge({ pricingType: "SLAB", flatPrice: null, tiers }, d("10"), d("4")))).toBe("2")
  })
})
