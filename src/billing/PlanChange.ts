/**
 * A plan change that takes effect NOW, computed in memory like a renewal
 * (Renewal.ts), with no database access: the caller (Purchases.change) loads
 * and locks the purchase, its balance rows and the organisation's active
 * taxes, then writes the step with the same code as the cycle job (`write`):
 * balance rows, the PRORATION invoice, the wallet postings through the ledger.
 *
 * The rules (docs/billing.md "Changing plans"):
 * - the billing anchor and the cycle stay; the share of the cycle left is
 *   counted in whole seconds (`prorationShare`);
 * - one PRORATION invoice: the unused share of the old plan's price (its
 *   `cost`, what the PLAN invoice charged) credited, the new plan's price for
 *   the rest of the cycle charged, each rounded to the cent; the old plan's
 *   ARREAR usage so far (one line per component, as at a cycle end); the debt
 *   of a composite only the old plan sells (its occurrences beyond the pool,
 *   at the old price); the active taxes on the subtotal;
 * - balances: every old row is replaced by the new plan's rows. A prepaid
 *   (ADVANCE) component both plans sell keeps what was used and moves by the
 *   new quantity's share left minus the old quantity's share left (never
 *   below zero, but for a composite's debt); a component new to the plan is
 *   granted its quantity's share left; tiers (`cycleQuantity`) carry over for
 *   a component both plans sell; what only the old plan sold is dropped;
 * - the wallet: the new plan's wallet amount's share left minus the old one's
 *   is posted (PLAN_CHANGE); a positive total is auto-paid as any invoice; a
 *   negative total (a net credit) is credited to the wallet (PLAN_CHANGE) and
 *   the invoice is issued PAID.
 */
import { BigDecimal } from "effect"
import { makeId } from "../ids.ts"
import type { BalanceValues } from "../ledger/Ledger.ts"
import { type Decimal, ZERO } from "../money.ts"
import type { PlanSnapshot, SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import type { LineInput } from "./InvoiceTotals.ts"
import { arrearLines, autoPay, issue, type NewId, type CycleStep, type RenewalState, type WalletStep } from "./Renewal.ts"

const { sum: add, subtract, max } = BigDecimal

/** The share of a cycle left at `at`: whole seconds left (the second under way counts as used) of the cycle's seconds. */
export interface Share {
  readonly remaining: bigint
  readonly length: bigint
}

export const prorationShare = (periodStart: Date, periodEnd: Date, at: Date): Share => {
  const length = Math.round((periodEnd.getTime() - periodStart.getTime()) / 1000)
  const left = Math.floor((periodEnd.getTime() - at.getTime()) / 1000)
  return { remaining: BigInt(Math.max(0, Math.min(length, left))), length: BigInt(Math.max(1, length)) }
}

/**
 * `amount × remaining / length`, rounded half away from zero to `scale`
 * places, exactly (integer arithmetic: the quotient of a share is rarely a
 * finite decimal).
 */
export const prorate = (amount: Decimal, share: Share, scale: number): Decimal => {
  const a = BigDecimal.normalize(amount)
  // amount = a.value / 10^a.scale; result × 10^scale = a.value × remaining × 10^scale / (10^a.scale × length)
  let numerator = a.value * share.remaining
  let denominator = share.length
  const shift = scale - a.scale
  if (shift >= 0) numerator *= 10n ** BigInt(shift)
  else denominator *= 10n ** BigInt(-shift)
  const negative = numerator < 0n
  const magnitude = negative ? -numerator : numerator
  let quotient = magnitude / denominator
  if ((magnitude % denominator) * 2n >= denominator) quotient += 1n
  return BigDecimal.normalize(BigDecimal.make(negative ? -quotient : quotient, scale))
}

/** Money is prorated to the cent; allowances to the 12 places usage keeps. */
const MONEY_SCALE = 2
const QUANTITY_SCALE = 12

const day = (date: Date) => date.toISOString().slice(0, 10)

/** Whether two components sell the same thing the same way: a balance row carries from one to the other. */
const sameSale = (
  a: { readonly type: string; readonly targetId: string | null; readonly billingMode: string },
  b: { readonly type: string; readonly targetId: string | null; readonly billingMode: string }
) => a.type === b.type && a.targetId === b.targetId && a.billingMode === b.billingMode

const walletAmount = (snapshot: PlanSnapshot) =>
  snapshot.components
    .filter((c) => c.type === "WALLET" && c.billingMode === "ADVANCE")
    .reduce((total, c) => add(total, c.amount ?? ZERO), ZERO)

const componentOf = (snapshot: PlanSnapshot, id: string): SnapshotComponent | undefined =>
  snapshot.components.find((c) => c.id === id)

/**
 * The lines of the PRORATION invoice: the unused share of the old plan
 * credited, the new plan's share charged, the old plan's ARREAR usage so far
 * and the occurrences beyond the pool of a composite the new plan does not
 * sell.
 */
const prorationLines = (state: RenewalState, to: PlanSnapshot, share: Share, at: Date, periodEnd: Date): Array<LineInput> => {
  const from = state.purchase.snapshot
  const period = `${day(at)} to ${day(periodEnd)}`
  const lines: Array<LineInput> = [
    {
      description: `Unused time on ${from.name} (${period})`,
      componentId: null,
      quantity: null,
      unitPrice: null,
      amount: BigDecimal.negate(prorate(from.cost, share, MONEY_SCALE))
    },
    {
      description: `Remaining time on ${to.name} (${period})`,
      componentId: null,
      quantity: null,
      unitPrice: null,
      amount: prorate(to.cost, share, MONEY_SCALE)
    },
    ...arrearLines((id) => componentOf(from, id), state.balances)
  ]
  for (const row of state.balances) {
    if (row.type !== "PRICING_METRIC" || row.billingMode !== "ADVANCE" || !BigDecimal.isNegative(row.remaining)) continue
    if (to.components.some((c) => sameSale(c, row))) continue
    const component = componentOf(from, row.componentId)
    const quantity = BigDecimal.normalize(BigDecimal.negate(row.remaining))
    const price = component?.unitPrice ?? ZERO
    lines.push({
      description: `${component?.targetName ?? row.componentId} (occurrences beyond the pool)`,
      componentId: row.componentId,
      quantity,
      unitPrice: price,
      amount: BigDecimal.normalize(BigDecimal.multiply(quantity, price))
    })
  }
  return lines
}

/**
 * The balance rows of the new plan for the rest of the cycle, from the old
 * rows (which are all replaced).
 */
const changedBalances = (state: RenewalState, to: PlanSnapshot, share: Share) => {
  const { organizationId, purchase } = state
  const pool = [...state.balances]
  const rows: Array<BalanceValues> = []
  const carried: Array<{ readonly from: string; readonly to: string }> = []
  for (const component of to.components) {
    if (component.type === "WALLET") continue
    const index = pool.findIndex((row) => sameSale(component, row))
    const old = index < 0 ? undefined : pool.splice(index, 1)[0]
    if (old !== undefined) carried.push({ from: old.componentId, to: component.id })
    const quantity = component.quantity ?? ZERO
    const advance = component.billingMode === "ADVANCE"
    let granted = ZERO
    let used = ZERO
    let remaining = ZERO
    if (advance) {
      const newShare = prorate(quantity, share, QUANTITY_SCALE)
      if (old === undefined) {
        granted = newShare
        remaining = newShare
      } else {
        const oldQuantity = componentOf(purchase.snapshot, old.componentId)?.quantity ?? ZERO
        const delta = subtract(newShare, prorate(oldQuantity, share, QUANTITY_SCALE))
        used = old.used
        remaining = add(old.remaining, delta)
        // A prepaid balance never goes below zero; a composite's pool may (its debt, deducted from the next grant).
        if (component.type !== "PRICING_METRIC") remaining = max(remaining, ZERO)
        granted = add(used, remaining)
      }
    } else if (old !== undefined) {
      used = old.used
    }
    rows.push({
      organizationId,
      purchaseId: purchase.id,
      componentId: component.id,
      customerId: purchase.customerId,
      type: component.type,
      billingMode: component.billingMode,
      targetId: component.targetId,
      granted: BigDecimal.normalize(granted),
      used: BigDecimal.normalize(used),
      remaining: BigDecimal.normalize(remaining),
      originalGranted: advance ? quantity : null,
      cycleQuantity: old?.cycleQuantity ?? ZERO,
      arrearAmount: ZERO
    })
  }
  return { rows, carried }
}

/**
 * The step of a change NOW, at `at`, of an ACTIVE purchase in its cycle to
 * the plan frozen as `to`: the PRORATION invoice, the new balance rows, the
 * wallet moves. The purchase stays in its cycle (`cycle` null).
 */
export const planChange = (state: RenewalState, to: PlanSnapshot, at: Date, newId: NewId = makeId): CycleStep => {
  const { organizationId, purchase } = state
  const periodStart = purchase.periodStart ?? purchase.billingDate
  const periodEnd = purchase.periodEnd ?? at
  const share = prorationShare(periodStart, periodEnd, at)
  const invoice = issue(state, newId, {
    kind: "PRORATION",
    periodStart: at.getTime() < periodEnd.getTime() ? at : periodEnd,
    periodEnd,
    cycleIndex: purchase.cycleIndex,
    lines: prorationLines(state, to, share, at, periodEnd),
    at
  })
  const balances = changedBalances(state, to, share)
  const walletSteps: Array<WalletStep> = []
  const walletShare = BigDecimal.normalize(
    subtract(prorate(walletAmount(to), share, MONEY_SCALE), prorate(walletAmount(purchase.snapshot), share, MONEY_SCALE))
  )
  if (!BigDecimal.isZero(walletShare)) {
    walletSteps.push({
      _tag: "Post",
      type: "PLAN_CHANGE",
      amount: walletShare,
      at,
      invoiceId: invoice.id,
      notes: `Wallet amount of ${to.name} for the rest of the cycle, less ${purchase.snapshot.name}'s`
    })
  }
  if (BigDecimal.isNegative(invoice.totals.total)) {
    walletSteps.push({
      _tag: "Post",
      type: "PLAN_CHANGE",
      amount: BigDecimal.negate(invoice.totals.total),
      at,
      invoiceId: invoice.id,
      notes: `Net credit of the change from ${purchase.snapshot.name} to ${to.name}`
    })
  } else {
    walletSteps.push(...autoPay(state, invoice))
  }
  return {
    organizationId,
    purchaseId: purchase.id,
    customerId: purchase.customerId,
    cycle: null,
    createBalances: balances.rows,
    setBalances: [],
    replaceBalances: true,
    carried: balances.carried,
    invoices: [invoice],
    walletSteps,
    endedCycle: null,
    lateBilled: [],
    changedTo: to,
    changedFrom: purchase.snapshot
  }
}
