/**
 * Purchases and their MONTHLY cycles (docs/billing.md).
 *
 * A purchase freezes its plan snapshot, then lives SCHEDULED -> ACTIVE ->
 * CANCELLED. At every cycle start ADVANCE components are granted (the wallet
 * amount credited), the recurring wallet grant applied and a PLAN invoice for
 * the plan cost issued; at every cycle end ARREAR charges are invoiced (unless
 * the wallet paid them as they happened) and ADVANCE remainders roll over or
 * expire per component. What a step does is computed in memory by Renewal.ts;
 * this file loads the state it needs and writes what it decided, set-based.
 *
 * The cycle job (`renewBatch`) claims a batch of due purchases with
 * `FOR UPDATE SKIP LOCKED` and moves each one cycle, all in one transaction
 * and a fixed number of statements whatever the batch size:
 *   claim (purchases, with whether the customer has a recurring grant and
 *   the organisation's invoice grace period);
 *   the balance rows, locked; the customers' FINAL cycle rows still owed
 *   (late lines), locked; the organisations' active taxes;
 *   the wallets that move, locked and created (Ledger.lockWallets, 2);
 *   one statement of data-modifying WITH clauses (`writeTogether`): purchases
 *   UPDATE; balance rows INSERT (first cycles) and UPDATE; invoices, invoice
 *   lines, payments (one INSERT each); the ended cycles and their balance rows
 *   (one INSERT each), the late rows billed (one UPDATE);
 *   wallets UPDATE, ledger rows INSERT and webhook outbox (Ledger.postToWallets).
 * A cycle-end USAGE invoice is DRAFT while the organisation has a grace
 * period (docs/billing.md "Late usage and the grace period").
 * Locks are taken in the ledger's order (purchases, balance rows, ended
 * cycles' balance rows, wallets),
 * so any number of workers may run beside each other and beside the signal
 * drain; a second run for the same instant finds nothing due. A new purchase
 * (`create`) and a cancellation (`cancel`) go through the same code, as sets
 * of one (`renewal` and the same statements; a first cycle that moves no wallet
 * is written as one statement with the purchase's INSERT), so money moves only
 * through the ledger. So does a plan change NOW (`change`: `planChange`, a
 * PRORATION invoice, the balance rows replaced); a change at the cycle end is
 * kept on the purchase and applied by `renewal`; the upcoming invoices
 * (`upcoming`) are that same `renewal`, computed on rows read unlocked and
 * never written (docs/billing.md "Changing plans", "The upcoming invoice").
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Schema, String, Struct } from "effect"
import { Customers } from "../customers/Customers.ts"
import { decodeRows, dieOnSqlError, findAll, findByIdOr, insertRowsStatement, knownCursor, orDie, pageClause, uniqueOr, writeTogether, writeTogetherStatement } from "../db/Sql.ts"
import { BillingDateInPast, NoScheduledChange, PurchaseAlreadyHeld, PurchaseCancelled, PurchaseNotFound } from "../errors.ts"
import { type CustomerRef, ensureActive } from "../customers/Customer.ts"
import type { Page } from "../Page.ts"
import { type CustomerId, makeId, type OrganizationId, PurchaseId } from "../ids.ts"
import {
  balanceColumns,
  createBalancesStatement,
  customerKey,
  Ledger,
  setBalancesStatement,
  type WalletPosting
} from "../ledger/Ledger.ts"
import { toSql, ZERO } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { type Invoice, Invoices, issuedInvoiceJson, issuedStatements, type TaxRate, type WalletPayment } from "./Invoices.ts"
import { planChange } from "./PlanChange.ts"
import { fingerprintOf, replay } from "../idempotency/Idempotency.ts"
import { BalanceRow, type PurchaseChange, type PurchaseCreate, PurchaseRow, PurchaseStatus, type PurchaseUpdate } from "./Purchase.ts"
import * as Rows from "../db/RowDecoders.ts"
import { BillingMode, ComponentType } from "../pricing/PlanSnapshot.ts"
import {
  cancellation,
  type LateBalance,
  needsWallet,
  type Renewal,
  renewal,
  type RenewalBalance,
  type RenewalState,
  settleWallet,
  type WalletState
} from "./Renewal.ts"
import { PlanSnapshot, snapshotOfText } from "../pricing/PlanSnapshot.ts"
import { loadSnapshot } from "./Snapshot.ts"
import { tally } from "../worker/Stats.ts"
import { faultPoint } from "../Fault.ts"
import { currentTime } from "../time.ts"

const notFound = (id: string) => new PurchaseNotFound({ message: `Purchase ${id} not found` })

const startOfUtcDay = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))

/**
 * A purchase locked for a step, with whether its customer's wallet has a
 * recurring grant (read unlocked). The snapshot arrives as text and is decoded
 * once per distinct snapshot (`snapshotOfText`).
 */
const LockedRow = Schema.Struct({
  ...PurchaseRow.fields,
  snapshot: Schema.String,
  scheduledSnapshot: Schema.NullOr(Schema.String),
  organizationId: Schema.String,
  hasRecurringGrant: Schema.Boolean,
  invoiceGraceHours: Schema.Number
})
type LockedPurchase = Omit<typeof LockedRow.Type, "snapshot" | "scheduledSnapshot"> & {
  readonly snapshot: PlanSnapshot
  readonly scheduledSnapshot: PlanSnapshot | null
}

const LockedBalance = Schema.Struct({ organizationId: Schema.String, ...BalanceRow.fields })

/**
 * LockedRow and LockedBalance decoded by hand (src/db/RowDecoders.ts): a
 * cycle batch reads 500 purchases and 1,000 balance rows, and their Schema
 * decoding was a quarter of what a billing day allocated. The type
 * annotations hold each decoder to its Schema's type.
 */
const lockedRows: (rows: ReadonlyArray<unknown>) => Effect.Effect<Array<typeof LockedRow.Type>> = Rows.rowDecoder("purchases", {
  id: (value) => Rows.string(value) as PurchaseId,
  customerId: (value) => Rows.string(value) as CustomerId,
  planId: Rows.string,
  status: Rows.literal(PurchaseStatus.literals),
  billingDate: Rows.timestamp,
  cycleIndex: Rows.number,
  periodStart: Rows.nullOr(Rows.timestamp),
  periodEnd: Rows.nullOr(Rows.timestamp),
  autoPayment: Rows.boolean,
  spentThisCycle: Rows.money,
  snapshot: Rows.string,
  cancelledAt: Rows.nullOr(Rows.timestamp),
  createdAt: Rows.timestamp,
  updatedAt: Rows.timestamp,
  scheduledPlanId: Rows.nullOr(Rows.string),
  scheduledSnapshot: Rows.nullOr(Rows.string),
  organizationId: Rows.string,
  hasRecurringGrant: Rows.boolean,
  invoiceGraceHours: Rows.number
})
/** A purchase balance row's columns, decoded by hand (the cycle job reads thousands a batch). */
export const balanceRowFields = {
  organizationId: Rows.string,
  purchaseId: Rows.string,
  componentId: Rows.string,
  customerId: Rows.string,
  type: Rows.literal(ComponentType.literals),
  billingMode: Rows.literal(BillingMode.literals),
  targetId: Rows.nullOr(Rows.string),
  granted: Rows.money,
  used: Rows.money,
  remaining: Rows.money,
  originalGranted: Rows.nullOr(Rows.money),
  cycleQuantity: Rows.money,
  arrearAmount: Rows.money
}
const lockedBalances: (rows: ReadonlyArray<unknown>) => Effect.Effect<Array<typeof LockedBalance.Type>> = Rows.rowDecoder(
  "purchase_balances",
  balanceRowFields
)

/** A FINAL cycle row of a customer still owed (late lines), with its cycle's period and component name. */
const OwedCycleBalance = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  componentId: Schema.String,
  customerId: Schema.String,
  targetName: Schema.NullOr(Schema.String),
  periodStart: Timestamp,
  periodEnd: Timestamp,
  arrearAmount: Money,
  invoicedArrear: Money
})

const ActiveTax = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  name: Schema.String,
  ratePercent: Money
})

/** The columns a locked purchase is read with (`p` is purchases). */
const lockedColumns = `p.organization_id, p.id, p.customer_id, p.plan_id, p.status, p.billing_date, p.cycle_index,
  p.period_start, p.period_end, p.auto_payment, p.spent_this_cycle, p.snapshot::text AS snapshot, p.cancelled_at,
  p.created_at, p.updated_at, p.scheduled_plan_id, p.scheduled_snapshot::text AS scheduled_snapshot,
  EXISTS (SELECT 1 FROM wallets w WHERE w.organization_id = p.organization_id AND w.customer_id = p.customer_id
    AND w.recurring_grant_usd <> 0) AS has_recurring_grant,
  (SELECT o.invoice_grace_hours FROM organizations o WHERE o.id = p.organization_id) AS invoice_grace_hours`

/**
 * The organisation's active taxes as loadStates reads them, oldest first, as a
 * column of the row a new purchase's INSERT returns (one round trip fewer).
 * Rates go as text: a JSON number would not keep them exact.
 */
const activeTaxesColumn = `(SELECT coalesce(json_agg(json_build_object('organizationId', t.organization_id, 'id', t.id,
    'name', t.name, 'ratePercent', t.rate_percent::text) ORDER BY t.organization_id, t.id), '[]'::json)
  FROM taxes t WHERE t.organization_id = p.organization_id AND t.is_active)::text AS active_taxes`

/** The columns `saleColumns` adds to the statement that freezes a new purchase's plan. */
const SaleColumns = Schema.Struct({
  activeTaxes: Schema.parseJson(Schema.Array(ActiveTax)),
  invoiceGraceHours: Schema.Number,
  hasRecurringGrant: Schema.Boolean
})

/** A snapshot as the jsonb columns keep it (decimals as strings). */
const snapshotText = (snapshot: PlanSnapshot) => JSON.stringify(Schema.encodeSync(PlanSnapshot)(snapshot))

/** A purchase row but its snapshot, and the columns that read it. */
const PurchaseScalars = Schema.Struct(Struct.omit(PurchaseRow.fields, "snapshot"))
const scalarColumns = Object.keys(PurchaseScalars.fields).map(String.camelToSnake).join(", ")

/** Locked purchase rows, decoded; a row that does not decode is a defect. */
const decodeLocked = (rows: ReadonlyArray<unknown>): Effect.Effect<Array<LockedPurchase>> =>
  Effect.flatMap(lockedRows(rows), (decoded) =>
    Effect.try({
      try: () =>
        decoded.map((row) => ({
          ...row,
          snapshot: snapshotOfText(row.snapshot),
          scheduledSnapshot: row.scheduledSnapshot === null ? null : snapshotOfText(row.scheduledSnapshot)
        })),
      catch: (error) => error
    }).pipe(Effect.orDie))

/** Distinct (organization, id) pairs as two arrays, for `unnest`. */
const pairsOf = (items: ReadonlyArray<readonly [string, string]>) => {
  const unique = new Map(items.map((item) => [`${item[0]}/${item[1]}`, item] as const))
  // Sorted by the map's keys, built once: a comparator that built them allocated two strings a comparison.
  const sorted = [...unique.keys()].sort().map((key) => unique.get(key)!)
  return { organizations: sorted.map((pair) => pair[0]), ids: sorted.map((pair) => pair[1]) }
}

/** A recorded plan change, as a keyed repeat reads it. */
const ChangeRecord = Schema.Struct({
  purchaseId: Schema.String,
  fingerprint: Schema.String,
  invoiceId: Schema.NullOr(Schema.String)
})

const PlanOnly = Schema.Struct({ planFound: Schema.Boolean })

export class Purchases extends Effect.Service<Purchases>()("Purchases", {
  dependencies: [Customers.Default, Ledger.Default, Invoices.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const ledger = yield* Ledger
    const invoices = yield* Invoices

    const findRow = findByIdOr(sql, PurchaseRow, "purchases", notFound)

    /**
     * What a new purchase's first cycle reads besides its plan, as columns of
     * the statement that freezes the plan (`loadSnapshot`, `p` the plan's row):
     * the organisation's active taxes and invoice grace period, and whether the
     * customer's wallet has a recurring grant, as `lockedColumns` reads them.
     */
    const saleColumns = (customerId: string) =>
      sql`${sql.literal(activeTaxesColumn)},
        (SELECT o.invoice_grace_hours FROM organizations o WHERE o.id = p.organization_id) AS invoice_grace_hours,
        EXISTS (SELECT 1 FROM wallets w WHERE w.organization_id = p.organization_id AND w.customer_id = ${customerId}
          AND w.recurring_grant_usd <> 0) AS has_recurring_grant`

    /**
     * Claims up to `limit` purchases due at `now`, oldest boundary first: an
     * ACTIVE one whose cycle has ended, or a SCHEDULED one whose date has come.
     * Rows another transaction holds are skipped, not waited for.
     */
    const claimDue = (now: Date, limit: number) =>
      Effect.flatMap(
        // The due keys are sorted and claimed alone, then read whole: sorting whole rows with their snapshots
        // spilled to disk (a third of a second a batch at 5,000 due). The outer FOR UPDATE, on rows this
        // transaction already holds, reads each one's latest version rather than the statement's snapshot.
        orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
            WHERE (p.organization_id, p.id) IN (
              SELECT d.organization_id, d.id FROM purchases d
              WHERE (d.status = 'ACTIVE' AND d.period_end <= ${now}) OR (d.status = 'SCHEDULED' AND d.billing_date <= ${now})
              ORDER BY coalesce(d.period_end, d.billing_date), d.organization_id, d.id
              LIMIT ${limit}
              FOR UPDATE SKIP LOCKED)
            ORDER BY coalesce(p.period_end, p.billing_date), p.organization_id, p.id
            FOR UPDATE OF p`),
        decodeLocked
      )

    /** Whether anything is due at `now`, claimed by another worker or not. */
    const anyDue = Effect.fn("Purchases.anyDue")((now: Date) =>
      Effect.map(
        orDie(sql`SELECT 1 FROM purchases
            WHERE (status = 'ACTIVE' AND period_end <= ${now}) OR (status = 'SCHEDULED' AND billing_date <= ${now})
            LIMIT 1`),
        (rows) => rows.length > 0
      ))

    /** One purchase, locked for a step (create, cancel). */
    const lockOne = (organizationId: OrganizationId, id: PurchaseId) =>
      Effect.flatMap(
        Effect.flatMap(
          orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
              WHERE p.organization_id = ${organizationId} AND p.id = ${id} FOR UPDATE OF p`),
          decodeLocked
        ),
        ([purchase]) => (purchase === undefined ? Effect.fail(notFound(id)) : Effect.succeed(purchase))
      )

    /**
     * What the steps of locked purchases read: their balance rows (locked, in
     * key order) and their organisations' active taxes, oldest first. Two
     * statements for any number of purchases.
     */
    const loadStates = (
      purchases: ReadonlyArray<LockedPurchase>,
      loadedTaxes?: ReadonlyArray<typeof ActiveTax.Type>,
      lock = true
    ) =>
      Effect.gen(function*() {
        const started = pairsOf(purchases.filter((p) => p.periodEnd !== null).map((p) => [p.organizationId, p.id] as const))
        const balances = started.ids.length === 0 ? [] : yield* Effect.flatMap(
          orDie(sql`SELECT * FROM purchase_balances
              WHERE (organization_id, purchase_id) IN (
                SELECT * FROM unnest(${started.organizations}::text[], ${started.ids}::text[]))
              ORDER BY organization_id, purchase_id, component_id
              ${sql.literal(lock ? "FOR UPDATE" : "")}`),
          lockedBalances
        )
        // The customers' FINAL cycle rows still owed: late lines of the USAGE invoice a cycle end issues
        // (locked after the balance rows, before the wallets: the ledger's order).
        const ending = pairsOf(
          purchases.filter((p) => p.status === "ACTIVE" && p.periodEnd !== null).map((p) => [p.organizationId, p.customerId] as const)
        )
        const owed = ending.ids.length === 0 ? [] : yield* findAll(
          OwedCycleBalance,
          // The owed rows are found first, per customer, through the partial index `cycle_balances_owed`
          // (almost always none), then joined: left to itself the planner joined the customers with
          // purchase_cycles on the organisation alone (a cross product growing with every cycle recorded,
          // 1.5 s a batch by the end of a billing day) while statistics still called the new rows few.
          sql`WITH owed AS MATERIALIZED (
                SELECT cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id
                FROM unnest(${ending.organizations}::text[], ${ending.ids}::text[]) AS k(organization_id, customer_id)
                JOIN cycle_balances cb ON cb.organization_id = k.organization_id AND cb.customer_id = k.customer_id
                  AND cb.arrear_amount <> cb.invoiced_arrear
              )
              SELECT cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id, cb.customer_id,
                     (SELECT c->>'targetName' FROM jsonb_array_elements(coalesce(pc.snapshot, p.snapshot)->'components') c
                       WHERE c->>'id' = cb.component_id LIMIT 1) AS target_name,
                     pc.period_start, pc.period_end, cb.arrear_amount, cb.invoiced_arrear
              FROM owed
              JOIN cycle_balances cb ON cb.organization_id = owed.organization_id AND cb.purchase_id = owed.purchase_id
                AND cb.cycle_index = owed.cycle_index AND cb.component_id = owed.component_id
              JOIN purchase_cycles pc ON pc.organization_id = cb.organization_id AND pc.purchase_id = cb.purchase_id
                AND pc.cycle_index = cb.cycle_index
              JOIN purchases p ON p.organization_id = cb.organization_id AND p.id = cb.purchase_id
              WHERE cb.arrear_amount <> cb.invoiced_arrear AND pc.status = 'FINAL'
              ORDER BY cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id
              ${sql.literal(lock ? "FOR UPDATE OF cb" : "")}`
        )
        const owedOf = new Map<string, Array<LateBalance>>()
        for (const row of owed) {
          const key = customerKey(row)
          const list = owedOf.get(key)
          if (list === undefined) owedOf.set(key, [row])
          else list.push(row)
        }
        const organizations = [...new Set(purchases.map((p) => p.organizationId))].sort()
        const taxes = loadedTaxes ?? (yield* findAll(
          ActiveTax,
          sql`SELECT organization_id, id, name, rate_percent FROM taxes
              WHERE organization_id = ANY(${organizations}::text[]) AND is_active
              ORDER BY organization_id, id`
        ))
        const balancesOf = new Map<string, Array<RenewalBalance>>()
        for (const row of balances) {
          const key = `${row.organizationId}/${row.purchaseId}`
          const list = balancesOf.get(key)
          if (list === undefined) balancesOf.set(key, [row])
          else list.push(row)
        }
        const taxesOf = new Map<string, Array<TaxRate>>()
        for (const tax of taxes) {
          const list = taxesOf.get(tax.organizationId)
          if (list === undefined) taxesOf.set(tax.organizationId, [tax])
          else list.push(tax)
        }
        return purchases.map((purchase): RenewalState => {
          // A customer's owed rows go to one step only (a customer has one live purchase; this is a guard).
          const key = customerKey(purchase)
          const lateBalances = owedOf.get(key) ?? []
          owedOf.delete(key)
          return {
            organizationId: purchase.organizationId,
            purchase,
            balances: balancesOf.get(`${purchase.organizationId}/${purchase.id}`) ?? [],
            taxes: taxesOf.get(purchase.organizationId) ?? [],
            graceHours: purchase.invoiceGraceHours,
            lateBalances
          }
        })
      })

    /**
     * Writes the steps, in the caller's transaction: locks the wallets that
     * move, settles each step's wallet moves against them in order, then writes
     * purchases, balance rows, invoices with their lines and payments, and the
     * wallet postings (after the invoices their rows name). The purchases
     * entered come back when `returning`.
     */
    const write = (
      renewals: ReadonlyArray<Renewal>,
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
        const cycles = renewals.flatMap((r) => (r.cycle === null ? [] : [{ ...r, cycle: r.cycle }]))
        // A renewal that applies a scheduled change also moves the purchase to its plan (null: it keeps its own).
        const changedPlanIds = cycles.map((r) => r.changedTo?.planId ?? null)
        const changedSnapshots = cycles.map((r) => (r.changedTo ? snapshotText(r.changedTo) : null))
        const purchasesEntered = cycles.length === 0 ? undefined : sql`UPDATE purchases AS p SET status = 'ACTIVE',
              cycle_index = v.cycle_index, period_start = v.period_start, period_end = v.period_end,
              spent_this_cycle = 0, updated_at = v.at,
              plan_id = coalesce(v.plan_id, p.plan_id), snapshot = coalesce(v.snapshot::jsonb, p.snapshot),
              scheduled_plan_id = CASE WHEN v.plan_id IS NULL THEN p.scheduled_plan_id END,
              scheduled_snapshot = CASE WHEN v.plan_id IS NULL THEN p.scheduled_snapshot END
            FROM unnest(
              ${cycles.map((r) => r.organizationId)}::text[], ${cycles.map((r) => r.purchaseId)}::text[],
              ${cycles.map((r) => r.cycle.index)}::int[],
              ${cycles.map((r) => r.cycle.start.toISOString())}::timestamptz[],
              ${cycles.map((r) => r.cycle.end.toISOString())}::timestamptz[],
              ${cycles.map((r) => r.cycle.at.toISOString())}::timestamptz[],
              ${changedPlanIds}::text[], ${changedSnapshots}::text[]
            ) AS v(organization_id, id, cycle_index, period_start, period_end, at, plan_id, snapshot)
            WHERE p.organization_id = v.organization_id AND p.id = v.id
            ${sql.literal(returning ? "RETURNING p.*" : "")}`
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
          ...planChangeStatements(renewals),
          createBalancesStatement(sql, renewals.filter((r) => r.replaceBalances !== true).flatMap((r) => r.createBalances)),
          setBalancesStatement(sql, renewals.flatMap((r) => r.setBalances)),
          ...issuedStatements(sql, renewals.flatMap((r) => r.invoices), payments),
          ...endedCycleStatements(renewals)
        ], returning ? purchasesEntered : undefined)
        yield* ledger.postToWallets(locked, postings)
        return { entered, payments }
      })

    /**
     * The statements of plan changes, for `writeTogether`: a change NOW moves
     * the purchase to its new plan in its cycle (a renewal that applies a
     * scheduled change does it in `purchasesEntered`); the ended cycles that have no snapshot of their own
     * keep the plan they were billed under (the one ending now carries it in
     * its INSERT).
     */
    const planChangeStatements = (renewals: ReadonlyArray<Renewal>) => {
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
     * `cycle_balances`) and marking the late rows the USAGE invoices billed as
     * invoiced, for `writeTogether`.
     */
    const endedCycleStatements = (renewals: ReadonlyArray<Renewal>) => {
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
        insertRowsStatement(sql, "cycle_balances", ended.flatMap((cycle) =>
          cycle.balances.map((row) => ({
            organizationId: cycle.organizationId,
            purchaseId: cycle.purchaseId,
            cycleIndex: cycle.cycleIndex,
            ...balanceColumns(row),
            invoicedArrear: toSql(row.invoicedArrear)
          }))
        )),
        billed.length === 0 ? undefined : sql`UPDATE cycle_balances AS cb SET invoiced_arrear = v.amount
            FROM unnest(
              ${billed.map((row) => row.organizationId)}::text[], ${billed.map((row) => row.purchaseId)}::text[],
              ${billed.map((row) => row.cycleIndex)}::int[], ${billed.map((row) => row.componentId)}::text[],
              ${billed.map((row) => toSql(row.arrearAmount))}::numeric[]
            ) AS v(organization_id, purchase_id, cycle_index, component_id, amount)
            WHERE cb.organization_id = v.organization_id AND cb.purchase_id = v.purchase_id
              AND cb.cycle_index = v.cycle_index AND cb.component_id = v.component_id`
      ]
    }

    /**
     * One batch of the cycle job, in one transaction: claims up to `limit`
     * purchases due at `now` and moves each one cycle (a purchase several
     * cycles behind is claimed again by the next batch). The number renewed;
     * 0 when nothing unclaimed is due.
     */
    const renewBatch = Effect.fn("Purchases.renewBatch")(function*(now: Date, limit: number) {
        const claimed = yield* claimDue(now, limit)
        if (claimed.length === 0) return claimed
        const states = yield* loadStates(claimed)
        // The renewed rows are not read back: a batch's 500 snapshots parsed and renamed for nothing.
        yield* write(states.map((state) => renewal(state)), claimed, false)
        yield* faultPoint("cycles.before-commit") // tests: dies with the batch written, before its commit
        return claimed
      },
        sql.withTransaction,
        Effect.orDie,
        // Counted for the worker's watchers once committed.
        Effect.tap((claimed) => tally(claimed.map((purchase) => [purchase.organizationId, "renewed"]))),
        Effect.map((claimed) => claimed.length)
      )

    /**
     * A new purchase. Read in two statements, no transaction: the customer
     * (`Customers.resolve`), then the plan frozen with what its first cycle
     * needs (the organisation's active taxes and grace period, whether the
     * customer's wallet has a recurring grant). Its first cycle is computed
     * from those, in memory, as the cycle job would compute it from the row
     * just inserted, and the purchase is inserted already ACTIVE in that cycle
     * together with its balance rows and its PLAN invoice: one statement,
     * atomic on its own. A first cycle that moves the wallet (a plan wallet
     * grant, a recurring grant) and a scheduled purchase take the path of
     * before, in a transaction: the row inserted, then `write` (wallets locked
     * after the purchase, in the ledger's order).
     */
    const create = Effect.fn("Purchases.create")(function*(organizationId: OrganizationId, input: PurchaseCreate) {
        const customer = yield* Effect.flatMap(customers.resolve(organizationId, input), ensureActive)
        const { extra: sale, snapshot } = yield* loadSnapshot(organizationId, input.planId, saleColumns(customer.id), SaleColumns)
        const now = yield* currentTime
        const requested = input.billingDate
        if (requested !== undefined && requested.getTime() < startOfUtcDay(now).getTime()) {
          return yield* new BillingDateInPast({ message: "billingDate must not be in the past" })
        }
        const scheduled = requested !== undefined && requested.getTime() > now.getTime()
        const id = PurchaseId.make(makeId("pur"))
        const row = {
          organizationId,
          id,
          customerId: customer.id,
          planId: snapshot.planId,
          status: scheduled ? "SCHEDULED" as const : "ACTIVE" as const,
          billingDate: scheduled ? requested : now,
          // Set rather than left to the column defaults: the first cycle below is computed from these values.
          cycleIndex: 0,
          autoPayment: false,
          snapshot: snapshotText(snapshot),
          createdAt: now,
          updatedAt: now
        }
        const alreadyHeld = uniqueOr(() =>
          new PurchaseAlreadyHeld({
            message: `Customer ${customer.id} already has a scheduled or active purchase; cancel it first`
          })
        )
        if (scheduled) {
          return (yield* decodeRows(PurchaseRow)(yield* alreadyHeld(sql`INSERT INTO purchases ${sql.insert(row)} RETURNING *`)))[0]!
        }
        // Not started yet (no period): its first cycle starts at its billing date, now.
        const unstarted: LockedPurchase = {
          ...row,
          billingDate: now,
          periodStart: null,
          periodEnd: null,
          spentThisCycle: ZERO,
          snapshot,
          cancelledAt: null,
          scheduledPlanId: null,
          scheduledSnapshot: null,
          hasRecurringGrant: sale.hasRecurringGrant,
          invoiceGraceHours: sale.invoiceGraceHours
        }
        const first = renewal({
          organizationId,
          purchase: unstarted,
          balances: [],
          taxes: sale.activeTaxes,
          graceHours: sale.invoiceGraceHours,
          lateBalances: []
        })
        if (needsWallet(first, sale.hasRecurringGrant)) {
          return yield* sql.withTransaction(Effect.gen(function*() {
            const inserted = yield* alreadyHeld(sql`INSERT INTO purchases AS p ${sql.insert(row)} RETURNING ${sql.literal(lockedColumns)}`)
            const [locked] = yield* decodeLocked(inserted)
            const { entered } = yield* write((yield* loadStates([locked!], sale.activeTaxes)).map((state) => renewal(state)), [locked!])
            return (yield* decodeRows(PurchaseRow)(entered))[0]!
          }))
        }
        const cycle = first.cycle!
        // The row comes back without its snapshot, which is the one in hand (read back, it was a third of the
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
        const [scalars] = yield* decodeRows(PurchaseScalars)(yield* alreadyHeld(sql`/* prepared */ ${written}`))
        return new PurchaseRow({ ...scalars!, snapshot }, true)
      }, dieOnSqlError)

    const list = Effect.fn("Purchases.list")((organizationId: OrganizationId, query: { readonly customerId?: CustomerId | undefined; readonly page: Page }) =>
      Effect.zipRight(knownCursor(sql, "purchases", organizationId, query.page), findAll(
        PurchaseRow,
        sql`SELECT * FROM purchases WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              ${pageClause(sql, query.page)}`
      )))

    const get = Effect.fn("Purchases.get")((organizationId: OrganizationId, id: PurchaseId) => findRow(organizationId, id))

    const update = Effect.fn("Purchases.update")(function*(organizationId: OrganizationId, id: PurchaseId, patch: PurchaseUpdate) {
        const purchase = yield* findRow(organizationId, id, true)
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is cancelled` })
        }
        yield* customers.requireActive(organizationId, purchase.customerId)
        yield* sql`UPDATE purchases SET auto_payment = ${patch.autoPayment}, updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /**
     * Cancels: invoices ARREAR usage charged so far in a final USAGE invoice and
     * ends the cycle now. Every invoice already issued stays as it is, paid or
     * not: it is money owed (the current cycle's PLAN invoice paid for an
     * allowance granted in advance), and voiding one is the operator's explicit
     * act (`billing invoice void`). Cancelling twice is 409.
     */
    const cancel = Effect.fn("Purchases.cancel")(function*(organizationId: OrganizationId, id: PurchaseId) {
        const purchase = yield* lockOne(organizationId, id)
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is already cancelled` })
        }
        const now = yield* currentTime
        if (purchase.status === "ACTIVE") {
          yield* write((yield* loadStates([purchase])).map((state) => cancellation(state, now)), [purchase])
        }
        yield* sql`UPDATE purchases SET status = 'CANCELLED', cancelled_at = ${now},
              scheduled_plan_id = NULL, scheduled_snapshot = NULL,
              period_end = CASE WHEN period_end IS NULL THEN NULL ELSE ${now}::timestamptz END, updated_at = ${now}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /** A trivial column for `loadSnapshot` when the caller reads nothing besides the plan. */
    const planOnly = sql`true AS plan_found`

    /** The answer of a change: the purchase as it now is and its PRORATION invoice (null when none was issued). */
    const changed = (organizationId: OrganizationId, id: PurchaseId, invoice: Invoice | null, replayed: boolean) =>
      Effect.map(findRow(organizationId, id), (purchase) => ({ purchase, invoice, replayed }))

    /**
     * Changes a purchase's plan (docs/billing.md "Changing plans"), in one
     * transaction, the purchase locked first (the signal drain and the cycle
     * job lock it too, so a signal is priced wholly before or wholly after).
     * `NOW` on an ACTIVE purchase: a PRORATION invoice, the balance rows
     * replaced, the wallet moved, through `write` as a renewal is
     * (`planChange`, src/billing/PlanChange.ts); on a SCHEDULED one the plan
     * is replaced before anything was charged. `CYCLE_END`: the new plan is
     * frozen now and kept for the renewal (`renewal` applies it). Either way
     * the plan is frozen at the request, as a purchase freezes it. A keyed
     * change is recorded first: a repeat answers the first change.
     */
    const change = Effect.fn("Purchases.change")(function*(organizationId: OrganizationId, id: PurchaseId, input: PurchaseChange) {
        const purchase = yield* lockOne(organizationId, id)
        const now = yield* currentTime
        const changeId = makeId("pch")
        const fingerprint = fingerprintOf([id, input.planId, input.when])
        const record = {
          organizationId,
          id: changeId,
          purchaseId: id,
          customerId: purchase.customerId,
          idempotencyKey: input.idempotencyKey ?? null,
          fingerprint,
          fromPlanId: purchase.planId,
          toPlanId: input.planId,
          timing: input.when,
          changedAt: now
        }
        if (input.idempotencyKey !== undefined) {
          const inserted = yield* sql`INSERT INTO purchase_changes ${sql.insert(record)}
              ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
              RETURNING id`
          if (inserted.length === 0) {
            const [first] = yield* findAll(
              ChangeRecord,
              sql`SELECT purchase_id, fingerprint, invoice_id FROM purchase_changes
                  WHERE organization_id = ${organizationId} AND idempotency_key = ${input.idempotencyKey}`
            )
            const replayed = replay(input.idempotencyKey, { fingerprint: first!.fingerprint, answer: first! }, fingerprint)
            if (Either.isLeft(replayed)) return yield* replayed.left
            const invoice = replayed.right.invoiceId === null ? null : yield* invoices.get(organizationId, replayed.right.invoiceId)
            return yield* changed(organizationId, id, invoice, true)
          }
        }
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is cancelled; its plan cannot be changed` })
        }
        yield* customers.requireActive(organizationId, purchase.customerId)
        const { snapshot } = yield* loadSnapshot(organizationId, input.planId, planOnly, PlanOnly)
        let invoice: Invoice | null = null
        if (input.when === "CYCLE_END") {
          yield* sql`UPDATE purchases SET scheduled_plan_id = ${snapshot.planId},
                scheduled_snapshot = ${snapshotText(snapshot)}::jsonb, updated_at = ${now}
              WHERE organization_id = ${organizationId} AND id = ${id}`
        } else if (purchase.status === "SCHEDULED") {
          // Nothing was charged yet: the plan is replaced, and its first cycle starts on it.
          yield* sql`UPDATE purchases SET plan_id = ${snapshot.planId}, snapshot = ${snapshotText(snapshot)}::jsonb,
                scheduled_plan_id = NULL, scheduled_snapshot = NULL, updated_at = ${now}
              WHERE organization_id = ${organizationId} AND id = ${id}`
        } else {
          const [state] = yield* loadStates([purchase])
          const step = planChange(state!, snapshot, now)
          const { payments } = yield* write([step], [purchase], false)
          const issued = step.invoices[0]!
          // Its number was taken by its INSERT (issuedStatements), in SQL: read back to answer it.
          const [numbered] = yield* orDie(sql<{ readonly number: string | null }>`SELECT number FROM invoices
              WHERE organization_id = ${organizationId} AND id = ${issued.id}`)
          invoice = issuedInvoiceJson(
            issued,
            payments.find((payment) => payment.invoiceId === issued.id)?.at ?? null,
            numbered?.number ?? null
          )
        }
        if (input.idempotencyKey !== undefined) {
          yield* sql`UPDATE purchase_changes SET invoice_id = ${invoice?.id ?? null}
              WHERE organization_id = ${organizationId} AND id = ${changeId}`
        } else {
          yield* sql`INSERT INTO purchase_changes ${sql.insert({ ...record, invoiceId: invoice?.id ?? null })}`
        }
        return yield* changed(organizationId, id, invoice, false)
      }, sql.withTransaction, dieOnSqlError)

    /** Removes the change waiting for the purchase's cycle end; none is 404, a cancelled purchase 409. */
    const removeScheduledChange = Effect.fn("Purchases.removeScheduledChange")(function*(organizationId: OrganizationId, id: PurchaseId) {
        const purchase = yield* findRow(organizationId, id, true)
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is cancelled` })
        }
        yield* customers.requireActive(organizationId, purchase.customerId)
        if (purchase.scheduledPlanId === null) {
          return yield* new NoScheduledChange({ message: `Purchase ${id} has no scheduled plan change` })
        }
        yield* sql`UPDATE purchases SET scheduled_plan_id = NULL, scheduled_snapshot = NULL, updated_at = ${yield* currentTime}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /**
     * What the cycle job would issue for the customer's live purchase at its
     * next step if nothing else happened: the same rows read (unlocked), the
     * same `renewal`, the wallet settled against the wallet as it is now
     * (auto-payments), nothing written. For an ACTIVE purchase the ended
     * cycle's USAGE invoice (when it bills anything) and the next cycle's
     * PLAN invoice, a scheduled change applied; for a SCHEDULED one its first
     * PLAN invoice; none without a live purchase. Ids are null.
     */
    const upcoming = Effect.fn("Purchases.upcoming")(function*(organizationId: OrganizationId, ref: CustomerRef) {
        const customer = yield* customers.resolve(organizationId, ref)
        const [purchase] = yield* Effect.flatMap(
          orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
              WHERE p.organization_id = ${organizationId} AND p.customer_id = ${customer.id}
                AND p.status IN ('SCHEDULED', 'ACTIVE')`),
          decodeLocked
        )
        if (purchase === undefined) return []
        const [state] = yield* loadStates([purchase], undefined, false)
        let ids = 0
        const step = renewal(state!, (prefix) => `${prefix}_upcoming_${ids++}`)
        const key = customerKey(step)
        const wallet = needsWallet(step, purchase.hasRecurringGrant)
          ? (yield* ledger.readWallets([step])).get(key) ?? { balance: ZERO, recurringGrantUsd: null }
          : undefined
        const { payments } = settleWallet(step, wallet)
        return step.invoices.map((issued) => ({
          ...issuedInvoiceJson(issued, payments.find((payment) => payment.invoiceId === issued.id)?.at ?? null, null),
          id: null,
          number: null
        }))
      }, dieOnSqlError)

    return { create, list, get, update, cancel, renewBatch, anyDue, change, removeScheduledChange, upcoming } as const
  })
}) {}

