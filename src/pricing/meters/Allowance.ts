/**
 * Drawing usage from a purchase (docs/billing.md "Metering"), as a pure function of the
 * purchase's snapshot and balances:
 * - A target is billed by a component of its own (CREDIT, OUTCOME, UNIT,
 *   PRICING_METRIC). A credit, outcome or unit with no component of its own but
 *   covered by a composite the plan sells is "billed by the composite": nothing
 *   moves here, the occurrence is billed on complete.
 * - ADVANCE is consumed first. What it cannot cover overflows to an ARREAR
 *   component of the same target; without one the whole signal is refused
 *   (out of allowance) and nothing moves. A composite's ADVANCE pool never
 *   refuses: occurrences beyond it are debt (remaining below zero) that the
 *   next cycle's grant absorbs.
 * - ARREAR charges accrue on the component for the cycle-end invoice, unless
 *   the plan has `walletFundedArrear`: then each charge is debited from the
 *   wallet at once (`walletDebit`).
 * - Prices are the snapshot's: pricePerOutcome, the composite price, the unit's
 *   tiers on the cycle's cumulative quantity. A credit's cost is priced by the
 *   caller; an ARREAR overflow of part of it is charged the same share.
 */
import { BigDecimal, Either } from "effect"
import { compositesCovering, type PlanSnapshot, type SnapshotComponent, unitPricingOf } from "../PlanSnapshot.ts"
import { type Decimal, divideTo, ZERO } from "../../money.ts"
import { unitCharge } from "../Pricing.ts"
import type { BalanceMove, PurchaseContext } from "./Context.ts"
import { InvalidUsage, NotOnPlan, OutOfAllowance } from "../../errors.ts"

export type AllowanceKind = "CREDIT" | "OUTCOME" | "UNIT" | "COMPOSITE"

export interface AllowanceRequest {
  readonly organizationId: string
  readonly kind: AllowanceKind
  /** The credit, outcome, unit or composite id. */
  readonly targetId: string
  /** Credits used, outcomes completed, units, or composite occurrences. Above zero. */
  readonly quantity: Decimal
  /** CREDIT only: the usage's customer cost. */
  readonly customerCost?: Decimal
}

export interface AllowanceDraw {
  readonly purchaseId: string
  /** ADVANCE, ARREAR, MIXED (the allowance ran out part-way), or COMPOSITE (nothing moved here). */
  readonly billingMode: "ADVANCE" | "ARREAR" | "MIXED" | "COMPOSITE"
  readonly advanceQuantity: Decimal
  readonly arrearQuantity: Decimal
  /** The usage at the customer price: what the usage-log row records. */
  readonly customerCost: Decimal
  /** The part of customerCost charged in arrears. */
  readonly arrearCharge: Decimal
  /** The ADVANCE allowance left afterwards; null when the plan has no ADVANCE component for it. */
  readonly remaining: Decimal | null
  readonly moves: ReadonlyArray<BalanceMove>
  /** What the purchase's `spent_this_cycle` grows by. */
  readonly spent: Decimal
  /** The wallet debit of a walletFundedArrear charge; zero otherwise. */
  readonly walletDebit: Decimal
}

const { sum: add, subtract, multiply, min, max } = BigDecimal

const componentTypeOf = (kind: AllowanceKind) => (kind === "COMPOSITE" ? "PRICING_METRIC" : kind)

const nothingMoved = (purchaseId: string): AllowanceDraw => ({
  purchaseId,
  billingMode: "COMPOSITE",
  advanceQuantity: ZERO,
  arrearQuantity: ZERO,
  customerCost: ZERO,
  arrearCharge: ZERO,
  remaining: null,
  moves: [],
  spent: ZERO,
  walletDebit: ZERO
})

export const drawAllowance = (
  purchase: PurchaseContext,
  request: AllowanceRequest
): Either.Either<AllowanceDraw, NotOnPlan | OutOfAllowance | InvalidUsage> => {
  const { kind, targetId, quantity, organizationId } = request
  if (!BigDecimal.isPositive(quantity)) return Either.left(new InvalidUsage({ message: "quantity must be above 0" }))
  const { snapshot } = purchase
  const components = snapshot.components.filter((c) => c.type === componentTypeOf(kind) && c.targetId === targetId)
  if (components.length === 0) {
    if (kind !== "COMPOSITE" && compositesCovering(snapshot, kind, targetId).length > 0) {
      return Either.right(nothingMoved(purchase.id))
    }
    return Either.left(new NotOnPlan({ message: `${kind.toLowerCase()} ${targetId} is not on the customer's plan` }))
  }
  const balanceOf = (component: SnapshotComponent | undefined) =>
    component === undefined ? undefined : purchase.balances.get(component.id)
  const advanceComponent = components.find((c) => c.billingMode === "ADVANCE")
  const arrearComponent = components.find((c) => c.billingMode === "ARREAR")
  const advance = balanceOf(advanceComponent)
  const arrear = balanceOf(arrearComponent)

  let advancePart = advance ? min(max(advance.remaining, ZERO), quantity) : ZERO
  let arrearPart = subtract(quantity, advancePart)
  if (BigDecimal.isPositive(arrearPart) && !arrear) {
    if (kind === "COMPOSITE" && advance) {
      advancePart = quantity
      arrearPart = ZERO
    } else {
      return Either.left(
        new OutOfAllowance({
          message: `Out of allowance: ${kind.toLowerCase()} ${targetId} has no prepaid balance left for this usage`
        })
      )
    }
  }

  const pricing = (advanceComponent ?? arrearComponent)!
  const usedBefore = add(advance?.cycleQuantity ?? ZERO, arrear?.cycleQuantity ?? ZERO)
  const priceOf = (count: Decimal) => BigDecimal.normalize(multiply(count, pricing.unitPrice ?? ZERO))
  let customerCost: Decimal
  let arrearCharge: Decimal
  switch (kind) {
    case "CREDIT":
      customerCost = request.customerCost ?? ZERO
      arrearCharge = BigDecimal.equals(arrearPart, quantity)
        ? customerCost
        : BigDecimal.isZero(arrearPart)
        ? ZERO
        : divideTo(multiply(customerCost, arrearPart), quantity)
      break
    case "UNIT":
      customerCost = unitCharge(unitPricingOf(pricing), usedBefore, quantity)
      arrearCharge = BigDecimal.isZero(arrearPart)
        ? ZERO
        : unitCharge(unitPricingOf(pricing), add(usedBefore, advancePart), arrearPart)
      break
    default:
      customerCost = priceOf(quantity)
      arrearCharge = priceOf(arrearPart)
  }

  // A late signal of an ended cycle moves that cycle's rows (cycle_balances).
  const cycle = purchase.closedCycle ? { closedCycle: purchase.cycleIndex } : {}
  const moves: Array<BalanceMove> = []
  let remaining: Decimal | null = null
  if (advance && !BigDecimal.isZero(advancePart)) {
    moves.push({
      organizationId,
      purchaseId: purchase.id,
      componentId: advance.componentId,
      granted: ZERO,
      used: advancePart,
      remaining: BigDecimal.negate(advancePart),
      cycleQuantity: advancePart,
      arrearAmount: ZERO,
      ...cycle
    })
    remaining = BigDecimal.normalize(subtract(advance.remaining, advancePart))
  } else if (advance) {
    remaining = advance.remaining
  }

  const funded = snapshot.walletFundedArrear
  let spent = ZERO
  let walletDebit = ZERO
  if (arrear && !BigDecimal.isZero(arrearPart)) {
    moves.push({
      organizationId,
      purchaseId: purchase.id,
      componentId: arrear.componentId,
      granted: ZERO,
      used: arrearPart,
      remaining: ZERO,
      cycleQuantity: arrearPart,
      arrearAmount: funded ? ZERO : arrearCharge,
      ...cycle
    })
    // An ended cycle's charges never count in the current cycle's spent_this_cycle.
    spent = purchase.closedCycle ? ZERO : arrearCharge
    if (funded) walletDebit = arrearCharge
  }

  return Either.right({
    purchaseId: purchase.id,
    billingMode: BigDecimal.isZero(arrearPart) ? "ADVANCE" : BigDecimal.isZero(advancePart) ? "ARREAR" : "MIXED",
    advanceQuantity: advancePart,
    arrearQuantity: arrearPart,
    customerCost,
    arrearCharge,
    remaining,
    moves,
    spent,
    walletDebit
  })
}

/**
 * How the plan sells a target: a component of its own, a composite that covers
 * it, or not at all.
 */
export const planCoverage = (
  snapshot: PlanSnapshot,
  kind: "CREDIT" | "OUTCOME" | "UNIT",
  targetId: string
): "DIRECT" | "COMPOSITE" | "NONE" =>
  snapshot.components.some((c) => c.type === kind && c.targetId === targetId)
    ? "DIRECT"
    : compositesCovering(snapshot, kind, targetId).length > 0
    ? "COMPOSITE"
    : "NONE"
