/**
 * What a meter reads: one customer's loaded state (purchase snapshot, balance
 * counters, wallet) and the workspace's live catalogue. The drain loads it once
 * per batch and keeps it current in memory as it prices the customer's signals
 * in order, so each signal sees the balances its predecessors left.
 */
import { BigDecimal } from "effect"
import type { PlanSnapshot } from "../PlanSnapshot.ts"
import type { Decimal } from "../../money.ts"
import type { ModelRates } from "../Pricing.ts"

/** One balance row of the purchase, as this batch has moved it so far. */
export interface BalanceState {
  readonly componentId: string
  remaining: Decimal
  cycleQuantity: Decimal
}

export interface PurchaseContext {
  readonly id: string
  readonly snapshot: PlanSnapshot
  /** The cycle these balances belong to (the purchase's current one, or an ended one). */
  readonly cycleIndex: number
  /**
   * True when the balances are an ended cycle's (`cycle_balances`): a late
   * signal of that cycle moves them, never the purchase's current ones.
   */
  readonly closedCycle: boolean
  /** By component id. */
  readonly balances: Map<string, BalanceState>
}

export interface WalletState {
  balance: Decimal
}

export interface CustomerContext {
  readonly organizationId: string
  readonly customerId: string
  readonly purchase: PurchaseContext | null
  /** Loaded (and locked) only when a signal of the batch may move it. */
  readonly wallet: WalletState | null
}

export interface CreditTarget {
  readonly id: string
  readonly name: string
  readonly basePrice: Decimal
  readonly tokensPerCredit: Decimal
  readonly marginPercent: Decimal
}

export interface StepTarget {
  readonly outcomeId: string
  readonly outcomeName: string
  readonly stepName: string
}

export interface UnitTarget {
  readonly id: string
  readonly name: string
}

export interface CompositeTarget {
  readonly id: string
  readonly name: string
  readonly refId: string
}

/** The live catalogue of one workspace, as far as the batch needs it. */
export interface Catalogue {
  readonly credit: (agentKey: string) => CreditTarget | undefined
  readonly outcomeStep: (agentKey: string) => StepTarget | undefined
  readonly unit: (agentKey: string) => UnitTarget | undefined
  readonly composite: (refId: string) => CompositeTarget | undefined
  /** An enabled model's rates. */
  readonly model: (modelId: string) => ModelRates | undefined
}

/**
 * A change of one balance row, as deltas. The ledger aggregates the moves of
 * a batch per row and writes each row once.
 */
export interface BalanceMove {
  readonly organizationId: string
  readonly purchaseId: string
  readonly componentId: string
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
  readonly cycleQuantity: Decimal
  readonly arrearAmount: Decimal
  /**
   * Set when the row is an ended cycle's (`cycle_balances`, that cycle's
   * index): the ledger moves that row, never the purchase's current one.
   */
  readonly closedCycle?: number
  /**
   * The usage-log row the move bills, when one does: named by a threshold
   * alert the move makes the balance reach (docs/webhooks.md).
   */
  readonly usageLogId?: string | null
}

/** Applies moves to the in-memory balances, so the next signal sees them. */
export const applyMoves = (purchase: PurchaseContext, moves: ReadonlyArray<BalanceMove>): void => {
  for (const move of moves) {
    const balance = purchase.balances.get(move.componentId)
    if (!balance) continue
    balance.remaining = BigDecimal.normalize(BigDecimal.sum(balance.remaining, move.remaining))
    balance.cycleQuantity = BigDecimal.normalize(BigDecimal.sum(balance.cycleQuantity, move.cycleQuantity))
  }
}
