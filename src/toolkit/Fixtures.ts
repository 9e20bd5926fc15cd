/**
 * `billing fixtures load FILE` and `billing seed`: a whole workspace from one
 * document (catalogue, plans, customers, purchases, webhook endpoints), built
 * through the same services as the API, so every rule and limit applies.
 *
 * Loading is idempotent by natural keys: models by id (built-in ones
 * included), credits, outcomes and units by their active agentKey, composites
 * by active refId, plans by active name, customers by externalId, purchases by
 * (customer, plan), endpoints by url. What exists is left as it is (not updated) and reported as "existing".
 * Records are written one by one, each in its own transaction: a failure
 * stops the load, and loading the same file again finishes the job.
 */
import { Effect, Option, Schema } from "effect"
import { Composites } from "../composites/Composites.ts"
import { CompositeCreate } from "../composites/Composite.ts"
import { Customers } from "../customers/Customers.ts"
import { CustomerCreate } from "../customers/Customer.ts"
import { Credits } from "../credits/Credits.ts"
import { CreditCreate } from "../credits/Credit.ts"
import { FixtureTargetNotFound } from "../errors.ts"
import { MAX_LIMIT } from "../Page.ts"
import { Models } from "../models/Models.ts"
import { ModelSet } from "../models/Model.ts"
import { Outcomes } from "../outcomes/Outcomes.ts"
import { OutcomeCreate } from "../outcomes/Outcome.ts"
import { Plans } from "../plans/Plans.ts"
import { PlanComponentInput, PlanCreate } from "../plans/Plan.ts"
import { Purchases } from "../billing/Purchases.ts"
import { ExternalId, RefId } from "../schema.ts"
import { Units } from "../units/Units.ts"
import { UnitCreate } from "../units/Unit.ts"
import { WebhookEndpoints } from "../webhooks/Endpoints.ts"
import { EndpointCreate } from "../webhooks/Webhook.ts"
import type { CustomerId, OrganizationId } from "../ids.ts"

/** A catalogue record named by its agentKey (credits, outcomes, units) or refId (composites). */
const Key = RefId

/** A composite names its members by key instead of by id. */
const CompositeFixture = Schema.Struct({
  ...CompositeCreate.fields,
  entitlements: Schema.Struct({
    credits: Schema.optional(Schema.Array(Key)),
    outcomes: Schema.optional(Schema.Array(Key)),
    units: Schema.optional(Schema.Array(Key))
  })
})

/** A plan component names its target by key: `credit`, `outcome`, `unit` (agentKey) or `composite` (refId). */
const ComponentFixture = Schema.Struct({
  ...PlanComponentInput.omit("creditId", "outcomeId", "unitId", "compositeId").fields,
  credit: Schema.optional(Key),
  outcome: Schema.optional(Key),
  unit: Schema.optional(Key),
  composite: Schema.optional(Key)
})

const PlanFixture = Schema.Struct({ ...PlanCreate.fields, entitlements: Schema.Array(ComponentFixture) })

/** Fixture customers need an externalId: it is what makes loading twice find them again. */
const CustomerFixture = Schema.Struct({ ...CustomerCreate.fields, externalId: ExternalId })

const PurchaseFixture = Schema.Struct({ externalId: ExternalId, plan: Schema.String })

export const FixtureDocument = Schema.Struct({
  models: Schema.optional(Schema.Array(ModelSet)),
  credits: Schema.optional(Schema.Array(CreditCreate)),
  outcomes: Schema.optional(Schema.Array(OutcomeCreate)),
  units: Schema.optional(Schema.Array(UnitCreate)),
  composites: Schema.optional(Schema.Array(CompositeFixture)),
  plans: Schema.optional(Schema.Array(PlanFixture)),
  customers: Schema.optional(Schema.Array(CustomerFixture)),
  purchases: Schema.optional(Schema.Array(PurchaseFixture)),
  webhooks: Schema.optional(Schema.Array(EndpointCreate))
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type FixtureDocument = typeof FixtureDocument.Type
export type FixtureDocumentInput = typeof FixtureDocument.Encoded

export type FixtureKind =
  | "model"
  | "credit"
  | "outcome"
  | "unit"
  | "composite"
  | "plan"
  | "customer"
  | "purchase"
  | "webhook"

export interface LoadedRecord {
  readonly kind: FixtureKind
  /** The natural key the record was matched by. */
  readonly key: string
  readonly id: string
  readonly status: "created" | "existing"
  /** A webhook endpoint made now: its signing secret, shown this once (as `billing webhook add` does). */
  readonly secret?: string
}

/** Every row of a paged catalogue list. */
const allPages = <A extends { readonly id: string }, E, R>(
  page: (cursor: string | undefined) => Effect.Effect<ReadonlyArray<A>, E, R>
): Effect.Effect<Array<A>, E, R> =>
  Effect.gen(function*() {
    const rows: Array<A> = []
    let cursor: string | undefined
    for (;;) {
      const batch = yield* page(cursor)
      rows.push(...batch)
      if (batch.length < MAX_LIMIT) return rows
      cursor = batch[batch.length - 1]!.id
    }
  })

const listQuery = (cursor: string | undefined) => ({ page: { limit: MAX_LIMIT, cursor }, active: true })

/**
 * Loads a decoded document into an organisation, in dependency order, and
 * reports every record with whether it was made now or found.
 */
export const loadFixtures = (
  organizationId: OrganizationId,
  document: FixtureDocument,
  onRecord: (record: LoadedRecord) => void = () => {}
) =>
  Effect.gen(function*() {
    const models = yield* Models
    const credits = yield* Credits
    const outcomes = yield* Outcomes
    const units = yield* Units
    const composites = yield* Composites
    const plans = yield* Plans
    const customers = yield* Customers
    const purchases = yield* Purchases
    const endpoints = yield* WebhookEndpoints

    const loaded: Array<LoadedRecord> = []
    const note = <Id extends string>(kind: FixtureKind, key: string, id: Id, created: boolean, secret?: string) => {
      const record: LoadedRecord = { kind, key, id, status: created ? "created" : "existing", ...(secret ? { secret } : {}) }
      loaded.push(record)
      onRecord(record)
      return id
    }
    /** The id of an existing record, or of the one `create` makes. */
    const ensure = <Id extends string, E, R>(
      kind: FixtureKind,
      key: string,
      existing: Option.Option<{ readonly id: Id }>,
      create: () => Effect.Effect<{ readonly id: Id }, E, R>
    ) =>
      Option.match(existing, {
        onSome: (found) => Effect.succeed(note(kind, key, found.id, false)),
        onNone: () => Effect.map(create(), (made) => note(kind, key, made.id, true))
      })

    for (const model of document.models ?? []) {
      const found = yield* Effect.option(models.get(organizationId, model.id))
      yield* ensure("model", model.id, found, () => models.set(organizationId, model))
    }

    // Endpoints first, so that the purchases below already send their wallet events.
    if (document.webhooks?.length) {
      const live = yield* endpoints.list(organizationId)
      for (const webhook of document.webhooks) {
        const found = live.find((e) => e.url === webhook.url)
        if (found) note("webhook", webhook.url, found.id, false)
        else {
          const added = yield* endpoints.add(organizationId, webhook)
          note("webhook", webhook.url, added.id, true, added.secret)
        }
      }
    }

    const creditIds = new Map<string, string>()
    for (const credit of document.credits ?? []) {
      const found = yield* credits.findActiveByAgentKey(organizationId, credit.agentKey)
      creditIds.set(credit.agentKey, yield* ensure("credit", credit.agentKey, found, () => credits.create(organizationId, credit)))
    }

    const outcomeIds = new Map<string, string>()
    for (const outcome of document.outcomes ?? []) {
      const found = yield* outcomes.findActiveByAgentKey(organizationId, outcome.agentKey)
      outcomeIds.set(
        outcome.agentKey,
        yield* ensure("outcome", outcome.agentKey, found, () => outcomes.create(organizationId, outcome))
      )
    }

    const unitIds = new Map<string, string>()
    if (document.units?.length) {
      const active = yield* allPages((cursor) => units.list(organizationId, listQuery(cursor)))
      for (const unit of document.units) {
        const found = Option.fromNullable(active.find((u) => u.agentKey === unit.agentKey))
        unitIds.set(
          unit.agentKey,
          yield* ensure("unit", unit.agentKey, found, () => units.create(organizationId, unit, { name: "fixtures" }))
        )
      }
    }

    /** An id by key: from this document, else an active record already in the workspace. */
    const idOf = (kind: "credit" | "outcome" | "unit" | "composite", key: string, known: Map<string, string>) =>
      Effect.gen(function*() {
        const fromDocument = known.get(key)
        if (fromDocument !== undefined) return fromDocument
        const found: Option.Option<{ readonly id: string }> = kind === "credit"
          ? yield* credits.findActiveByAgentKey(organizationId, key)
          : kind === "outcome"
          ? yield* outcomes.findActiveByAgentKey(organizationId, key)
          : kind === "unit"
          ? Option.fromNullable(
            (yield* allPages((cursor) => units.list(organizationId, listQuery(cursor)))).find((u) => u.agentKey === key)
          )
          : Option.fromNullable(
            (yield* allPages((cursor) => composites.list(organizationId, listQuery(cursor)))).find((c) => c.refId === key)
          )
        if (Option.isNone(found)) return yield* new FixtureTargetNotFound({ message: `fixtures: no active ${kind} with key ${key}` })
        known.set(key, found.value.id)
        return found.value.id
      })

    const compositeIds = new Map<string, string>()
    if (document.composites?.length) {
      const active = yield* allPages((cursor) => composites.list(organizationId, listQuery(cursor)))
      for (const composite of document.composites) {
        const found = Option.fromNullable(active.find((c) => c.refId === composite.refId))
        compositeIds.set(
          composite.refId,
          yield* ensure("composite", composite.refId, found, () =>
            Effect.gen(function*() {
              const members = composite.entitlements
              return yield* composites.create(organizationId, {
                ...composite,
                entitlements: {
                  creditIds: yield* Effect.forEach(members.credits ?? [], (key) => idOf("credit", key, creditIds)),
                  outcomeIds: yield* Effect.forEach(members.outcomes ?? [], (key) => idOf("outcome", key, outcomeIds)),
                  unitIds: yield* Effect.forEach(members.units ?? [], (key) => idOf("unit", key, unitIds))
                }
              })
            }))
        )
      }
    }

    const planIds = new Map<string, string>()
    if (document.plans?.length) {
      const active = yield* allPages((cursor) => plans.list(organizationId, listQuery(cursor)))
      for (const plan of document.plans) {
        const found = Option.fromNullable(active.find((p) => p.name === plan.name))
        planIds.set(
          plan.name,
          yield* ensure("plan", plan.name, found, () =>
            Effect.gen(function*() {
              const entitlements = yield* Effect.forEach(plan.entitlements, ({ credit, outcome, unit, composite, ...component }) =>
                Effect.gen(function*() {
                  return {
                    ...component,
                    creditId: credit === undefined ? undefined : yield* idOf("credit", credit, creditIds),
                    outcomeId: outcome === undefined ? undefined : yield* idOf("outcome", outcome, outcomeIds),
                    unitId: unit === undefined ? undefined : yield* idOf("unit", unit, unitIds),
                    compositeId: composite === undefined ? undefined : yield* idOf("composite", composite, compositeIds)
                  }
                }))
              return yield* plans.create(organizationId, { ...plan, entitlements })
            }))
        )
      }
    }

    const customerIds = new Map<string, CustomerId>()
    for (const customer of document.customers ?? []) {
      const found = yield* Effect.option(customers.getByExternalId(organizationId, customer.externalId))
      customerIds.set(
        customer.externalId,
        yield* ensure("customer", customer.externalId, found, () => customers.create(organizationId, customer))
      )
    }

    for (const purchase of document.purchases ?? []) {
      const customerId = customerIds.get(purchase.externalId) ??
        (yield* customers.getByExternalId(organizationId, purchase.externalId)).id
      const planId = planIds.get(purchase.plan) ??
        (yield* Effect.map(
          allPages((cursor) => plans.list(organizationId, listQuery(cursor))),
          (active) => active.find((p) => p.name === purchase.plan)?.id
        ))
      if (planId === undefined) {
        return yield* new FixtureTargetNotFound({ message: `fixtures: no active plan named ${purchase.plan}` })
      }
      const current = yield* allPages((cursor) =>
        purchases.list(organizationId, { customerId, page: { limit: MAX_LIMIT, cursor } })
      )
      const found = Option.fromNullable(
        current.find((p) => p.planId === planId && (p.status === "ACTIVE" || p.status === "SCHEDULED"))
      )
      yield* ensure(
        "purchase",
        `${purchase.externalId}/${purchase.plan}`,
        found,
        () => purchases.create(organizationId, { customerId, planId })
      )
    }

    return loaded
  })
