/**
 * A customer's spend state as a check sees it, computed in memory from what
 * was read (no SQL here):
 * - `simulateQueued` prices the customer's queued, not yet priced signals in
 *   order with the drain's own dispatch (signals/MeterSignal.ts) against the
 *   committed balances, as the worker will, and keeps what each takes of each
 *   balance (`pending`);
 * - `judge` answers a check: the request priced by the same meters against
 *   the balances left after the queued signals and the active holds.
 */
import { BigDecimal, Either } from "effect"
import { type Decimal, sum, ZERO } from "../money.ts"
import { UnknownTarget } from "../errors.ts"
import type { Refusal } from "../errors.ts"
import { drawAllowance, planCoverage } from "../pricing/meters/Allowance.ts"
import { applyMoves, type BalanceState, type CustomerContext, type PurchaseContext } from "../pricing/meters/Context.ts"
import {
  type Metered,
  meterCredit,
  meterOutcomeCompletion,
  meterUnit,
  meterWallet,
  type UsageMeter
} from "../pricing/meters/Meters.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import type { BatchContext, Customer, DecodedSignal } from "../signals/BatchContext.ts"
import { meterSignal } from "../signals/MeterSignal.ts"
import type { Usage } from "../signals/Signal.ts"
import type { CheckMeter, CheckReason, HoldRequest } from "./Entitlement.ts"

/** An active hold, as read: what it keeps back of which balance. */
export interface ActiveHold {
  readonly id: string
  readonly meter: CheckMeter
  readonly targetId: string | null
  readonly amount: Decimal
}

/** The balance a usage-log meter draws: the plan component type of its target. */
const componentTypeOf: Record<UsageMeter, string | null> = {
  CREDIT: "CREDIT",
  OUTCOME_STEP: null,
  OUTCOME: "OUTCOME",
  UNIT: "UNIT",
  WALLET: null,
  COMPOSITE: "PRICING_METRIC"
}

/** The key of one target's balance: `CREDIT/crd_...`, `PRICING_METRIC/cmp_...`; the wallet is `WALLET`. */
export const balanceKey = (componentType: string, targetId: string | null) =>
  componentType === "WALLET" ? "WALLET" : `${componentType}/${targetId}`

export interface Simulated {
  readonly customer: Customer
  /** The customer's state after its queued signals: balances and wallet as the worker will leave them. */
  readonly state: CustomerContext
  /** The committed balance of each component of the current purchase (by component id), and the wallet's. */
  readonly committed: { readonly balances: ReadonlyMap<string, Decimal>; readonly wallet: Decimal }
  /** What the queued signals take of each balance (`balanceKey`): allowance and arrears alike, or wallet USD. */
  readonly pending: ReadonlyMap<string, Decimal>
  /** Holds named by a queued signal: that signal's cost is counted in `pending`, so the hold is not counted again. */
  readonly settling: ReadonlySet<string>
}

/**
 * Prices the customer's queued signals in order, as the drain would, moving
 * the in-memory balances. Signals of an ended cycle, or waiting for the
 * renewal, do not touch the current balances and are left out; a signal the
 * worker would refuse takes nothing.
 */
export const simulateQueued = (
  context: BatchContext,
  customer: Customer,
  queued: ReadonlyArray<DecodedSignal>
): Simulated => {
  const state = context.customerContext(customer)
  const committedBalances = new Map<string, Decimal>()
  for (const [id, balance] of state.purchase?.balances ?? []) committedBalances.set(id, balance.remaining)
  const committedWallet = state.wallet?.balance ?? ZERO
  const pending = new Map<string, Decimal>()
  // A draw always takes something (a meter's quantity is above 0); a wallet debit is added only when there is one.
  const add = (key: string, amount: Decimal) => pending.set(key, BigDecimal.sum(pending.get(key) ?? ZERO, amount))
  const settling = new Set<string>()
  // The steps' costs that the drain carries from a run's steps to its completion set only that completion's provider
  // cost, which no answer of the check holds: none are carried here.
  const noRunCosts = new Map<string, Decimal>()
  for (const signal of queued) {
    const record = signal.record
    if (signal.body.reservationId !== undefined) settling.add(signal.body.reservationId)
    if (record.member !== null && !context.isMember(record.organizationId, customer.id, record.member)) continue
    const cycle = context.cycleOf(record, customer)
    if (cycle._tag !== "Billed" || cycle.purchase !== state.purchase || state.purchase === null) continue
    const metered = meterSignal(signal, state, context, noRunCosts)
    if (Either.isLeft(metered)) continue
    const priced = metered.right
    const type = componentTypeOf[priced.entry.meter]
    if (priced.draw !== null) {
      applyMoves(state.purchase, priced.draw.moves)
      if (type !== null) {
        add(balanceKey(type, priced.entry.entitlementId), BigDecimal.sum(priced.draw.advanceQuantity, priced.draw.arrearQuantity))
      }
    }
    if (!BigDecimal.isZero(priced.walletDebit)) {
      if (state.wallet !== null) state.wallet.balance = BigDecimal.subtract(state.wallet.balance, priced.walletDebit)
      add("WALLET", priced.walletDebit)
    }
  }
  return { customer, state, committed: { balances: committedBalances, wallet: committedWallet }, pending, settling }
}

/** The holds that count: not named by a queued signal (whose own cost `pending` counts). */
export const countedHolds = (simulated: Simulated, holds: ReadonlyArray<ActiveHold>) =>
  holds.filter((hold) => !simulated.settling.has(hold.id))

/** What the check asks, decoded. */
export interface CheckAsk {
  readonly meter: CheckMeter
  readonly agentKey?: string | undefined
  readonly quantity?: Decimal | undefined
  readonly usage?: Usage | undefined
  readonly reserve?: HoldRequest | undefined
}

export interface Judgement {
  readonly allowed: boolean
  readonly reason: CheckReason | null
  readonly remaining: Decimal | null
  readonly pending: Decimal
  readonly held: Decimal
  readonly estimatedCost: Decimal | null
  /** The target's id (null for WALLET). */
  readonly targetId: string | null
  /** What a check with `reserve` holds when allowed (null without `reserve`). */
  readonly holdAmount: Decimal | null
}

/** The check's reason for a refusal of the meters; one that names no reason is the request's target unknown. */
export const reasonOf = (refusal: Refusal): Either.Either<CheckReason, UnknownTarget> => {
  switch (refusal._tag) {
    case "NoActivePlan":
      return Either.right("NO_ACTIVE_PLAN")
    case "NotOnPlan":
      return Either.right("NOT_ON_PLAN")
    case "OutOfAllowance":
      return Either.right("OUT_OF_ALLOWANCE")
    case "ModelNotEnabled":
      return Either.right("MODEL_NOT_ENABLED")
    case "CustomerArchived":
      return Either.right("CUSTOMER_ARCHIVED")
    case "UnknownTarget":
      return Either.left(refusal)
    default:
      // A customer resolved and no member named: the meters refuse with nothing else.
      return Either.left(new UnknownTarget({ message: refusal.message }))
  }
}

/** Far above any balance: the allowance a request is priced against to tell its cost whatever is left. */
const ROOM = BigDecimal.fromBigInt(10n ** 15n)

const advanceOf = (purchase: PurchaseContext | null, type: string, targetId: string | null): SnapshotComponent | undefined =>
  purchase?.snapshot.components.find((c) => c.type === type && c.targetId === targetId && c.billingMode === "ADVANCE")

/** The state with the target's prepaid balance set to `remaining` (a copy: the simulated state is not touched). */
const withAdvance = (state: CustomerContext, component: SnapshotComponent | undefined, remaining: Decimal): CustomerContext => {
  const purchase = state.purchase
  if (purchase === null || component === undefined) return state
  const balances = new Map<string, BalanceState>([...purchase.balances].map(([id, balance]) => [id, { ...balance }] as const))
  const own = balances.get(component.id)
  if (own !== undefined) own.remaining = remaining
  return { ...state, purchase: { ...purchase, balances } }
}

/**
 * Answers a check against the simulated state and the active holds:
 * allowed iff the meters price the request against the balance left after
 * the queued signals and the holds (for a prepaid target without an ARREAR
 * component: remaining - pending - held >= estimatedCost), and, when it
 * asks to hold an amount of its own, that amount fits the same way. A WALLET is
 * never refused for lack of funds.
 */
export const judge = (
  simulated: Simulated,
  context: BatchContext,
  holds: ReadonlyArray<ActiveHold>,
  ask: CheckAsk
): Either.Either<Judgement, UnknownTarget> =>
  Either.gen(function*() {
    const { customer, state } = simulated
    const catalogue = context.catalogue(customer.organizationId)
    const agentKey = ask.agentKey ?? ""
    const notLive = (kind: string) => new UnknownTarget({ message: `agentKey ${agentKey} is not a live ${kind} of this workspace` })
    const step = ask.meter === "OUTCOME" ? catalogue.outcomeStep(agentKey) : undefined
    const targetId = ask.meter === "CREDIT"
      ? catalogue.credit(agentKey)?.id ?? (yield* Either.left(notLive("credit")))
      : ask.meter === "OUTCOME"
      ? step?.outcomeId ?? (yield* Either.left(notLive("outcome step")))
      : ask.meter === "UNIT"
      ? catalogue.unit(agentKey)?.id ?? (yield* Either.left(notLive("unit")))
      : null
    const type = ask.meter
    const key = balanceKey(type, targetId)
    const counted = countedHolds(simulated, holds).filter((hold) => hold.meter === ask.meter && hold.targetId === targetId)
    const held = sum(counted.map((hold) => hold.amount))
    const pending = simulated.pending.get(key) ?? ZERO
    const advance = advanceOf(state.purchase, type, targetId)
    const remaining = type === "WALLET"
      ? simulated.committed.wallet
      : advance === undefined
      ? null
      : simulated.committed.balances.get(advance.id) ?? null

    const meterOf = (at: CustomerContext, usage: Usage | undefined = ask.usage): Metered => {
      switch (ask.meter) {
        case "CREDIT":
          return meterCredit({ agentKey, usage: usage!, runId: null, tag: undefined }, at, catalogue)
        case "OUTCOME":
          return meterOutcomeCompletion({
            runId: "",
            outcome: { outcomeId: step!.outcomeId, outcomeName: step!.outcomeName, agentKey },
            stepsCost: ZERO,
            ...(ask.quantity === undefined ? {} : { quantity: ask.quantity })
          }, at)
        case "UNIT":
          return meterUnit({ agentKey, quantity: ask.quantity, tag: undefined }, at, catalogue)
        case "WALLET":
          return meterWallet({ usage: usage!, tag: undefined }, at, catalogue)
      }
    }

    // The request's cost whatever is left: priced with room in the target's prepaid balance.
    const roomy = withAdvance(state, advance, ROOM)
    const estimate = meterOf(roomy)
    const estimatedCost = Either.isRight(estimate) ? estimate.right.entry.quantity : null

    // The verdict: priced against what the queued signals and the holds leave.
    const left = advance === undefined || state.purchase === null
      ? state
      : withAdvance(state, advance, BigDecimal.subtract(state.purchase.balances.get(advance.id)?.remaining ?? ZERO, held))
    const verdict = meterOf(left)
    let reason: CheckReason | null = customer.archivedAt !== null
      ? "CUSTOMER_ARCHIVED"
      : Either.isLeft(verdict)
      ? yield* reasonOf(verdict.left)
      : null

    let holdAmount: Decimal | null = null
    if (ask.reserve !== undefined && reason === null) {
      const asked = ask.reserve
      if (asked.usage !== undefined) {
        const priced = meterOf(roomy, asked.usage)
        if (Either.isLeft(priced)) reason = yield* reasonOf(priced.left)
        else holdAmount = priced.right.entry.quantity
      } else {
        holdAmount = asked.amount ?? asked.quantity ?? estimatedCost
      }
      // An amount of its own must fit the balance left, as the request must.
      if (
        reason === null && holdAmount !== null && BigDecimal.isPositive(holdAmount) && type !== "WALLET" && targetId !== null && left.purchase !== null &&
        planCoverage(left.purchase.snapshot, type, targetId) === "DIRECT"
      ) {
        const fits = drawAllowance(left.purchase, {
          organizationId: customer.organizationId,
          kind: type,
          targetId,
          quantity: holdAmount
        })
        if (Either.isLeft(fits)) reason = fits.left._tag === "NotOnPlan" ? "NOT_ON_PLAN" : "OUT_OF_ALLOWANCE"
      }
    }
    return {
      allowed: reason === null,
      reason,
      remaining,
      pending,
      held,
      estimatedCost,
      targetId,
      holdAmount: reason === null ? holdAmount : null
    }
  })
