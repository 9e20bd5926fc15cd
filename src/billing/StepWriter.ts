/**
 * The step writer: writes the steps Renewal.ts computes (a cycle's renewal, a
 * cancellation, a plan change NOW), set-based, in a fixed number of
 * statements whatever the number of steps. The wallets are locked and posted
 * through the ledger (Ledger.lockWallets, Ledger.postToWallets); every other
 * write of the steps goes in one statement of data-modifying WITH clauses
 * (`writeTogether`): purchases, balance rows, invoices with their lines and
 * payments, the ended cycles and their balance rows, the late rows billed.
 * What of it is money (purchases entering their cycles, balance rows, the
 * ended cycles' balances, invoiced arrears) is the ledger's statements
 * (src/ledger/Ledger.ts, src/ledger/Cycles.ts), given plain rows.
 * A new purchase whose first cycle moves no wallet takes a shorter path, one
 * prepared statement (`insertInFirstCycle`). The lifecycle events of the
 * steps (`stepEvents`: the purchase's, then its invoices' created and paid)
 * are recorded by the caller after its last write (LifecycleEvents.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { insertRowsStatement, writeTogether, writeTogetherStatement } from "../db/Sql.ts"
import { type CycleEntry, endedCycleBalancesStatement, enterCyclesStatement, invoiceLateArrearsStatement } from "../ledger/Cycles.ts"
import { createBalancesStatement, customerKey, type Ledger, setBalancesStatement, type WalletPosting } from "../ledger/Ledger.ts"
import { PlanSnapshot } from "../pricing/PlanSnapshot.ts"
import type { WalletPayment } from "./Invoice.ts"
import { issuedStatements, paidAtIssue } from "./IssuedInvoices.ts"
import type { LifecycleEvent, PurchaseEvent } from "./LifecycleEvents.ts"
import { type LockedPurchase, scalarColumns, snapshotText } from "./PurchaseRows.ts"
import { needsWallet, type CycleStep, settleWallet, type WalletState } from "./Renewal.ts"
import { prepared } from "../db/Prepared.ts"

/**
 * Writes the steps, in the caller's transaction: locks the wallets that
 * move, settles each step's wallet moves against them in order, then writes
 * purchases, balance rows, invoices with their lines and payments, and the
 * wallet postings (after the invoices their rows name). The purchases
 * entered come back when `returning`.
 */
export const writeSteps = (
  sql: SqlClient.SqlClient,
  ledger: Ledger,
  renewals: ReadonlyArray<CycleStep>,
  purchases: ReadonlyArray<LockedPurchase>,
  returning = true
): Effect.Effect<{ readonly entered: ReadonlyArray<unknown>; readonly payments: ReadonlyArray<WalletPayment> }> =>
  Effect.gen(function*() {
    const withRecurringGrant = new Set(
      purchases.filter((p) => p.hasRecurringGrant).map((p) => customerKey(p))
    )
    const locked = yield* ledger.lockWallets(
      renewals.filter((r) => needsWallet(r, withRecurringGrant.has(customerKey(r))))
    )
    const wallets = new Map<string, WalletState>()
    for (const [key, wallet] of locked) wallets.set(key, wallet)
    const postings: Array<WalletPosting> = []
    const payments: Array<WalletPayment> = []
    for (const step of renewals) {
      const key = customerKey(step)
      const wallet = wallets.get(key)
      const settled = settleWallet(step, wallet)
      if (wallet !== undefined) wallets.set(key, { ...wallet, balance: settled.balance })
      postings.push(...settled.postings)
      payments.push(...settled.payments)
    }
    const entries = renewals.flatMap((r): Array<CycleEntry> =>
      r.cycle === null ? [] : [{
        organizationId: r.organizationId,
        purchaseId: r.purchaseId,
        cycle: r.cycle,
        // A renewal that applies a scheduled change also moves the purchase to its plan (null: it keeps its own).
        planId: r.changedTo?.planId ?? null,
        snapshot: r.changedTo ? snapshotText(r.changedTo) : null
      }]
    )
    const purchasesEntered = enterCyclesStatement(sql, entries, returning)
    // The rows of a plan change are replaced first, on their own (Ledger.replaceBalances): a change to the same
    // plan keeps their keys, and balance adjustments name them.
    const replacing = renewals.filter((r) => r.replaceBalances === true)
    yield* ledger.replaceBalances(
      replacing,
      replacing.flatMap((r) => r.createBalances),
      replacing.flatMap((r) => (r.carried ?? []).map((c) => ({ organizationId: r.organizationId, purchaseId: r.purchaseId, ...c })))
    )
    // One statement for every write but the wallets' (each write touches rows no other one does).
    const entered = yield* writeTogether(sql, [
      purchasesEntered,
      ...planChangeStatements(sql, renewals),
      createBalancesStatement(sql, renewals.filter((r) => r.replaceBalances !== true).flatMap((r) => r.createBalances)),
      setBalancesStatement(sql, renewals.flatMap((r) => r.setBalances)),
      ...issuedStatements(sql, renewals.flatMap((r) => r.invoices), payments),
      ...endedCycleStatements(sql, renewals)
    ], returning ? purchasesEntered : undefined)
    yield* ledger.postToWallets(locked, postings)
    return { entered, payments }
  })

/**
 * The lifecycle events of written steps (LifecycleEvents.ts), for the caller
 * to record after its last write: for each step, its purchase's event
 * (`purchaseEventOf`: renewed, created, cancelled, changed; none when it
 * gives none), with the invoices the step issued as its `invoiceIds`, then
 * `invoice.created` for each of them (DRAFTs too) and `invoice.paid` for each
 * issued PAID (`paidAtIssue`: free, or paid from the wallet by `payments`).
 * Descriptors only, cheap: nothing is read or built unless an endpoint of the
 * organisation subscribes (`recordLifecycleEvents`).
 */
export const stepEvents = (
  renewals: ReadonlyArray<CycleStep>,
  payments: ReadonlyArray<WalletPayment>,
  purchaseEventOf: (step: CycleStep, invoiceIds: ReadonlyArray<string>) => PurchaseEvent | undefined
): Array<LifecycleEvent> => {
  const paidAt = new Map(payments.map((payment) => [`${payment.organizationId}/${payment.invoiceId}`, payment.at] as const))
  const events: Array<LifecycleEvent> = []
  for (const step of renewals) {
    const purchaseEvent = purchaseEventOf(step, step.invoices.map((invoice) => invoice.id))
    if (purchaseEvent !== undefined) events.push(purchaseEvent)
    for (const invoice of step.invoices) {
      const key = { organizationId: invoice.organizationId, invoiceId: invoice.id }
      events.push({ type: "invoice.created", ...key, at: invoice.at })
      const paid = paidAtIssue(invoice, paidAt.get(`${invoice.organizationId}/${invoice.id}`) ?? null)
      if (paid !== null) events.push({ type: "invoice.paid", ...key, at: paid })
    }
  }
  return events
}

/**
 * The statements of plan changes, for `writeTogether`: a change NOW moves
 * the purchase to its new plan in its cycle (a renewal that applies a
 * scheduled change does it in `purchasesEntered`); the ended cycles that
 * have no snapshot of their own keep the plan they were billed under (the
 * one ending now carries it in its INSERT).
 */
const planChangeStatements = (sql: SqlClient.SqlClient, renewals: ReadonlyArray<CycleStep>) => {
  const now = renewals.filter((r) => r.cycle === null && r.changedTo)
  const changed = renewals.filter((r) => r.changedFrom)
  return [
    now.length === 0 ? undefined : sql`UPDATE purchases AS p SET plan_id = v.plan_id, snapshot = v.snapshot::jsonb,
              scheduled_plan_id = NULL, scheduled_snapshot = NULL, updated_at = v.at
            FROM unnest(
              ${now.map((r) => r.organizationId)}::text[], ${now.map((r) => r.purchaseId)}::text[],
              ${now.map((r) => r.changedTo!.planId)}::text[], ${now.map((r) => snapshotText(r.changedTo!))}::text[],
              ${now.map((r) => r.invoices[0]?.at.toISOString() ?? null)}::timestamptz[]
            ) AS v(organization_id, id, plan_id, snapshot, at)
            WHERE p.organization_id = v.organization_id AND p.id = v.id`,
    changed.length === 0 ? undefined : sql`UPDATE purchase_cycles AS c SET snapshot = v.snapshot::jsonb
            FROM unnest(
              ${changed.map((r) => r.organizationId)}::text[], ${changed.map((r) => r.purchaseId)}::text[],
              ${changed.map((r) => snapshotText(r.changedFrom!))}::text[]
            ) AS v(organization_id, purchase_id, snapshot)
            WHERE c.organization_id = v.organization_id AND c.purchase_id = v.purchase_id AND c.snapshot IS NULL`
  ]
}

/**
 * The statements recording the cycles that ended (`purchase_cycles`, their
 * `cycle_balances` through the ledger) and marking the late rows the USAGE
 * invoices billed as invoiced (the ledger's), for `writeTogether`.
 */
const endedCycleStatements = (sql: SqlClient.SqlClient, renewals: ReadonlyArray<CycleStep>) => {
  const ended = renewals.flatMap((r) => (r.endedCycle === null ? [] : [r.endedCycle]))
  const billed = renewals.flatMap((r) => r.lateBilled)
  return [
    insertRowsStatement(sql, "purchase_cycles", ended.map((cycle) => ({
      organizationId: cycle.organizationId,
      purchaseId: cycle.purchaseId,
      cycleIndex: cycle.cycleIndex,
      customerId: cycle.customerId,
      periodStart: cycle.periodStart.toISOString(),
      periodEnd: cycle.periodEnd.toISOString(),
      status: cycle.status,
      usageInvoiceId: cycle.usageInvoiceId,
      finalizeAt: cycle.finalizeAt.toISOString(),
      // An object, not its text: json_populate_recordset fills the jsonb column with it as it is.
      snapshot: cycle.snapshot ? Schema.encodeSync(PlanSnapshot)(cycle.snapshot) : null
    }))),
    endedCycleBalancesStatement(sql, ended),
    invoiceLateArrearsStatement(sql, billed)
  ]
}

/**
 * A new purchase inserted ACTIVE in its first cycle with that cycle's balance
 * rows and PLAN invoice, as one statement, atomic on its own: the path of a
 * first cycle that moves no wallet (`needsWallet` false), where `writeSteps`
 * would need a transaction and the wallets locked. `row` is the purchase as
 * Purchases.create builds it; the statement returns its `scalarColumns`.
 */
export const insertInFirstCycle = (sql: SqlClient.SqlClient, row: Readonly<Record<string, unknown>>, first: CycleStep) => {
  const cycle = first.cycle!
  // The row comes back without its snapshot, which is the one in hand (read back, it was much of the
  // statement's bytes and decoded again every decimal of the plan).
  const purchase = sql`INSERT INTO purchases ${
    sql.insert({
      ...row,
      cycleIndex: cycle.index,
      periodStart: cycle.start,
      periodEnd: cycle.end,
      spentThisCycle: "0",
      updatedAt: cycle.at
    })
  } RETURNING ${sql.literal(scalarColumns)}`
  const written = writeTogetherStatement(sql, [
    purchase,
    createBalancesStatement(sql, first.createBalances),
    setBalancesStatement(sql, first.setBalances),
    ...issuedStatements(sql, first.invoices, [])
  ], purchase)!
  // Prepared (src/db/Pool.ts): its text is one per plan shape (components, invoice lines), planned once a connection.
  return prepared(sql)`${written}`
}
