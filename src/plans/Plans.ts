/**
 * Plans: create, list (oldest first), read, change, archive and unarchive.
 *
 * Contract for other features (stable):
 * - `get(organizationId, planId)`: the `Plan`, active or archived (`isActive`),
 *   with `walletFundedArrear`, `priceAdjustment`, `currencyCode`, `cost` (from the
 *   catalogue's prices at the time of the call; docs/catalogue-units-composites-plans.md "Plans") and `entitlements`:
 *   components with `type`, `billingMode`, the target id (`targetIdOf`),
 *   `targetName`, `quantity`, `amount` and `rollover`. 404 when missing or
 *   another organisation's.
 * - `getPriced(organizationId, planId)`: the same plan plus, per component, the
 *   catalogue prices its charges depend on (`TargetPrice`) and its ADVANCE
 *   charge: what a purchase freezes in its snapshot.
 * - `advanceCharge(component, price)`: one component's ADVANCE charge (0 for an
 *   ARREAR component); the plan cost is their sum plus `priceAdjustment`.
 *
 * Rules: every component names exactly the target its type needs, a record of
 * the same organisation (unknown: 400; archived: 409); ADVANCE credit, outcome,
 * unit and composite components need `quantity` > 0 (whole for outcomes and
 * composites); an ADVANCE wallet needs `amount` >= 0; at most one WALLET
 * component; `walletFundedArrear` needs an ADVANCE wallet and an ARREAR
 * component; the cost may not be negative. PATCH with `entitlements` replaces
 * the components (purchases keep their own snapshot).
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findCataloguePage } from "../db/Sql.ts"
import { InvalidPlanComponent, InvalidWalletFunding, NegativePlanCost, PlanNotFound } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { type Decimal, sum, toSql, ZERO } from "../money.ts"
import { type CreditTerms, unitTotal, type UnitPricing } from "../pricing/Pricing.ts"
import { Money, Timestamp } from "../schema.ts"
import { checkReferences } from "../composites/References.ts"
import type { CatalogueListQuery } from "../Page.ts"
import { PricingType, UnitTier } from "../units/Unit.ts"
import {
  BillingCycle,
  BillingMode,
  ComponentType,
  type IdField,
  idFields,
  Plan,
  PlanComponent,
  type PlanComponentInput,
  type PlanCreate,
  type PlanUpdate,
  targetField
} from "./Plan.ts"
import { currentTime } from "../time.ts"
import { archiveDoors } from "../db/ActiveFlag.ts"

/** The catalogue prices a component's charges depend on. */
export type TargetPrice =
  | { readonly type: "WALLET" }
  | { readonly type: "CREDIT"; readonly pricePerCredit: Decimal; readonly terms: CreditTerms }
  | { readonly type: "OUTCOME"; readonly pricePerOutcome: Decimal }
  | { readonly type: "UNIT"; readonly pricing: UnitPricing }
  | { readonly type: "PRICING_METRIC"; readonly price: Decimal }

export interface PricedComponent {
  readonly component: PlanComponent
  readonly price: TargetPrice
  /** The component's ADVANCE charge per cycle (0 for ARREAR). */
  readonly charge: Decimal
}

export interface PricedPlan {
  readonly plan: Plan
  readonly components: ReadonlyArray<PricedComponent>
}

/**
 * One component's ADVANCE charge (docs/catalogue-units-composites-plans.md "Plans"): credit qty * pricePerCredit,
 * outcome qty * pricePerOutcome, unit total(qty), composite qty * price,
 * wallet amount. ARREAR components are charged by usage, so 0 here.
 */
export const advanceCharge = (
  component: { readonly billingMode: BillingMode; readonly quantity: Decimal | null; readonly amount: Decimal | null },
  price: TargetPrice
): Decimal => {
  if (component.billingMode === "ARREAR") return ZERO
  const quantity = component.quantity ?? ZERO
  switch (price.type) {
    case "WALLET":
      return component.amount ?? ZERO
    case "CREDIT":
      return BigDecimal.normalize(BigDecimal.multiply(quantity, price.pricePerCredit))
    case "OUTCOME":
      return BigDecimal.normalize(BigDecimal.multiply(quantity, price.pricePerOutcome))
    case "UNIT":
      return unitTotal(price.pricing, quantity)
    case "PRICING_METRIC":
      return BigDecimal.normalize(BigDecimal.multiply(quantity, price.price))
  }
}

/** The id of the record a component sells; "" for the wallet. */
export const targetIdOf = (component: PlanComponent): string => {
  const field = targetField[component.type]
  return field === undefined ? "" : component[field]
}

const PlanRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  billingCycle: BillingCycle,
  priceAdjustment: Money,
  walletFundedArrear: Schema.Boolean,
  currencyCode: Schema.String,
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
type PlanRow = typeof PlanRow.Type

/** A plan component with its target's name and catalogue prices, as `componentColumns` reads it. */
export const ComponentRow = Schema.Struct({
  id: Schema.String,
  planId: Schema.String,
  type: ComponentType,
  billingMode: BillingMode,
  creditId: Schema.NullOr(Schema.String),
  outcomeId: Schema.NullOr(Schema.String),
  unitId: Schema.NullOr(Schema.String),
  compositeId: Schema.NullOr(Schema.String),
  quantity: Schema.NullOr(Money),
  amount: Schema.NullOr(Money),
  rollover: Schema.Boolean,
  targetName: Schema.NullOr(Schema.String),
  pricePerCredit: Schema.NullOr(Money),
  creditBasePrice: Schema.NullOr(Money),
  creditTokensPerCredit: Schema.NullOr(Money),
  creditMarginPercent: Schema.NullOr(Money),
  pricePerOutcome: Schema.NullOr(Money),
  pricingType: Schema.NullOr(PricingType),
  flatPrice: Schema.NullOr(Money),
  tiers: Schema.NullOr(Schema.Array(UnitTier)),
  compositePrice: Schema.NullOr(Money)
})
export type ComponentRow = typeof ComponentRow.Type

/**
 * The select list and joins of `ComponentRow` (`pc` is plan_components), shared
 * by the plan reads and the one statement a sale reads (src/billing/Snapshot.ts).
 */
export const componentColumns = `pc.id, pc.plan_id, pc.type, pc.billing_mode, pc.credit_id, pc.outcome_id, pc.unit_id,
       pc.composite_id, pc.quantity, pc.amount, pc.rollover,
       coalesce(c.name, o.name, u.name, m.name) AS target_name,
       c.price_per_credit, c.base_price AS credit_base_price,
       c.tokens_per_credit AS credit_tokens_per_credit, c.margin_percent AS credit_margin_percent,
       o.price_per_outcome, u.pricing_type, u.flat_price, u.tiers,
       m.price AS composite_price`
export const componentJoins = `LEFT JOIN credits c ON c.organization_id = pc.organization_id AND c.id = pc.credit_id
  LEFT JOIN outcomes o ON o.organization_id = pc.organization_id AND o.id = pc.outcome_id
  LEFT JOIN units u ON u.organization_id = pc.organization_id AND u.id = pc.unit_id
  LEFT JOIN composites m ON m.organization_id = pc.organization_id AND m.id = pc.composite_id`

/** The foreign keys guarantee the target row; its absence is a bug, not a client error. */
export const required = <A>(value: A | null, what: string): A => {
  if (value === null) throw new Error(`plan component is missing its ${what}`)
  return value
}

export const priceOf = (row: ComponentRow): TargetPrice => {
  switch (row.type) {
    case "WALLET":
      return { type: "WALLET" }
    case "CREDIT":
      return {
        type: "CREDIT",
        pricePerCredit: required(row.pricePerCredit, "credit"),
        terms: {
          basePrice: required(row.creditBasePrice, "credit"),
          tokensPerCredit: required(row.creditTokensPerCredit, "credit"),
          marginPercent: required(row.creditMarginPercent, "credit")
        }
      }
    case "OUTCOME":
      return { type: "OUTCOME", pricePerOutcome: required(row.pricePerOutcome, "outcome") }
    case "UNIT":
      return {
        type: "UNIT",
        pricing: { pricingType: required(row.pricingType, "unit"), flatPrice: row.flatPrice, tiers: row.tiers ?? [] }
      }
    case "PRICING_METRIC":
      return { type: "PRICING_METRIC", price: required(row.compositePrice, "composite") }
  }
}

const pricedComponentOf = (row: ComponentRow): PricedComponent => {
  const price = priceOf(row)
  const component = new PlanComponent({
    id: row.id,
    type: row.type,
    billingMode: row.billingMode,
    creditId: row.creditId ?? "",
    outcomeId: row.outcomeId ?? "",
    unitId: row.unitId ?? "",
    compositeId: row.compositeId ?? "",
    targetName: row.type === "WALLET" ? "Wallet" : required(row.targetName, "target"),
    quantity: row.quantity ?? ZERO,
    amount: row.amount ?? ZERO,
    rollover: row.rollover
  })
  return { component, price, charge: advanceCharge(component, price) }
}

/** A component as validated for storage. */
interface ComponentSpec {
  readonly type: ComponentType
  readonly billingMode: BillingMode
  readonly targetId: string | null
  readonly quantity: Decimal | null
  readonly amount: Decimal | null
  readonly rollover: boolean
}

const sent = (value: string | null | undefined): value is string => value !== undefined && value !== null && value !== ""

type Checked<A> = { readonly value: A } | { readonly error: string }

/** Checks one component's own fields; the message names it by its place in the list. */
const componentSpecOf = (input: PlanComponentInput, index: number): Checked<ComponentSpec> => {
  const where = `entitlements[${index}]`
  const fail = (message: string) => ({ error: `${where}: ${message}` })
  const field = targetField[input.type]
  for (const other of idFields) {
    if (other !== field && sent(input[other])) return fail(`${other} does not apply to a ${input.type} component`)
  }
  const targetId = field === undefined ? null : input[field]
  if (field !== undefined && !sent(targetId)) return fail(`${field} is required for a ${input.type} component`)
  const advance = input.billingMode === "ADVANCE"
  // Plans answer 0 where quantity or amount does not apply; a client sending that 0 back means "not set".
  const notApplicable = (value: Decimal | null | undefined, applies: boolean) =>
    value === undefined || value === null || (!applies && BigDecimal.isZero(value)) ? null : value
  const quantity = notApplicable(input.quantity, advance && input.type !== "WALLET")
  const amount = notApplicable(input.amount, advance && input.type === "WALLET")
  if (input.type === "WALLET") {
    if (quantity !== null) return fail("quantity does not apply to a WALLET component; its grant is amount")
    if (advance && amount === null) return fail("amount is required for an ADVANCE WALLET component")
    if (!advance && amount !== null) return fail("amount applies to an ADVANCE WALLET component only")
    if (amount !== null && BigDecimal.lessThan(amount, ZERO)) return fail("amount must be 0 or more")
  } else {
    if (amount !== null) return fail("amount applies to WALLET components only")
    if (advance && quantity === null) return fail(`quantity is required for an ADVANCE ${input.type} component`)
    if (!advance && quantity !== null) return fail("quantity applies to ADVANCE components only")
    if (quantity !== null && !BigDecimal.greaterThan(quantity, ZERO)) return fail("quantity must be above 0")
    if (quantity !== null && (input.type === "OUTCOME" || input.type === "PRICING_METRIC") && !BigDecimal.isInteger(quantity)) {
      return fail(`quantity of a ${input.type} component must be a whole number`)
    }
  }
  if (!advance && input.rollover === true) return fail("rollover applies to ADVANCE components only")
  return {
    value: {
      type: input.type,
      billingMode: input.billingMode,
      targetId: targetId ?? null,
      quantity,
      amount,
      rollover: input.rollover ?? false
    }
  }
}

/** `walletFundedArrear` funds ARREAR charges from an ADVANCE wallet: both must be on the plan. */
const walletFundingProblem = (components: ReadonlyArray<{ readonly type: ComponentType; readonly billingMode: BillingMode }>) =>
  !components.some((c) => c.type === "WALLET" && c.billingMode === "ADVANCE")
    ? "walletFundedArrear needs an ADVANCE WALLET component"
    : !components.some((c) => c.billingMode === "ARREAR")
    ? "walletFundedArrear needs at least one ARREAR component"
    : undefined

const notFound = (id: string) => new PlanNotFound({ message: `Plan ${id} not found` })

export class Plans extends Effect.Service<Plans>()("Plans", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Every component's own rules, the plan-wide ones, then the references. */
    const specsOf = (organizationId: OrganizationId, inputs: ReadonlyArray<PlanComponentInput>) =>
      Effect.gen(function*() {
        const specs: Array<ComponentSpec> = []
        const seen = new Set<string>()
        for (const [index, input] of inputs.entries()) {
          const checked = componentSpecOf(input, index)
          if ("error" in checked) return yield* new InvalidPlanComponent({ message: checked.error })
          const spec = checked.value
          if (spec.type === "WALLET" && specs.some((other) => other.type === "WALLET")) {
            return yield* new InvalidPlanComponent({ message: `entitlements[${index}]: a plan has at most one WALLET component` })
          }
          const key = `${spec.type} ${spec.targetId} ${spec.billingMode}`
          if (seen.has(key)) return yield* new InvalidPlanComponent({ message: `entitlements[${index}]: ${key} is listed twice` })
          seen.add(key)
          specs.push(spec)
        }
        const idsOf = (type: ComponentType) => [
          ...new Set(specs.filter((spec) => spec.type === type).map((spec) => spec.targetId!))
        ]
        yield* checkReferences(sql, organizationId, "credit", idsOf("CREDIT"))
        yield* checkReferences(sql, organizationId, "outcome", idsOf("OUTCOME"))
        yield* checkReferences(sql, organizationId, "unit", idsOf("UNIT"))
        yield* checkReferences(sql, organizationId, "composite", idsOf("PRICING_METRIC"))
        return specs
      })

    const storeComponents = (organizationId: OrganizationId, planId: string, specs: ReadonlyArray<ComponentSpec>) =>
      Effect.gen(function*() {
        yield* sql`DELETE FROM plan_components WHERE organization_id = ${organizationId} AND plan_id = ${planId}`
        yield* sql`INSERT INTO plan_components ${
          sql.insert(specs.map((spec, position) => {
            const ids: Record<IdField, string | null> = { creditId: null, outcomeId: null, unitId: null, compositeId: null }
            const field = targetField[spec.type]
            if (field !== undefined) ids[field] = spec.targetId
            return {
              organizationId,
              id: makeId("pcomp"),
              planId,
              position,
              type: spec.type,
              billingMode: spec.billingMode,
              ...ids,
              quantity: spec.quantity === null ? null : toSql(spec.quantity),
              amount: spec.amount === null ? null : toSql(spec.amount),
              rollover: spec.rollover
            }
          }))
        }`
      })

    /** Plans with their components priced at the catalogue's current prices, in the rows' order. */
    const priced = (organizationId: OrganizationId, rows: ReadonlyArray<PlanRow>) =>
      Effect.gen(function*() {
        if (rows.length === 0) return []
        const componentRows = yield* findAll(
          ComponentRow,
          sql`SELECT ${sql.literal(componentColumns)}
              FROM plan_components pc
              ${sql.literal(componentJoins)}
              WHERE pc.organization_id = ${organizationId} AND pc.plan_id IN ${sql.in(rows.map((row) => row.id))}
              ORDER BY pc.plan_id, pc.position`
        )
        return yield* Effect.try(() =>
          rows.map((row): PricedPlan => {
            const components = componentRows.filter((c) => c.planId === row.id).map(pricedComponentOf)
            const cost = BigDecimal.normalize(
              BigDecimal.sum(sum(components.map((c) => c.charge)), row.priceAdjustment)
            )
            return {
              plan: new Plan({ ...row, cost, entitlements: components.map((c) => c.component) }),
              components
            }
          })
        ).pipe(Effect.orDie)
      })

    const findRow = findByIdOr(sql, PlanRow, "plans", notFound)

    const getPriced = Effect.fn("Plans.getPriced")((organizationId: OrganizationId, id: string) =>
      Effect.flatMap(findRow(organizationId, id, false), (row) =>
        Effect.map(priced(organizationId, [row]), (plans) => plans[0]!)))

    const get = Effect.fn("Plans.get")((organizationId: OrganizationId, id: string) =>
      Effect.map(getPriced(organizationId, id), (pricedPlan) => pricedPlan.plan))

    /** The plan as stored now, checked as a whole: funding rule and a cost of 0 or more. */
    const checkedPlan = (organizationId: OrganizationId, id: string) =>
      Effect.gen(function*() {
        const plan = yield* get(organizationId, id)
        if (plan.walletFundedArrear) {
          const problem = walletFundingProblem(plan.entitlements)
          if (problem !== undefined) return yield* new InvalidWalletFunding({ message: problem })
        }
        if (BigDecimal.lessThan(plan.cost, ZERO)) {
          return yield* new NegativePlanCost({
            message: `priceAdjustment would make the plan cost negative (${BigDecimal.format(plan.cost)})`
          })
        }
        return plan
      })

    const create = Effect.fn("Plans.create")(function*(organizationId: OrganizationId, input: PlanCreate) {
        const specs = yield* specsOf(organizationId, input.entitlements)
        const id = makeId("plan")
        const [organization] = yield* sql<{ currencyCode: string }>`
          SELECT currency_code FROM organizations WHERE id = ${organizationId}`
        yield* sql`INSERT INTO plans ${
          sql.insert({
            organizationId,
            id,
            name: input.name,
            description: input.description ?? "",
            billingCycle: input.billingCycle,
            priceAdjustment: toSql(input.priceAdjustment ?? ZERO),
            walletFundedArrear: input.walletFundedArrear ?? false,
            currencyCode: organization?.currencyCode ?? "USD"
          })
        }`
        yield* storeComponents(organizationId, id, specs)
        // The row just written: not finding it is no answer of this request, but a defect.
        return yield* Effect.catchTag(checkedPlan(organizationId, id), "PlanNotFound", (missing) => Effect.die(missing))
      }, sql.withTransaction, dieOnSqlError)

    const page = findCataloguePage(sql, PlanRow, "plans")
    const list = Effect.fn("Plans.list")((organizationId: OrganizationId, query: CatalogueListQuery) =>
      Effect.flatMap(
        page(organizationId, query),
        (rows) => Effect.map(priced(organizationId, rows), (plans) => plans.map((p) => p.plan))
      ))

    const update = Effect.fn("Plans.update")(function*(organizationId: OrganizationId, id: string, patch: PlanUpdate) {
        yield* findRow(organizationId, id, true)
        if (patch.entitlements !== undefined) {
          yield* storeComponents(organizationId, id, yield* specsOf(organizationId, patch.entitlements))
        }
        const changes: Record<string, unknown> = { updatedAt: yield* currentTime }
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.description !== undefined) changes.description = patch.description ?? ""
        if (patch.billingCycle !== undefined) changes.billingCycle = patch.billingCycle
        if (patch.priceAdjustment !== undefined) changes.priceAdjustment = toSql(patch.priceAdjustment)
        if (patch.walletFundedArrear !== undefined) changes.walletFundedArrear = patch.walletFundedArrear
        yield* sql`UPDATE plans SET ${sql.update(changes)} WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* checkedPlan(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /** Archives or unarchives; an archived plan is not purchasable. Doing it twice answers the same plan. */
    const setActive = (organizationId: OrganizationId, id: string, active: boolean) =>
      Effect.gen(function*() {
        yield* findRow(organizationId, id, true)
        yield* sql`UPDATE plans SET is_active = ${active}, updated_at = now()
                   WHERE organization_id = ${organizationId} AND id = ${id} AND is_active <> ${active}`
        return yield* get(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    return {
      create,
      list,
      get,
      getPriced,
      update,
      ...archiveDoors("Plans", setActive)
    } as const
  })
}) {}
