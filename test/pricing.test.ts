import { describe, expect, it } from "@effect/vitest"
import { BigDecimal } from "effect"
import { decimal, toSql } from "../src/money.ts"
import {
  bundleWeightProblem,
  callCost,
  chargeCredit,
  type ModelRates,
  priceBundle,
  providerCost,
  tierProblem,
  type UnitPricing,
  unitCharge,
  unitTotal,
  withMargin
} from "../src/pricing/Pricing.ts"

const d = decimal
const text = (value: BigDecimal.BigDecimal) => toSql(value)

const gpt4o: ModelRates = { input: d("2.5"), output: d("10"), cacheRead: d("1.25"), cacheWrite: null }
const sonnet: ModelRates = { input: d("3"), output: d("15"), cacheRead: d("0.3"), cacheWrite: d("3.75") }
const mistral: ModelRates = { input: d("2"), output: d("6"), cacheRead: null, cacheWrite: null }

const item = (modelId: string, a: string, input: string, output: string, cache: string, cacheWrite: string) => ({
  modelId,
  averageTokensPerLLMCall: d(a),
  input: d(input),
  output: d(output),
  cache: d(cache),
  cacheWrite: d(cacheWrite)
})

const rates = (id: string) => ({ "gpt-4o": gpt4o, "claude-sonnet-4": sonnet, "mistral-large": mistral })[id]!

describe("bundles", () => {
  it("prices one call of an item: A * weighted rates / 100 / 1e6", () => {
    expect(text(callCost(item("gpt-4o", "1000", "60", "40", "0", "0"), gpt4o))).toBe("0.0055")
    expect(text(callCost(item("claude-sonnet-4", "2000", "50", "20", "20", "10"), sonnet))).toBe("0.00987")
  })

  it("sums items into basePrice and tokensPerCredit", () => {
    const price = priceBundle(
      [item("gpt-4o", "1000", "60", "40", "0", "0"), item("claude-sonnet-4", "2000", "50", "20", "20", "10")],
      rates
    )
    expect(text(price.basePrice)).toBe("0.01537")
    expect(text(price.tokensPerCredit)).toBe("3000")
  })

  it("applies margins, including -100 and 0", () => {
    expect(text(withMargin(d("0.0055"), d("20")))).toBe("0.0066")
    expect(text(withMargin(d("0.0055"), d("0")))).toBe("0.0055")
    expect(text(withMargin(d("0.0055"), d("-100")))).toBe("0")
    expect(text(withMargin(d("0.01537"), d("12.5")))).toBe("0.01729125")
  })

  it("checks weights: whole, 0-100, adding to 100, cacheWrite only with a cache-write rate", () => {
    expect(bundleWeightProblem(item("gpt-4o", "1000", "60", "40", "0", "0"), gpt4o)).toBeUndefined()
    expect(bundleWeightProblem(item("gpt-4o", "1000", "60", "30", "0", "0"), gpt4o)).toContain("add up to 100")
    expect(bundleWeightProblem(item("gpt-4o", "1000", "60.5", "39.5", "0", "0"), gpt4o)).toContain("whole number")
    expect(bundleWeightProblem(item("gpt-4o", "1000", "110", "-10", "0", "0"), gpt4o)).toContain("0 to 100")
    expect(bundleWeightProblem(item("gpt-4o", "1000", "50", "40", "0", "10"), gpt4o)).toContain("cache-write")
    expect(bundleWeightProblem(item("claude-sonnet-4", "1000", "50", "40", "0", "10"), sonnet)).toBeUndefined()
  })
})

describe("usage", () => {
  const usage = { inputTokens: d("1000"), outputTokens: d("500"), cacheTokens: d("200"), cacheWriteTokens: d("100") }

  it("costs tokens at the model's rates, falling back for missing cache rates", () => {
    expect(text(providerCost(usage, sonnet))).toBe("0.010935")
    // no cache-write rate: cache-write tokens at the cache rate
    expect(text(providerCost(usage, gpt4o))).toBe("0.007875")
    // no cache rates at all: both at the input rate
    expect(text(providerCost(usage, mistral))).toBe("0.0056")
  })

  it("charges a credit signal: credits = cost / basePrice to 12 places, customer cost with margin", () => {
    const charge = chargeCredit(usage, gpt4o, { basePrice: d("0.0055"), tokensPerCredit: d("1000"), marginPercent: d("20") })
    expect(text(charge.providerCost)).toBe("0.007875")
    expect(text(charge.creditsUsed)).toBe("1.431818181818")
    expect(text(charge.customerCost)).toBe("0.00945")
  })

  it("uses tokens / tokensPerCredit for a free bundle", () => {
    const charge = chargeCredit(usage, gpt4o, { basePrice: d("0"), tokensPerCredit: d("3000"), marginPercent: d("0") })
    expect(text(charge.creditsUsed)).toBe("0.6")
  })
})

describe("units", () => {
  const tiers = [
    { upTo: d("10"), price: d("1") },
    { upTo: d("20"), price: d("0.5") },
    { upTo: null, price: d("0.1") }
  ]
  const slab: UnitPricing = { pricingType: "SLAB", flatPrice: null, tiers }
  const volume: UnitPricing = { pricingType: "VOLUME", flatPrice: null, tiers }
  const flat: UnitPricing = { pricingType: "FLAT", flatPrice: d("2.5"), tiers: [] }

  it("FLAT is price times quantity", () => {
    expect(text(unitTotal(flat, d("3")))).toBe("7.5")
    expect(text(unitCharge(flat, d("3"), d("0.5")))).toBe("1.25")
  })

  it("SLAB graduates across tier edges (upTo inclusive)", () => {
    expect(text(unitTotal(slab, d("0")))).toBe("0")
    expect(text(unitTotal(slab, d("10")))).toBe("10")
    expect(text(unitTotal(slab, d("10.5")))).toBe("10.25")
    expect(text(unitTotal(slab, d("15")))).toBe("12.5")
    expect(text(unitTotal(slab, d("20")))).toBe("15")
    expect(text(unitTotal(slab, d("25")))).toBe("15.5")
    expect(text(unitCharge(slab, d("9"), d("2")))).toBe("1.5")
  })

  it("VOLUME prices every unit at the tier holding Q, so a step down can be negative", () => {
    expect(text(unitTotal(volume, d("10")))).toBe("10")
    expect(text(unitTotal(volume, d("11")))).toBe("5.5")
    expect(text(unitTotal(volume, d("20")))).toBe("10")
    expect(text(unitTotal(volume, d("21")))).toBe("2.1")
    expect(text(unitCharge(volume, d("10"), d("1")))).toBe("-4.5")
  })

  it("a cycle's charges always sum to the cycle's total", () => {
    for (const pricing of [slab, volume, flat]) {
      let used = d("0")
      let charged = d("0")
      for (const quantity of ["3", "7", "0.5", "9.5", "4", "1"]) {
        charged = BigDecimal.sum(charged, unitCharge(pricing, used, d(quantity)))
        used = BigDecimal.sum(used, d(quantity))
      }
      expect(text(charged)).toBe(text(unitTotal(pricing, used)))
    }
  })

  it("checks tiers: ascending, last one unbounded", () => {
    expect(tierProblem(tiers)).toBeUndefined()
    expect(tierProblem([])).toContain("at least one")
    expect(tierProblem([{ upTo: d("10"), price: d("1") }])).toContain("last tier")
    expect(tierProblem([{ upTo: d("10"), price: d("1") }, { upTo: d("5"), price: d("1") }, { upTo: null, price: d("1") }]))
      .toContain("ascending")
    expect(tierProblem([{ upTo: null, price: d("1") }, { upTo: null, price: d("1") }])).toContain("only the last")
  })
})
