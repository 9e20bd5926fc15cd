/**
 * Purchases and their MONTHLY cycles (docs/billing.md): the service.
 *
 * A purchase freezes its plan snapshot, then lives SCHEDULED -> ACTIVE ->
 * CANCELLED. At every cycle start ADVANCE components are granted (the wallet
 * amount credited), the recurring wallet grant applied and a PLAN invoice for
 * the plan cost issued; at every cycle end ARREAR charges are invoiced (unless
 * the wallet paid them as they happened) and ADVANCE remainders roll over or
 * expire per component. What a step does is computed in memory by Renewal.ts;
 * PurchaseRows.ts (the repository) loads the state it needs and StepWriter.ts
 * writes what it decided, set-based; this file holds the rules between them.
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
 * Every change records its lifecycle events (`purchase.*`, and the
 * `invoice.*` of the invoices it issues) after its last write, in its
 * transaction (LifecycleEvents.ts; one statement more when nobody listens).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { decodeRows, dieOnSqlError, findAll, findByIdOr, knownCursor, orDie, pageClause, uniqueOr } from "../db/Sql.ts"
import { BillingDateInPast, NoScheduledChange, PurchaseAlreadyHeld, PurchaseCancelled } from "../errors.ts"
import { type CustomerRef, ensureActive } from "../customers/Customer.ts"
import type { Page } from "../Page.ts"
import { type CustomerId, makeId, type OrganizationId, PurchaseId } from "../ids.ts"
import { customerKey, Ledger } from "../ledger/Ledger.ts"
import { ZERO } from "../money.ts"
import type { Invoice } from "./Invoice.ts"
import { Invoices } from "./Invoices.ts"
import { paymentTermsOf, projectedDueDate } from "./DueDates.ts"
import { issuedInvoiceJson } from "./IssuedInvoices.ts"
import { planChange } from "./PlanChange.ts"
import { claimKey, fingerprintOf } from "../idempotency/Idempotency.ts"
import { type PurchaseChange, type PurchaseCreate, PurchaseRow, type PurchaseUpdate } from "./Purchase.ts"
import {
  claimDue,
  decodeLocked,
  loadStates,
  type LockedPurchase,
  lockedColumns,
  lockOne,
  purchaseNotFound,
  PurchaseScalars,
  readLivePurchase,
  SaleColumns,
  saleColumns,
  snapshotText
} from "./PurchaseRows.ts"
import { cancellation, needsWallet, renewal, settleWallet } from "./Renewal.ts"
import { loadSnapshot } from "./Snapshot.ts"
import { type LifecycleEvent, type PurchaseEvent, recordLifecycleEvents } from "./LifecycleEvents.ts"
import { insertInFirstCycle, stepEvents, writeSteps } from "./StepWriter.ts"
import { tally } from "../worker/Stats.ts"
import { faultPoint } from "../Fault.ts"
import { currentTime } from "../time.ts"

const startOfUtcDay = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))

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

    const findRow = findByIdOr(sql, PurchaseRow, "purchases", purchaseNotFound)

    /**
     * Whether anything is due at `now`, claimed by another worker or not. Each
     * kind is asked of its own partial index, first boundary first: asked as one
     * `OR` with `LIMIT 1`, the planner expected a sequential scan to meet a due
     * row at once, and read every purchase when none was due, the answer of
     * nearly every idle poll (13 ms at 4,096 purchases, docs/benchmarks.md "The
     * drain's own work at 4,096 customers").
     */
    const anyDue = Effect.fn("Purchases.anyDue")((now: Date) =>
      Effect.map(
        orDie(sql`SELECT 1 FROM (SELECT period_end FROM purchases WHERE status = 'ACTIVE' AND period_end <= ${now}
                                 ORDER BY period_end LIMIT 1) ended
                  UNION ALL
                  SELECT 1 FROM (SELECT billing_date FROM purchases WHERE status = 'SCHEDULED' AND billing_date <= ${now}
                                 ORDER BY billing_date LIMIT 1) starting`),
        (rows) => rows.length > 0
      ))

    /**
     * One batch of the cycle job, in one transaction: claims up to `limit`
     * purchases due at `now` and moves each one cycle (a purchase several
     * cycles behind is claimed again by the next batch). The number renewed;
     * 0 when nothing unclaimed is due.
     */
    const renewBatch = Effect.fn("Purchases.renewBatch")(function*(now: Date, limit: number) {
        const claimed = yield* claimDue(sql, now, limit)
        if (claimed.length === 0) return claimed
        const states = yield* loadStates(sql, claimed)
        const steps = states.map((state) => renewal(state))
        // The renewed rows are not read back: a batch's snapshots would be parsed and renamed for nothing.
        const { payments } = yield* writeSteps(sql, ledger, steps, claimed, false)
        // purchase.renewed and the invoices' events: one statement more when nobody listens (LifecycleEvents.ts).
        const before = new Map<string, LockedPurchase>(claimed.map((purchase) => [`${purchase.organizationId}/${purchase.id}`, purchase]))
        yield* recordLifecycleEvents(sql, stepEvents(steps, payments, (step, invoiceIds) => ({
          type: "purchase.renewed",
          organizationId: step.organizationId,
          purchaseId: step.purchaseId,
          at: step.cycle?.at ?? now,
          before: before.get(`${step.organizationId}/${step.purchaseId}`),
          invoiceIds
        })))
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
     * atomic on its own (`insertInFirstCycle`). A first cycle that moves the
     * wallet (a plan wallet grant, a recurring grant) takes the general path,
     * in a transaction: the row inserted, then `writeSteps` (wallets locked
     * after the purchase, in the ledger's order). A scheduled purchase is
     * its row alone.
     */
    const create = Effect.fn("Purchases.create")(function*(organizationId: OrganizationId, input: PurchaseCreate) {
        const customer = yield* Effect.flatMap(customers.resolve(organizationId, input), ensureActive)
        const { extra: sale, snapshot } = yield* loadSnapshot(organizationId, input.planId, saleColumns(sql, customer.id), SaleColumns)
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
        const createdEvent = (invoiceIds: ReadonlyArray<string>): PurchaseEvent =>
          ({ type: "purchase.created", organizationId, purchaseId: id, at: now, invoiceIds })
        if (scheduled) {
          const insert = Effect.map(
            Effect.flatMap(alreadyHeld(sql`INSERT INTO purchases ${sql.insert(row)} RETURNING *`), decodeRows(PurchaseRow)),
            (rows) => rows[0]!
          )
          // One statement on its own when nobody listens; with its event in a transaction when somebody does.
          if (!sale.listenedEvents.includes("purchase.created")) return yield* insert
          return yield* sql.withTransaction(Effect.tap(insert, () => recordLifecycleEvents(sql, [createdEvent([])])))
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
            const steps = (yield* loadStates(sql, [locked!], sale.activeTaxes)).map((state) => renewal(state))
            const { entered, payments } = yield* writeSteps(sql, ledger, steps, [locked!])
            yield* recordLifecycleEvents(sql, stepEvents(steps, payments, (_, invoiceIds) => createdEvent(invoiceIds)))
            return (yield* decodeRows(PurchaseRow)(entered))[0]!
          }))
        }
        const insert = Effect.flatMap(alreadyHeld(insertInFirstCycle(sql, row, first)), decodeRows(PurchaseScalars))
        // One statement, atomic on its own, when nobody listens; with the events in a transaction when somebody does.
        const events = stepEvents([first], [], (_, invoiceIds) => createdEvent(invoiceIds))
        const [scalars] = events.some((event) => sale.listenedEvents.includes(event.type))
          ? yield* sql.withTransaction(Effect.tap(insert, () => recordLifecycleEvents(sql, events)))
          : yield* insert
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
        if (patch.autoPayment !== purchase.autoPayment) {
          yield* recordLifecycleEvents(sql, [{
            type: "purchase.changed",
            organizationId,
            purchaseId: id,
            at: yield* currentTime,
            before: purchase,
            change: "AUTO_PAYMENT_CHANGED"
          }])
        }
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
        const purchase = yield* lockOne(sql, organizationId, id)
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is already cancelled` })
        }
        const now = yield* currentTime
        const steps = purchase.status === "ACTIVE"
          ? (yield* loadStates(sql, [purchase])).map((state) => cancellation(state, now))
          : []
        const { payments } = steps.length === 0 ? { payments: [] } : yield* writeSteps(sql, ledger, steps, [purchase])
        yield* sql`UPDATE purchases SET status = 'CANCELLED', cancelled_at = ${now},
              scheduled_plan_id = NULL, scheduled_snapshot = NULL,
              period_end = CASE WHEN period_end IS NULL THEN NULL ELSE ${now}::timestamptz END, updated_at = ${now}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        const cancelled = (invoiceIds: ReadonlyArray<string>): PurchaseEvent =>
          ({ type: "purchase.cancelled", organizationId, purchaseId: id, at: now, before: purchase, invoiceIds })
        yield* recordLifecycleEvents(
          sql,
          steps.length === 0 ? [cancelled([])] : stepEvents(steps, payments, (_, invoiceIds) => cancelled(invoiceIds))
        )
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
     * replaced, the wallet moved, through `writeSteps` as a renewal is
     * (`planChange`, src/billing/PlanChange.ts); on a SCHEDULED one the plan
     * is replaced before anything was charged. `CYCLE_END`: the new plan is
     * frozen now and kept for the renewal (`renewal` applies it). Either way
     * the plan is frozen at the request, as a purchase freezes it. A keyed
     * change is recorded first: a repeat answers the first change.
     */
    const change = Effect.fn("Purchases.change")(function*(organizationId: OrganizationId, id: PurchaseId, input: PurchaseChange) {
        const purchase = yield* lockOne(sql, organizationId, id)
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
          const first = yield* claimKey(
            input.idempotencyKey,
            fingerprint,
            sql`INSERT INTO purchase_changes ${sql.insert(record)}
              ON CONFLICT (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
              RETURNING id`,
            findAll(
              ChangeRecord,
              sql`SELECT purchase_id, fingerprint, invoice_id FROM purchase_changes
                  WHERE organization_id = ${organizationId} AND idempotency_key = ${input.idempotencyKey}`
            ).pipe(Effect.map((rows) => rows[0]!))
          )
          if (Option.isSome(first)) {
            const invoice = first.value.invoiceId === null ? null : yield* invoices.get(organizationId, first.value.invoiceId)
            return yield* changed(organizationId, id, invoice, true)
          }
        }
        if (purchase.status === "CANCELLED") {
          return yield* new PurchaseCancelled({ message: `Purchase ${id} is cancelled; its plan cannot be changed` })
        }
        yield* customers.requireActive(organizationId, purchase.customerId)
        const { snapshot } = yield* loadSnapshot(organizationId, input.planId, planOnly, PlanOnly)
        let invoice: Invoice | null = null
        const changedEvent = (change: PurchaseEvent["change"], invoiceIds: ReadonlyArray<string> = []): PurchaseEvent =>
          ({ type: "purchase.changed", organizationId, purchaseId: id, at: now, before: purchase, invoiceIds, change })
        let events: ReadonlyArray<LifecycleEvent> = [changedEvent(input.when === "CYCLE_END" ? "PLAN_CHANGE_SCHEDULED" : "PLAN_CHANGED")]
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
          const [state] = yield* loadStates(sql, [purchase])
          const step = planChange(state!, snapshot, now)
          const { payments } = yield* writeSteps(sql, ledger, [step], [purchase], false)
          events = stepEvents([step], payments, (_, invoiceIds) => changedEvent("PLAN_CHANGED", invoiceIds))
          const issued = step.invoices[0]!
          // Its number and due date were given by its INSERT (issuedStatements), in SQL: read back to answer it.
          const [numbered] = yield* orDie(sql<{ readonly number: string | null; readonly dueDate: Date | string | null }>`
              SELECT number, due_date FROM invoices WHERE organization_id = ${organizationId} AND id = ${issued.id}`)
          invoice = issuedInvoiceJson(
            issued,
            payments.find((payment) => payment.invoiceId === issued.id)?.at ?? null,
            numbered?.number ?? null,
            numbered?.dueDate == null ? null : new Date(numbered.dueDate)
          )
        }
        if (input.idempotencyKey !== undefined) {
          yield* sql`UPDATE purchase_changes SET invoice_id = ${invoice?.id ?? null}
              WHERE organization_id = ${organizationId} AND id = ${changeId}`
        } else {
          yield* sql`INSERT INTO purchase_changes ${sql.insert({ ...record, invoiceId: invoice?.id ?? null })}`
        }
        yield* recordLifecycleEvents(sql, events)
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
        const now = yield* currentTime
        yield* sql`UPDATE purchases SET scheduled_plan_id = NULL, scheduled_snapshot = NULL, updated_at = ${now}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        yield* recordLifecycleEvents(sql, [{
          type: "purchase.changed",
          organizationId,
          purchaseId: id,
          at: now,
          before: purchase,
          change: "SCHEDULED_CHANGE_REMOVED"
        }])
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
        const [purchase] = yield* readLivePurchase(sql, organizationId, customer.id)
        if (purchase === undefined) return []
        const [state] = yield* loadStates(sql, [purchase], undefined, false)
        let ids = 0
        const step = renewal(state!, (prefix) => `${prefix}_upcoming_${ids++}`)
        const key = customerKey(step)
        const wallet = needsWallet(step, purchase.hasRecurringGrant)
          ? (yield* ledger.readWallets([step])).get(key) ?? { balance: ZERO, recurringGrantUsd: null }
          : undefined
        const { payments } = settleWallet(step, wallet)
        const terms = yield* paymentTermsOf(sql, organizationId, customer.id)
        return step.invoices.map((issued) => ({
          ...issuedInvoiceJson(
            issued,
            payments.find((payment) => payment.invoiceId === issued.id)?.at ?? null,
            null,
            projectedDueDate(issued, terms)
          ),
          id: null,
          number: null
        }))
      }, dieOnSqlError)

    return { create, list, get, update, cancel, renewBatch, anyDue, change, removeScheduledChange, upcoming } as const
  })
}) {}
