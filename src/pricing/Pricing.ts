/**
 * The pricing rules of docs/catalogue-credits-outcomes.md as functions: every price the service computes, in exact
 * decimals. Nothing here touches the database; callers load rates and records.
 *
 * Rates are USD per million tokens. A bundle item's four weights are whole
 * percentages of one call's tokens in each class (each 0-100, summing to 100).
 */
import { BigDecimal } from "effect"
import { type Decimal, divideTo, HUNDRED, MILLION, ONE, roundTo, sum, USAGE_SCALE, ZERO } from "../money.ts"

export interface ModelRates {
  readonly input: Decimal
  readonly output: Decimal
  readonly cacheRead: Decimal | null
  readonly cacheWrite: Decimal | null
}

export interface BundleItem {
  readonly modelId: string
  readonly averageTokensPerLLMCall: Decimal
  readonly input: Decimal
  readonly output: Decimal
  readonly cache: Decimal
  readonly cacheWrite: Decimal
}

const { multiply, sum: add, subtract } = BigDecimal

/** Cache reads without a cache rate bill at the input rate. */
export const cacheReadRate = (rates: ModelRates): Decimal => rates.cacheRead ?? rates.input

/** Cache writes without a cache-write rate bill at the cache rate, then the input rate. */
export const cacheWriteRate = (rates: ModelRates): Decimal => rates.cacheWrite ?? rates.cacheRead ?? rates.input

/** `A * (input*r_in + output*r_out + cache*r_cr + cacheWrite*r_cw) / 100 / 1e6`: one LLM call of the item. */
export const callCost = (item: BundleItem, rates: ModelRates): Decimal => {
  const weighted = sum([
    multiply(item.input, rates.input),
    multiply(item.output, rates.output),
    multiply(item.cache, cacheReadRate(rates)),
    multiply(item.cacheWrite, cacheWriteRate(rates))
  ])
  return BigDecimal.normalize(
    BigDecimal.unsafeDivide(multiply(item.averageTokensPerLLMCall, weighted), multiply(HUNDRED, MILLION))
  )
}

export interface BundlePrice {
  /** USD of one bundle's work: one call of each item. */
  readonly basePrice: Decimal
  /** Tokens of one bundle's work; one credit is one bundle. */
  readonly tokensPerCredit: Decimal
}

export const priceBundle = (items: ReadonlyArray<BundleItem>, ratesOf: (modelId: string) => ModelRates): BundlePrice => ({
  basePrice: sum(items.map((item) => callCost(item, ratesOf(item.modelId)))),
  tokensPerCredit: sum(items.map((item) => item.averageTokensPerLLMCall))
})

/** `base * (1 + margin/100)`; margin is at least -100, so the result is never negative. */
export const withMargin = (base: Decimal, marginPercent: Decimal): Decimal =>
  BigDecimal.normalize(multiply(base, add(ONE, BigDecimal.unsafeDivide(marginPercent, HUNDRED))))

/** Why a bundle item's weights are unacceptable, if they are. */
export const bundleWeightProblem = (item: BundleItem, rates: ModelRates): string | undefined => {
  const weights = [item.input, item.output, item.cache, item.cacheWrite]
  for (const weight of weights) {
    if (!BigDecimal.isInteger(weight) || BigDecimal.lessThan(weight, ZERO) || BigDecimal.greaterThan(weight, HUNDRED)) {
      return "weights input, output, cache and cacheWrite must each be a whole number from 0 to 100"
    }
  }
  if (!BigDecimal.equals(sum(weights), HUNDRED)) return "weights input + output + cache + cacheWrite must add up to 100"
  if (BigDecimal.greaterThan(item.cacheWrite, ZERO) && rates.cacheWrite === null) {
    return `model ${item.modelId} has no cache-write rate, so cacheWrite must be 0`
  }
  if (BigDecimal.lessThanOrEqualTo(item.averageTokensPerLLMCall, ZERO)) return "averageTokensPerLLMCall must be above 0"
  return undefined
}

// ---------------------------------------------------------------------------
// Usage

export interface TokenUsage {
  readonly inputTokens: Decimal
  readonly outputTokens: Decimal
  readonly cacheTokens: Decimal
  readonly cacheWriteTokens: Decimal
}

export const totalTokens = (usage: TokenUsage): Decimal =>
  sum([usage.inputTokens, usage.outputTokens, usage.cacheTokens, usage.cacheWriteTokens])

/** What the model's provider charges for the tokens, at the model's rates, to 12 places. */
export const providerCost = (usage: TokenUsage, rates: ModelRates): Decimal =>
  divideTo(
    sum([
      multiply(usage.inputTokens, rates.input),
      multiply(usage.outputTokens, rates.output),
      multiply(usage.cacheTokens, cacheReadRate(rates)),
      multiply(usage.cacheWriteTokens, cacheWriteRate(rates))
    ]),
    MILLION
  )

export interface CreditCharge {
  readonly providerCost: Decimal
  readonly creditsUsed: Decimal
  readonly customerCost: Decimal
}

/** What a credit signal is priced from; a purchase freezes them in its snapshot. */
export interface CreditTerms {
  readonly basePrice: Decimal
  readonly tokensPerCredit: Decimal
  readonly marginPercent: Decimal
}

/**
 * A credit signal: credits used = provider cost / basePrice (tokens /
 * tokensPerCredit for a free bundle); the customer pays the provider cost with
 * the credit's margin.
 */
export const chargeCredit = (usage: TokenUsage, rates: ModelRates, credit: CreditTerms): CreditCharge => {
  const cost = providerCost(usage, rates)
  const creditsUsed = BigDecimal.isZero(credit.basePrice)
    ? BigDecimal.isZero(credit.tokensPerCredit) ? ZERO : divideTo(totalTokens(usage), credit.tokensPerCredit)
    : divideTo(cost, credit.basePrice)
  return {
    providerCost: cost,
    creditsUsed,
    customerCost: roundTo(withMargin(cost, credit.marginPercent), USAGE_SCALE)
  }
}

// ---------------------------------------------------------------------------
// Units

export type PricingType = "FLAT" | "SLAB" | "VOLUME"

export interface Tier {
  /** Inclusive upper bound of the tier; null for the last, unbounded tier. */
  readonly upTo: Decimal | null
  readonly price: Decimal
}

export interface UnitPricing {
  readonly pricingType: PricingType
  readonly flatPrice: Decimal | null
  /** Ascending by `upTo`, the last one unbounded. */
  readonly tiers: ReadonlyArray<Tier>
}

const min = (a: Decimal, b: Decimal) => (BigDecimal.lessThan(a, b) ? a : b)

/** Why a unit's tiers are unacceptable, if they are. */
export const tierProblem = (tiers: ReadonlyArray<Tier>): string | undefined => {
  if (tiers.length === 0) return "tiers must hold at least one tier"
  let previous: Decimal = ZERO
  for (const [index, tier] of tiers.entries()) {
    const last = index === tiers.length - 1
    if (BigDecimal.lessThan(tier.price, ZERO)) return "tier prices must be 0 or more"
    if (last) {
      if (tier.upTo !== null) return "the last tier must have upTo null"
    } else {
      if (tier.upTo === null) return "only the last tier may have upTo null"
      if (!BigDecimal.greaterThan(tier.upTo, previous)) return "tier upTo values must be above 0 and ascending"
      previous = tier.upTo
    }
  }
  return undefined
}

/** The total price of `quantity` units in one billing cycle. */
export const unitTotal = (pricing: UnitPricing, quantity: Decimal): Decimal => {
  if (!BigDecimal.greaterThan(quantity, ZERO)) return ZERO
  switch (pricing.pricingType) {
    case "FLAT":
      return BigDecimal.normalize(multiply(pricing.flatPrice ?? ZERO, quantity))
    case "SLAB": {
      // Graduated: each tier prices the units of (0, Q] that fall inside it.
      let total = ZERO
      let floor = ZERO
      for (const tier of pricing.tiers) {
        const ceiling = tier.upTo === null ? quantity : min(tier.upTo, quantity)
        if (BigDecimal.greaterThan(ceiling, floor)) total = add(total, multiply(tier.price, subtract(ceiling, floor)))
        if (tier.upTo === null || !BigDecimal.lessThan(tier.upTo, quantity)) break
        floor = tier.upTo
      }
      return BigDecimal.normalize(total)
    }
    case "VOLUME": {
      // Every unit at the price of the tier that holds Q.
      const tier = pricing.tiers.find((t) => t.upTo === null || BigDecimal.lessThanOrEqualTo(quantity, t.upTo))
      return BigDecimal.normalize(multiply(tier?.price ?? ZERO, quantity))
    }
  }
}

/**
 * A unit signal of `quantity` when `usedBefore` units were already recorded this
 * cycle: `total(Q + q) - total(Q)`, so a cycle's rows always sum to its total
 * (a VOLUME step down can make a row negative).
 */
export const unitCharge = (pricing: UnitPricing, usedBefore: Decimal, quantity: Decimal): Decimal =>
  BigDecimal.normalize(subtract(unitTotal(pricing, add(usedBefore, quantity)), unitTotal(pricing, usedBefore)))
