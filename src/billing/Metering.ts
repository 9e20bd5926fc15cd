/**
 * Metering one usage outside the signal drain (tests, tools): the same pure
 * allowance rules the drain uses (src/signals/meters/Allowance.ts), on the
 * customer's locked purchase and balances, written through the ledger. It runs
 * INSIDE THE CALLER'S TRANSACTION; a refusal writes nothing.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Either, Option } from "effect"
import { findAll, findOne } from "../db/Sql.ts"
import { Ledger } from "../ledger/Ledger.ts"
import type { Decimal } from "../money.ts"
import { type AllowanceDraw, type AllowanceKind, drawAllowance } from "../signals/meters/Allowance.ts"
import type { PurchaseContext } from "../signals/meters/Context.ts"
import { NoActivePlan } from "../errors.ts"
import { BalanceRow, PurchaseRow } from "./Purchase.ts"
import type { PlanSnapshot } from "./Snapshot.ts"

export { planCoverage } from "../signals/meters/Allowance.ts"

export type MeterKind = AllowanceKind

export interface MeterRequest {
  readonly organizationId: string
  readonly customerId: string
  readonly kind: MeterKind
  /** The credit, outcome, unit or composite id (not the agentKey). */
  readonly targetId: string
  /** Credits used, outcomes completed, units, or composite occurrences. Above zero. */
  readonly quantity: Decimal
  /** CREDIT only: the usage's customer cost. */
  readonly customerCost?: Decimal
  /** The usage-log row this usage writes; carried on wallet ledger rows it causes. */
  readonly usageLogId: string | null
  readonly at?: Date
}

export interface MeterResult extends Omit<AllowanceDraw, "moves" | "spent" | "walletDebit"> {
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

export class Metering extends Effect.Service<Metering>()("Metering", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger

    const activeRow = (organizationId: string, customerId: string, lock: boolean) =>
      findOne(
        PurchaseRow,
        lock
          ? sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                  AND status = 'ACTIVE' FOR NO KEY UPDATE`
          : sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                  AND status = 'ACTIVE'`
      )

    /** The customer's ACTIVE purchase and its snapshot, or None. */
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

    /** The locked purchase with its locked balances, as the meters read it. */
    const lockedContext = (organizationId: string, customerId: string) =>
      Effect.gen(function*() {
        const purchase = yield* activeRow(organizationId, customerId, true)
        if (Option.isNone(purchase)) return Option.none<PurchaseContext>()
        const rows = yield* findAll(
          BalanceRow,
          sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId} AND purchase_id = ${purchase.value.id}
              ORDER BY component_id FOR UPDATE`
        )
        return Option.some<PurchaseContext>({
          id: purchase.value.id,
          snapshot: purchase.value.snapshot,
          cycleIndex: purchase.value.cycleIndex,
          closedCycle: false,
          balances: new Map(rows.map((row) => [row.componentId, {
            componentId: row.componentId,
            remaining: row.remaining,
            cycleQuantity: row.cycleQuantity
          }]))
        })
      })

    /** Meters one usage against the ACTIVE purchase; a refusal writes nothing. */
    const meter = (request: MeterRequest) =>
      Effect.gen(function*() {
        const { organizationId, customerId } = request
        const context = yield* lockedContext(organizationId, customerId)
        if (Option.isNone(context)) {
          return yield* new NoActivePlan({ message: `Customer ${customerId} has no active plan` })
        }
        const draw = drawAllowance(context.value, request)
        if (Either.isLeft(draw)) return yield* draw.left
        const { moves, spent, walletDebit, ...result } = draw.right
        yield* ledger.moveBalances(moves)
        yield* ledger.addSpent([{ organizationId, purchaseId: result.purchaseId, amount: spent }])
        let walletBalance: Decimal | null = null
        if (!BigDecimal.isZero(walletDebit)) {
          const moved = yield* ledger.moveWallet({
            organizationId,
            customerId,
            delta: BigDecimal.negate(walletDebit),
            type: "USAGE_LOG",
            usageLogId: request.usageLogId,
            purchaseId: result.purchaseId,
            ...(request.at ? { at: request.at } : {})
          })
          walletBalance = moved.balance
        }
        return { ...result, walletBalance } satisfies MeterResult
      })

    /**
     * A wallet usage: debits exactly `amount` from the ordinary Wallet, never
     * refused for funds. Returns the balance after.
     */
    const debitWallet = (
      organizationId: string,
      customerId: string,
      amount: Decimal,
      options: { readonly usageLogId: string | null; readonly at?: Date }
    ) =>
      Effect.gen(function*() {
        const purchase = yield* activeRow(organizationId, customerId, true)
        const purchaseId = Option.isSome(purchase) ? purchase.value.id : null
        if (purchaseId !== null) yield* ledger.addSpent([{ organizationId, purchaseId, amount }])
        const moved = yield* ledger.moveWallet({
          organizationId,
          customerId,
          delta: BigDecimal.negate(amount),
          type: "USAGE_LOG",
          usageLogId: options.usageLogId,
          purchaseId,
          ...(options.at ? { at: options.at } : {})
        })
        return { previousBalance: moved.previousBalance, balance: moved.balance }
      })

    return { currentPurchase, meter, debitWallet } as const
  })
}) {}
