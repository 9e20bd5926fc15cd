/**
 * A check's reads in one statement, for a customer with no queued signal (the
 * usual case when the worker keeps up): the customer, whether it has queued
 * signals, its active holds, its ACTIVE purchase with the balance rows, its
 * wallet, and the catalogue rows the request names (credit, outcome step,
 * unit by agentKey; the models of its usage). One statement reads them in one
 * snapshot. A customer with queued signals is read by the batch loader
 * instead (Entitlements.ts), which also loads what those signals name.
 *
 * Built into a BatchContext of this one customer so that SpendState.ts
 * prices the request exactly as on the other path.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { PurchaseRow } from "../billing/Purchase.ts"
import { ZERO } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import type { Catalogue, PurchaseContext } from "../pricing/meters/Context.ts"
import type { BatchContext, Customer } from "../signals/BatchContext.ts"
import type { Hold } from "./SpendState.ts"

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
  readonly holds: ReadonlyArray<Hold>
  readonly context: BatchContext
}

/** The customer named `by` (its id, or the active holder of an externalId) and its state; None when there is none. */
export const quickRead = (
  sql: SqlClient.SqlClient,
  organizationId: string,
  by: { readonly _tag: "ById"; readonly customerId: string } | { readonly _tag: "ByExternalId"; readonly externalId: string },
  agentKey: string | undefined,
  models: ReadonlyArray<string>,
  now: Date
) =>
  Effect.map(
    findAll(
      QuickRow,
      sql`/* prepared: ${sql.literal(by._tag === "ById" ? "entitlements.quick_read.by_id" : "entitlements.quick_read.by_external_id")} */
          SELECT c.organization_id, c.id, c.external_id, c.archived_at,
            (EXISTS (SELECT 1 FROM signals s WHERE s.status = 'QUEUED' AND s.organization_id = c.organization_id
                       AND coalesce(s.customer_id, 'ext:' || s.external_id) = c.id)
             OR c.external_id IS NOT NULL AND EXISTS (SELECT 1 FROM signals s WHERE s.status = 'QUEUED'
                       AND s.organization_id = c.organization_id
                       AND coalesce(s.customer_id, 'ext:' || s.external_id) = 'ext:' || c.external_id)) AS has_queued,
            (SELECT coalesce(json_agg(json_build_object('id', r.id, 'meter', r.meter, 'targetId', r.target_id,
                                                        'amount', r.amount::text)), '[]')
             FROM reservations r WHERE r.organization_id = c.organization_id AND r.customer_id = c.id
               AND r.status = 'HELD' AND r.expires_at > ${now}) AS holds,
            (SELECT json_build_object('id', p.id, 'cycleIndex', p.cycle_index, 'snapshot', p.snapshot, 'balances',
                      (SELECT coalesce(json_agg(json_build_object('componentId', b.component_id,
                                'remaining', b.remaining::text, 'cycleQuantity', b.cycle_quantity::text)), '[]')
                       FROM purchase_balances b WHERE b.organization_id = p.organization_id AND b.purchase_id = p.id))
             FROM purchases p WHERE p.organization_id = c.organization_id AND p.customer_id = c.id AND p.status = 'ACTIVE'
             ORDER BY p.id DESC LIMIT 1) AS purchase,
            (SELECT w.balance::text FROM wallets w WHERE w.organization_id = c.organization_id AND w.customer_id = c.id) AS wallet,
            (SELECT json_build_object('id', x.id, 'name', x.name, 'basePrice', x.base_price::text,
                      'tokensPerCredit', x.tokens_per_credit::text, 'marginPercent', x.margin_percent::text)
             FROM credits x WHERE x.is_active AND x.organization_id = c.organization_id AND x.agent_key = ${agentKey ?? ""}) AS credit,
            (SELECT json_build_object('outcomeId', o.id, 'outcomeName', o.name, 'stepName', st.name)
             FROM outcome_steps st JOIN outcomes o ON o.organization_id = st.organization_id AND o.id = st.outcome_id
             WHERE st.removed_at IS NULL AND o.is_active AND st.organization_id = c.organization_id
               AND st.agent_key = ${agentKey ?? ""}
             ORDER BY o.id LIMIT 1) AS step,
            (SELECT json_build_object('id', u.id, 'name', u.name) FROM units u
             WHERE u.is_active AND u.organization_id = c.organization_id AND u.agent_key = ${agentKey ?? ""}) AS unit,
            (SELECT coalesce(json_agg(json_build_object('id', m.id, 'input', m.input_rate::text, 'output', m.output_rate::text,
                      'cacheRead', m.cache_read_rate::text, 'cacheWrite', m.cache_write_rate::text)), '[]')
             FROM models m WHERE m.enabled AND m.organization_id = c.organization_id AND m.id = ANY(${models}::text[])) AS models
          FROM customers c
          WHERE c.organization_id = ${organizationId} AND ${
        by._tag === "ById" ? sql`c.id = ${by.customerId}` : sql`c.external_id = ${by.externalId} AND c.archived_at IS NULL`
      }`
    ),
    (rows): QuickState | undefined => {
      const row = rows[0]
      if (row === undefined) return undefined
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
        cycleOf: () => ({ _tag: "Billed", purchase }),
        isMember: () => false,
        catalogue: () => catalogue,
        run: () => undefined,
        runCost: () => ZERO,
        occurrence: () => undefined,
        wallets: new Map()
      }
      return { customer, hasQueued: row.hasQueued, holds: row.holds, context }
    }
  )
