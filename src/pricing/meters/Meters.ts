/**
 * The meters: one pure function per kind of signal. Each takes the decoded
 * signal and its customer's loaded context, and returns the usage entry to
 * log with the balance moves it causes, or a typed refusal. No SQL here: the
 * drain loads the context, applies the moves in memory between signals, and
 * writes everything through the ledger at the end of the batch.
 */
import { BigDecimal, Either } from "effect"
import { type Decimal, ONE, ZERO } from "../../money.ts"
import { chargeCredit, type CreditTerms, providerCost, type TokenUsage } from "../Pricing.ts"
import { type AllowanceDraw, drawAllowance, planCoverage } from "./Allowance.ts"
import type { Catalogue, CompositeTarget, CreditTarget, CustomerContext, PurchaseContext } from "./Context.ts"
import { ModelNotEnabled, NoActivePlan, NotOnPlan, type Refusal, UnknownTarget } from "../../errors.ts"

/**
 * One model call's tokens, as a signal states them: the decoded type of
 * `Usage` (src/signals/Signal.ts), written out here so that pricing, a floor
 * below signals, does not import it.
 */
export interface Usage {
  readonly model: string
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cacheTokens?: number | undefined
  readonly cacheWriteTokens?: number | undefined
}

export type UsageMeter = "CREDIT" | "OUTCOME_STEP" | "OUTCOME" | "UNIT" | "WALLET" | "COMPOSITE"

/** The usage-log row of a priced signal, ids aside. */
export interface UsageEntry {
  readonly meter: UsageMeter
  readonly entitlementId: string | null
  readonly entitlementName: string | null
  readonly agentKey: string | null
  readonly usage: Usage | null
  readonly quantity: Decimal
  readonly providerCost: Decimal
  readonly customerCost: Decimal
  readonly billingMode: string | null
  readonly balanceRemaining: Decimal | null
  readonly purchaseId: string | null
  readonly composite: { readonly id: string; readonly refId: string; readonly value: string } | null
  readonly custom: unknown
}

/** A priced signal: what to log, and what it moves. */
export interface Priced {
  readonly entry: UsageEntry
  /** The allowance drawn (balance moves, spent, a funded-arrear wallet debit); null when nothing was drawn. */
  readonly draw: AllowanceDraw | null
  /** A wallet signal's debit (its provider cost); zero for every other meter. */
  readonly walletDebit: Decimal
  /** What the purchase's spent_this_cycle grows by, the draw's included. */
  readonly spent: Decimal
}

export type Metered = Either.Either<Priced, Refusal>

/** A composite tag the signal carries, resolved to a live composite of the workspace. */
export interface ResolvedTag {
  readonly composite: CompositeTarget
  readonly value: string
}

const tokensOf = (usage: Usage): TokenUsage => ({
  inputTokens: BigDecimal.fromBigInt(BigInt(usage.inputTokens ?? 0)),
  outputTokens: BigDecimal.fromBigInt(BigInt(usage.outputTokens ?? 0)),
  cacheTokens: BigDecimal.fromBigInt(BigInt(usage.cacheTokens ?? 0)),
  cacheWriteTokens: BigDecimal.fromBigInt(BigInt(usage.cacheWriteTokens ?? 0))
})

const notInWorkspace = (kind: string, agentKey: string) =>
  new UnknownTarget({ message: `agentKey ${agentKey} is not a live ${kind} of this workspace` })

const notSold = (agentKey: string) =>
  new NotOnPlan({ message: `agentKey ${agentKey} is not sold on the customer's plan nor covered by a composite that is` })

const activePurchase = (context: CustomerContext): Either.Either<PurchaseContext, NoActivePlan> =>
  context.purchase === null
    ? Either.left(new NoActivePlan({ message: "Customer has no active plan" }))
    : Either.right(context.purchase)

const ratesOf = (catalogue: Catalogue, modelId: string) => {
  const rates = catalogue.model(modelId)
  return rates === undefined
    ? Either.left(new ModelNotEnabled({ message: `model ${modelId} is not enabled in this workspace` }))
    : Either.right(rates)
}

/**
 * Whether a target is billed directly or by a composite: by the plan's own
 * coverage, or by the signal's tag when that tag's composite is sold on the
 * plan and covers the target.
 */
const billedBy = (
  purchase: PurchaseContext,
  kind: "CREDIT" | "OUTCOME" | "UNIT",
  targetId: string,
  agentKey: string,
  tag: ResolvedTag | undefined
): Either.Either<"DIRECT" | "COMPOSITE", NotOnPlan> => {
  const covered = planCoverage(purchase.snapshot, kind, targetId)
  if (covered === "NONE") return Either.left(notSold(agentKey))
  const billedByTag = tag !== undefined && purchase.snapshot.components.some((c) =>
    c.type === "PRICING_METRIC" && c.targetId === tag.composite.id &&
    (kind === "CREDIT" ? c.covers.credits : kind === "OUTCOME" ? c.covers.outcomes : c.covers.units).includes(targetId)
  )
  return Either.right(covered === "COMPOSITE" || billedByTag ? "COMPOSITE" : "DIRECT")
}

const tagColumns = (tag: ResolvedTag | undefined) =>
  tag === undefined ? null : { id: tag.composite.id, refId: tag.composite.refId, value: tag.value }

const priced = (entry: UsageEntry, draw: AllowanceDraw | null, walletDebit: Decimal = ZERO): Priced => ({
  entry,
  draw,
  walletDebit: BigDecimal.sum(walletDebit, draw?.walletDebit ?? ZERO),
  spent: BigDecimal.sum(draw?.spent ?? ZERO, walletDebit)
})

export interface CreditSignalInput {
  readonly agentKey: string
  readonly usage: Usage
  readonly runId: string | null
  readonly tag: ResolvedTag | undefined
}

/**
 * The credit's terms as the purchase sold them (margin, basePrice,
 * tokensPerCredit), so a later catalogue edit changes new purchases only. The
 * model's token rates stay live: they are what the provider charges today.
 */
const soldTerms = (purchase: PurchaseContext, target: CreditTarget): CreditTerms =>
  purchase.snapshot.components.find((c) => c.type === "CREDIT" && c.targetId === target.id && c.creditTerms)
    ?.creditTerms ?? target

/** Credits used = provider cost / basePrice, at the customer price of the credit's margin. */
export const meterCredit = (input: CreditSignalInput, context: CustomerContext, catalogue: Catalogue): Metered =>
  Either.gen(function*() {
    const target = catalogue.credit(input.agentKey)
    if (target === undefined) return yield* Either.left(notInWorkspace("credit", input.agentKey))
    const purchase = yield* activePurchase(context)
    const by = yield* billedBy(purchase, "CREDIT", target.id, input.agentKey, input.tag)
    const rates = yield* ratesOf(catalogue, input.usage.model)
    const charge = chargeCredit(tokensOf(input.usage), rates, by === "DIRECT" ? soldTerms(purchase, target) : target)
    const draw = by === "DIRECT" && BigDecimal.isPositive(charge.creditsUsed)
      ? yield* drawAllowance(purchase, {
        organizationId: context.organizationId,
        kind: "CREDIT",
        targetId: target.id,
        quantity: charge.creditsUsed,
        customerCost: charge.customerCost
      })
      : null
    return priced({
      meter: "CREDIT",
      entitlementId: target.id,
      entitlementName: target.name,
      agentKey: input.agentKey,
      usage: input.usage,
      quantity: charge.creditsUsed,
      providerCost: charge.providerCost,
      customerCost: draw?.customerCost ?? ZERO,
      billingMode: draw?.billingMode ?? (by === "COMPOSITE" ? "COMPOSITE" : null),
      balanceRemaining: draw?.remaining ?? null,
      purchaseId: purchase.id,
      composite: tagColumns(input.tag),
      custom: null
    }, draw)
  })

export interface OutcomeStepSignalInput {
  readonly agentKey: string
  readonly usage: Usage | null
  readonly tag: ResolvedTag | undefined
}

/** A step of an outcome run: records its provider cost for margin reporting and bills nothing. */
export const meterOutcomeStep = (
  input: OutcomeStepSignalInput,
  context: CustomerContext,
  catalogue: Catalogue
): Metered =>
  Either.gen(function*() {
    const target = catalogue.outcomeStep(input.agentKey)
    if (target === undefined) return yield* Either.left(notInWorkspace("outcome step", input.agentKey))
    const purchase = yield* activePurchase(context)
    yield* billedBy(purchase, "OUTCOME", target.outcomeId, input.agentKey, input.tag)
    const cost = input.usage === null ? ZERO : providerCost(tokensOf(input.usage), yield* ratesOf(catalogue, input.usage.model))
    return priced({
      meter: "OUTCOME_STEP",
      entitlementId: target.outcomeId,
      entitlementName: `${target.outcomeName} / ${target.stepName}`,
      agentKey: input.agentKey,
      usage: input.usage,
      quantity: ONE,
      providerCost: cost,
      customerCost: ZERO,
      billingMode: null,
      balanceRemaining: null,
      purchaseId: purchase.id,
      composite: tagColumns(input.tag),
      custom: null
    }, null)
  })

export interface OutcomeCompletionInput {
  readonly runId: string
  /** The outcome the run's first step signal names; undefined when no step of a live outcome reported. */
  readonly outcome: { readonly outcomeId: string; readonly outcomeName: string; readonly agentKey: string } | undefined
  /** The provider cost of the run's step signals. */
  readonly stepsCost: Decimal
  /** Outcomes consumed: 1 for a completed run; a spend check may ask about more at once. */
  readonly quantity?: Decimal
}

/** A completed run consumes one outcome at pricePerOutcome. */
export const meterOutcomeCompletion = (input: OutcomeCompletionInput, context: CustomerContext): Metered =>
  Either.gen(function*() {
    const target = input.outcome
    if (target === undefined) {
      return yield* Either.left(new UnknownTarget({ message: `Outcome run ${input.runId} has no step of a live outcome` }))
    }
    const purchase = yield* activePurchase(context)
    const by = yield* billedBy(purchase, "OUTCOME", target.outcomeId, target.agentKey, undefined)
    const quantity = input.quantity ?? ONE
    const draw = by === "DIRECT"
      ? yield* drawAllowance(purchase, {
        organizationId: context.organizationId,
        kind: "OUTCOME",
        targetId: target.outcomeId,
        quantity
      })
      : null
    return priced({
      meter: "OUTCOME",
      entitlementId: target.outcomeId,
      entitlementName: target.outcomeName,
      agentKey: target.agentKey,
      usage: null,
      quantity,
      providerCost: input.stepsCost,
      customerCost: draw?.customerCost ?? ZERO,
      billingMode: draw?.billingMode ?? "COMPOSITE",
      balanceRemaining: draw?.remaining ?? null,
      purchaseId: purchase.id,
      composite: null,
      custom: null
    }, draw)
  })

export interface UnitSignalInput {
  readonly agentKey: string
  readonly quantity: Decimal | undefined
  readonly tag: ResolvedTag | undefined
}

/** Counted units, priced on the cycle's cumulative quantity. */
export const meterUnit = (input: UnitSignalInput, context: CustomerContext, catalogue: Catalogue): Metered =>
  Either.gen(function*() {
    const target = catalogue.unit(input.agentKey)
    if (target === undefined) return yield* Either.left(notInWorkspace("unit", input.agentKey))
    const purchase = yield* activePurchase(context)
    const by = yield* billedBy(purchase, "UNIT", target.id, input.agentKey, input.tag)
    const quantity = input.quantity ?? ONE
    const draw = by === "DIRECT"
      ? yield* drawAllowance(purchase, {
        organizationId: context.organizationId,
        kind: "UNIT",
        targetId: target.id,
        quantity
      })
      : null
    return priced({
      meter: "UNIT",
      entitlementId: target.id,
      entitlementName: target.name,
      agentKey: input.agentKey,
      usage: null,
      quantity,
      providerCost: ZERO,
      customerCost: draw?.customerCost ?? ZERO,
      billingMode: draw?.billingMode ?? "COMPOSITE",
      balanceRemaining: draw?.remaining ?? null,
      purchaseId: purchase.id,
      composite: tagColumns(input.tag),
      custom: null
    }, draw)
  })

export interface WalletSignalInput {
  readonly usage: Usage
  readonly tag: ResolvedTag | undefined
}

/**
 * Debits exactly the provider cost, no margin; never refused for funds. Only
 * a plan with a WALLET component meters wallet signals (`meters.wallet` of the
 * current plan): without one the wallet is billed by nothing, neither its grant
 * nor an invoice, so a debit there would be usage no one pays for; the signal
 * is refused (422 not on plan) instead, as a credit signal for a credit the
 * plan does not sell is (docs/signals.md, "A wallet signal needs a wallet").
 */
export const meterWallet = (input: WalletSignalInput, context: CustomerContext, catalogue: Catalogue): Metered =>
  Either.gen(function*() {
    const purchase = yield* activePurchase(context)
    if (!purchase.snapshot.components.some((component) => component.type === "WALLET")) {
      return yield* Either.left(
        new NotOnPlan({
          message: "the wallet is not on the customer's plan: a wallet signal needs a plan with a WALLET component"
        })
      )
    }
    const cost = providerCost(tokensOf(input.usage), yield* ratesOf(catalogue, input.usage.model))
    const before = context.wallet?.balance ?? ZERO
    return priced({
      meter: "WALLET",
      entitlementId: null,
      entitlementName: "Wallet",
      agentKey: null,
      usage: input.usage,
      quantity: cost,
      providerCost: cost,
      customerCost: cost,
      billingMode: "WALLET",
      balanceRemaining: BigDecimal.normalize(BigDecimal.subtract(before, cost)),
      purchaseId: purchase.id,
      composite: tagColumns(input.tag),
      custom: null
    }, null, cost)
  })

export interface CompositeOccurrenceInput {
  readonly composite: CompositeTarget
  readonly value: string
  readonly custom: unknown
}

/** One completed occurrence of a composite, at its price per occurrence. */
export const meterCompositeOccurrence = (input: CompositeOccurrenceInput, context: CustomerContext): Metered =>
  Either.gen(function*() {
    const purchase = context.purchase
    if (purchase === null) {
      return yield* Either.left(new NoActivePlan({ message: `Customer ${context.customerId} has no active plan` }))
    }
    const draw = yield* drawAllowance(purchase, {
      organizationId: context.organizationId,
      kind: "COMPOSITE",
      targetId: input.composite.id,
      quantity: ONE
    })
    return priced({
      meter: "COMPOSITE",
      entitlementId: input.composite.id,
      entitlementName: input.composite.name,
      agentKey: input.composite.refId,
      usage: null,
      quantity: ONE,
      providerCost: ZERO,
      customerCost: draw.customerCost,
      billingMode: draw.billingMode,
      balanceRemaining: draw.remaining,
      purchaseId: draw.purchaseId,
      composite: { id: input.composite.id, refId: input.composite.refId, value: input.value },
      custom: input.custom
    }, draw)
  })
