/**
 * Freezing a plan into the snapshot a purchase keeps (the snapshot's shape is
 * src/pricing/PlanSnapshot.ts, on the pricing floor, which the meters read).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { PlanInactive, UnknownPlan } from "../errors.ts"
import { type Plans, targetIdOf, type TargetPrice } from "../plans/Plans.ts"
import type { PlanSnapshot, SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import type { OrganizationId } from "../ids.ts"

const KeyRow = Schema.Struct({ id: Schema.String, key: Schema.String })

const StepRow = Schema.Struct({
  outcomeId: Schema.String,
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String
})

const CoverRow = Schema.Struct({ compositeId: Schema.String, kind: Schema.String, targetId: Schema.String })

/** What the component's charges are priced from, as the snapshot keeps it. */
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

/**
 * Freezes an active plan with its current prices; an archived or unknown plan
 * is 400. Prices and charges come from `Plans.getPriced`, so the plan's cost and
 * what a purchase charges are computed in one place; the snapshot adds what
 * metering needs: agent keys, outcome steps and what each composite covers.
 */
export const loadSnapshot = (plans: Plans, organizationId: OrganizationId, planId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { components: priced, plan } = yield* plans.getPriced(organizationId, planId).pipe(
      Effect.catchTag("PlanNotFound", () => Effect.fail(new UnknownPlan({ message: `Plan ${planId} not found` })))
    )
    if (!plan.isActive) return yield* new PlanInactive({ message: `Plan ${planId} is archived and cannot be purchased` })
    const targetIds = priced.map(({ component }) => targetIdOf(component)).filter((id) => id !== "")
    const outcomeIds = priced.flatMap(({ component }) => (component.outcomeId ? [component.outcomeId] : []))
    const compositeIds = priced.flatMap(({ component }) => (component.compositeId ? [component.compositeId] : []))
    // Ids are unique across kinds, so one lookup finds every target's key (a composite's is its refId).
    const keys = targetIds.length === 0 ? [] : yield* findAll(
      KeyRow,
      sql`SELECT id, agent_key AS key FROM credits WHERE organization_id = ${organizationId} AND ${sql.in("id", targetIds)}
          UNION ALL
          SELECT id, agent_key FROM outcomes WHERE organization_id = ${organizationId} AND ${sql.in("id", targetIds)}
          UNION ALL
          SELECT id, agent_key FROM units WHERE organization_id = ${organizationId} AND ${sql.in("id", targetIds)}
          UNION ALL
          SELECT id, ref_id FROM composites WHERE organization_id = ${organizationId} AND ${sql.in("id", targetIds)}`
    )
    const steps = outcomeIds.length === 0 ? [] : yield* findAll(
      StepRow,
      sql`SELECT outcome_id, id, name, agent_key FROM outcome_steps
          WHERE organization_id = ${organizationId} AND removed_at IS NULL AND ${sql.in("outcome_id", outcomeIds)}
          ORDER BY position`
    )
    const covers = compositeIds.length === 0 ? [] : yield* findAll(
      CoverRow,
      sql`SELECT composite_id, kind, target_id FROM composite_entitlements
          WHERE organization_id = ${organizationId} AND ${sql.in("composite_id", compositeIds)}
          ORDER BY position`
    )
    const components = priced.map(({ charge, component, price }): SnapshotComponent => {
      const targetId = targetIdOf(component) || null
      const coverOf = (kind: string) =>
        covers.filter((cover) => cover.compositeId === targetId && cover.kind === kind).map((cover) => cover.targetId)
      return {
        id: component.id,
        type: component.type,
        billingMode: component.billingMode,
        targetId,
        targetName: component.targetName,
        agentKey: keys.find((row) => row.id === targetId)?.key ?? null,
        // The snapshot keeps null where a number does not apply, as it always has.
        quantity: component.type === "WALLET" || component.billingMode === "ARREAR" ? null : component.quantity,
        amount: component.type === "WALLET" && component.billingMode === "ADVANCE" ? component.amount : null,
        rollover: component.rollover,
        ...pricesOf(price),
        charge,
        steps: steps.filter((step) => step.outcomeId === targetId).map(({ agentKey, id, name }) => ({ id, name, agentKey })),
        covers: component.type === "PRICING_METRIC"
          ? { credits: coverOf("CREDIT"), outcomes: coverOf("OUTCOME"), units: coverOf("UNIT") }
          : { credits: [], outcomes: [], units: [] }
      }
    })
    const snapshot: PlanSnapshot = {
      planId: plan.id,
      name: plan.name,
      description: plan.description,
      billingCycle: plan.billingCycle,
      currencyCode: plan.currencyCode,
      priceAdjustment: plan.priceAdjustment,
      walletFundedArrear: plan.walletFundedArrear,
      cost: plan.cost,
      components
    }
    return snapshot
  })
