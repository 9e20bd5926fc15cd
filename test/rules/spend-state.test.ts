/**
 * The check's spend state alone (src/entitlements/SpendState.ts,
 * docs/entitlements.md "The rule" and "How `pending` is computed"): the
 * customer's queued signals priced in memory in order, as the worker will, and
 * a check judged against what they and the active holds leave. The batch
 * context is built in memory here; exact decimals worked out by hand.
 */
import { BigDecimal, Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  type ActiveHold,
  balanceKey,
  type CheckAsk,
  countedHolds,
  judge,
  reasonOf,
  type Simulated,
  simulateQueued
} from "../../src/entitlements/SpendState.ts"
import {
  CustomerArchived,
  CustomerNotFound,
  InvalidUsage,
  ModelNotEnabled,
  NoActivePlan,
  NotOnPlan,
  OutOfAllowance,
  UnknownMember,
  UnknownTarget
} from "../../src/errors.ts"
import { type Decimal, decimal, ZERO } from "../../src/money.ts"
import type { Catalogue, CustomerContext, PurchaseContext } from "../../src/pricing/meters/Context.ts"
import type { PlanSnapshot, SnapshotComponent } from "../../src/pricing/PlanSnapshot.ts"
import type { BatchContext, Customer, DecodedSignal, SignalCycle, SignalRecord } from "../../src/signals/BatchContext.ts"
import { CUSTOMER, ORG, queued, snapshotComponent as component } from "./fixtures.ts"

const d = decimal
const text = (value: Decimal | null) => (value === null ? null : BigDecimal.format(BigDecimal.normalize(value)))



// A credit bundle costing 0.0055 a call: 1000 input and 500 output tokens of gpt-4o cost 0.0075, so 1.363636363636 credits.
const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
const CREDITS_OF_USAGE = "1.363636363636"
const USD_OF_USAGE = "0.0075"

const creditAdvance = component({ id: "cmp_cadv", type: "CREDIT", billingMode: "ADVANCE", targetId: "crd_1", quantity: d("10"), unitPrice: d("0.0066") })
const unitAdvance = component({ id: "cmp_uadv", type: "UNIT", billingMode: "ADVANCE", targetId: "unt_1", quantity: d("10"), pricingType: "FLAT", flatPrice: d("0.5") })
const unitArrear = component({ id: "cmp_uarr", type: "UNIT", billingMode: "ARREAR", targetId: "unt_1", pricingType: "FLAT", flatPrice: d("0.5") })
const outcomeAdvance = component({ id: "cmp_oadv", type: "OUTCOME", billingMode: "ADVANCE", targetId: "out_1", quantity: d("2"), unitPrice: d("1.5") })
const walletComponent = component({ id: "cmp_w", type: "WALLET", billingMode: "ADVANCE", amount: ZERO })
// A composite whose occurrences are billed from a pool of 5, covering the unit `labels`, which the plan does not sell alone.
const compositeAdvance = component({
  id: "cmp_tadv",
  type: "PRICING_METRIC",
  billingMode: "ADVANCE",
  targetId: "cps_1",
  quantity: d("5"),
  unitPrice: d("2"),
  covers: { credits: [], outcomes: [], units: ["unt_2"] }
})

const catalogue: Catalogue = {
  credit: (agentKey) =>
    agentKey === "chat"
      ? { id: "crd_1", name: "Chat", basePrice: d("0.0055"), tokensPerCredit: d("1000"), marginPercent: d("20") }
      : undefined,
  outcomeStep: (agentKey) => (agentKey === "draft" ? { outcomeId: "out_1", outcomeName: "Report", stepName: "Draft" } : undefined),
  unit: (agentKey) =>
    agentKey === "pages"
      ? { id: "unt_1", name: "Pages" }
      : agentKey === "labels"
      ? { id: "unt_2", name: "Labels" }
      : agentKey === "faxes"
      ? { id: "unt_3", name: "Faxes" }
      : undefined,
  composite: (refId) => (refId === "ticket" ? { id: "cps_1", name: "Ticket", refId: "ticket" } : undefined),
  model: (modelId) => (modelId === "gpt-4o" ? { input: d("2.5"), output: d("10"), cacheRead: d("1.25"), cacheWrite: null } : undefined)
}

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

/** A purchase whose balances start with the remaining given (cycle quantity 0). */
const purchase = (
  components: ReadonlyArray<SnapshotComponent>,
  remaining: Record<string, string>,
  { id = "pur_1", walletFundedArrear = false } = {}
): PurchaseContext => ({
  id,
  snapshot: snapshot(components, walletFundedArrear),
  cycleIndex: 0,
  closedCycle: false,
  balances: new Map(Object.entries(remaining).map(([componentId, value]) => [componentId, { componentId, remaining: d(value), cycleQuantity: ZERO }]))
})

interface World {
  readonly purchase: PurchaseContext | null
  readonly wallet?: string | null
  readonly customer?: Customer
  /** The cycle of a signal by id, when not the current purchase's. */
  readonly cycles?: Record<string, SignalCycle>
}

/** A batch context holding one customer, as the spend check loads it. */
const contextOf = (world: World): BatchContext => {
  const state: CustomerContext = {
    organizationId: ORG,
    customerId: CUSTOMER.id,
    purchase: world.purchase,
    wallet: world.wallet === undefined || world.wallet === null ? null : { balance: d(world.wallet) }
  }
  return {
    customerById: () => world.customer ?? CUSTOMER,
    customerByExternalId: () => world.customer ?? CUSTOMER,
    customerContext: () => state,
    cycleOf: (signal) => world.cycles?.[signal.id] ?? ({ _tag: "Billed", purchase: state.purchase } as SignalCycle),
    isMember: (organizationId, customerId, email) => organizationId === ORG && customerId === CUSTOMER.id && email === "ann@example.com",
    catalogue: () => catalogue,
    run: (organizationId, runId) =>
      runId === "run_1" ? { organizationId, runId, outcomeId: "out_1", outcomeName: "Report", agentKey: "draft" } : undefined,
    runCost: () => ZERO,
    occurrence: (organizationId, signalId) =>
      signalId.startsWith("sig_occ")
        ? { organizationId, signalId, compositeId: "cps_1", compositeName: "Ticket", refId: "ticket", value: "T-1", custom: null }
        : undefined,
    wallets: new Map()
  }
}

const units = (quantity: string, fields: Partial<SignalRecord> = {}, holdId?: string) =>
  queued("UNIT", { agentKey: "pages", quantity: d(quantity), ...(holdId === undefined ? {} : { reservationId: holdId }) }, fields)
const creditCall = (holdId?: string) =>
  queued("CREDIT", { agentKey: "chat", usage, ...(holdId === undefined ? {} : { reservationId: holdId }) })
const walletCall = () => queued("WALLET", { usage })

/** What `pending` holds, by balance key, as exact text. */
const pendingOf = (simulated: Simulated) =>
  Object.fromEntries([...simulated.pending].map(([key, amount]) => [key, text(amount)]))
const remainingIn = (state: CustomerContext, componentId: string) => text(state.purchase?.balances.get(componentId)?.remaining ?? null)

describe("a balance's key", () => {
  it("is the component type and target, and WALLET alone for the wallet", () => {
    expect(balanceKey("CREDIT", "crd_1")).toBe("CREDIT/crd_1")
    expect(balanceKey("PRICING_METRIC", "cps_1")).toBe("PRICING_METRIC/cps_1")
    expect(balanceKey("WALLET", null)).toBe("WALLET")
    expect(balanceKey("WALLET", "anything")).toBe("WALLET")
  })
})

describe("the reason a check names for a refusal of the meters", () => {
  it("is the refusal's own name, the worker's", () => {
    const reason = (refusal: Parameters<typeof reasonOf>[0]) => Either.getOrNull(reasonOf(refusal))
    expect(reason(new NoActivePlan({ message: "" }))).toBe("NO_ACTIVE_PLAN")
    expect(reason(new NotOnPlan({ message: "" }))).toBe("NOT_ON_PLAN")
    expect(reason(new OutOfAllowance({ message: "" }))).toBe("OUT_OF_ALLOWANCE")
    expect(reason(new ModelNotEnabled({ message: "" }))).toBe("MODEL_NOT_ENABLED")
    expect(reason(new CustomerArchived({ message: "" }))).toBe("CUSTOMER_ARCHIVED")
  })

  it("is none for an unknown target, which fails the check as it is", () => {
    const unknown = new UnknownTarget({ message: "agentKey x is not a live unit of this workspace" })
    const result = reasonOf(unknown)
    expect(Either.isLeft(result) && result.left).toBe(unknown)
  })

  it("is none for a refusal with no reason of its own: the check fails as an unknown target, with its message", () => {
    for (const refusal of [
      new InvalidUsage({ message: "quantity must be above 0" }),
      new CustomerNotFound({ message: "no such customer" }),
      new UnknownMember({ message: "no such member" })
    ]) {
      const result = reasonOf(refusal)
      expect(Either.isLeft(result) && { tag: result.left._tag, message: result.left.message }).toEqual({
        tag: "UnknownTarget",
        message: refusal.message
      })
    }
  })
})

describe("the queued signals, priced in memory (pending)", () => {
  it("counts what they take of a target, prepaid and in arrears alike", () => {
    const context = contextOf({ purchase: purchase([unitAdvance, unitArrear], { cmp_uadv: "10", cmp_uarr: "0" }) })
    const simulated = simulateQueued(context, CUSTOMER, [units("4"), units("4"), units("4")])
    // 10 from the prepaid balance, 2 overflowing to the ARREAR component: 12.
    expect(pendingOf(simulated)).toEqual({ "UNIT/unt_1": "12" })
    expect(remainingIn(simulated.state, "cmp_uadv")).toBe("0")
    // What was committed before them, as read.
    expect(Object.fromEntries([...simulated.committed.balances].map(([id, value]) => [id, text(value)]))).toEqual({
      cmp_uadv: "10",
      cmp_uarr: "0"
    })
  })

  it("prices each against the balances the earlier ones left; one the worker would refuse takes nothing", () => {
    const context = contextOf({ purchase: purchase([unitAdvance], { cmp_uadv: "10" }) })
    // 6 fits; the next 6 does not fit the 4 left (out of allowance, no ARREAR); the 4 after it does.
    const simulated = simulateQueued(context, CUSTOMER, [units("6"), units("6"), units("4")])
    expect(pendingOf(simulated)).toEqual({ "UNIT/unt_1": "10" })
    expect(remainingIn(simulated.state, "cmp_uadv")).toBe("0")
    expect(text(simulated.committed.balances.get("cmp_uadv") ?? null)).toBe("10")
  })

  it("keys credits, outcomes and composites by their balance; an outcome step takes nothing", () => {
    const context = contextOf({
      purchase: purchase([creditAdvance, outcomeAdvance, compositeAdvance], { cmp_cadv: "10", cmp_oadv: "2", cmp_tadv: "5" })
    })
    const simulated = simulateQueued(context, CUSTOMER, [
      creditCall(),
      queued("OUTCOME", { agentKey: "draft", usage }, { runId: "run_1" }),
      queued("OUTCOME_COMPLETE", {}, { runId: "run_1" }),
      queued("OUTCOME", { agentKey: "draft", usage }, { runId: "run_1" }),
      queued("COMPOSITE_COMPLETE", {}, { id: "sig_occ_1" }),
      creditCall()
    ])
    expect(pendingOf(simulated)).toEqual({
      "CREDIT/crd_1": "2.727272727272",
      "OUTCOME/out_1": "1",
      "PRICING_METRIC/cps_1": "1"
    })
  })

  it("counts a target billed by a composite in nothing: it moves no balance of its own", () => {
    const context = contextOf({ purchase: purchase([compositeAdvance], { cmp_tadv: "5" }) })
    const simulated = simulateQueued(context, CUSTOMER, [queued("UNIT", { agentKey: "labels", quantity: d("3") })])
    expect(pendingOf(simulated)).toEqual({})
  })

  it("counts the USD a wallet signal debits, and moves the wallet, not what was committed", () => {
    const context = contextOf({ purchase: purchase([walletComponent], {}), wallet: "5" })
    const simulated = simulateQueued(context, CUSTOMER, [walletCall(), walletCall()])
    expect(pendingOf(simulated)).toEqual({ WALLET: "0.015" })
    expect(text(simulated.state.wallet?.balance ?? null)).toBe("4.985")
    expect(text(simulated.committed.wallet)).toBe("5")
  })

  it("counts a wallet debit when no wallet was read (balance 0), leaving it unread", () => {
    const context = contextOf({ purchase: purchase([walletComponent], {}) })
    const simulated = simulateQueued(context, CUSTOMER, [walletCall()])
    expect(pendingOf(simulated)).toEqual({ WALLET: USD_OF_USAGE })
    expect(text(simulated.committed.wallet)).toBe("0")
    expect(simulated.state.wallet).toBeNull()
  })

  it("counts a wallet-funded arrears charge both in its target and in the wallet", () => {
    const context = contextOf({ purchase: purchase([unitArrear], { cmp_uarr: "0" }, { walletFundedArrear: true }), wallet: "3" })
    const simulated = simulateQueued(context, CUSTOMER, [units("2")])
    // 2 units in arrears at 0.5: 1 USD debited from the wallet at once.
    expect(pendingOf(simulated)).toEqual({ "UNIT/unt_1": "2", WALLET: "1" })
    expect(text(simulated.state.wallet?.balance ?? null)).toBe("2")
  })

  it("leaves out a member's signal unless the member is the customer's, and signals of another cycle", () => {
    const current = purchase([unitAdvance, unitArrear], { cmp_uadv: "10", cmp_uarr: "0" })
    const ended = purchase([unitAdvance], { cmp_uadv: "10" }, { id: "pur_0" })
    const waiting = units("100", { id: "sig_waiting" })
    const late = units("200", { id: "sig_late" })
    const context = contextOf({
      purchase: current,
      cycles: {
        sig_waiting: { _tag: "Waiting", purchaseId: "pur_1", periodEnd: new Date("2026-11-27T00:00:00.000Z") },
        sig_late: { _tag: "Billed", purchase: ended } as SignalCycle
      }
    })
    const simulated = simulateQueued(context, CUSTOMER, [
      units("1", { member: "bob@example.com" }),
      units("2", { member: "ann@example.com" }),
      waiting,
      late,
      units("4")
    ])
    expect(pendingOf(simulated)).toEqual({ "UNIT/unt_1": "6" })
    expect(remainingIn({ ...simulated.state, purchase: ended }, "cmp_uadv")).toBe("10")
  })

  it("counts nothing without a current purchase", () => {
    const context = contextOf({ purchase: null, wallet: "5" })
    const simulated = simulateQueued(context, CUSTOMER, [units("1"), walletCall()])
    expect(pendingOf(simulated)).toEqual({})
    expect(simulated.committed.balances.size).toBe(0)
    expect(text(simulated.committed.wallet)).toBe("5")
  })

  it("knows the holds the queued signals settle, counted or not, and counts only the other holds", () => {
    const context = contextOf({ purchase: purchase([unitAdvance], { cmp_uadv: "1" }) })
    // The second does not fit (refused by the worker): its hold is still being settled.
    const simulated = simulateQueued(context, CUSTOMER, [units("1", {}, "rsv_a"), units("5", {}, "rsv_b"), units("1")])
    expect([...simulated.settling].sort()).toEqual(["rsv_a", "rsv_b"])
    const hold = (id: string): ActiveHold => ({ id, meter: "UNIT", targetId: "unt_1", amount: d("1") })
    expect(countedHolds(simulated, [hold("rsv_a"), hold("rsv_c"), hold("rsv_b"), hold("rsv_d")]).map((h) => h.id)).toEqual(["rsv_c", "rsv_d"])
  })
})

/** The judgement of `ask` after `queue`, amounts as exact text. */
const judged = (world: World, queue: ReadonlyArray<DecodedSignal>, holds: ReadonlyArray<ActiveHold>, ask: CheckAsk) => {
  const context = contextOf(world)
  const simulated = simulateQueued(context, world.customer ?? CUSTOMER, queue)
  const result = judge(simulated, context, holds, ask)
  if (Either.isLeft(result)) return { refused: result.left._tag, message: result.left.message }
  const j = result.right
  return {
    allowed: j.allowed,
    reason: j.reason,
    remaining: text(j.remaining),
    pending: text(j.pending),
    held: text(j.held),
    estimatedCost: text(j.estimatedCost),
    targetId: j.targetId,
    holdAmount: text(j.holdAmount)
  }
}

const unitHold = (id: string, amount: string, fields: Partial<ActiveHold> = {}): ActiveHold => ({ id, meter: "UNIT", targetId: "unt_1", amount: d(amount), ...fields })
const prepaidUnits = () => ({ purchase: purchase([unitAdvance], { cmp_uadv: "10" }) })

describe("a check, judged on what the queue and the holds leave", () => {
  it("allows a prepaid target iff remaining - pending - held >= estimatedCost, to the last unit", () => {
    const queue = () => [units("3")]
    const holds = [unitHold("rsv_1", "2")]
    // 10 - 3 - 2 = 5: five fit, 5.000001 do not.
    expect(judged(prepaidUnits(), queue(), holds, { meter: "UNIT", agentKey: "pages", quantity: d("5") })).toEqual({
      allowed: true,
      reason: null,
      remaining: "10",
      pending: "3",
      held: "2",
      estimatedCost: "5",
      targetId: "unt_1",
      holdAmount: null
    })
    expect(judged(prepaidUnits(), queue(), holds, { meter: "UNIT", agentKey: "pages", quantity: d("5.000001") })).toEqual({
      allowed: false,
      reason: "OUT_OF_ALLOWANCE",
      remaining: "10",
      pending: "3",
      held: "2",
      estimatedCost: "5.000001",
      targetId: "unt_1",
      holdAmount: null
    })
  })

  it("counts only the holds on the same meter and target, and not a hold a queued signal settles", () => {
    const holds = [
      unitHold("rsv_1", "2"),
      unitHold("rsv_other_target", "7", { targetId: "unt_9" }),
      unitHold("rsv_other_meter", "7", { meter: "CREDIT", targetId: "unt_1" }),
      unitHold("rsv_settling", "4"),
      unitHold("rsv_2", "0.5")
    ]
    // The queued signal settling rsv_settling counts 3 in pending; its hold of 4 no longer counts.
    expect(judged(prepaidUnits(), [units("3", {}, "rsv_settling")], holds, { meter: "UNIT", agentKey: "pages", quantity: d("4.5") }))
      .toMatchObject({ allowed: true, pending: "3", held: "2.5" })
    expect(judged(prepaidUnits(), [units("3", {}, "rsv_settling")], holds, { meter: "UNIT", agentKey: "pages", quantity: d("4.6") }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE" })
  })

  it("allows past the prepaid balance when an ARREAR component takes the overflow, with pending counting both", () => {
    const world = { purchase: purchase([unitAdvance, unitArrear], { cmp_uadv: "10", cmp_uarr: "0" }) }
    expect(judged(world, [units("8"), units("4")], [unitHold("rsv_1", "3")], { meter: "UNIT", agentKey: "pages", quantity: d("50") }))
      .toEqual({
        allowed: true,
        reason: null,
        remaining: "10",
        pending: "12",
        held: "3",
        estimatedCost: "50",
        targetId: "unt_1",
        holdAmount: null
      })
  })

  it("tells a request's whole cost even when the balance left cannot cover it", () => {
    expect(judged(prepaidUnits(), [units("9")], [], { meter: "UNIT", agentKey: "pages", quantity: d("6") }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", remaining: "10", pending: "9", estimatedCost: "6" })
  })

  it("prices credits at the purchase's terms; a queued credit call and a hold leave less", () => {
    const world = () => ({ purchase: purchase([creditAdvance], { cmp_cadv: "4" }) })
    const ask: CheckAsk = { meter: "CREDIT", agentKey: "chat", usage }
    // 4 - 1.363636363636 - 1.272727272728 = 1.363636363636: exactly one more call.
    const hold = [{ id: "rsv_1", meter: "CREDIT" as const, targetId: "crd_1", amount: d("1.272727272728") }]
    expect(judged(world(), [creditCall()], hold, ask)).toEqual({
      allowed: true,
      reason: null,
      remaining: "4",
      pending: CREDITS_OF_USAGE,
      held: "1.272727272728",
      estimatedCost: CREDITS_OF_USAGE,
      targetId: "crd_1",
      holdAmount: null
    })
    const more = [{ ...hold[0]!, amount: d("1.272727272729") }]
    expect(judged(world(), [creditCall()], more, ask)).toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE" })
  })

  it("judges an outcome by its step's key, one outcome unless a quantity is asked", () => {
    const world = () => ({ purchase: purchase([outcomeAdvance], { cmp_oadv: "2" }) })
    const completion = () => queued("OUTCOME_COMPLETE", {}, { runId: "run_1" })
    expect(judged(world(), [completion()], [], { meter: "OUTCOME", agentKey: "draft" })).toEqual({
      allowed: true,
      reason: null,
      remaining: "2",
      pending: "1",
      held: "0",
      estimatedCost: "1",
      targetId: "out_1",
      holdAmount: null
    })
    expect(judged(world(), [completion()], [], { meter: "OUTCOME", agentKey: "draft", quantity: d("2") }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", estimatedCost: "2" })
  })

  it("never refuses a WALLET for funds: remaining is the committed wallet, pending what queued signals debit", () => {
    const world = { purchase: purchase([walletComponent], {}), wallet: "0.001" }
    const holds: Array<ActiveHold> = [
      { id: "rsv_w", meter: "WALLET", targetId: null, amount: d("0.25") },
      { id: "rsv_u", meter: "UNIT", targetId: "unt_1", amount: d("9") }
    ]
    expect(judged(world, [walletCall()], holds, { meter: "WALLET", usage })).toEqual({
      allowed: true,
      reason: null,
      remaining: "0.001",
      pending: USD_OF_USAGE,
      held: "0.25",
      estimatedCost: USD_OF_USAGE,
      targetId: null,
      holdAmount: null
    })
  })

  it("has no remaining for a target without a prepaid balance: ARREAR only, or billed by a composite", () => {
    const arrearOnly = { purchase: purchase([unitArrear], { cmp_uarr: "0" }) }
    expect(judged(arrearOnly, [units("2")], [], { meter: "UNIT", agentKey: "pages", quantity: d("1000") }))
      .toMatchObject({ allowed: true, reason: null, remaining: null, pending: "2", estimatedCost: "1000" })
    const composite = { purchase: purchase([compositeAdvance], { cmp_tadv: "0" }) }
    expect(judged(composite, [], [], { meter: "UNIT", agentKey: "labels", quantity: d("3") }))
      .toMatchObject({ allowed: true, reason: null, remaining: null, pending: "0", estimatedCost: "3", targetId: "unt_2" })
  })

  it("reads the prepaid balance of the target asked, not another of the same kind", () => {
    const otherUnit = component({ id: "cmp_u2adv", type: "UNIT", billingMode: "ADVANCE", targetId: "unt_3", quantity: d("3"), pricingType: "FLAT", flatPrice: d("1") })
    const world = { purchase: purchase([unitAdvance, otherUnit], { cmp_uadv: "10", cmp_u2adv: "3" }) }
    expect(judged(world, [units("1")], [], { meter: "UNIT", agentKey: "faxes", quantity: d("3") }))
      .toMatchObject({ allowed: true, remaining: "3", pending: "0", estimatedCost: "3", targetId: "unt_3" })
    expect(judged(world, [units("1")], [], { meter: "UNIT", agentKey: "faxes", quantity: d("4") }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", remaining: "3" })
  })

  it("has no remaining when the prepaid balance row is missing, and counts it as empty", () => {
    // Never so in the database (every component has its row): the check then refuses rather than guess.
    const world = { purchase: purchase([unitAdvance], {}) }
    expect(judged(world, [], [], { meter: "UNIT", agentKey: "pages", quantity: d("1") }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", remaining: null, estimatedCost: null })
  })

  it("names the reason of a refusal as the worker's refusal", () => {
    const ask: CheckAsk = { meter: "UNIT", agentKey: "faxes", quantity: d("1") }
    expect(judged(prepaidUnits(), [], [], ask)).toEqual({
      allowed: false,
      reason: "NOT_ON_PLAN",
      remaining: null,
      pending: "0",
      held: "0",
      estimatedCost: null,
      targetId: "unt_3",
      holdAmount: null
    })
    expect(judged({ purchase: null }, [], [], { meter: "UNIT", agentKey: "pages", quantity: d("1") }))
      .toMatchObject({ allowed: false, reason: "NO_ACTIVE_PLAN", remaining: null, estimatedCost: null })
    expect(judged({ purchase: purchase([walletComponent], {}) }, [], [], { meter: "WALLET", usage: { model: "o9" } }))
      .toMatchObject({ allowed: false, reason: "MODEL_NOT_ENABLED", remaining: "0", estimatedCost: null })
  })

  it("refuses an archived customer, still telling the cost", () => {
    const archived = { ...CUSTOMER, archivedAt: new Date("2026-11-01T00:00:00.000Z") }
    expect(judged({ ...prepaidUnits(), customer: archived }, [], [], { meter: "UNIT", agentKey: "pages", quantity: d("1") }))
      .toMatchObject({ allowed: false, reason: "CUSTOMER_ARCHIVED", remaining: "10", estimatedCost: "1" })
  })

  it("fails with an unknown target when the agentKey names nothing live of the kind asked", () => {
    const world = prepaidUnits()
    expect(judged(world, [], [], { meter: "CREDIT", agentKey: "pages", usage })).toEqual({
      refused: "UnknownTarget",
      message: "agentKey pages is not a live credit of this workspace"
    })
    expect(judged(world, [], [], { meter: "OUTCOME", agentKey: "chat" })).toEqual({
      refused: "UnknownTarget",
      message: "agentKey chat is not a live outcome step of this workspace"
    })
    expect(judged(world, [], [], { meter: "UNIT", agentKey: "chat" })).toEqual({
      refused: "UnknownTarget",
      message: "agentKey chat is not a live unit of this workspace"
    })
    expect(judged(world, [], [], { meter: "UNIT" })).toEqual({
      refused: "UnknownTarget",
      message: "agentKey  is not a live unit of this workspace"
    })
  })

  it("fails, as an unknown target, a request the meters refuse as invalid", () => {
    expect(judged(prepaidUnits(), [], [], { meter: "UNIT", agentKey: "pages", quantity: d("0") })).toEqual({
      refused: "UnknownTarget",
      message: "quantity must be above 0"
    })
  })
})

describe("a reserving check", () => {
  const holdUnits = (quantity: string | undefined, ask = "1") =>
    judged(prepaidUnits(), [units("3")], [unitHold("rsv_1", "2")], {
      meter: "UNIT",
      agentKey: "pages",
      quantity: d(ask),
      reserve: { ttlSeconds: 60, ...(quantity === undefined ? {} : { quantity: d(quantity) }) }
    })

  it("holds its own estimatedCost when it names no amount", () => {
    expect(holdUnits(undefined, "4")).toMatchObject({ allowed: true, holdAmount: "4", estimatedCost: "4" })
  })

  it("holds a quantity of its own when it fits the balance left (10 - 3 - 2 = 5), and refuses one that does not", () => {
    expect(holdUnits("5")).toMatchObject({ allowed: true, reason: null, holdAmount: "5" })
    expect(holdUnits("5.5")).toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", holdAmount: null })
  })

  it("refuses a hold of a target the plan does not sell at all", () => {
    // The request itself is judged first: an unsold unit is NOT_ON_PLAN before any hold.
    expect(judged(prepaidUnits(), [], [], { meter: "UNIT", agentKey: "faxes", quantity: d("1"), reserve: { ttlSeconds: 60, quantity: d("1") } }))
      .toMatchObject({ allowed: false, reason: "NOT_ON_PLAN", holdAmount: null })
  })

  it("holds past the prepaid balance when an ARREAR component takes the overflow", () => {
    const world = { purchase: purchase([unitAdvance, unitArrear], { cmp_uadv: "10", cmp_uarr: "0" }) }
    expect(judged(world, [units("9")], [], { meter: "UNIT", agentKey: "pages", quantity: d("1"), reserve: { ttlSeconds: 60, quantity: d("30") } }))
      .toMatchObject({ allowed: true, holdAmount: "30" })
  })

  it("holds a target billed by a composite without a balance to fit", () => {
    const world = { purchase: purchase([compositeAdvance], { cmp_tadv: "0" }) }
    expect(judged(world, [], [], { meter: "UNIT", agentKey: "labels", quantity: d("1"), reserve: { ttlSeconds: 60, quantity: d("30") } }))
      .toMatchObject({ allowed: true, holdAmount: "30" })
  })

  it("holds the price of a model call named, and refuses one the workspace cannot price", () => {
    const world = () => ({ purchase: purchase([creditAdvance], { cmp_cadv: "4" }) })
    const twice = { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 }
    expect(judged(world(), [], [], { meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60, usage: twice } }))
      .toMatchObject({ allowed: true, estimatedCost: CREDITS_OF_USAGE, holdAmount: "2.727272727273" })
    expect(judged(world(), [], [], { meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60, usage: { ...twice, model: "o9" } } }))
      .toMatchObject({ allowed: false, reason: "MODEL_NOT_ENABLED", holdAmount: null })
    // 4 credits: three calls' worth fit, not more.
    expect(judged(world(), [], [], { meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60, usage: { ...twice, inputTokens: 6000, outputTokens: 3000 } } }))
      .toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE", holdAmount: null })
  })

  it("allows a hold that comes to zero (a call of no tokens), with nothing to fit", () => {
    const world = { purchase: purchase([creditAdvance], { cmp_cadv: "4" }) }
    expect(judged(world, [], [], { meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60, usage: { model: "gpt-4o" } } }))
      .toMatchObject({ allowed: true, reason: null, holdAmount: "0" })
  })

  it("holds an amount of USD on the wallet whatever its balance", () => {
    const world = { purchase: purchase([walletComponent], {}), wallet: "1" }
    expect(judged(world, [], [], { meter: "WALLET", usage, reserve: { ttlSeconds: 60, amount: d("25") } }))
      .toMatchObject({ allowed: true, holdAmount: "25", remaining: "1" })
  })

  it("holds nothing when the check is refused, and keeps the check's reason", () => {
    expect(judged({ purchase: null }, [], [], { meter: "UNIT", agentKey: "pages", quantity: d("1"), reserve: { ttlSeconds: 60 } }))
      .toMatchObject({ allowed: false, reason: "NO_ACTIVE_PLAN", holdAmount: null })
    // The hold's own usage names a model the workspace does not enable: the check's reason stands.
    const archived = { ...CUSTOMER, archivedAt: new Date("2026-11-01T00:00:00.000Z") }
    const world = { purchase: purchase([creditAdvance], { cmp_cadv: "4" }), customer: archived }
    expect(judged(world, [], [], { meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60, usage: { model: "o9" } } }))
      .toMatchObject({ allowed: false, reason: "CUSTOMER_ARCHIVED", holdAmount: null })
  })

  it("leaves the simulated state as it was", () => {
    const context = contextOf(prepaidUnits())
    const simulated = simulateQueued(context, CUSTOMER, [units("3")])
    judge(simulated, context, [unitHold("rsv_1", "2")], { meter: "UNIT", agentKey: "pages", quantity: d("1"), reserve: { ttlSeconds: 60, quantity: d("4") } })
    expect(remainingIn(simulated.state, "cmp_uadv")).toBe("7")
  })
})
