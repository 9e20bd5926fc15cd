/**
 * The cycle each signal of a batch is billed in, by its moment: the ACTIVE
 * purchase's current cycle (nothing more to read), a wait for its renewal, or
 * an ended cycle with its own snapshot and `cycle_balances` (locked), read only
 * when the batch holds late signals.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { groupBy } from "effect/Array"
import { BalanceRow, PurchaseRow } from "../billing/Purchase.ts"
import { findAll } from "../db/Sql.ts"
import type { PurchaseContext } from "../pricing/meters/Context.ts"
import { Timestamp } from "../schema.ts"
import type { BatchCustomers, Customer } from "./BatchCustomers.ts"
import { type LockClause, scoped } from "./BatchKeys.ts"
import type { ActivePurchases } from "./BatchPurchases.ts"
import type { SignalRecord } from "./ClaimedSignal.ts"

/** A purchase cycle's period, `[start, end)`. */
export interface CyclePeriod {
  readonly start: Date
  readonly end: Date
}

/**
 * The cycle a signal is billed in, by its moment:
 * - Billed: the purchase context of the cycle containing the moment (the
 *   ACTIVE purchase's current cycle, or an ended cycle) and that cycle's
 *   `period`, or null for both when no purchase cycle contains it (the meters
 *   refuse: no active plan). `activeCycle` is the ACTIVE purchase's current
 *   cycle, when the customer has one: a refusal of a moment outside every
 *   cycle names it (the customer may well have a plan, bought after it);
 * - Waiting: the moment is at or after the ACTIVE purchase's period_end, whose
 *   renewal has not run yet: the signal stays QUEUED until it has.
 */
export type SignalCycle =
  | {
    readonly _tag: "Billed"
    readonly purchase: PurchaseContext | null
    readonly period: CyclePeriod | null
    readonly activeCycle: CyclePeriod | null
  }
  | { readonly _tag: "Waiting"; readonly purchaseId: string; readonly periodEnd: Date }

/** An ended cycle containing a late signal's moment, with its purchase's snapshot (cancelled purchases too). */
const EndedCycleRow = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  customerId: Schema.String,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  snapshot: PurchaseRow.fields.snapshot
})

/** A balance row of an ended cycle. */
const CycleBalanceRow = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  componentId: Schema.String,
  remaining: BalanceRow.fields.remaining,
  cycleQuantity: BalanceRow.fields.cycleQuantity
})

export interface SignalCycles {
  /** Each signal's cycle, by `scoped(organizationId, signalId)`; none for a signal without a customer. */
  readonly ofSignal: Map<string, SignalCycle>
  /** The customer's ACTIVE purchase's current cycle, when it has one. */
  readonly activeCycleOf: (customer: Customer) => CyclePeriod | null
}

export const loadSignalCycles = (
  sql: SqlClient.SqlClient,
  locked: LockClause,
  records: ReadonlyArray<SignalRecord>,
  customers: BatchCustomers,
  purchases: ActivePurchases
) =>
  Effect.gen(function*() {
    const activeOf = purchases.rowOf
    const purchaseOf = purchases.contextOf
    const customerOfSignal = customers.ofSignal
    const activeCycleOf = (customer: Customer): CyclePeriod | null => {
      const active = activeOf.get(scoped(customer.organizationId, customer.id))
      return active === undefined || active.periodStart === null || active.periodEnd === null
        ? null
        : { start: active.periodStart, end: active.periodEnd }
    }

    // Each signal's cycle, by its moment. On time: the ACTIVE purchase's current cycle, nothing to load.
    // Late (a moment before it, or no ACTIVE purchase): the ended cycles containing those moments, their
    // purchases' snapshots and their balance rows, locked after the purchases' rows, in key order: two
    // statements for the whole batch, none when no signal of the batch is late.
    const cycleOfSignal = new Map<string, SignalCycle>()
    const lateSignals: Array<readonly [SignalRecord, Customer]> = []
    for (const record of records) {
      const customer = customerOfSignal(record)
      if (customer === undefined) continue
      const active = activeOf.get(scoped(customer.organizationId, customer.id))
      const moment = record.moment.getTime()
      if (active !== undefined && active.periodStart !== null && active.periodEnd !== null) {
        if (active.periodStart.getTime() <= moment && moment < active.periodEnd.getTime()) {
          const period = { start: active.periodStart, end: active.periodEnd }
          cycleOfSignal.set(scoped(record.organizationId, record.id), {
            _tag: "Billed",
            purchase: purchaseOf.get(scoped(customer.organizationId, customer.id))!,
            period,
            activeCycle: period
          })
          continue
        }
        if (moment >= active.periodEnd.getTime()) {
          cycleOfSignal.set(scoped(record.organizationId, record.id), {
            _tag: "Waiting",
            purchaseId: active.id,
            periodEnd: active.periodEnd
          })
          continue
        }
      }
      lateSignals.push([record, customer])
    }
    const endedContexts = new Map<string, PurchaseContext>()
    if (lateSignals.length > 0) {
      const moments = new Map<string, readonly [string, string, string]>()
      for (const [record, customer] of lateSignals) {
        const iso = record.moment.toISOString()
        moments.set(`${customer.organizationId}/${customer.id}/${iso}`, [customer.organizationId, customer.id, iso])
      }
      const triples = [...moments.values()]
      const ended = yield* findAll(
        EndedCycleRow,
        // The plan the cycle was billed under: its own snapshot when the purchase changed plan since.
        sql`SELECT c.organization_id, c.purchase_id, c.cycle_index, c.customer_id, c.period_start, c.period_end,
              coalesce(c.snapshot, p.snapshot) AS snapshot
            FROM purchase_cycles c
            JOIN purchases p ON p.organization_id = c.organization_id AND p.id = c.purchase_id
            WHERE (c.organization_id, c.purchase_id, c.cycle_index) IN (
              SELECT e.organization_id, e.purchase_id, e.cycle_index
              FROM purchase_cycles e
              JOIN unnest(${triples.map((t) => t[0])}::text[], ${triples.map((t) => t[1])}::text[],
                          ${triples.map((t) => t[2])}::timestamptz[]) AS v(organization_id, customer_id, moment)
                ON e.organization_id = v.organization_id AND e.customer_id = v.customer_id
               AND e.period_start <= v.moment AND v.moment < e.period_end)
            ORDER BY c.organization_id, c.purchase_id, c.cycle_index
            ${locked("FOR UPDATE OF c")}`
      )
      const endedKey = (organizationId: string, purchaseId: string, cycleIndex: number) =>
        `${organizationId}/${purchaseId}/${cycleIndex}`
      for (const cycle of ended) {
        endedContexts.set(endedKey(cycle.organizationId, cycle.purchaseId, cycle.cycleIndex), {
          id: cycle.purchaseId,
          snapshot: cycle.snapshot,
          cycleIndex: cycle.cycleIndex,
          closedCycle: true,
          balances: new Map()
        })
      }
      const cycleRows = ended.length === 0 ? [] : yield* findAll(
        CycleBalanceRow,
        sql`SELECT organization_id, purchase_id, cycle_index, component_id, remaining, cycle_quantity FROM cycle_balances
            WHERE (organization_id, purchase_id, cycle_index) IN (
              SELECT * FROM unnest(${ended.map((c) => c.organizationId)}::text[], ${ended.map((c) => c.purchaseId)}::text[],
                                   ${ended.map((c) => c.cycleIndex)}::int[]))
            ORDER BY organization_id, purchase_id, cycle_index, component_id ${locked("FOR UPDATE")}`
      )
      for (const row of cycleRows) {
        endedContexts.get(endedKey(row.organizationId, row.purchaseId, row.cycleIndex))?.balances.set(row.componentId, {
          componentId: row.componentId,
          remaining: row.remaining,
          cycleQuantity: row.cycleQuantity
        })
      }
      const cyclesOfCustomer = groupBy(ended, (cycle) => scoped(cycle.organizationId, cycle.customerId))
      for (const [record, customer] of lateSignals) {
        const moment = record.moment.getTime()
        // Ended cycles never overlap for one customer; should two, the later one bills it.
        let found: typeof EndedCycleRow.Type | undefined
        for (const cycle of cyclesOfCustomer[scoped(customer.organizationId, customer.id)] ?? []) {
          if (cycle.periodStart.getTime() <= moment && moment < cycle.periodEnd.getTime()) {
            if (found === undefined || cycle.periodStart.getTime() > found.periodStart.getTime()) found = cycle
          }
        }
        cycleOfSignal.set(scoped(record.organizationId, record.id), {
          _tag: "Billed",
          purchase: found === undefined
            ? null
            : endedContexts.get(endedKey(found.organizationId, found.purchaseId, found.cycleIndex))!,
          period: found === undefined ? null : { start: found.periodStart, end: found.periodEnd },
          activeCycle: activeCycleOf(customer)
        })
      }
    }
    const loaded: SignalCycles = { ofSignal: cycleOfSignal, activeCycleOf }
    return loaded
  })
