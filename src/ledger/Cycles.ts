/**
 * The money a purchase's cycles hold, written by the ledger: a purchase
 * entering a cycle (its spent-this-cycle back to zero), the balance rows an
 * ended cycle keeps (`cycle_balances`), and how much of their arrears
 * invoices hold (`invoiced_arrear`: a late row billed on a USAGE invoice, a
 * grace period's drafts finalised). The cycle job's step writer sends the
 * statements in its one `writeTogether` (src/billing/StepWriter.ts), the
 * finalisation runs its own (src/billing/DraftInvoices.ts); always in the
 * caller's transaction, which holds the rows' locks. Callers hand over plain
 * rows.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { insertRowsStatement, orDie } from "../db/Sql.ts"
import { type Decimal, toSql } from "../money.ts"
import { balanceColumns, type BalanceValues } from "./Ledger.ts"

/** A purchase entering a cycle: ACTIVE in its period from `at`, with nothing spent yet. */
export interface CycleEntry {
  readonly organizationId: string
  readonly purchaseId: string
  readonly cycle: { readonly index: number; readonly start: Date; readonly end: Date; readonly at: Date }
  /** The plan a scheduled change moves it to, and that plan's snapshot as JSON text; null: it keeps its own. */
  readonly planId: string | null
  readonly snapshot: string | null
}

/**
 * The UPDATE moving purchases into their cycles (status, period,
 * spent-this-cycle 0; the plan of a change applied now, its schedule
 * cleared), for `writeTogether`; undefined when none enters one. With
 * `returning`, the purchases come back whole.
 */
export const enterCyclesStatement = (sql: SqlClient.SqlClient, entries: ReadonlyArray<CycleEntry>, returning: boolean) =>
  entries.length === 0 ? undefined : sql`UPDATE purchases AS p SET status = 'ACTIVE',
              cycle_index = v.cycle_index, period_start = v.period_start, period_end = v.period_end,
              spent_this_cycle = 0, updated_at = v.at,
              plan_id = coalesce(v.plan_id, p.plan_id), snapshot = coalesce(v.snapshot::jsonb, p.snapshot),
              scheduled_plan_id = CASE WHEN v.plan_id IS NULL THEN p.scheduled_plan_id END,
              scheduled_snapshot = CASE WHEN v.plan_id IS NULL THEN p.scheduled_snapshot END
            FROM unnest(
              ${entries.map((e) => e.organizationId)}::text[], ${entries.map((e) => e.purchaseId)}::text[],
              ${entries.map((e) => e.cycle.index)}::int[],
              ${entries.map((e) => e.cycle.start.toISOString())}::timestamptz[],
              ${entries.map((e) => e.cycle.end.toISOString())}::timestamptz[],
              ${entries.map((e) => e.cycle.at.toISOString())}::timestamptz[],
              ${entries.map((e) => e.planId)}::text[], ${entries.map((e) => e.snapshot)}::text[]
            ) AS v(organization_id, id, cycle_index, period_start, period_end, at, plan_id, snapshot)
            WHERE p.organization_id = v.organization_id AND p.id = v.id
            ${sql.literal(returning ? "RETURNING p.*" : "")}`

/**
 * A balance row of an ended cycle as its end records it: `remaining` is what
 * is left to the cycle's late usage; `invoicedArrear` what of its arrears
 * the cycle's invoice holds (all of them when the cycle is FINAL at once, 0
 * while its invoice is a DRAFT).
 */
export interface EndedBalanceValues extends Omit<BalanceValues, "organizationId" | "purchaseId" | "originalGranted"> {
  readonly invoicedArrear: Decimal
}

/** An ended cycle of a purchase with its balance rows. */
export interface EndedCycleBalances {
  readonly organizationId: string
  readonly purchaseId: string
  readonly cycleIndex: number
  readonly balances: ReadonlyArray<EndedBalanceValues>
}

/** The INSERT of the ended cycles' balance rows (`cycle_balances`), for `writeTogether`; undefined when there are none. */
export const endedCycleBalancesStatement = (sql: SqlClient.SqlClient, ended: ReadonlyArray<EndedCycleBalances>) =>
  insertRowsStatement(sql, "cycle_balances", ended.flatMap((cycle) =>
    cycle.balances.map((row) => ({
      organizationId: cycle.organizationId,
      purchaseId: cycle.purchaseId,
      cycleIndex: cycle.cycleIndex,
      ...balanceColumns(row),
      invoicedArrear: toSql(row.invoicedArrear)
    }))
  ))

/** A late row of an ended cycle a USAGE invoice billed: all of its arrears are invoiced now. */
export interface BilledLateArrear {
  readonly organizationId: string
  readonly purchaseId: string
  readonly cycleIndex: number
  readonly componentId: string
  readonly arrearAmount: Decimal
}

/** The UPDATE setting the billed late rows' invoiced_arrear to their arrears, for `writeTogether`; undefined for none. */
export const invoiceLateArrearsStatement = (sql: SqlClient.SqlClient, billed: ReadonlyArray<BilledLateArrear>) =>
  billed.length === 0 ? undefined : sql`UPDATE cycle_balances AS cb SET invoiced_arrear = v.amount
            FROM unnest(
              ${billed.map((row) => row.organizationId)}::text[], ${billed.map((row) => row.purchaseId)}::text[],
              ${billed.map((row) => row.cycleIndex)}::int[], ${billed.map((row) => row.componentId)}::text[],
              ${billed.map((row) => toSql(row.arrearAmount))}::numeric[]
            ) AS v(organization_id, purchase_id, cycle_index, component_id, amount)
            WHERE cb.organization_id = v.organization_id AND cb.purchase_id = v.purchase_id
              AND cb.cycle_index = v.cycle_index AND cb.component_id = v.component_id`

/** Ended cycles, distinct and in key order, as three parallel arrays for `unnest`. */
export interface CycleKeyColumns {
  readonly organizations: ReadonlyArray<string>
  readonly purchases: ReadonlyArray<string>
  readonly indexes: ReadonlyArray<number>
}

/**
 * Invoices what the cycles' finalised drafts hold: each balance row's
 * invoiced_arrear becomes its arrear_amount, in the cycles that have a usage
 * invoice (a cycle without one invoiced nothing). One statement; the caller
 * holds the cycles' locks.
 */
export const invoiceCycleArrears = (sql: SqlClient.SqlClient, cycles: CycleKeyColumns): Effect.Effect<void> =>
  Effect.asVoid(orDie(sql`UPDATE cycle_balances AS cb SET invoiced_arrear = cb.arrear_amount
          FROM purchase_cycles pc
          WHERE (pc.organization_id, pc.purchase_id, pc.cycle_index) IN (
              SELECT * FROM unnest(${cycles.organizations}::text[], ${cycles.purchases}::text[], ${cycles.indexes}::int[]))
            AND pc.usage_invoice_id IS NOT NULL
            AND cb.organization_id = pc.organization_id AND cb.purchase_id = pc.purchase_id
            AND cb.cycle_index = pc.cycle_index`))
