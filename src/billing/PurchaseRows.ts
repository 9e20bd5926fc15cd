/**
 * The purchases repository: how a purchase and what its steps need are read
 * from the database, and the columns and row shapes those reads return.
 * Purchases.ts decides and Renewal.ts computes; this module reads for them:
 * purchases locked for a step (claimed by the cycle job, one for a change or
 * a cancellation) or read unlocked (the upcoming invoices), their balance
 * rows, the customers' owed cycle rows and the organisations' taxes, and the
 * columns a new purchase's plan is frozen with. Locks are taken in the
 * ledger's order (purchases, balance rows, ended cycles' balance rows).
 * The rows the cycle job reads by the thousand are decoded by hand, each
 * decoder beside the Schema it stands for.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema, String, Struct } from "effect"
import { groupBy } from "effect/Array"
import { findAll, orDie } from "../db/Sql.ts"
import * as Rows from "../db/RowDecoders.ts"
import { PurchaseNotFound } from "../errors.ts"
import type { CustomerId, OrganizationId, PurchaseId } from "../ids.ts"
import { customerKey } from "../ledger/Ledger.ts"
import { BillingMode, ComponentType, PlanSnapshot, snapshotOfText } from "../pricing/PlanSnapshot.ts"
import { Money, Timestamp } from "../schema.ts"
import type { TaxRate } from "./InvoiceTotals.ts"
import { BalanceRow, PurchaseRow, PurchaseStatus } from "./Purchase.ts"
import type { LateBalance, RenewalBalance, RenewalState } from "./Renewal.ts"
import { keyPairs } from "../db/KeyPairs.ts"
import { listenedEventsColumn } from "../webhooks/Outbox.ts"

export const purchaseNotFound = (id: string) => new PurchaseNotFound({ message: `Purchase ${id} not found` })

/**
 * A purchase locked for a step, with whether its customer's wallet has a
 * recurring grant (read unlocked). The snapshot arrives as text and is decoded
 * once per distinct snapshot (`snapshotOfText`).
 */
export const LockedRow = Schema.Struct({
  ...PurchaseRow.fields,
  snapshot: Schema.String,
  scheduledSnapshot: Schema.NullOr(Schema.String),
  organizationId: Schema.String,
  hasRecurringGrant: Schema.Boolean,
  invoiceGraceHours: Schema.Number
})
export type LockedPurchase = Omit<typeof LockedRow.Type, "snapshot" | "scheduledSnapshot"> & {
  readonly snapshot: PlanSnapshot
  readonly scheduledSnapshot: PlanSnapshot | null
}

export const LockedBalance = Schema.Struct({ organizationId: Schema.String, ...BalanceRow.fields })

/**
 * LockedRow and LockedBalance decoded by hand (src/db/RowDecoders.ts): a
 * cycle batch reads hundreds of purchases and thousands of balance rows, and
 * their Schema decoding was the largest share of what a billing day
 * allocated. The type annotations hold each decoder to its Schema's type;
 * test/row-decoders.test.ts holds it to the Schema's values and failures.
 */
export const lockedRows: (rows: ReadonlyArray<unknown>) => Effect.Effect<Array<typeof LockedRow.Type>> = Rows.rowDecoder("purchases", {
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
export const lockedBalances: (rows: ReadonlyArray<unknown>) => Effect.Effect<Array<typeof LockedBalance.Type>> = Rows.rowDecoder(
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

/** An organisation's active tax, as a step reads it. */
export const ActiveTax = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  name: Schema.String,
  ratePercent: Money
})

/** The columns a locked purchase is read with (`p` is purchases). */
export const lockedColumns = `p.organization_id, p.id, p.customer_id, p.plan_id, p.status, p.billing_date, p.cycle_index,
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
export const SaleColumns = Schema.Struct({
  activeTaxes: Schema.parseJson(Schema.Array(ActiveTax)),
  invoiceGraceHours: Schema.Number,
  hasRecurringGrant: Schema.Boolean,
  /** The lifecycle events a new purchase can send that some endpoint listens to now. */
  listenedEvents: Schema.Array(Schema.String)
})

/** A snapshot as the jsonb columns keep it (decimals as strings). */
export const snapshotText = (snapshot: PlanSnapshot) => JSON.stringify(Schema.encodeSync(PlanSnapshot)(snapshot))

/** A purchase row but its snapshot, and the columns that read it. */
export const PurchaseScalars = Schema.Struct(Struct.omit(PurchaseRow.fields, "snapshot"))
export const scalarColumns = Object.keys(PurchaseScalars.fields).map(String.camelToSnake).join(", ")

/** Locked purchase rows, decoded; a row that does not decode is a defect. */
export const decodeLocked = (rows: ReadonlyArray<unknown>): Effect.Effect<Array<LockedPurchase>> =>
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

/**
 * What a new purchase's first cycle reads besides its plan, as columns of
 * the statement that freezes the plan (`loadSnapshot`, `p` the plan's row):
 * the organisation's active taxes and invoice grace period, and whether the
 * customer's wallet has a recurring grant, as `lockedColumns` reads them.
 */
export const saleColumns = (sql: SqlClient.SqlClient, customerId: string) =>
  sql`${sql.literal(activeTaxesColumn)},
        (SELECT o.invoice_grace_hours FROM organizations o WHERE o.id = p.organization_id) AS invoice_grace_hours,
        EXISTS (SELECT 1 FROM wallets w WHERE w.organization_id = p.organization_id AND w.customer_id = ${customerId}
          AND w.recurring_grant_usd <> 0) AS has_recurring_grant,
        ${listenedEventsColumn(sql, "p.organization_id", PURCHASE_CREATION_EVENTS)} AS listened_events`

/** What creating a purchase can send: its own event, and those of the invoices its first cycle issues. */
const PURCHASE_CREATION_EVENTS = ["purchase.created", "invoice.created", "invoice.paid"] as const

/**
 * Claims up to `limit` purchases due at `now`, oldest boundary first: an
 * ACTIVE one whose cycle has ended, or a SCHEDULED one whose date has come.
 * Rows another transaction holds are skipped, not waited for.
 */
export const claimDue = (sql: SqlClient.SqlClient, now: Date, limit: number) =>
  Effect.flatMap(
    // The due keys are sorted and claimed alone, then read whole: sorting whole rows with their snapshots
    // spilled to disk. The outer FOR UPDATE, on rows this transaction already holds, reads each one's
    // latest version rather than the statement's snapshot.
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

/** One purchase, locked for a step (a cancellation, a plan change). */
export const lockOne = (sql: SqlClient.SqlClient, organizationId: OrganizationId, id: PurchaseId) =>
  Effect.flatMap(
    Effect.flatMap(
      orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
              WHERE p.organization_id = ${organizationId} AND p.id = ${id} FOR UPDATE OF p`),
      decodeLocked
    ),
    ([purchase]) => (purchase === undefined ? Effect.fail(purchaseNotFound(id)) : Effect.succeed(purchase))
  )

/**
 * What the steps of locked purchases read: their balance rows (locked, in
 * key order), their customers' FINAL cycle rows still owed (locked) and
 * their organisations' active taxes, oldest first. Three statements for any
 * number of purchases; two when the taxes are in hand (`loadedTaxes`), none
 * locked when `lock` is false (the upcoming invoices).
 */
export const loadStates = (
  sql: SqlClient.SqlClient,
  purchases: ReadonlyArray<LockedPurchase>,
  loadedTaxes?: ReadonlyArray<typeof ActiveTax.Type>,
  lock = true
) =>
  Effect.gen(function*() {
    const started = keyPairs(purchases.filter((p) => p.periodEnd !== null).map((p) => [p.organizationId, p.id] as const))
    const balances = started.keys.length === 0 ? [] : yield* Effect.flatMap(
      orDie(sql`SELECT * FROM purchase_balances
              WHERE (organization_id, purchase_id) IN (
                SELECT * FROM unnest(${started.organizations}::text[], ${started.keys}::text[]))
              ORDER BY organization_id, purchase_id, component_id
              ${sql.literal(lock ? "FOR UPDATE" : "")}`),
      lockedBalances
    )
    // The customers' FINAL cycle rows still owed: late lines of the USAGE invoice a cycle end issues
    // (locked after the balance rows, before the wallets: the ledger's order).
    const ending = keyPairs(
      purchases.filter((p) => p.status === "ACTIVE" && p.periodEnd !== null).map((p) => [p.organizationId, p.customerId] as const)
    )
    const owed = ending.keys.length === 0 ? [] : yield* findAll(
      OwedCycleBalance,
      // The owed rows are found first, per customer, through the partial index `cycle_balances_owed`
      // (almost always none), then joined: left to itself the planner joined the customers with
      // purchase_cycles on the organisation alone (a cross product growing with every cycle recorded)
      // while statistics still called the new rows few.
      sql`WITH owed AS MATERIALIZED (
                SELECT cb.organization_id, cb.purchase_id, cb.cycle_index, cb.component_id
                FROM unnest(${ending.organizations}::text[], ${ending.keys}::text[]) AS k(organization_id, customer_id)
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
    const owedOf: Record<string, ReadonlyArray<LateBalance>> = groupBy(owed, customerKey)
    const organizations = [...new Set(purchases.map((p) => p.organizationId))].sort()
    const taxes = loadedTaxes ?? (yield* findAll(
      ActiveTax,
      sql`SELECT organization_id, id, name, rate_percent FROM taxes
              WHERE organization_id = ANY(${organizations}::text[]) AND is_active
              ORDER BY organization_id, id`
    ))
    const balancesOf: Record<string, ReadonlyArray<RenewalBalance>> = groupBy(balances, (row) => `${row.organizationId}/${row.purchaseId}`)
    const taxesOf: Record<string, ReadonlyArray<TaxRate>> = groupBy(taxes, (tax) => tax.organizationId)
    return purchases.map((purchase): RenewalState => {
      // A customer's owed rows go to one step only (a customer has one live purchase; this is a guard).
      const key = customerKey(purchase)
      const lateBalances = owedOf[key] ?? []
      delete owedOf[key]
      return {
        organizationId: purchase.organizationId,
        purchase,
        balances: balancesOf[`${purchase.organizationId}/${purchase.id}`] ?? [],
        taxes: taxesOf[purchase.organizationId] ?? [],
        graceHours: purchase.invoiceGraceHours,
        lateBalances
      }
    })
  })

/** The customer's live purchase (SCHEDULED or ACTIVE), read as a step reads it but unlocked, if it has one. */
export const readLivePurchase = (sql: SqlClient.SqlClient, organizationId: OrganizationId, customerId: CustomerId) =>
  Effect.flatMap(
    orDie(sql`SELECT ${sql.literal(lockedColumns)} FROM purchases p
              WHERE p.organization_id = ${organizationId} AND p.customer_id = ${customerId}
                AND p.status IN ('SCHEDULED', 'ACTIVE')`),
    decodeLocked
  )
