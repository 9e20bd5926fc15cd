/**
 * The meters alone: pure functions of a signal and its customer's loaded
 * context, with exact decimals worked out by hand. No database.
 */
import { describe, expect, it } from "@effect/vitest"
import { BigDecimal, Either } from "effect"
import type { PlanSnapshot, SnapshotComponent } from "../src/pricing/PlanSnapshot.ts"
import { decimal, ZERO } from "../src/money.ts"
import { snapshotComponent as component } from "./rules/fixtures.ts"
import { drawAllowance } from "../src/pricing/meters/Allowance.ts"
import { applyMoves, type Catalogue, type CustomerContext, type PurchaseContext } from "../src/pricing/meters/Context.ts"
import {
  meterCompositeOccurrence,
  meterCredit,
  type Metered,
  meterOutcomeCompletion,
  meterOutcomeStep,
  meterUnit,
  meterWallet,
  type Priced
} from "../src/pricing/meters/Meters.ts"

const d = decimal
const text = (value: BigDecimal.BigDecimal | null | undefined) =>
  value === null || value === undefined ? value : BigDecimal.format(BigDecimal.normalize(value))


const snapshot = (components: ReadonlyArray<SnapshotComponent>, walletFundedArrear = false): PlanSnapshot => ({
  planId: "pln_1",
  name: "Plan",
  description: "",
  billingCycle: "MONTHLY",
  currencyCode: "USD",
  priceAdjustment: ZERO,
  walletFundedArrear,
  cost: ZERO,
  components
})

/** A purchase whose balances start as given (remaining; cycle quantity 0 unless said). */
const purchase = (
  components: ReadonlyArray<SnapshotComponent>,
  balances: Record<string, string | { remaining: string; cycleQuantity: string }>,
  walletFundedArrear = false
): PurchaseContext => ({
  id: "pur_1",
  snapshot: snapshot(components, walletFundedArrear),
  cycleIndex: 0,
  closedCycle: false,
  balances: new Map(Object.entries(balances).map(([componentId, value]) => {
    const { remaining, cycleQuantity } = typeof value === "string" ? { remaining: value, cycleQuantity: "0" } : value
    return [componentId, { componentId, remaining: d(remaining), cycleQuantity: d(cycleQuantity) }]
  }))
})

const customer = (purchaseContext: PurchaseContext | null, wallet: string | null = null): CustomerContext => ({
  organizationId: "org_1",
  customerId: "cus_1",
  purchase: purchaseContext,
  wallet: wallet === null ? null : { balance: d(wallet) }
})

// GPT-4o-like rates (USD per million tokens) and a credit whose bundle costs 0.0055 a call, 20% margin.
const catalogue: Catalogue = {
  credit: (agentKey) =>
    agentKey === "chat"
      ? { id: "crd_1", name: "Chat", basePrice: d("0.0055"), tokensPerCredit: d("1000"), marginPercent: d("20") }
      : undefined,
  outcomeStep: (agentKey) =>
    agentKey === "draft" ? { outcomeId: "out_1", outcomeName: "Report", stepName: "Draft" } : undefined,
  unit: (agentKey) => (agentKey === "pages" ? { id: "unt_1", name: "Pages" } : undefined),
  composite: (refId) => (refId === "ticket" ? { id: "cmp_1", name: "Ticket", refId: "ticket" } : undefined),
  model: (modelId) =>
    modelId === "gpt-4o" ? { input: d("2.5"), output: d("10"), cacheRead: d("1.25"), cacheWrite: null } : undefined
}

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

const priced = (metered: Metered): Priced => {
  if (Either.isLeft(metered)) throw new Error(`refused: ${metered.left._tag}: ${metered.left.message}`)
  return metered.right
}
const refusal = (metered: Metered) => (Either.isLeft(metered) ? metered.left._tag : `priced ${metered.right.entry.meter}`)

const creditAdvance = component({ id: "cmp_adv", type: "CREDIT", billingMode: "ADVANCE", targetId: "crd_1", quantity: d("10"), unitPrice: d("0.0066") })
const creditArrear = component({ id: "cmp_arr", type: "CREDIT", billingMode: "ARREAR", targetId: "crd_1", unitPrice: d("0.0066") })

describe("credit meter", () => {
  it("charges provider cost / basePrice credits at the margin, from ADVANCE", () => {
    const context = customer(purchase([creditAdvance], { cmp_adv: "10" }))
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, context, catalogue))
    // provider (1000*2.5 + 500*10)/1e6 = 0.0075; credits 0.0075/0.0055 = 1.363636363636 (12 places, half away from zero)
    expect(text(result.entry.providerCost)).toBe("0.0075")
    expect(text(result.entry.quantity)).toBe("1.363636363636")
    expect(text(result.entry.customerCost)).toBe("0.009")
    expect(result.entry.billingMode).toBe("ADVANCE")
    expect(text(result.entry.balanceRemaining)).toBe("8.636363636364")
    expect(result.draw?.moves).toHaveLength(1)
    expect(text(result.draw?.moves[0]?.remaining)).toBe("-1.363636363636")
    expect(text(result.spent)).toBe("0")
  })

  it("overflows the part ADVANCE cannot cover to ARREAR, charged its share of the cost", () => {
    const context = customer(purchase([creditAdvance, creditArrear], { cmp_adv: "1", cmp_arr: "0" }))
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, context, catalogue))
    expect(result.entry.billingMode).toBe("MIXED")
    expect(text(result.draw?.advanceQuantity)).toBe("1")
    expect(text(result.draw?.arrearQuantity)).toBe("0.363636363636")
    // 0.009 * 0.363636363636 / 1.363636363636 = 0.0024 (to 12 places)
    expect(text(result.draw?.arrearCharge)).toBe("0.0024")
    expect(text(result.spent)).toBe("0.0024")
    expect(text(result.draw?.moves.find((m) => m.componentId === "cmp_arr")?.arrearAmount)).toBe("0.0024")
  })

  it("debits a walletFundedArrear charge from the wallet instead of accruing it", () => {
    const context = customer(purchase([creditArrear], { cmp_arr: "0" }, true), "1")
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, context, catalogue))
    expect(result.entry.billingMode).toBe("ARREAR")
    expect(text(result.walletDebit)).toBe("0.009")
    expect(text(result.draw?.moves[0]?.arrearAmount)).toBe("0")
  })

  it("bills nothing directly for a credit covered only by a sold composite", () => {
    const composite = component({ id: "cmp_c", type: "PRICING_METRIC", billingMode: "ADVANCE", targetId: "cmp_1", quantity: d("5"), unitPrice: d("2"), covers: { credits: ["crd_1"], outcomes: [], units: [] } })
    const context = customer(purchase([composite], { cmp_c: "5" }))
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, context, catalogue))
    expect(result.entry.billingMode).toBe("COMPOSITE")
    expect(text(result.entry.customerCost)).toBe("0")
    expect(result.draw).toBeNull()
  })

  it("refuses, in this order: unknown agentKey, no plan, not on the plan, disabled model, out of allowance", () => {
    const input = { agentKey: "chat", usage, runId: null, tag: undefined }
    expect(refusal(meterCredit({ ...input, agentKey: "nope" }, customer(null), catalogue))).toBe("UnknownTarget")
    expect(refusal(meterCredit(input, customer(null), catalogue))).toBe("NoActivePlan")
    expect(refusal(meterCredit(input, customer(purchase([], {})), catalogue))).toBe("NotOnPlan")
    const sold = customer(purchase([creditAdvance], { cmp_adv: "1" }))
    expect(refusal(meterCredit({ ...input, usage: { ...usage, model: "llama" } }, sold, catalogue))).toBe("ModelNotEnabled")
    expect(refusal(meterCredit(input, sold, catalogue))).toBe("OutOfAllowance")
  })

  it("keeps refusals exact and ordered when moves are applied between signals", () => {
    const context = customer(purchase([creditAdvance], { cmp_adv: "3" }))
    const results = [1, 2, 3].map(() => {
      const metered = meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, context, catalogue)
      if (Either.isRight(metered) && metered.right.draw) applyMoves(context.purchase!, metered.right.draw.moves)
      return refusal(metered)
    })
    // 3 credits cover two signals of 1.363636363636; the third is refused and moves nothing.
    expect(results).toEqual(["priced CREDIT", "priced CREDIT", "OutOfAllowance"])
    expect(text(context.purchase!.balances.get("cmp_adv")!.remaining)).toBe("0.272727272728")
  })
})

describe("outcome meters", () => {
  const outcome = component({ id: "cmp_o", type: "OUTCOME", billingMode: "ADVANCE", targetId: "out_1", quantity: d("2"), unitPrice: d("1.5") })

  it("records a step's provider cost and bills nothing", () => {
    const result = priced(meterOutcomeStep({ agentKey: "draft", usage, tag: undefined }, customer(purchase([outcome], { cmp_o: "2" })), catalogue))
    expect(result.entry.entitlementName).toBe("Report / Draft")
    expect(text(result.entry.providerCost)).toBe("0.0075")
    expect(text(result.entry.customerCost)).toBe("0")
    expect(result.draw).toBeNull()
    expect(refusal(meterOutcomeStep({ agentKey: "nope", usage: null, tag: undefined }, customer(null), catalogue))).toBe("UnknownTarget")
  })

  it("bills a completed run one outcome at pricePerOutcome, with its steps' cost", () => {
    const context = customer(purchase([outcome], { cmp_o: "2" }))
    const input = { runId: "run_1", outcome: { outcomeId: "out_1", outcomeName: "Report", agentKey: "report" }, stepsCost: d("0.0123") }
    const result = priced(meterOutcomeCompletion(input, context))
    expect(text(result.entry.customerCost)).toBe("1.5")
    expect(text(result.entry.providerCost)).toBe("0.0123")
    expect(text(result.entry.balanceRemaining)).toBe("1")
    expect(refusal(meterOutcomeCompletion({ ...input, outcome: undefined }, context))).toBe("UnknownTarget")
    expect(refusal(meterOutcomeCompletion(input, customer(purchase([outcome], { cmp_o: "0" }))))).toBe("OutOfAllowance")
  })
})

describe("unit meter", () => {
  const slab = component({
    id: "cmp_u",
    type: "UNIT",
    billingMode: "ARREAR",
    targetId: "unt_1",
    pricingType: "SLAB",
    tiers: [{ upTo: d("10"), price: d("1") }, { upTo: null, price: d("0.5") }]
  })

  it("prices on the cycle's cumulative quantity (SLAB across a tier boundary)", () => {
    const context = customer(purchase([slab], { cmp_u: { remaining: "0", cycleQuantity: "8" } }))
    const result = priced(meterUnit({ agentKey: "pages", quantity: d("4"), tag: undefined }, context, catalogue))
    // units 9-10 at 1, units 11-12 at 0.5
    expect(text(result.entry.customerCost)).toBe("3")
    expect(text(result.spent)).toBe("3")
    expect(text(result.draw?.moves[0]?.cycleQuantity)).toBe("4")
  })

  it("refuses a quantity not above zero and an unknown unit", () => {
    const context = customer(purchase([slab], { cmp_u: "0" }))
    expect(refusal(meterUnit({ agentKey: "pages", quantity: d("0"), tag: undefined }, context, catalogue))).toBe("InvalidUsage")
    expect(refusal(meterUnit({ agentKey: "nope", quantity: undefined, tag: undefined }, context, catalogue))).toBe("UnknownTarget")
  })
})

describe("wallet meter", () => {
  it("refuses a plan without a WALLET component: nothing bills that wallet (422 not on plan)", () => {
    expect(refusal(meterWallet({ usage, tag: undefined }, customer(purchase([creditAdvance], { cmp_adv: "10" }), "5"), catalogue))).toBe("NotOnPlan")
  })

  it("debits exactly the provider cost, below zero, never refused for funds", () => {
    const wallet = component({ id: "cmp_w", type: "WALLET", billingMode: "ADVANCE", amount: d("0") })
    const result = priced(meterWallet({ usage, tag: undefined }, customer(purchase([wallet], {}), "0.005"), catalogue))
    expect(text(result.walletDebit)).toBe("0.0075")
    expect(text(result.entry.balanceRemaining)).toBe("-0.0025")
    expect(text(result.spent)).toBe("0.0075")
    expect(refusal(meterWallet({ usage, tag: undefined }, customer(null, "1"), catalogue))).toBe("NoActivePlan")
  })
})

describe("composite occurrence meter", () => {
  const pool = component({ id: "cmp_p", type: "PRICING_METRIC", billingMode: "ADVANCE", targetId: "cmp_1", quantity: d("1"), unitPrice: d("2.5") })
  const input = { composite: { id: "cmp_1", name: "Ticket", refId: "ticket" }, value: "t-1", custom: { a: 1 } }

  it("draws the pool and never refuses: occurrences beyond it are debt", () => {
    const context = customer(purchase([pool], { cmp_p: "0" }))
    const result = priced(meterCompositeOccurrence(input, context))
    expect(text(result.entry.customerCost)).toBe("2.5")
    expect(text(result.entry.balanceRemaining)).toBe("-1")
    expect(result.entry.custom).toEqual({ a: 1 })
  })

  it("refuses without a plan or when the plan does not sell the composite", () => {
    expect(refusal(meterCompositeOccurrence(input, customer(null)))).toBe("NoActivePlan")
    expect(refusal(meterCompositeOccurrence(input, customer(purchase([], {}))))).toBe("NotOnPlan")
  })
})

describe("drawAllowance", () => {
  it("refuses without moving anything when ADVANCE cannot cover and there is no ARREAR", () => {
    const context = purchase([creditAdvance], { cmp_adv: "0.5" })
    const drawn = drawAllowance(context, { organizationId: "org_1", kind: "CREDIT", targetId: "crd_1", quantity: d("1"), customerCost: d("1") })
    expect(Either.isLeft(drawn) && drawn.left._tag).toBe("OutOfAllowance")
    expect(text(context.balances.get("cmp_adv")!.remaining)).toBe("0.5")
  })
})
