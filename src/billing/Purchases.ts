/**
 * Purchases and their MONTHLY cycles (DESIGN.md §5).
 *
 * A purchase freezes its plan snapshot, then lives SCHEDULED -> ACTIVE ->
 * CANCELLED. At every cycle start ADVANCE components are granted (the wallet
 * amount credited), the recurring wallet grant applied and a PLAN invoice for
 * the plan cost issued; at every cycle end ARREAR charges are invoiced (unless
 * the wallet paid them as they happened) and ADVANCE remainders roll over or
 * expire per component. The cycle job claims due purchases with
 * `FOR UPDATE SKIP LOCKED` and moves each one cycle per transaction, so any
 * number of workers may run and a second run for the same instant finds
 * nothing due.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { dieOnSqlError, findAll, findByIdOr, uniqueOr } from "../db/Sql.ts"
import { BadRequest, Conflict, NotFound } from "../errors.ts"
import type { Page } from "../http/Pagination.ts"
import { makeId } from "../ids.ts"
import { toSql, ZERO } from "../money.ts"
import { cyclePeriod } from "./Cycle.ts"
import { Invoices, type LineInput } from "./Invoices.ts"
import { BalanceRow, type PurchaseCreate, PurchaseRow, type PurchaseUpdate } from "./Purchase.ts"
import { Plans } from "../plans/Plans.ts"
import { loadSnapshot, PlanSnapshot, type SnapshotComponent } from "./Snapshot.ts"
import { Wallets } from "./Wallets.ts"

const { max, min, sum: add } = BigDecimal

const notFound = (id: string) => new NotFound({ message: `Purchase ${id} not found` })

const startOfUtcDay = (date: Date) => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))

const DueRow = Schema.Struct({ organizationId: Schema.String, id: Schema.String })

export class Purchases extends Effect.Service<Purchases>()("Purchases", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const wallets = yield* Wallets
    const invoices = yield* Invoices
    const plans = yield* Plans

    const findRow = findByIdOr(sql, PurchaseRow, "purchases", notFound)

    const balancesOf = (organizationId: string, purchaseId: string) =>
      findAll(
        BalanceRow,
        sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}
            ORDER BY component_id FOR UPDATE`
      )

    const advanceQuantity = (component: SnapshotComponent) => component.quantity ?? ZERO

    /**
     * Starts cycle `index` of a purchase at `at`: grants ADVANCE components
     * (after the previous cycle's rollover and composite debt), credits the
     * wallet, applies the recurring grant and issues the PLAN invoice.
     */
    const startCycle = (organizationId: string, purchase: PurchaseRow, index: number, at: Date) =>
      Effect.gen(function*() {
        const period = cyclePeriod(purchase.billingDate, index)
        const { snapshot } = purchase
        yield* sql`UPDATE purchases SET status = 'ACTIVE', cycle_index = ${index}, period_start = ${period.start},
              period_end = ${period.end}, spent_this_cycle = 0, updated_at = ${at}
            WHERE organization_id = ${organizationId} AND id = ${purchase.id}`
        const metered = snapshot.components.filter((c) => c.type !== "WALLET")
        if (index === 0) {
          if (metered.length > 0) {
            yield* sql`INSERT INTO purchase_balances ${
              sql.insert(metered.map((c) => {
                const granted = c.billingMode === "ADVANCE" ? advanceQuantity(c) : ZERO
                return {
                  organizationId,
                  purchaseId: purchase.id,
                  componentId: c.id,
                  customerId: purchase.customerId,
                  type: c.type,
                  billingMode: c.billingMode,
                  targetId: c.targetId,
                  granted: toSql(granted),
                  remaining: toSql(granted),
                  originalGranted: c.billingMode === "ADVANCE" ? toSql(granted) : null
                }
              }))
            }`
          }
        } else {
          const rows = yield* balancesOf(organizationId, purchase.id)
          for (const row of rows) {
            const component = metered.find((c) => c.id === row.componentId)
            if (!component) continue
            let granted = ZERO
            if (component.billingMode === "ADVANCE") {
              const carried = component.rollover ? max(row.remaining, ZERO) : ZERO
              const debt = min(row.remaining, ZERO)
              granted = BigDecimal.normalize(add(add(advanceQuantity(component), carried), debt))
            }
            yield* sql`UPDATE purchase_balances SET granted = ${toSql(granted)}::numeric, used = 0,
                  remaining = ${toSql(granted)}::numeric,
                  original_granted = ${component.billingMode === "ADVANCE" ? toSql(advanceQuantity(component)) : null}::numeric,
                  cycle_quantity = 0, arrear_amount = 0
                WHERE organization_id = ${organizationId} AND purchase_id = ${purchase.id}
                  AND component_id = ${row.componentId}`
          }
        }
        for (const component of snapshot.components) {
          if (component.type !== "WALLET" || component.billingMode !== "ADVANCE") continue
          const amount = component.amount ?? ZERO
          if (BigDecimal.isZero(amount)) continue
          yield* wallets.move(organizationId, purchase.customerId, amount, {
            type: index === 0 ? "PURCHASE_GRANT" : "CYCLE_GRANT",
            purchaseId: purchase.id,
            at
          })
        }
        const wallet = yield* wallets.get(organizationId, purchase.customerId)
        if (wallet.recurringGrantUsd !== null && !BigDecimal.isZero(wallet.recurringGrantUsd)) {
          yield* wallets.move(organizationId, purchase.customerId, wallet.recurringGrantUsd, {
            type: "RECURRING_GRANT",
            purchaseId: purchase.id,
            at
          })
        }
        const lines: Array<LineInput> = snapshot.components
          .filter((c) => c.billingMode === "ADVANCE")
          .map((c) => ({
            description: `${c.targetName} (${c.type === "WALLET" ? "wallet credit" : "prepaid"})`,
            componentId: c.id,
            quantity: c.type === "WALLET" ? null : c.quantity,
            unitPrice: c.type === "WALLET" || c.type === "UNIT" ? null : c.unitPrice,
            amount: c.charge
          }))
        if (!BigDecimal.isZero(snapshot.priceAdjustment)) {
          lines.push({
            description: "Price adjustment",
            componentId: null,
            quantity: null,
            unitPrice: null,
            amount: snapshot.priceAdjustment
          })
        }
        if (lines.length === 0) {
          lines.push({ description: snapshot.name, componentId: null, quantity: null, unitPrice: null, amount: ZERO })
        }
        yield* invoices.issue(organizationId, {
          customerId: purchase.customerId,
          purchaseId: purchase.id,
          kind: "PLAN",
          currencyCode: snapshot.currencyCode,
          periodStart: period.start,
          periodEnd: period.end,
          lines,
          autoPayment: purchase.autoPayment,
          at
        })
      })

    /** Invoices the ended cycle's ARREAR charges (the wallet already paid them under walletFundedArrear). */
    const invoiceArrears = (organizationId: string, purchase: PurchaseRow, at: Date) =>
      Effect.gen(function*() {
        const rows = yield* balancesOf(organizationId, purchase.id)
        const lines: Array<LineInput> = []
        for (const row of rows) {
          if (row.billingMode !== "ARREAR" || BigDecimal.isZero(row.arrearAmount)) continue
          const component = purchase.snapshot.components.find((c) => c.id === row.componentId)
          lines.push({
            description: `${component?.targetName ?? row.componentId} (usage)`,
            componentId: row.componentId,
            quantity: row.cycleQuantity,
            unitPrice: component?.type === "UNIT" ? null : component?.unitPrice ?? null,
            amount: row.arrearAmount
          })
        }
        if (lines.length === 0) return
        yield* sql`UPDATE purchase_balances SET arrear_amount = 0
            WHERE organization_id = ${organizationId} AND purchase_id = ${purchase.id}`
        yield* invoices.issue(organizationId, {
          customerId: purchase.customerId,
          purchaseId: purchase.id,
          kind: "USAGE",
          currencyCode: purchase.snapshot.currencyCode,
          periodStart: purchase.periodStart ?? purchase.billingDate,
          periodEnd: purchase.periodEnd ?? at,
          lines,
          autoPayment: purchase.autoPayment,
          at
        })
      })

    const create = (organizationId: string, input: PurchaseCreate) =>
      Effect.gen(function*() {
        const customer = yield* customers.resolve(organizationId, input)
        if (customer.archivedAt !== null) {
          return yield* new Conflict({ message: `Customer ${customer.id} is archived` })
        }
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
        if (!scheduled) yield* startCycle(organizationId, yield* findRow(organizationId, id), 0, now)
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
        yield* sql`UPDATE purchases SET auto_payment = ${patch.autoPayment}, updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    /**
     * Cancels: voids the OPEN invoices, invoices ARREAR usage charged so far in
     * a final USAGE invoice, and ends the cycle now. Cancelling twice is 409.
     */
    const cancel = (organizationId: string, id: string) =>
      Effect.gen(function*() {
        const purchase = yield* findRow(organizationId, id, true)
        if (purchase.status === "CANCELLED") {
          return yield* new Conflict({ message: `Purchase ${id} is already cancelled` })
        }
        const now = new Date()
        yield* invoices.voidOpenOfPurchase(organizationId, id, now)
        if (purchase.status === "ACTIVE") yield* invoiceArrears(organizationId, purchase, now)
        yield* sql`UPDATE purchases SET status = 'CANCELLED', cancelled_at = ${now},
              period_end = CASE WHEN period_end IS NULL THEN NULL ELSE ${now}::timestamptz END, updated_at = ${now}
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* findRow(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    /**
     * One step of the cycle job: claims one purchase due at `now` (a SCHEDULED
     * one whose date has come, or an ACTIVE one whose cycle has ended) and moves
     * it one cycle on. 1 when it did, 0 when nothing is due.
     */
    const renewOne = (now: Date) =>
      Effect.gen(function*() {
        const due = yield* findAll(
          DueRow,
          sql`SELECT organization_id, id FROM purchases
              WHERE (status = 'ACTIVE' AND period_end <= ${now}) OR (status = 'SCHEDULED' AND billing_date <= ${now})
              ORDER BY coalesce(period_end, billing_date), id
              LIMIT 1 FOR UPDATE SKIP LOCKED`
        )
        const claimed = due[0]
        if (!claimed) return 0
        const purchase = yield* findRow(claimed.organizationId, claimed.id)
        if (purchase.status === "SCHEDULED") {
          yield* startCycle(claimed.organizationId, purchase, 0, purchase.billingDate)
        } else {
          const boundary = purchase.periodEnd!
          yield* invoiceArrears(claimed.organizationId, purchase, boundary)
          yield* startCycle(claimed.organizationId, purchase, purchase.cycleIndex + 1, boundary)
        }
        return 1
      }).pipe(sql.withTransaction, Effect.orDie)

    return { create, list, get, update, cancel, renewOne } as const
  })
}) {}

