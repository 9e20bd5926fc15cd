/**
 * Freezing a plan into the snapshot a purchase keeps (the snapshot's shape is
 * src/pricing/PlanSnapshot.ts, on the pricing floor, which the meters read).
 */
import { SqlClient, type Statement } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { decodeRows, orDie } from "../db/Sql.ts"
import { PlanInactive, UnknownPlan } from "../errors.ts"
import { advanceCharge, ComponentRow, componentColumns, componentJoins, priceOf, required, type TargetPrice } from "../plans/Plans.ts"
import type { PlanSnapshot, SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import type { OrganizationId } from "../ids.ts"
import { sum, ZERO } from "../money.ts"
import { Money } from "../schema.ts"
import { prepared } from "../db/Prepared.ts"

const Step = Schema.Struct({ id: Schema.String, name: Schema.String, agentKey: Schema.String })

const Cover = Schema.Struct({ kind: Schema.String, targetId: Schema.String })

/** The plan's own columns, on every row of the statement (a plan without components has one row of them). */
const PlanColumns = Schema.Struct({
  planRowId: Schema.String,
  planName: Schema.String,
  planDescription: Schema.String,
  planBillingCycle: Schema.String,
  planPriceAdjustment: Money,
  planWalletFundedArrear: Schema.Boolean,
  planCurrencyCode: Schema.String,
  planIsActive: Schema.Boolean
})

/** A component as the plan reads price it, with what metering needs besides: its target's key, steps and covers. */
const SnapshotRow = Schema.Struct({
  ...ComponentRow.fields,
  agentKey: Schema.NullOr(Schema.String),
  steps: Schema.Array(Step),
  covers: Schema.Array(Cover)
})

/** What the components' charges are priced from, as the snapshot keeps it. */
const pricesOf = (price: TargetPrice) => ({
  unitPrice: price.type === "CREDIT"
    ? price.pricePerCredit
    : price.type === "OUTCOME"
    ? price.pricePerOutcome
    : price.type === "PRICING_METRIC"
    ? price.price
    : null,
  pricingType: price.type === "UNIT" ? price.pricing.pricingType : null,
  flatPrice: price.type === "UNIT" ? price.pricing.flatPrice : null,
  tiers: price.type === "UNIT" ? price.pricing.tiers : [],
  ...(price.type === "CREDIT" ? { creditTerms: price.terms } : {})
})

const targetIdOfRow = (row: ComponentRow): string | null => {
  switch (row.type) {
    case "WALLET":
      return null
    case "CREDIT":
      return row.creditId || null
    case "OUTCOME":
      return row.outcomeId || null
    case "UNIT":
      return row.unitId || null
    case "PRICING_METRIC":
      return row.compositeId || null
  }
}

const componentOf = (row: typeof SnapshotRow.Type): SnapshotComponent => {
  // As the plan reads it (Plans.ts pricedComponentOf): 0 where a quantity or amount is not stored.
  const quantity = row.quantity ?? ZERO
  const amount = row.amount ?? ZERO
  const price = priceOf(row)
  const coverOf = (kind: string) => row.covers.filter((cover) => cover.kind === kind).map((cover) => cover.targetId)
  return {
    id: row.id,
    type: row.type,
    billingMode: row.billingMode,
    targetId: targetIdOfRow(row),
    targetName: row.type === "WALLET" ? "Wallet" : required(row.targetName, "target"),
    agentKey: row.agentKey,
    // The snapshot keeps null where a number does not apply, as it always has.
    quantity: row.type === "WALLET" || row.billingMode === "ARREAR" ? null : quantity,
    amount: row.type === "WALLET" && row.billingMode === "ADVANCE" ? amount : null,
    rollover: row.rollover,
    ...pricesOf(price),
    charge: advanceCharge({ billingMode: row.billingMode, quantity, amount }, price),
    steps: row.steps,
    covers: row.type === "PRICING_METRIC"
      ? { credits: coverOf("CREDIT"), outcomes: coverOf("OUTCOME"), units: coverOf("UNIT") }
      : { credits: [], outcomes: [], units: [] }
  }
}

/**
 * Freezes an active plan with its current prices, in one statement; an
 * archived or unknown plan is 400. Each component is priced by the plan's own
 * rules (Plans.ts `priceOf`, `advanceCharge`), so the plan's cost and what a
 * purchase charges are computed in one place; the snapshot adds what metering
 * needs: agent keys, outcome steps and what each composite covers.
 *
 * `extra` is further columns of the organisation the caller reads in the same
 * statement (`p` is the plan's row), decoded by `extraSchema` from the first row.
 */
export const loadSnapshot = <A, I>(
  organizationId: OrganizationId,
  planId: string,
  extra: Statement.Fragment,
  extraSchema: Schema.Schema<A, I, never>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One row a component, in the plan's order; its target's key, an outcome's live steps and a composite's
    // entitlements come along as JSON (ids and names only: the decimals are columns).
    // Prepared (src/db/Pool.ts), as the sale's other statements: planning them was a large share of PostgreSQL's
    // CPU a purchase (docs/benchmarks.md, "A sale's three statements prepared").
    const rows = yield* orDie(prepared(sql)`SELECT p.id AS plan_row_id, p.name AS plan_name, p.description AS plan_description,
          p.billing_cycle AS plan_billing_cycle, p.price_adjustment AS plan_price_adjustment,
          p.wallet_funded_arrear AS plan_wallet_funded_arrear, p.currency_code AS plan_currency_code,
          p.is_active AS plan_is_active,
          ${sql.literal(componentColumns)},
          coalesce(c.agent_key, o.agent_key, u.agent_key, m.ref_id) AS agent_key,
          (SELECT coalesce(json_agg(json_build_object('id', s.id, 'name', s.name, 'agentKey', s.agent_key) ORDER BY s.position), '[]')
            FROM outcome_steps s
            WHERE s.organization_id = pc.organization_id AND s.outcome_id = pc.outcome_id AND s.removed_at IS NULL) AS steps,
          (SELECT coalesce(json_agg(json_build_object('kind', ce.kind, 'targetId', ce.target_id) ORDER BY ce.position), '[]')
            FROM composite_entitlements ce
            WHERE ce.organization_id = pc.organization_id AND ce.composite_id = pc.composite_id) AS covers,
          ${extra}
        FROM plans p
        LEFT JOIN plan_components pc ON pc.organization_id = p.organization_id AND pc.plan_id = p.id
        ${sql.literal(componentJoins)}
        WHERE p.organization_id = ${organizationId} AND p.id = ${planId}
        ORDER BY pc.position`)
    if (rows.length === 0) return yield* new UnknownPlan({ message: `Plan ${planId} not found` })
    const [plan] = yield* decodeRows(PlanColumns)([rows[0]])
    if (!plan!.planIsActive) return yield* new PlanInactive({ message: `Plan ${planId} is archived and cannot be purchased` })
    const [extraRow] = yield* decodeRows(extraSchema)([rows[0]])
    const componentRows = yield* decodeRows(SnapshotRow)(rows.filter((row) => (row as { id: unknown }).id !== null))
    const components = yield* Effect.orDie(Effect.try(() => componentRows.map(componentOf)))
    const snapshot: PlanSnapshot = {
      planId: plan!.planRowId,
      name: plan!.planName,
      description: plan!.planDescription,
      billingCycle: plan!.planBillingCycle,
      currencyCode: plan!.planCurrencyCode,
      priceAdjustment: plan!.planPriceAdjustment,
      walletFundedArrear: plan!.planWalletFundedArrear,
      // As Plans.ts prices a plan: the ADVANCE charges and the price adjustment.
      cost: BigDecimal.normalize(BigDecimal.sum(sum(components.map((c) => c.charge)), plan!.planPriceAdjustment)),
      components
    }
    return { snapshot, extra: extraRow! }
  })
