/**
 * The threshold alerts' rule (docs/webhooks.md "Threshold alerts"), alone: the
 * level a prepaid balance's used share is at, and which thresholds a set of
 * balance moves reaches. Pure: the ledger's statement finds the rows that rose
 * (src/ledger/Ledger.ts) and the outbox keeps each (balance, cycle, threshold)
 * once (src/webhooks/Outbox.ts); what fires between the two is decided here.
 */
import { BigDecimal } from "effect"
import { type Decimal, HUNDRED } from "../money.ts"
import type { BalanceMove } from "../pricing/meters/Context.ts"
import { type BalanceKind, type ThresholdCrossing, USED_THRESHOLDS } from "../webhooks/ThresholdCrossing.ts"

export { USED_THRESHOLDS, type UsedThreshold } from "../webhooks/ThresholdCrossing.ts"

/** The thresholds, highest first, with their factors as decimals (made once: the walk calls `usedLevel` a move). */
const THRESHOLD_FACTORS = [...USED_THRESHOLDS].reverse().map((threshold) => [threshold, BigDecimal.fromBigInt(BigInt(threshold))] as const)

/**
 * The highest threshold (percent of `granted` used) a prepaid balance is at, 0
 * below the lowest one or when nothing is granted (0, or less after a
 * composite's carried debt). The ledger's statement filters its rows by the
 * same rule in SQL.
 */
export const usedLevel = (granted: Decimal, used: Decimal): number => {
  if (!BigDecimal.isPositive(granted)) return 0
  const usedTimes100 = BigDecimal.multiply(used, HUNDRED)
  for (const [threshold, factor] of THRESHOLD_FACTORS) {
    if (BigDecimal.greaterThanOrEqualTo(usedTimes100, BigDecimal.multiply(granted, factor))) return threshold
  }
  return 0
}

/** How the API names a balance's kind: the plan's `PRICING_METRIC` component is a composite. */
export const balanceKindOf = (componentType: string): BalanceKind =>
  componentType === "PRICING_METRIC" ? "COMPOSITE" : componentType as BalanceKind

/**
 * A current prepaid balance row the moves raised past a threshold, as the
 * ledger's statement returns it: its values after all the moves, and what the
 * moves added to them in all (`...Moved`).
 */
export interface RaisedRow {
  readonly organizationId: string
  readonly purchaseId: string
  readonly componentId: string
  readonly customerId: string
  readonly externalId: string | null
  readonly type: string
  readonly targetId: string
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
  readonly grantedMoved: Decimal
  readonly usedMoved: Decimal
  readonly remainingMoved: Decimal
  readonly cycleIndex: number
  readonly periodStart: Date
  readonly periodEnd: Date
}

const rowKey = (row: { organizationId: string; purchaseId: string; componentId: string }) =>
  `${row.organizationId}/${row.purchaseId}/${row.componentId}`

/**
 * The thresholds the moves reached on the raised rows, at `at`. Each row is
 * walked from its value before the moves through its moves in the order given,
 * so each threshold names the move (and usage-log row) that reached it and the
 * values just after; one move that reaches several thresholds reaches each of
 * them, lowest first. A threshold the row was at before the moves, or already
 * reached by an earlier move of the walk, is not reached again; an ended
 * cycle's move (`closedCycle`) and a row that did not rise reach nothing.
 */
export const thresholdsReached = (
  raised: ReadonlyArray<RaisedRow>,
  moves: ReadonlyArray<BalanceMove>,
  at: Date
): Array<ThresholdCrossing> => {
  type Walk = { readonly row: RaisedRow; granted: Decimal; used: Decimal; remaining: Decimal; reached: number }
  const walks = new Map<string, Walk>()
  for (const row of raised) {
    const granted = BigDecimal.subtract(row.granted, row.grantedMoved)
    const used = BigDecimal.subtract(row.used, row.usedMoved)
    walks.set(rowKey(row), {
      row,
      granted,
      used,
      remaining: BigDecimal.subtract(row.remaining, row.remainingMoved),
      reached: usedLevel(granted, used)
    })
  }
  const crossings: Array<ThresholdCrossing> = []
  for (const move of moves) {
    if (move.closedCycle !== undefined) continue
    const walk = walks.get(rowKey(move))
    if (walk === undefined) continue
    walk.granted = BigDecimal.sum(walk.granted, move.granted)
    walk.used = BigDecimal.sum(walk.used, move.used)
    walk.remaining = BigDecimal.sum(walk.remaining, move.remaining)
    const level = usedLevel(walk.granted, walk.used)
    for (const threshold of USED_THRESHOLDS) {
      if (threshold <= walk.reached || threshold > level) continue
      const { row } = walk
      crossings.push({
        organizationId: row.organizationId,
        customerId: row.customerId,
        externalId: row.externalId,
        purchaseId: row.purchaseId,
        componentId: row.componentId,
        balanceType: balanceKindOf(row.type),
        balanceId: row.targetId,
        cycleIndex: row.cycleIndex,
        periodStart: row.periodStart,
        periodEnd: row.periodEnd,
        threshold,
        granted: BigDecimal.normalize(walk.granted),
        used: BigDecimal.normalize(walk.used),
        remaining: BigDecimal.normalize(walk.remaining),
        usageLogId: move.usageLogId ?? null,
        at
      })
    }
    walk.reached = Math.max(walk.reached, level)
  }
  return crossings
}
