/**
 * A check's reads in one statement, for a customer with no queued signal (the
 * usual case when the worker keeps up): the customer, whether it has queued
 * signals, its active holds, its ACTIVE purchase with the balance rows, its
 * wallet, and the catalogue rows the request names (credit, outcome step,
 * unit by agentKey; the models of its usage). One statement reads them in one
 * snapshot, for one check or for many (the checks that arrived together,
 * src/db/Coalesce.ts, each under its own organisation). A customer with queued signals is read by the batch loader
 * instead (Entitlements.ts), which also loads what those signals name.
 *
 * Built into a BatchContext of this one customer so that SpendState.ts
 * prices the request exactly as on the other path.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import * as Rows from "../db/RowDecoders.ts"
import { orDie } from "../db/Sql.ts"
import { PurchaseRow } from "../billing/Purchase.ts"
import { ZERO } from "../money.ts"
import { snapshotOfText } from "../pricing/PlanSnapshot.ts"
import { Money, Timestamp } from "../schema.ts"
import type { Catalogue, PurchaseContext } from "../pricing/meters/Context.ts"
import type { BatchContext, Customer } from "../signals/BatchContext.ts"
import type { ActiveHold } from "./SpendState.ts"

const Meter = Schema.Literal("CREDIT", "OUTCOME", "UNIT", "WALLET")

const QuickRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  archivedAt: Schema.NullOr(Timestamp),
  hasQueued: Schema.Boolean,
  holds: Schema.Array(Schema.Struct({ id: Schema.String, meter: Meter, targetId: Schema.NullOr(Schema.String), amount: Money })),
  purchase: Schema.NullOr(Schema.Struct({
    id: Schema.String,
    cycleIndex: Schema.Number,
    snapshot: PurchaseRow.fields.snapshot,
    balances: Schema.Array(Schema.Struct({ componentId: Schema.String, remaining: Money, cycleQuantity: Money }))
  })),
  wallet: Schema.NullOr(Money),
  credit: Schema.NullOr(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    basePrice: Money,
    tokensPerCredit: Money,
    marginPercent: Money
  })),
  step: Schema.NullOr(Schema.Struct({ outcomeId: Schema.String, outcomeName: Schema.String, stepName: Schema.String })),
  unit: Schema.NullOr(Schema.Struct({ id: Schema.String, name: Schema.String })),
  models: Schema.Array(Schema.Struct({
    id: Schema.String,
    input: Money,
    output: Money,
    cacheRead: Schema.NullOr(Money),
    cacheWrite: Schema.NullOr(Money)
  }))
})

export interface QuickState {
  readonly customer: Customer
  readonly hasQueued: boolean
  readonly holds: ReadonlyArray<ActiveHold>
  readonly context: BatchContext
}

/** How a quick read names its customer: by id, or as the active holder of an externalId. */
export type QuickReadBy = "ById" | "ByExternalId"

/** One check's quick read: whose state, and what its request names. */
export interface QuickRequest {
  readonly organizationId: string
  /** The customer's id, or its externalId, as `QuickReadBy` says. */
  readonly customer: string
  readonly agentKey: string | undefined
  readonly models: ReadonlyArray<string>
  readonly now: Date
}

export const QuickRowOf = Schema.extend(QuickRow, Schema.Struct({ request: Schema.Number }))

/**
 * QuickRowOf decoded by hand (src/db/RowDecoders.ts), its snapshot from its
 * text through the decoded snapshots' cache: the read runs on every check,
 * and its Schema decoding (the snapshot's every component and decimal, on
 * every check) was part of the large share of the API process's time that went to
 * the Effect runtime and Schema (docs/benchmarks.md, "The check without a
 * fiber"). test/row-decoders.test.ts holds it to the Schema.
 */
export const decodeQuickRows: (rows: ReadonlyArray<unknown>) => Effect.Effect<Array<typeof QuickRowOf.Type>> = Rows.rowDecoder(
  "quick read",
  {
    organizationId: Rows.string,
    id: Rows.string,
    externalId: Rows.nullOr(Rows.string),
    archivedAt: Rows.nullOr(Rows.timestamp),
    hasQueued: Rows.boolean,
    holds: Rows.array(Rows.struct({
      id: Rows.string,
      meter: Rows.literal(Meter.literals),
      targetId: Rows.nullOr(Rows.string),
      amount: Rows.money
    })),
    purchase: Rows.nullOr(Rows.struct({
      id: Rows.string,
      cycleIndex: Rows.number,
      snapshot: (value) => snapshotOfText(Rows.string(value)),
      balances: Rows.array(Rows.struct({ componentId: Rows.string, remaining: Rows.money, cycleQuantity: Rows.money }))
    })),
    wallet: Rows.nullOr(Rows.money),
    credit: Rows.nullOr(Rows.struct({
      id: Rows.string,
      name: Rows.string,
      basePrice: Rows.money,
      tokensPerCredit: Rows.money,
      marginPercent: Rows.money
    })),
    step: Rows.nullOr(Rows.struct({ outcomeId: Rows.string, outcomeName: Rows.string, stepName: Rows.string })),
    unit: Rows.nullOr(Rows.struct({ id: Rows.string, name: Rows.string })),
    models: Rows.array(Rows.struct({
      id: Rows.string,
      input: Rows.money,
      output: Rows.money,
      cacheRead: Rows.nullOr(Rows.money),
      cacheWrite: Rows.nullOr(Rows.money)
    })),
    request: Rows.number
  }
)

/**
 * The state of each of `requests` (all naming their customer `by` the same
 * form), in one statement: one row per request whose customer exists, in
 * the answer's position of its request; undefined where there is none.
 * Each request's rows are read under its own organisation.
 */
export const quickReadMany = (sql: SqlClient.SqlClient, by: QuickReadBy, requests: ReadonlyArray<QuickRequest>) =>
  Effect.map(
    Effect.flatMap(
      orDie(sql`/* prepared: ${sql.literal(by === "ById" ? "entitlements.quick_read.by_id" : "entitlements.quick_read.by_external_id")} */
          SELECT req.n::int AS request, c.organization_id, c.id, c.external_id, c.archived_at,
            (EXISTS (SELECT 1 FROM signals s WHERE s.status = 'QUEUED' AND s.organization_id = c.organization_id
                       AND coalesce(s.customer_id, 'ext:' || s.external_id) = c.id)
             OR c.external_id IS NOT NULL AND EXISTS (SELECT 1 FROM signals s WHERE s.status = 'QUEUED'
                       AND s.organization_id = c.organization_id
                       AND coalesce(s.customer_id, 'ext:' || s.external_id) = 'ext:' || c.external_id)) AS has_queued,
            (SELECT coalesce(json_agg(json_build_object('id', r.id, 'meter', r.meter, 'targetId', r.target_id,
                                                        'amount', r.amount::text)), '[]')
             FROM reservations r WHERE r.organization_id = c.organization_id AND r.customer_id = c.id
               AND r.status = 'HELD' AND r.expires_at > req.now) AS holds,
            (SELECT json_build_object('id', p.id, 'cycleIndex', p.cycle_index, 'snapshot', p.snapshot::text, 'balances',
                      (SELECT coalesce(json_agg(json_build_object('componentId', b.component_id,
                                'remaining', b.remaining::text, 'cycleQuantity', b.cycle_quantity::text)), '[]')
                       FROM purchase_balances b WHERE b.organization_id = p.organization_id AND b.purchase_id = p.id))
             FROM purchases p WHERE p.organization_id = c.organization_id AND p.customer_id = c.id AND p.status = 'ACTIVE'
             ORDER BY p.id DESC LIMIT 1) AS purchase,
            (SELECT w.balance::text FROM wallets w WHERE w.organization_id = c.organization_id AND w.customer_id = c.id) AS wallet,
            (SELECT json_build_object('id', x.id, 'name', x.name, 'basePrice', x.base_price::text,
                      'tokensPerCredit', x.tokens_per_credit::text, 'marginPercent', x.margin_percent::text)
             FROM credits x WHERE x.is_active AND x.organization_id = c.organization_id AND x.agent_key = req.agent_key) AS credit,
            (SELECT json_build_object('outcomeId', o.id, 'outcomeName', o.name, 'stepName', st.name)
             FROM outcome_steps st JOIN outcomes o ON o.organization_id = st.organization_id AND o.id = st.outcome_id
             WHERE st.removed_at IS NULL AND o.is_active AND st.organization_id = c.organization_id
               AND st.agent_key = req.agent_key
             ORDER BY o.id LIMIT 1) AS step,
            (SELECT json_build_object('id', u.id, 'name', u.name) FROM units u
             WHERE u.is_active AND u.organization_id = c.organization_id AND u.agent_key = req.agent_key) AS unit,
            (SELECT coalesce(json_agg(json_build_object('id', m.id, 'input', m.input_rate::text, 'output', m.output_rate::text,
                      'cacheRead', m.cache_read_rate::text, 'cacheWrite', m.cache_write_rate::text)), '[]')
             FROM models m WHERE m.enabled AND m.organization_id = c.organization_id
               AND m.id = ANY(ARRAY(SELECT jsonb_array_elements_text(req.models::jsonb)))) AS models
          FROM unnest(${requests.map((request) => request.organizationId)}::text[],
                      ${requests.map((request) => request.customer)}::text[],
                      ${requests.map((request) => request.agentKey ?? "")}::text[],
                      ${requests.map((request) => JSON.stringify(request.models))}::text[],
                      ${requests.map((request) => request.now.toISOString())}::timestamptz[])
               WITH ORDINALITY AS req(organization_id, customer, agent_key, models, now, n)
          JOIN customers c ON c.organization_id = req.organization_id AND ${
        by === "ById" ? sql`c.id = req.customer` : sql`c.external_id = req.customer AND c.archived_at IS NULL`
      }`),
      decodeQuickRows
    ),
    (rows): ReadonlyArray<QuickState | undefined> => {
      const states: Array<QuickState | undefined> = requests.map(() => undefined)
      for (const row of rows) states[row.request - 1] = stateOf(row, requests[row.request - 1]!.agentKey)
      return states
    }
  )

const stateOf = (row: typeof QuickRow.Type, agentKey: string | undefined): QuickState => {
  const customer: Customer = {
    organizationId: row.organizationId,
    id: row.id,
    externalId: row.externalId,
    archivedAt: row.archivedAt
  }
  const purchase: PurchaseContext | null = row.purchase === null ? null : {
    id: row.purchase.id,
    snapshot: row.purchase.snapshot,
    cycleIndex: row.purchase.cycleIndex,
    closedCycle: false,
    balances: new Map(row.purchase.balances.map((b) => [b.componentId, { ...b }] as const))
  }
  const catalogue: Catalogue = {
    credit: (key) => (key === agentKey && row.credit !== null ? row.credit : undefined),
    outcomeStep: (key) => (key === agentKey && row.step !== null ? row.step : undefined),
    unit: (key) => (key === agentKey && row.unit !== null ? row.unit : undefined),
    composite: () => undefined,
    model: (id) => row.models.find((model) => model.id === id)
  }
  const context: BatchContext = {
    customerById: () => customer,
    customerByExternalId: () => customer,
    customerContext: () => ({
      organizationId: customer.organizationId,
      customerId: customer.id,
      purchase,
      wallet: row.wallet === null ? null : { balance: row.wallet }
    }),
    // The check prices now, in the current cycle; it words no refusal by its cycle.
    cycleOf: () => ({ _tag: "Billed", purchase, period: null, activeCycle: null }),
    isMember: () => false,
    catalogue: () => catalogue,
    run: () => undefined,
    runCost: () => ZERO,
    occurrence: () => undefined,
    wallets: new Map()
  }
  return { customer, hasQueued: row.hasQueued, holds: row.holds, context }
}
