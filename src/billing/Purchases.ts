/**
 * Purchases and their MONTHLY cycles (DESIGN.md §5).
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
 *   claim (purchases, with whether the customer has a recurring grant);
 *   the balance rows, locked; the organisations' active taxes;
 *   the wallets that move, locked and created (Ledger.lockWallets, 2);
 *   purchases UPDATE; balance rows INSERT (first cycles) and UPDATE;
 *   invoices, invoice lines, payments (one INSERT each);
 *   wallets UPDATE, ledger rows INSERT and webhook outbox (Ledger.postToWallets).
 * Locks are taken in the ledger's order (purchases, balance rows, wallets),
 * so any number of workers may run beside each other and beside the signal
 * drain; a second run for the same instant finds nothing due. A new purchase
 * (`create`) and a cancellation (`cancel`) go through the same code, as sets
 * of one, so money moves only through the ledger.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { decodeRows, dieOnSqlError, findAll, findByIdOr, orDie, uniqueOr } from "../db/Sql.ts"
import { BadRequest, Conflict, NotFound } from "../errors.ts"
import { ensureActive } from "../customers/Customer.ts"
import type { Page } from "../Page.ts"
import { makeId } from "../ids.ts"
import { customerKey, Ledger, type WalletPosting } from "../ledger/Ledger.ts"
import { Money } from "../schema.ts"
import { Invoices, type TaxRate, type WalletPayment } from "./Invoices.ts"
import { BalanceRow, type PurchaseCreate, PurchaseRow, type PurchaseUpdate } from "./Purchase.ts"
import { Plans } from "../plans/Plans.ts"
import {
  cancellation,
  needsWallet,
  type Renewal,
  renewal,
  type RenewalBalance,
  type RenewalState,
  settleWallet,
  type WalletState
} from "./Renewal.ts"
import { loadSnapshot, PlanSnapshot } from "./Snapshot.ts"
import { tally } from "../worker/Stats.ts"
import { faultPoint } from "../worker/Fault.ts"

const notFound = (id: string) => new NotFound({ message: `Purchase ${id} not found` })

const startOfUtcDay = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))

/**
 * A purchase locked for a step, with whether its customer's wallet has a
 * recurring grant (read unlocked). The snapshot arrives as text and is decoded
 * once per distinct snapshot (`decodeSnapshot`).
 */
const LockedRow = Schema.Struct({
  ...PurchaseRow.fields,
  snapshot: Schema.String,
  organizationId: Schema.String,
  hasRecurringGrant: Schema.Boolean
})
type LockedPurchase = Omit<typeof LockedRow.Type, "snapshot"> & { readonly snapshot: PlanSnapshot }

/**
 * Decoded snapshots by their text: the purchases of one plan (and version)
 * share the same snapshot, so a batch of hundreds decodes a handful. Snapshots
 * are immutable; the cache is dropped when it grows past a bound.
 */
const snapshotCache = new Map<string, PlanSnapshot>()
const SNAPSHOT_CACHE_SIZE = 1000
const decodeSnapshotText = Schema.decodeUnknownSync(Schema.parseJson(PlanSnapshot))
const decodeSnapshot = (text: string): PlanSnapshot => {
  let snapshot = snapshotCache.get(text)
  if (snapshot === undefined) {
    snapshot = decodeSnapshotText(text)
    if (snapshotCache.size >= SNAPSHOT_CACHE_SIZE) snapshotCache.clear()
    snapshotCache.set(text, snapshot)
  }
  return snapshot
}

const LockedBalance = Schema.Struct({ organizationId: Schema.String, ...BalanceRow.fields })

const ActiveTax = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  name: Schema.String,
  ratePercent: Money
})

/** The columns a locked purchase is read with (`p` is purchases). */
const lockedColumns = `p.organization_id, p.id, p.customer_id, p.plan_id, p.status, p.billing_date, p.cycle_index,
  p.period_start, p.period_end, p.auto_payment, p.spent_this_cycle, p.snapshot::text AS snapshot, p.cancelled_at,
  p.created_at, p.updated_at,
  EXISTS (SELECT 1 FROM wallets w WHERE w.organization_id = p.organization_id AND w.customer_id = p.customer_id
    AND w.recurring_grant_usd <> 0) AS has_recurring_grant`

/** Locked purchase rows, decoded; a row that does not decode is a defect. */
const decodeLocked = (rows: ReadonlyArray<unknown>): Effect.Effect<Array<LockedPurchase>> =>
  Effect.flatMap(decodeRows(LockedRow)(rows), (decoded) =>
    Effect.try({
      try: () => decoded.map((row) => ({ ...row, snapshot: decodeSnapshot(row.snapshot) })),
      catch: (error) => error
    }).pipe(Effect.orDie))

/** Distinct (organization, id) pairs as two arrays, for `unnest`. */
const pairsOf = (items: ReadonlyArray<readonly [string, string]>) => {
  const unique = new Map(items.map((item) => [`${item[0]}/${item[1]}`, item] as const))
  const sorted = [...unique.values()].sort((a, b) => (`${a[0]}/${a[1]}` < `${b[0]}/${b[1]}` ? -1 : 1))
  return { organizations: sorted.map((pair) => pair[0]), ids: sorted.map((pair) => pair[1]) }
}

export class Purchases extends Effect.Service<Purchases>()("Purchases", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const invoices = yield* Invoices
    const ledger = yield* Ledger
    const plans = yield* Plans

    const findRow = findByIdOr(sql, PurchaseRow, "purchases", notFound)

    /**
     * Claims up to `limit` purchases due at `now`, oldest boundary first: an
     * ACTIVE one whose cycle has ended, or a SCHEDULED one whose date has come.
     * Rows another transaction holds are skipped, not waited for.
     */
    const claimDue = (now: Date, limit: number) =>
      Effect.flatMap(
        orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
            WHERE (p.status = 'ACTIVE' AND p.period_end <= ${now}) OR (p.status = 'SCHEDULED' AND p.billing_date <= ${now})
            ORDER BY coalesce(p.period_end, p.billing_date), p.organization_id, p.id
            LIMIT ${limit}
            FOR UPDATE OF p SKIP LOCKED`),
        decodeLocked
      )

    /** Whether anything is due at `now`, claimed by another worker or not. */
    const anyDue = (now: Date) =>
      Effect.map(
        orDie(sql`SELECT 1 FROM purchases
            WHERE (status = 'ACTIVE' AND period_end <= ${now}) OR (status = 'SCHEDULED' AND billing_date <= ${now})
            LIMIT 1`),
        (rows) => rows.length > 0
      )

    /** One purchase, locked for a step (create, cancel). */
    const lockOne = (organizationId: string, id: string) =>
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
    const loadStates = (purchases: ReadonlyArray<LockedPurchase>) =>
      Effect.gen(function*() {
        const started = pairsOf(purchases.filter((p) => p.periodEnd !== null).map((p) => [p.organizationId, p.id] as const))
        const balances = started.ids.length === 0 ? [] : yield* findAll(
          LockedBalance,
          sql`SELECT * FROM purchase_balances
              WHERE (organization_id, purchase_id) IN (
                SELECT * FROM unnest(${started.organizations}::text[], ${started.ids}::text[]))
              ORDER BY organization_id, purchase_id, component_id
              FOR UPDATE`
        )
        const organizations = [...new Set(purchases.map((p) => p.organizationId))].sort()
        const taxes = yield* findAll(
          ActiveTax,
          sql`SELECT organization_id, id, name, rate_percent FROM taxes
              WHERE organization_id = ANY(${organizations}::text[]) AND is_active
              ORDER BY organization_id, id`
        )
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
        return purchases.map((purchase): RenewalState => ({
          organizationId: purchase.organizationId,
          purchase,
          balances: balancesOf.get(`${purchase.organizationId}/${purchase.id}`) ?? [],
          taxes: taxesOf.get(purchase.organizationId) ?? []
        }))
      })

    /**
     * Writes the steps, in the caller's transaction: locks the wallets that
     * move, settles each step's wallet moves against them in order, then writes
     * purchases, balance rows, invoices with their lines and payments, and the
     * wallet postings (after the invoices their rows name).
     */
    const write = (renewals: ReadonlyArray<Renewal>, purchases: ReadonlyArray<LockedPurchase>) =>
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
        if (cycles.length > 0) {
          yield* orDie(sql`UPDATE purchases AS p SET status = 'ACTIVE', cycle_index = v.cycle_index,
                period_start = v.period_start, period_end = v.period_end, spent_this_cycle = 0, updated_at = v.at
              FROM unnest(
                ${cycles.map((r) => r.organizationId)}::text[], ${cycles.map((r) => r.purchaseId)}::text[],
                ${cycles.map((r) => r.cycle.index)}::int[],
                ${cycles.map((r) => r.cycle.start.toISOString())}::timestamptz[],
                ${cycles.map((r) => r.cycle.end.toISOString())}::timestamptz[],
                ${cycles.map((r) => r.cycle.at.toISOString())}::timestamptz[]
              ) AS v(organization_id, id, cycle_index, period_start, period_end, at)
              WHERE p.organization_id = v.organization_id AND p.id = v.id`)
        }
        yield* ledger.createBalances(renewals.flatMap((r) => r.createBalances))
        yield* ledger.setBalances(renewals.flatMap((r) => r.setBalances))
        yield* invoices.writeIssued(renewals.flatMap((r) => r.invoices), payments)
        yield* ledger.postToWallets(locked, postings)
      })

    /**
     * One batch of the cycle job, in one transaction: claims up to `limit`
     * purchases due at `now` and moves each one cycle (a purchase several
     * cycles behind is claimed again by the next batch). The number renewed;
     * 0 when nothing unclaimed is due.
     */
    const renewBatch = (now: Date, limit: number) =>
      Effect.gen(function*() {
        const claimed = yield* claimDue(now, limit)
        if (claimed.length === 0) return claimed
        const states = yield* loadStates(claimed)
        yield* write(states.map((state) => renewal(state)), claimed)
        yield* faultPoint("cycles.before-commit") // tests: dies with the batch written, before its commit
        return claimed
      }).pipe(
        sql.withTransaction,
        Effect.orDie,
        // Counted for the worker's watchers once committed.
        Effect.tap((claimed) => tally(claimed.map((purchase) => [purchase.organizationId, "renewed"]))),
        Effect.map((claimed) => claimed.length)
      )

    const create = (organizationId: string, input: PurchaseCreate) =>
      Effect.gen(function*() {
        const customer = yield* Effect.flatMap(customers.resolve(organizationId, input), ensureActive)
        const snapshot = yield* loadSnapshot(plans, organizationId, input.planId)
        const now = new Date()
        const requested = input.billingDate
        if (requested !== undefined && requested.getTime() < startOfUtcDay(now).getTime()) {
          return yield* new BadRequest({ message: "billingDate must not be in the past" })
        }
        const scheduled = requested !== undefined && requested.getTime() > now.getTime()
        const id = makeId("pur")
        yield* sql`INSERT INTO purchases ${
          sql.insert({
            organizationId,
            id,
            customerId: customer.id,
            planId: snapshot.planId,
            status: scheduled ? "SCHEDULED" : "ACTIVE",
            billingDate: scheduled ? requested : now,
            snapshot: JSON.stringify(Schema.encodeSync(PlanSnapshot)(snapshot)),
            createdAt: now,
            updatedAt: now
          })
        }`.pipe(
          uniqueOr(() =>
            new Conflict({
              message: `Customer ${customer.id} already has a scheduled or active purchase; cancel it first`
            })
          )
        )
        if (!scheduled) {
          // Not started yet (no period): its first cycle starts at its billing date, now.
          const locked = yield* lockOne(organizationId, id)
          yield* write((yield* loadStates([locked])).map((state) => renewal(state)), [locked])
        }
        return yield* findRow(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    const list = (organizationId: string, query: { readonly customerId?: string | undefined; readonly page: Page }) =>
      findAll(
        PurchaseRow,
        sql`SELECT * FROM purchases WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              AND (${query.page.cursor ?? null}::text IS NULL OR id > ${query.page.cursor ?? null})
            ORDER BY id LIMIT ${query.page.limit}`
      )

    const get = (organizationId: string, id: string) => findRow(organizationId, id)

    const update = (organizationId: string, id: string, patch: PurchaseUpdate) =>
      Effect.gen(function*() {
        const purchase = yield* findRow(organizationId, id, true)
        if (purchase.status === "CANCELLED") {
          return yield* new Conflict({ message: `Purchase ${id} is cancelled` })
        }
        yield* customers.requireActive(organizationId, purchase.customerId)
        yield* sql`UPDATE purchases SET auto_payment = ${patch.autoPayment}, updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    /**
     * Cancels: invoices ARREAR usage charged so far in a final USAGE invoice and
     * ends the cycle now. Every invoice already issued stays as it is, paid or
     * not: it is money owed (the current cycle's PLAN invoice paid for an
     * allowance granted in advance), and voiding one is the operator's explicit
     * act (`billing invoice void`). Cancelling twice is 409.
     */
    const cancel = (organizationId: string, id: string) =>
      Effect.gen(function*() {
        const purchase = yield* lockOne(organizationId, id)
        if (purchase.status === "CANCELLED") {
          return yield* new Conflict({ message: `Purchase ${id} is already cancelled` })
        }
        const now = new Date()
        if (purchase.status === "ACTIVE") {
          yield* write((yield* loadStates([purchase])).map((state) => cancellation(state, now)), [purchase])
        }
        yield* sql`UPDATE purchases SET status = 'CANCELLED', cancelled_at = ${now},
              period_end = CASE WHEN period_end IS NULL THEN NULL ELSE ${now}::timestamptz END, updated_at = ${now}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    return { create, list, get, update, cancel, renewBatch, anyDue } as const
  })
}) {}

