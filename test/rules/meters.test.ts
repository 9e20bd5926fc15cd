/**
 * The meters and the allowance as whole answers (src/pricing/meters/): every
 * field of the usage entry and of the draw a signal gets, the refusals and
 * what they name, composite coverage by the plan and by a signal's tag, and a
 * late signal of an ended cycle. test/meters.test.ts has the worked prices.
 */
import { randomUUID } from "node:crypto"
import { BigDecimal, Either } from "effect"
import { describe, expect, it } from "vitest"
import { type AllowanceDraw, type AllowanceRequest, drawAllowance, planCoverage } from "../../src/pricing/meters/Allowance.ts"
import { applyMoves, type Catalogue, type CustomerContext, type PurchaseContext } from "../../src/pricing/meters/Context.ts"
import {
  meterCompositeOccurrence,
  meterCredit,
  type Metered,
  meterOutcomeCompletion,
  meterOutcomeStep,
  meterUnit,
  meterWallet,
  type ResolvedTag
} from "../../src/pricing/meters/Meters.ts"
import { compositesCovering, type PlanSnapshot, type SnapshotComponent, snapshotOfText, unitPricingOf } from "../../src/pricing/PlanSnapshot.ts"
import { component, d, plan, text } from "./fixtures.ts"

/** Every decimal of a value as text, deeply: whole entries and draws compare in one assertion. */
const plain = (value: unknown): unknown => {
  if (BigDecimal.isBigDecimal(value)) return text(value)
  if (Array.isArray(value)) return value.map(plain)
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
  return value
}

const priced = (metered: Metered) => {
  if (Either.isLeft(metered)) throw new Error(`refused: ${metered.left._tag}: ${metered.left.message}`)
  return plain(metered.right) as Record<string, unknown> & { entry: Record<string, unknown>; draw: Record<string, unknown> | null }
}
const refused = (metered: Either.Either<unknown, { readonly _tag: string; readonly message: string }>) =>
  Either.isLeft(metered) ? { tag: metered.left._tag, message: metered.left.message } : { tag: "priced", message: "" }

/**
 * A refusal's code, and the words its message must hold (what was refused),
 * not its whole text: the wording is the errors' own business.
 */
const says = (result: { readonly tag: string; readonly message: string }, tag: string, ...words: ReadonlyArray<string>) => {
  expect(result.tag).toBe(tag)
  for (const word of words) expect(result.message).toContain(word)
}

const purchaseOf = (
  snapshot: PlanSnapshot,
  balances: Record<string, string | { readonly remaining: string; readonly cycleQuantity: string }>,
  fields: Partial<Omit<PurchaseContext, "snapshot" | "balances">> = {}
): PurchaseContext => ({
  id: "pur_1",
  snapshot,
  cycleIndex: 4,
  closedCycle: false,
  balances: new Map(Object.entries(balances).map(([componentId, value]) => {
    const { remaining, cycleQuantity } = typeof value === "string" ? { remaining: value, cycleQuantity: "0" } : value
    return [componentId, { componentId, remaining: d(remaining), cycleQuantity: d(cycleQuantity) }]
  })),
  ...fields
})

const customer = (purchase: PurchaseContext | null, wallet: string | null = null): CustomerContext => ({
  organizationId: "org_1",
  customerId: "cus_1",
  purchase,
  wallet: wallet === null ? null : { balance: d(wallet) }
})

const catalogue: Catalogue = {
  credit: (agentKey) =>
    agentKey === "chat"
      ? { id: "crd_1", name: "Chat", basePrice: d("0.0055"), tokensPerCredit: d("1000"), marginPercent: d("20") }
      : undefined,
  outcomeStep: (agentKey) => (agentKey === "draft" ? { outcomeId: "out_1", outcomeName: "Report", stepName: "Draft" } : undefined),
  unit: (agentKey) => (agentKey === "pages" ? { id: "unt_1", name: "Pages" } : undefined),
  composite: () => undefined,
  model: (modelId) => (modelId === "gpt-4o" ? { input: d("2.5"), output: d("10"), cacheRead: d("1.25"), cacheWrite: d("3") } : undefined)
}

// 1000 × 2.5 + 500 × 10 + 200 × 1.25 + 100 × 3 per million = 0.00805
const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500, cacheTokens: 200, cacheWriteTokens: 100 }
const soldTerms = { basePrice: d("0.005"), tokensPerCredit: d("1000"), marginPercent: d("100") }
const creditAdvance = component("adv", { type: "CREDIT", targetId: "crd_1", quantity: "10", unitPrice: "0.01", creditTerms: soldTerms })
const creditArrear = component("arr", { type: "CREDIT", billingMode: "ARREAR", targetId: "crd_1", unitPrice: "0.01" })
const ticket = component("tkt", {
  type: "PRICING_METRIC",
  targetId: "cmp_1",
  quantity: "5",
  unitPrice: "2",
  covers: { credits: ["crd_1"], outcomes: ["out_1"], units: ["unt_1"] }
})
const tag: ResolvedTag = { composite: { id: "cmp_1", name: "Ticket", refId: "ticket" }, value: "T-7" }
const tagColumns = { id: "cmp_1", refId: "ticket", value: "T-7" }

describe("the credit meter", () => {
  it("prices a credit the plan sells at the terms the purchase froze, every field of the entry", () => {
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, customer(purchaseOf(plan("p", [creditAdvance]), { adv: "10" })), catalogue))
    // 0.00805 / 0.005 = 1.61 credits; the customer pays 0.00805 doubled
    expect(result.entry).toEqual({
      meter: "CREDIT",
      entitlementId: "crd_1",
      entitlementName: "Chat",
      agentKey: "chat",
      usage,
      quantity: "1.61",
      providerCost: "0.00805",
      customerCost: "0.0161",
      billingMode: "ADVANCE",
      balanceRemaining: "8.39",
      purchaseId: "pur_1",
      composite: null,
      custom: null
    })
    expect([result.walletDebit, result.spent]).toEqual(["0", "0"])
    expect(result.draw).toMatchObject({ billingMode: "ADVANCE", advanceQuantity: "1.61", arrearQuantity: "0" })
  })

  it("counts missing token classes as none", () => {
    const result = priced(meterCredit({ agentKey: "chat", usage: { model: "gpt-4o" }, runId: null, tag: undefined }, customer(purchaseOf(plan("p", [creditAdvance]), { adv: "10" })), catalogue))
    expect(result.entry).toMatchObject({ quantity: "0", providerCost: "0", customerCost: "0", billingMode: null, balanceRemaining: null })
    expect(result.draw).toBeNull()
  })

  it("prices at the live terms when the snapshot froze none", () => {
    const live = component("adv", { type: "CREDIT", targetId: "crd_1", quantity: "10", creditTerms: null })
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, customer(purchaseOf(plan("p", [live]), { adv: "10" })), catalogue))
    // 0.00805 / 0.0055 to 12 places; 0.00805 × 1.2
    expect(result.entry).toMatchObject({ quantity: "1.463636363636", customerCost: "0.00966" })
  })

  it("prices each credit at its own frozen terms, not at another credit's the plan lists first", () => {
    const otherTerms = { basePrice: d("0.001"), tokensPerCredit: d("1000"), marginPercent: d("0") }
    const otherCredit = component("oth", { type: "CREDIT", targetId: "crd_2", quantity: "10", creditTerms: otherTerms })
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, customer(purchaseOf(plan("p", [otherCredit, creditAdvance]), { oth: "10", adv: "10" })), catalogue))
    // crd_1's own terms: 0.00805 / 0.005 = 1.61 credits, the cost doubled (crd_2's would make 8.05 credits at cost)
    expect(result.entry).toMatchObject({ quantity: "1.61", customerCost: "0.0161", balanceRemaining: "8.39" })
  })

  it("bills nothing directly when the signal's tag names a sold composite covering the credit, and records the tag", () => {
    const both = plan("p", [creditAdvance, ticket])
    const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag }, customer(purchaseOf(both, { adv: "10", tkt: "5" })), catalogue))
    expect(result.entry).toMatchObject({
      quantity: "1.463636363636",
      customerCost: "0",
      billingMode: "COMPOSITE",
      balanceRemaining: null,
      composite: tagColumns
    })
    expect(result.draw).toBeNull()
  })

  it("bills directly when the tag's composite is not sold, or does not cover the credit", () => {
    const notCovering = { ...ticket, covers: { credits: [], outcomes: ["crd_1"], units: ["crd_1"] } }
    // another composite of the plan covers the credit: the tag names the one that bills it, and that one is not sold
    const anotherCovering = { ...ticket, id: "tk2", targetId: "cmp_2" }
    for (const components of [[creditAdvance], [creditAdvance, notCovering], [creditAdvance, anotherCovering]]) {
      const result = priced(meterCredit({ agentKey: "chat", usage, runId: null, tag }, customer(purchaseOf(plan("p", components), { adv: "10" })), catalogue))
      expect(result.entry).toMatchObject({ billingMode: "ADVANCE", customerCost: "0.0161", composite: tagColumns })
    }
  })

  it("refuses, naming what it refused", () => {
    const sold = customer(purchaseOf(plan("p", [creditAdvance]), { adv: "0.5" }))
    says(refused(meterCredit({ agentKey: "nope", usage, runId: null, tag: undefined }, sold, catalogue)), "UnknownTarget", "nope", "credit")
    says(refused(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, customer(purchaseOf(plan("p", []), {})), catalogue)), "NotOnPlan", "chat")
    says(refused(meterCredit({ agentKey: "chat", usage: { model: "llama" }, runId: null, tag: undefined }, sold, catalogue)), "ModelNotEnabled", "llama")
    says(refused(meterCredit({ agentKey: "chat", usage, runId: null, tag: undefined }, customer(null), catalogue)), "NoActivePlan", "plan")
  })
})

describe("the outcome meters", () => {
  const outcome = component("out", { type: "OUTCOME", targetId: "out_1", quantity: "3", unitPrice: "1.5" })
  const run = { runId: "run_1", outcome: { outcomeId: "out_1", outcomeName: "Report", agentKey: "report" }, stepsCost: d("0.0123") }

  it("records a step's provider cost, one step, billing nothing", () => {
    const result = priced(meterOutcomeStep({ agentKey: "draft", usage, tag }, customer(purchaseOf(plan("p", [outcome]), { out: "3" })), catalogue))
    expect(result).toEqual({
      entry: {
        meter: "OUTCOME_STEP",
        entitlementId: "out_1",
        entitlementName: "Report / Draft",
        agentKey: "draft",
        usage,
        quantity: "1",
        providerCost: "0.00805",
        customerCost: "0",
        billingMode: null,
        balanceRemaining: null,
        purchaseId: "pur_1",
        composite: tagColumns,
        custom: null
      },
      draw: null,
      walletDebit: "0",
      spent: "0"
    })
    const noUsage = priced(meterOutcomeStep({ agentKey: "draft", usage: null, tag: undefined }, customer(purchaseOf(plan("p", [outcome]), { out: "3" })), catalogue))
    expect(noUsage.entry).toMatchObject({ usage: null, providerCost: "0", composite: null })
  })

  it("refuses a step of an outcome the plan does not sell, or of a disabled model", () => {
    expect(refused(meterOutcomeStep({ agentKey: "draft", usage, tag: undefined }, customer(purchaseOf(plan("p", []), {})), catalogue)).tag).toBe("NotOnPlan")
    expect(refused(meterOutcomeStep({ agentKey: "draft", usage: { model: "llama" }, tag: undefined }, customer(purchaseOf(plan("p", [outcome]), {})), catalogue)).tag)
      .toBe("ModelNotEnabled")
    says(refused(meterOutcomeStep({ agentKey: "nope", usage, tag: undefined }, customer(null), catalogue)), "UnknownTarget", "nope", "outcome step")
    expect(refused(meterOutcomeStep({ agentKey: "draft", usage, tag: undefined }, customer(null), catalogue)).tag).toBe("NoActivePlan")
  })

  it("bills a completed run its outcomes at pricePerOutcome", () => {
    const result = priced(meterOutcomeCompletion({ ...run, quantity: d("2") }, customer(purchaseOf(plan("p", [outcome]), { out: "3" }))))
    expect(result.entry).toEqual({
      meter: "OUTCOME",
      entitlementId: "out_1",
      entitlementName: "Report",
      agentKey: "report",
      usage: null,
      quantity: "2",
      providerCost: "0.0123",
      customerCost: "3",
      billingMode: "ADVANCE",
      balanceRemaining: "1",
      purchaseId: "pur_1",
      composite: null,
      custom: null
    })
    expect(priced(meterOutcomeCompletion(run, customer(purchaseOf(plan("p", [outcome]), { out: "3" })))).entry).toMatchObject({ quantity: "1", customerCost: "1.5" })
  })

  it("leaves a run of an outcome a composite covers to the composite", () => {
    const result = priced(meterOutcomeCompletion(run, customer(purchaseOf(plan("p", [ticket]), { tkt: "5" }))))
    expect(result.entry).toMatchObject({ customerCost: "0", billingMode: "COMPOSITE", balanceRemaining: null, purchaseId: "pur_1" })
    expect(result.draw).toBeNull()
  })

  it("refuses a run with no step of a live outcome, naming the run", () => {
    says(refused(meterOutcomeCompletion({ ...run, outcome: undefined }, customer(null))), "UnknownTarget", "run_1")
  })
})

describe("the unit meter", () => {
  const pages = component("pg", { type: "UNIT", billingMode: "ARREAR", targetId: "unt_1", pricingType: "FLAT", flatPrice: d("0.25") })

  it("counts one unit when the signal states no quantity, at the unit's price", () => {
    const result = priced(meterUnit({ agentKey: "pages", quantity: undefined, tag }, customer(purchaseOf(plan("p", [pages]), { pg: "0" })), catalogue))
    expect(result.entry).toEqual({
      meter: "UNIT",
      entitlementId: "unt_1",
      entitlementName: "Pages",
      agentKey: "pages",
      usage: null,
      quantity: "1",
      providerCost: "0",
      customerCost: "0.25",
      billingMode: "ARREAR",
      balanceRemaining: null,
      purchaseId: "pur_1",
      composite: tagColumns,
      custom: null
    })
    expect([result.spent, result.walletDebit]).toEqual(["0.25", "0"])
  })

  it("draws a prepaid unit's balance and tells what is left of it", () => {
    const prepaid = component("pa", { type: "UNIT", targetId: "unt_1", quantity: "10", pricingType: "FLAT", flatPrice: d("0.25") })
    const result = priced(meterUnit({ agentKey: "pages", quantity: d("4"), tag: undefined }, customer(purchaseOf(plan("p", [prepaid]), { pa: "10" })), catalogue))
    expect(result.entry).toMatchObject({ quantity: "4", customerCost: "1", billingMode: "ADVANCE", balanceRemaining: "6" })
    expect([result.spent, result.walletDebit]).toEqual(["0", "0"])
  })

  it("leaves units a composite covers to the composite, tagged or covered by the plan", () => {
    const viaTag = priced(meterUnit({ agentKey: "pages", quantity: d("4"), tag }, customer(purchaseOf(plan("p", [pages, ticket]), { pg: "0" })), catalogue))
    expect(viaTag.entry).toMatchObject({ quantity: "4", customerCost: "0", billingMode: "COMPOSITE", composite: tagColumns })
    const onlyComposite = priced(meterUnit({ agentKey: "pages", quantity: d("4"), tag: undefined }, customer(purchaseOf(plan("p", [ticket]), {})), catalogue))
    expect(onlyComposite.entry).toMatchObject({ billingMode: "COMPOSITE", composite: null })
    const coversOutcomesOnly = { ...ticket, covers: { credits: ["unt_1"], outcomes: ["unt_1"], units: [] } }
    const direct = priced(meterUnit({ agentKey: "pages", quantity: d("4"), tag }, customer(purchaseOf(plan("p", [pages, coversOutcomesOnly]), { pg: "0" })), catalogue))
    expect(direct.entry).toMatchObject({ billingMode: "ARREAR", customerCost: "1" })
  })

  it("refuses an unknown unit, naming it", () => {
    says(refused(meterUnit({ agentKey: "nope", quantity: undefined, tag: undefined }, customer(null), catalogue)), "UnknownTarget", "nope", "unit")
  })
})

describe("the wallet meter", () => {
  const wallet = component("w", { type: "WALLET", targetId: null, amount: "0" })

  it("debits the provider cost and records it as the customer's cost", () => {
    const result = priced(meterWallet({ usage, tag }, customer(purchaseOf(plan("p", [wallet]), {}), "1"), catalogue))
    expect(result).toEqual({
      entry: {
        meter: "WALLET",
        entitlementId: null,
        entitlementName: "Wallet",
        agentKey: null,
        usage,
        quantity: "0.00805",
        providerCost: "0.00805",
        customerCost: "0.00805",
        billingMode: "WALLET",
        balanceRemaining: "0.99195",
        purchaseId: "pur_1",
        composite: tagColumns,
        custom: null
      },
      draw: null,
      walletDebit: "0.00805",
      spent: "0.00805"
    })
  })

  it("meters the wallet of a plan that sells more than its wallet", () => {
    const result = priced(meterWallet({ usage, tag: undefined }, customer(purchaseOf(plan("p", [creditAdvance, wallet]), { adv: "10" }), "1"), catalogue))
    expect(result.entry).toMatchObject({ meter: "WALLET", quantity: "0.00805", balanceRemaining: "0.99195" })
    expect(result.walletDebit).toBe("0.00805")
  })

  it("counts an unloaded wallet as empty", () => {
    expect(priced(meterWallet({ usage, tag: undefined }, customer(purchaseOf(plan("p", [wallet]), {})), catalogue)).entry).toMatchObject({ balanceRemaining: "-0.00805" })
  })

  it("refuses a plan without a wallet, saying so, and a disabled model", () => {
    says(refused(meterWallet({ usage, tag: undefined }, customer(purchaseOf(plan("p", [creditAdvance]), {}), "1"), catalogue)), "NotOnPlan", "wallet")
    expect(refused(meterWallet({ usage: { model: "llama" }, tag: undefined }, customer(purchaseOf(plan("p", [wallet]), {}), "1"), catalogue)).tag)
      .toBe("ModelNotEnabled")
  })
})

describe("the composite occurrence meter", () => {
  const input = { composite: { id: "cmp_1", name: "Ticket", refId: "ticket" }, value: "T-7", custom: { a: 1 } }

  it("draws one occurrence from the pool, every field of the entry", () => {
    const result = priced(meterCompositeOccurrence(input, customer(purchaseOf(plan("p", [ticket]), { tkt: "5" }))))
    expect(result.entry).toEqual({
      meter: "COMPOSITE",
      entitlementId: "cmp_1",
      entitlementName: "Ticket",
      agentKey: "ticket",
      usage: null,
      quantity: "1",
      providerCost: "0",
      customerCost: "2",
      billingMode: "ADVANCE",
      balanceRemaining: "4",
      purchaseId: "pur_1",
      composite: tagColumns,
      custom: { a: 1 }
    })
  })

  it("refuses without a plan, naming the customer", () => {
    says(refused(meterCompositeOccurrence(input, customer(null))), "NoActivePlan", "cus_1")
  })
})

const request = (fields: Partial<AllowanceRequest> & Pick<AllowanceRequest, "kind" | "targetId" | "quantity">): AllowanceRequest => ({
  organizationId: "org_1",
  ...fields
})
const draw = (purchase: PurchaseContext, r: AllowanceRequest) => {
  const drawn = drawAllowance(purchase, r)
  if (Either.isLeft(drawn)) throw new Error(`refused: ${drawn.left.message}`)
  return plain(drawn.right) as Record<string, unknown>
}
const move = (componentId: string, used: string, remaining: string, arrearAmount: string, fields: Record<string, unknown> = {}) => ({
  organizationId: "org_1",
  purchaseId: "pur_1",
  componentId,
  granted: "0",
  used,
  remaining,
  cycleQuantity: used,
  arrearAmount,
  ...fields
})

describe("drawAllowance", () => {
  const outcomeAdvance = component("oa", { type: "OUTCOME", targetId: "out_1", quantity: "3", unitPrice: "1.5" })
  const outcomeArrear = component("or", { type: "OUTCOME", billingMode: "ARREAR", targetId: "out_1", unitPrice: "9" })
  const both = plan("p", [outcomeAdvance, outcomeArrear])

  it("draws ADVANCE first and overflows the rest to ARREAR, priced at the first component's price", () => {
    expect(draw(purchaseOf(both, { oa: "2", or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("5") }))).toEqual({
      purchaseId: "pur_1",
      billingMode: "MIXED",
      advanceQuantity: "2",
      arrearQuantity: "3",
      customerCost: "7.5",
      arrearCharge: "4.5",
      remaining: "0",
      moves: [move("oa", "2", "-2", "0"), move("or", "3", "0", "4.5")],
      spent: "4.5",
      walletDebit: "0"
    })
  })

  it("moves only the prepaid row when it covers the whole quantity, though an ARREAR component could take more", () => {
    expect(draw(purchaseOf(both, { oa: "3", or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("2") }))).toEqual({
      purchaseId: "pur_1",
      billingMode: "ADVANCE",
      advanceQuantity: "2",
      arrearQuantity: "0",
      customerCost: "3",
      arrearCharge: "0",
      remaining: "1",
      moves: [move("oa", "2", "-2", "0")],
      spent: "0",
      walletDebit: "0"
    })
  })

  it("bills all in ARREAR when nothing is left in ADVANCE, and keeps a composite's debt as the remainder", () => {
    expect(draw(purchaseOf(both, { oa: "-2", or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("1") }))).toMatchObject({
      billingMode: "ARREAR",
      advanceQuantity: "0",
      arrearQuantity: "1",
      remaining: "-2",
      moves: [move("or", "1", "0", "1.5")]
    })
    const arrearOnly = plan("p", [outcomeArrear])
    expect(draw(purchaseOf(arrearOnly, { or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("1") }))).toMatchObject({
      billingMode: "ARREAR",
      customerCost: "9",
      remaining: null
    })
    expect(draw(purchaseOf(plan("p", [{ ...outcomeArrear, unitPrice: null }]), { or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("1") })))
      .toMatchObject({ customerCost: "0", arrearCharge: "0" })
  })

  it("debits a walletFundedArrear charge from the wallet, accruing nothing", () => {
    const funded = { ...both, walletFundedArrear: true }
    expect(draw(purchaseOf(funded, { oa: "0", or: "0" }), request({ kind: "OUTCOME", targetId: "out_1", quantity: d("2") }))).toMatchObject({
      moves: [move("or", "2", "0", "0")],
      spent: "3",
      walletDebit: "3"
    })
  })

  it("moves an ended cycle's rows for a late signal, which adds nothing to this cycle's spend", () => {
    const closed = purchaseOf(both, { oa: "1", or: "0" }, { closedCycle: true, cycleIndex: 2 })
    expect(draw(closed, request({ kind: "OUTCOME", targetId: "out_1", quantity: d("2") }))).toMatchObject({
      moves: [move("oa", "1", "-1", "0", { closedCycle: 2 }), move("or", "1", "0", "1.5", { closedCycle: 2 })],
      spent: "0",
      walletDebit: "0"
    })
  })

  it("charges an overflowing credit its share of the customer's cost, all of it, or none", () => {
    const credits = plan("p", [creditAdvance, creditArrear])
    const ask = (quantity: string, customerCost?: string) =>
      request({ kind: "CREDIT", targetId: "crd_1", quantity: d(quantity), ...(customerCost === undefined ? {} : { customerCost: d(customerCost) }) })
    expect(draw(purchaseOf(credits, { adv: "1", arr: "0" }), ask("3", "0.9"))).toMatchObject({ customerCost: "0.9", arrearCharge: "0.6", spent: "0.6" })
    expect(draw(purchaseOf(credits, { adv: "0", arr: "0" }), ask("3", "0.9"))).toMatchObject({ arrearCharge: "0.9", billingMode: "ARREAR" })
    expect(draw(purchaseOf(credits, { adv: "5", arr: "0" }), ask("3", "0.9"))).toMatchObject({ arrearCharge: "0", billingMode: "ADVANCE", remaining: "2" })
    expect(draw(purchaseOf(credits, { adv: "1", arr: "0" }), ask("3"))).toMatchObject({ customerCost: "0", arrearCharge: "0" })
    // a share that is not a finite decimal: 12 places
    expect(draw(purchaseOf(credits, { adv: "2", arr: "0" }), ask("3", "1"))).toMatchObject({ arrearCharge: "0.333333333333" })
  })

  it("prices units on the cycle's cumulative quantity, the ARREAR part after the ADVANCE part", () => {
    const tiers = [{ upTo: d("10"), price: d("1") }, { upTo: null, price: d("0.5") }]
    const unitAdvance = component("ua", { type: "UNIT", targetId: "unt_1", quantity: "5", pricingType: "SLAB", tiers })
    const unitArrear = component("ur", { type: "UNIT", billingMode: "ARREAR", targetId: "unt_1", pricingType: "SLAB", tiers })
    const units = purchaseOf(plan("p", [unitAdvance, unitArrear]), { ua: { remaining: "2", cycleQuantity: "3" }, ur: { remaining: "0", cycleQuantity: "4" } })
    // 7 used before; 6 more: units 8-10 at 1, 11-13 at 0.5 = 4.5; the ARREAR part is units 10-13: 1 + 1.5
    expect(draw(units, request({ kind: "UNIT", targetId: "unt_1", quantity: d("6") }))).toMatchObject({
      advanceQuantity: "2",
      arrearQuantity: "4",
      customerCost: "4.5",
      arrearCharge: "2.5"
    })
    expect(draw(units, request({ kind: "UNIT", targetId: "unt_1", quantity: d("2") }))).toMatchObject({ customerCost: "2", arrearCharge: "0" })
  })

  it("lets a composite's pool run into debt, and refuses a composite with no pool row", () => {
    const pool = purchaseOf(plan("p", [ticket]), { tkt: "0.5" })
    expect(draw(pool, request({ kind: "COMPOSITE", targetId: "cmp_1", quantity: d("2") }))).toMatchObject({
      billingMode: "ADVANCE",
      advanceQuantity: "2",
      arrearQuantity: "0",
      customerCost: "4",
      remaining: "-1.5",
      moves: [move("tkt", "2", "-2", "0")]
    })
    says(refused(drawAllowance(purchaseOf(plan("p", [ticket]), {}), request({ kind: "COMPOSITE", targetId: "cmp_1", quantity: d("1") }))), "OutOfAllowance", "composite cmp_1")
  })

  it("refuses a quantity not above zero, and what the plan neither sells nor covers, naming it", () => {
    const p = purchaseOf(both, { oa: "3", or: "0" })
    for (const quantity of ["0", "-1"]) {
      says(refused(drawAllowance(p, request({ kind: "OUTCOME", targetId: "out_1", quantity: d(quantity) }))), "InvalidUsage", "quantity")
    }
    says(refused(drawAllowance(p, request({ kind: "UNIT", targetId: "unt_9", quantity: d("1") }))), "NotOnPlan", "unit unt_9")
    // a composite is never covered by another composite
    const covering = { ...ticket, covers: { ...ticket.covers, credits: ["cmp_2"] } }
    expect(refused(drawAllowance(purchaseOf(plan("p", [covering]), {}), request({ kind: "COMPOSITE", targetId: "cmp_2", quantity: d("1") }))).tag).toBe("NotOnPlan")
  })

  it("moves nothing for a target a sold composite covers", () => {
    const nothing: AllowanceDraw = {
      purchaseId: "pur_1",
      billingMode: "COMPOSITE",
      advanceQuantity: d("0"),
      arrearQuantity: d("0"),
      customerCost: d("0"),
      arrearCharge: d("0"),
      remaining: null,
      moves: [],
      spent: d("0"),
      walletDebit: d("0")
    }
    expect(draw(purchaseOf(plan("p", [ticket]), {}), request({ kind: "CREDIT", targetId: "crd_1", quantity: d("1") }))).toEqual(plain(nothing))
  })
})

describe("what the plan sells", () => {
  const credit = component("c", { type: "CREDIT", targetId: "crd_1" })
  const covering = (covers: SnapshotComponent["covers"]) => component("k", { type: "PRICING_METRIC", targetId: "cmp_1", covers })
  const notAComposite = component("x", { type: "UNIT", targetId: "unt_1", covers: { credits: ["crd_1"], outcomes: ["out_1"], units: ["unt_1"] } })

  it("tells a target the plan sells from one a composite covers and one it does not sell", () => {
    expect(planCoverage(plan("p", [credit]), "CREDIT", "crd_1")).toBe("DIRECT")
    expect(planCoverage(plan("p", [covering({ credits: ["crd_1"], outcomes: [], units: [] })]), "CREDIT", "crd_1")).toBe("COMPOSITE")
    expect(planCoverage(plan("p", [credit]), "OUTCOME", "crd_1")).toBe("NONE")
    // another credit than the one the plan sells
    expect(planCoverage(plan("p", [credit]), "CREDIT", "crd_2")).toBe("NONE")
  })

  it("looks in the composite's list of the target's kind, and only in composites", () => {
    const k = covering({ credits: ["a"], outcomes: ["b"], units: ["c"] })
    const snapshot = plan("p", [k, notAComposite])
    expect([compositesCovering(snapshot, "CREDIT", "a"), compositesCovering(snapshot, "OUTCOME", "b"), compositesCovering(snapshot, "UNIT", "c")])
      .toEqual([[k], [k], [k]])
    expect([compositesCovering(snapshot, "CREDIT", "b"), compositesCovering(snapshot, "OUTCOME", "c"), compositesCovering(snapshot, "UNIT", "a")])
      .toEqual([[], [], []])
    expect(compositesCovering(snapshot, "UNIT", "unt_1")).toEqual([])
  })

  it("prices a unit component FLAT unless it says otherwise", () => {
    expect(unitPricingOf(component("u", { type: "UNIT", flatPrice: d("2") }))).toEqual({ pricingType: "FLAT", flatPrice: d("2"), tiers: [] })
    expect(unitPricingOf(component("u", { type: "UNIT", pricingType: "VOLUME" })).pricingType).toBe("VOLUME")
  })

  it("reads a snapshot from its stored text, once per text", () => {
    const stored = JSON.stringify({ ...plan("p", []), priceAdjustment: "1.5", cost: "10.25", components: [] })
    const snapshot = snapshotOfText(stored)
    expect([snapshot.planId, text(snapshot.priceAdjustment), text(snapshot.cost)]).toEqual(["p", "1.5", "10.25"])
    expect(snapshotOfText(stored)).toBe(snapshot)
    expect(() => snapshotOfText("{}")).toThrow()
  })

  it("keeps at most 1000 decoded snapshots: the next new text drops them all", () => {
    // Texts no other run has read: the cache lives as long as the module, across tests and Stryker's runs.
    const run = randomUUID()
    let n = 0
    const fresh = () => JSON.stringify({ ...plan(`${run}-${n++}`, []), priceAdjustment: "0", cost: "0", components: [] })
    // What the cache holds now is unknown: read new texts until one drops it (the sentinel is decoded anew).
    const sentinel = fresh()
    const before = snapshotOfText(sentinel)
    let kept = before
    for (let i = 0; i < 1000 && kept === before; i++) {
      snapshotOfText(fresh())
      kept = snapshotOfText(sentinel)
    }
    expect(kept).not.toBe(before)
    // The cache now holds two: the text that dropped it and the sentinel. 998 more fill it to 1000, all kept;
    for (let i = 0; i < 998; i++) snapshotOfText(fresh())
    expect(snapshotOfText(sentinel)).toBe(kept)
    // the next new one drops them.
    snapshotOfText(fresh())
    expect(snapshotOfText(sentinel)).not.toBe(kept)
  })
})

describe("applyMoves", () => {
  it("moves the batch's in-memory balances by each move, and ignores rows it does not hold", () => {
    const p = purchaseOf(plan("p", []), { a: { remaining: "5", cycleQuantity: "1" } })
    applyMoves(p, [
      { organizationId: "org_1", purchaseId: "pur_1", componentId: "a", granted: d("0"), used: d("2"), remaining: d("-2"), cycleQuantity: d("2"), arrearAmount: d("0") },
      { organizationId: "org_1", purchaseId: "pur_1", componentId: "zz", granted: d("0"), used: d("1"), remaining: d("-1"), cycleQuantity: d("1"), arrearAmount: d("0") },
      { organizationId: "org_1", purchaseId: "pur_1", componentId: "a", granted: d("0"), used: d("0.5"), remaining: d("-0.5"), cycleQuantity: d("0.5"), arrearAmount: d("0") }
    ])
    expect([...p.balances.values()].map((b) => [b.componentId, text(b.remaining), text(b.cycleQuantity)])).toEqual([["a", "2.5", "3.5"]])
  })
})
