/**
 * Metering: the one door through which usage moves a customer's balances.
 * This is the contract the signal pipeline (src/signals/) codes against.
 *
 * Every function here runs INSIDE THE CALLER'S TRANSACTION (wrap the whole
 * signal, its usage-log row and this call in one `sql.withTransaction`): it
 * takes row locks (`FOR SHARE` on the purchase, `FOR UPDATE` on the balance
 * rows and the wallet, always in that order) so any number of workers meter
 * the same customer in parallel and the counters stay exact. A failure
 * (422) writes nothing, provided the caller lets it roll the transaction back.
 *
 * The rules (DESIGN.md §4, §5):
 * - Only the customer's ACTIVE purchase meters; none is 422 "no active plan".
 * - A target is billed by a component of its own (CREDIT, OUTCOME, UNIT,
 *   PRICING_METRIC) on the purchase's frozen snapshot. A credit, outcome or unit
 *   with no component of its own but covered by a composite component is
 *   "billed by the composite": nothing moves here (`billingMode: "COMPOSITE"`),
 *   the occurrence is billed by `meter({ kind: "COMPOSITE" })` on complete.
 *   A target neither sold nor covered is 422.
 * - ADVANCE is consumed first. What it cannot cover overflows to an ARREAR
 *   component of the same target when the plan has one; otherwise the whole
 *   signal is refused with 422 "out of allowance" and nothing is written.
 *   Exception: a composite's ADVANCE pool never refuses. Occurrences beyond it
 *   are debt (its `remaining` goes below zero) deducted from the next cycle's grant.
 * - ARREAR charges accrue on the component and are invoiced at the cycle end,
 *   unless the plan has `walletFundedArrear`: then each charge is debited from
 *   the wallet at once (ledger type USAGE_LOG with the usageLogId, webhook
 *   source USAGE); the wallet may go negative.
 * - Prices are the snapshot's: pricePerOutcome, the composite price, the unit's
 *   pricing on the cycle's cumulative quantity (`unitCharge(pricing, Q, q)`).
 *   Credits are priced by the caller from live model rates (`customerCost`);
 *   an ARREAR overflow of part of a credit signal is charged the same share of
 *   that cost.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option } from "effect"
import { findAll, findOne } from "../db/Sql.ts"
import { BadRequest, Unprocessable } from "../errors.ts"
import { type Decimal, divideTo, toSql, ZERO } from "../money.ts"
import { unitCharge } from "../pricing/Pricing.ts"
import { BalanceRow, PurchaseRow } from "./Purchase.ts"
import { compositesCovering, type PlanSnapshot, type SnapshotComponent, unitPricingOf } from "./Snapshot.ts"
import { Wallets } from "./Wallets.ts"

export type MeterKind = "CREDIT" | "OUTCOME" | "UNIT" | "COMPOSITE"

export interface MeterRequest {
  readonly organizationId: string
  readonly customerId: string
  readonly kind: MeterKind
  /** The credit, outcome, unit or composite id (not the agentKey). */
  readonly targetId: string
  /**
   * Credits used, outcomes completed (1 per completed run), units (the signal's
   * `quantity`, fractions allowed) or composite occurrences (1 per occurrence).
   * Must be above zero.
   */
  readonly quantity: Decimal
  /** CREDIT only: the signal's customer cost (providerCost with the credit's margin). */
  readonly customerCost?: Decimal
  /** The usage-log row this signal writes; carried on wallet ledger rows it causes. */
  readonly usageLogId: string | null
  readonly at?: Date
}

export interface MeterResult {
  readonly purchaseId: string
  /**
   * ADVANCE: all from the prepaid allowance. ARREAR: all charged in arrears.
   * MIXED: the allowance ran out part-way and the rest overflowed to ARREAR.
   * COMPOSITE: billed by a composite component; nothing moved here.
   */
  readonly billingMode: "ADVANCE" | "ARREAR" | "MIXED" | "COMPOSITE"
  readonly advanceQuantity: Decimal
  readonly arrearQuantity: Decimal
  /** The usage at the customer price (what the usage-log row records as customerCost). */
  readonly customerCost: Decimal
  /** The part of customerCost charged in arrears (invoiced, or debited from the wallet). */
  readonly arrearCharge: Decimal
  /** The ADVANCE allowance left after this signal; null when the plan has no ADVANCE component for it. */
  readonly remaining: Decimal | null
  /** The wallet balance after a walletFundedArrear debit; null when the wallet did not move. */
  readonly walletBalance: Decimal | null
}

/** The customer's current purchase with its frozen snapshot. */
export interface CurrentPurchase {
  readonly id: string
  readonly customerId: string
  readonly planId: string
  readonly snapshot: PlanSnapshot
  readonly periodStart: Date
  readonly periodEnd: Date
}

const { sum: add, subtract, multiply, min, max } = BigDecimal

const componentTypeOf = (kind: MeterKind) => (kind === "COMPOSITE" ? "PRICING_METRIC" : kind)

export class Metering extends Effect.Service<Metering>()("Metering", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const wallets = yield* Wallets

    const activeRow = (organizationId: string, customerId: string, lock: boolean) =>
      findOne(
        PurchaseRow,
        lock
          ? sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                  AND status = 'ACTIVE' FOR SHARE`
          : sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                  AND status = 'ACTIVE'`
      )

    /**
     * The customer's ACTIVE purchase and its snapshot, or None. Use it to answer
     * "no active plan" (422) and "agentKey not sold on the plan nor covered by a
     * composite that is" (422) before metering: see `planComponentFor`.
     */
    const currentPurchase = (organizationId: string, customerId: string) =>
      Effect.map(
        activeRow(organizationId, customerId, false),
        Option.map((row): CurrentPurchase => ({
          id: row.id,
          customerId: row.customerId,
          planId: row.planId,
          snapshot: row.snapshot,
          periodStart: row.periodStart!,
          periodEnd: row.periodEnd!
        }))
      )

    /**
     * Meters one signal against the ACTIVE purchase (see the module comment for
     * the rules). Fails with 422 for no active plan, a target not on the plan,
     * or out of allowance, and 400 for a quantity not above zero; then nothing was written.
     */
    const meter = (request: MeterRequest) =>
      Effect.gen(function*() {
        const { organizationId, customerId, kind, targetId, quantity } = request
        const at = request.at ?? new Date()
        if (!BigDecimal.isPositive(quantity)) {
          return yield* new BadRequest({ message: "quantity must be above 0" })
        }
        const purchase = yield* activeRow(organizationId, customerId, true)
        if (Option.isNone(purchase)) {
          return yield* new Unprocessable({ message: `Customer ${customerId} has no active plan` })
        }
        const { snapshot } = purchase.value
        const purchaseId = purchase.value.id
        const components = snapshot.components.filter((c) =>
          c.type === componentTypeOf(kind) && c.targetId === targetId
        )
        if (components.length === 0) {
          if (kind !== "COMPOSITE" && compositesCovering(snapshot, kind, targetId).length > 0) {
            return {
              purchaseId,
              billingMode: "COMPOSITE",
              advanceQuantity: ZERO,
              arrearQuantity: ZERO,
              customerCost: ZERO,
              arrearCharge: ZERO,
              remaining: null,
              walletBalance: null
            } satisfies MeterResult
          }
          return yield* new Unprocessable({ message: `${kind.toLowerCase()} ${targetId} is not on the customer's plan` })
        }
        const rows = yield* findAll(
          BalanceRow,
          sql`SELECT * FROM purchase_balances
              WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}
                AND ${sql.in("component_id", components.map((c) => c.id))}
              ORDER BY component_id FOR UPDATE`
        )
        const rowOf = (component: SnapshotComponent | undefined) =>
          component && rows.find((row) => row.componentId === component.id)
        const advanceComponent = components.find((c) => c.billingMode === "ADVANCE")
        const arrearComponent = components.find((c) => c.billingMode === "ARREAR")
        const advance = rowOf(advanceComponent)
        const arrear = rowOf(arrearComponent)

        let advancePart = advance ? min(max(advance.remaining, ZERO), quantity) : ZERO
        let arrearPart = subtract(quantity, advancePart)
        if (BigDecimal.isPositive(arrearPart) && !arrear) {
          if (kind === "COMPOSITE" && advance) {
            advancePart = quantity
            arrearPart = ZERO
          } else {
            return yield* new Unprocessable({
              message: `Out of allowance: ${kind.toLowerCase()} ${targetId} has no prepaid balance left for this usage`
            })
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

        let remaining: Decimal | null = null
        if (advance && !BigDecimal.isZero(advancePart)) {
          const after = BigDecimal.normalize(subtract(advance.remaining, advancePart))
          yield* Effect.orDie(sql`UPDATE purchase_balances SET
                used = used + ${toSql(advancePart)}::numeric,
                remaining = ${toSql(after)}::numeric,
                cycle_quantity = cycle_quantity + ${toSql(advancePart)}::numeric
              WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}
                AND component_id = ${advance.componentId}`)
          remaining = after
        } else if (advance) {
          remaining = advance.remaining
        }

        let walletBalance: Decimal | null = null
        if (arrear && !BigDecimal.isZero(arrearPart)) {
          const funded = snapshot.walletFundedArrear
          yield* Effect.orDie(sql`UPDATE purchase_balances SET
                used = used + ${toSql(arrearPart)}::numeric,
                cycle_quantity = cycle_quantity + ${toSql(arrearPart)}::numeric,
                arrear_amount = arrear_amount + ${funded ? "0" : toSql(arrearCharge)}::numeric
              WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}
                AND component_id = ${arrear.componentId}`)
          yield* Effect.orDie(sql`UPDATE purchases SET spent_this_cycle = spent_this_cycle + ${toSql(arrearCharge)}::numeric
              WHERE organization_id = ${organizationId} AND id = ${purchaseId}`)
          if (funded && !BigDecimal.isZero(arrearCharge)) {
            const moved = yield* wallets.move(organizationId, customerId, BigDecimal.negate(arrearCharge), {
              type: "USAGE_LOG",
              usageLogId: request.usageLogId,
              purchaseId,
              at
            })
            walletBalance = moved.balance
          }
        }

        return {
          purchaseId,
          billingMode: BigDecimal.isZero(arrearPart) ? "ADVANCE" : BigDecimal.isZero(advancePart) ? "ARREAR" : "MIXED",
          advanceQuantity: advancePart,
          arrearQuantity: arrearPart,
          customerCost,
          arrearCharge,
          remaining,
          walletBalance
        } satisfies MeterResult
      })

    /**
     * A wallet signal: debits exactly `amount` (the provider cost) from the
     * ordinary Wallet. Never refused for funds; the wallet may go negative.
     * Needs no plan. Writes a USAGE_LOG ledger row carrying `usageLogId` and the
     * webhook events (source USAGE). Returns the balance after.
     */
    const debitWallet = (
      organizationId: string,
      customerId: string,
      amount: Decimal,
      options: { readonly usageLogId: string | null; readonly at?: Date }
    ) =>
      Effect.gen(function*() {
        const purchase = yield* activeRow(organizationId, customerId, true)
        if (Option.isSome(purchase)) {
          yield* Effect.orDie(sql`UPDATE purchases SET spent_this_cycle = spent_this_cycle + ${toSql(amount)}::numeric
              WHERE organization_id = ${organizationId} AND id = ${purchase.value.id}`)
        }
        const moved = yield* wallets.move(organizationId, customerId, BigDecimal.negate(amount), {
          type: "USAGE_LOG",
          usageLogId: options.usageLogId,
          purchaseId: Option.isSome(purchase) ? purchase.value.id : null,
          ...(options.at ? { at: options.at } : {})
        })
        return { previousBalance: moved.previousBalance, balance: moved.balance }
      })

    return { currentPurchase, meter, debitWallet } as const
  })
}) {}

/**
 * How the current plan sells a target: a component of its own, a composite
 * that covers it, or not at all (the signal is 422). For the signal intake's
 * early checks; `meter` applies the same rule.
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
