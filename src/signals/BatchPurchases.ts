/**
 * The ACTIVE purchases of a batch's customers and their balance rows, locked
 * for the drain (purchases first, then balances, in key order), as the
 * purchase contexts the meters price against. Both statements are shaped for
 * their plans: each key found by an index probe of its own, then locked by
 * primary key in key order.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "@effect/sql"
import { BalanceRow, PurchaseRow } from "../billing/Purchase.ts"
import { findAll } from "../db/Sql.ts"
import type { PurchaseContext } from "../pricing/meters/Context.ts"
import { Timestamp } from "../schema.ts"
import type { Customer } from "./BatchCustomers.ts"
import { type LockClause, pairs, scoped } from "./BatchKeys.ts"
import { prepared } from "../db/Prepared.ts"

/** A customer's ACTIVE purchase and its current cycle. */
export const ActivePurchaseRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  customerId: Schema.String,
  cycleIndex: Schema.Number,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  snapshot: PurchaseRow.fields.snapshot
})
export type ActivePurchaseRow = typeof ActivePurchaseRow.Type

/** A balance row of an ACTIVE purchase's current cycle. */
const ActiveBalanceRow = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  componentId: Schema.String,
  remaining: BalanceRow.fields.remaining,
  cycleQuantity: BalanceRow.fields.cycleQuantity
})

export interface ActivePurchases {
  /** A customer's ACTIVE purchase as read, by `scoped(organizationId, customerId)`. */
  readonly rowOf: Map<string, ActivePurchaseRow>
  /** Its purchase context, balances included, by `scoped(organizationId, customerId)`. */
  readonly contextOf: Map<string, PurchaseContext>
}

export const loadActivePurchases = (
  sql: SqlClient.SqlClient,
  locked: LockClause,
  customers: Iterable<Customer>
) =>
  Effect.gen(function*() {
    const live = pairs([...customers].map((c) => [c.organizationId, c.id] as const))

    // Their ACTIVE purchases and balance rows, locked: purchases first, then balances, in key order.
    // Each is found by one index probe a key (a LATERAL subquery of its own), then locked by primary
    // key in key order: the keys found (`found`, sorted) lead a nested loop whose inner side locks, so
    // rows are locked in that order. As a semi-join of the table against the keys, the planner read
    // and hashed every ACTIVE purchase of the database for each batch once the table had statistics
    // (docs/benchmarks.md "Many customers at once").
    const purchases = live.size === 0 ? [] : yield* findAll(
      ActivePurchaseRow,
      prepared(sql)`WITH found AS MATERIALIZED (
            SELECT f.organization_id, f.id
            FROM unnest(${live.organizations}::text[], ${live.keys}::text[]) AS k(organization_id, customer_id)
            CROSS JOIN LATERAL (
              SELECT p.organization_id, p.id FROM purchases p
              WHERE p.status = 'ACTIVE' AND p.organization_id = k.organization_id AND p.customer_id = k.customer_id
              OFFSET 0) f
            ORDER BY f.organization_id, f.id)
          SELECT p.organization_id, p.id, p.customer_id, p.cycle_index, p.period_start, p.period_end, p.snapshot
          FROM found CROSS JOIN LATERAL (
            -- By primary key alone: with the status here too, the planner may take the one-live-purchase index
            -- on the organisation and filter the id, every purchase of the workspace a key. The status is
            -- asked of the row as locked (its latest version), outside.
            SELECT organization_id, id, customer_id, cycle_index, period_start, period_end, snapshot, status FROM purchases
            WHERE organization_id = found.organization_id AND id = found.id
            OFFSET 0 ${locked("FOR NO KEY UPDATE")}) p
          WHERE p.status = 'ACTIVE'
          ORDER BY p.organization_id, p.id`
    )
    const purchasePairs = pairs(purchases.map((p) => [p.organizationId, p.id] as const))
    const balances = purchasePairs.size === 0 ? [] : yield* findAll(
      ActiveBalanceRow,
      prepared(sql)`WITH found AS MATERIALIZED (
            SELECT f.organization_id, f.purchase_id, f.component_id
            FROM unnest(${purchasePairs.organizations}::text[], ${purchasePairs.keys}::text[]) AS k(organization_id, purchase_id)
            CROSS JOIN LATERAL (
              SELECT b.organization_id, b.purchase_id, b.component_id FROM purchase_balances b
              WHERE b.organization_id = k.organization_id AND b.purchase_id = k.purchase_id OFFSET 0) f
            ORDER BY f.organization_id, f.purchase_id, f.component_id)
          SELECT b.* FROM found CROSS JOIN LATERAL (
            SELECT organization_id, purchase_id, component_id, remaining, cycle_quantity FROM purchase_balances
            WHERE organization_id = found.organization_id AND purchase_id = found.purchase_id
              AND component_id = found.component_id
            OFFSET 0 ${locked("FOR UPDATE")}) b
          ORDER BY b.organization_id, b.purchase_id, b.component_id`
    )
    const purchaseOf = new Map<string, PurchaseContext>()
    const activeOf = new Map<string, ActivePurchaseRow>()
    for (const purchase of purchases) {
      activeOf.set(scoped(purchase.organizationId, purchase.customerId), purchase)
      purchaseOf.set(scoped(purchase.organizationId, purchase.customerId), {
        id: purchase.id,
        snapshot: purchase.snapshot,
        cycleIndex: purchase.cycleIndex,
        closedCycle: false,
        balances: new Map()
      })
    }
    const purchaseById = new Map(purchases.map((p) => [scoped(p.organizationId, p.id), purchaseOf.get(scoped(p.organizationId, p.customerId))!]))
    for (const row of balances) {
      purchaseById.get(scoped(row.organizationId, row.purchaseId))?.balances.set(row.componentId, {
        componentId: row.componentId,
        remaining: row.remaining,
        cycleQuantity: row.cycleQuantity
      })
    }
    const loaded: ActivePurchases = { rowOf: activeOf, contextOf: purchaseOf }
    return loaded
  })
