/**
 * Outcomes and their ordered steps: create, list, read, change, archive and
 * unarchive. Each step is priced from its own model bundle at the workspace's
 * current rates; the outcome's basePrice is the sum of its live steps' and
 * pricePerOutcome = basePrice * (1 + marginPercent / 100).
 *
 * Keys: an outcome's agentKey is unique among the organisation's active
 * outcomes, and a live step (not removed, of an active outcome) holds its
 * agentKey alone in the organisation, because signals and adjustments find a
 * step by its key. Partial unique indexes decide both (migrations 0002, 0003),
 * so races answer 409 as well. Steps dropped by a PATCH keep their row with
 * `removed_at` set, so usage recorded against them still resolves.
 *
 * Lookups other features use (stable):
 * - `get(organizationId, id)`: the outcome with its live steps, active or
 *   archived; 404 when missing or another organisation's.
 * - `findStepByAgentKey(organizationId, agentKey)`: `Option<{ step, outcome }>`,
 *   the live step holding the key and its (active) outcome.
 * - `findActiveByAgentKey(organizationId, agentKey)`: `Option<Outcome>`, the
 *   active outcome whose own agentKey it is.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findCataloguePage, findOne, orDie, uniqueOr } from "../db/Sql.ts"
import { AgentKeyTaken, InvalidOutcomeSteps, OutcomeNotFound, StepAgentKeyRepeated, StepAgentKeyTaken } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { bundleToJson, Models, type PricedBundle } from "../models/Models.ts"
import { type Decimal, sum, toSql } from "../money.ts"
import { withMargin } from "../pricing/Pricing.ts"
import { Outcome, type OutcomeCreate, OutcomeStep, type OutcomeUpdate, OutcomeWithSteps } from "./Outcome.ts"
import { currentTime } from "../time.ts"

const notFound = (id: string) => new OutcomeNotFound({ message: `Outcome ${id} not found` })

const outcomeKeyTaken = (agentKey: string) =>
  new AgentKeyTaken({ message: `agentKey ${agentKey} is already used by another active outcome` })

const stepKeyTaken = (agentKey?: string) =>
  new StepAgentKeyTaken({
    message: agentKey === undefined
      ? "a step agentKey is already used by a step of another active outcome"
      : `step agentKey ${agentKey} is already used by a step of another active outcome`
  })

/** Two steps of one outcome with the same key: a signal could not tell them apart. */
const repeatedStepKey = (keys: ReadonlyArray<string>) => {
  const seen = new Set<string>()
  for (const key of keys) {
    if (seen.has(key)) return new StepAgentKeyRepeated({ message: `step agentKey ${key} is used by more than one step of this outcome` })
    seen.add(key)
  }
  return undefined
}

const StepWithOutcome = Schema.Struct({ ...OutcomeStep.fields, outcomeId: Schema.String })

/** A step as the PATCH leaves it, before it is written. */
interface PlannedStep {
  readonly id: string
  readonly isNew: boolean
  readonly name: string
  readonly agentKey: string
  /** Set when the step's bundle was (re)priced by this request. */
  readonly priced: PricedBundle | undefined
  readonly basePrice: Decimal
}

export class Outcomes extends Effect.Service<Outcomes>()("Outcomes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const models = yield* Models

    const stepColumns = sql`id, outcome_id, name, agent_key, position AS "order", base_price, model_bundle`

    const liveSteps = (organizationId: OrganizationId, outcomeId: string) =>
      findAll(
        OutcomeStep,
        sql`SELECT ${stepColumns} FROM outcome_steps
            WHERE organization_id = ${organizationId} AND outcome_id = ${outcomeId} AND removed_at IS NULL
            ORDER BY position`
      )

    const withSteps = (organizationId: OrganizationId) => (outcome: Outcome) =>
      Effect.map(liveSteps(organizationId, outcome.id), (steps) => new OutcomeWithSteps({ ...outcome, steps }))

    const findRow = findByIdOr(sql, Outcome, "outcomes", notFound)

    /** The first of `keys` that a live step of another outcome holds. */
    const stepKeyHeldElsewhere = (organizationId: OrganizationId, outcomeId: string, keys: ReadonlyArray<string>) =>
      keys.length === 0
        ? Effect.succeed(undefined)
        : Effect.map(
          orDie(sql<{ agentKey: string }>`
            SELECT agent_key FROM outcome_steps
            WHERE organization_id = ${organizationId} AND key_claimed AND outcome_id <> ${outcomeId}
              AND agent_key IN ${sql.in(keys)}
            LIMIT 1`),
          (rows) => rows[0]?.agentKey
        )

    const insertStep = (organizationId: OrganizationId, outcomeId: string, step: PlannedStep, position: number, claimed: boolean) =>
      sql`INSERT INTO outcome_steps ${
        sql.insert({
          organizationId,
          id: step.id,
          outcomeId,
          name: step.name,
          agentKey: step.agentKey,
          position,
          modelBundle: bundleToJson(step.priced!.items),
          basePrice: toSql(step.basePrice),
          keyClaimed: claimed
        })
      }`

    const create = Effect.fn("Outcomes.create")(function*(organizationId: OrganizationId, input: OutcomeCreate) {
        const repeated = repeatedStepKey(input.steps.map((step) => step.agentKey))
        if (repeated) return yield* repeated
        const priced = yield* models.priceBundles(
          organizationId,
          input.steps.map((step, index) => ({ path: `steps.${index}.modelBundle`, items: step.modelBundle }))
        )
        const id = makeId("out")
        const held = yield* stepKeyHeldElsewhere(organizationId, id, input.steps.map((step) => step.agentKey))
        if (held !== undefined) return yield* stepKeyTaken(held)
        const basePrice = sum(priced.map((bundle) => bundle.basePrice))
        yield* sql`INSERT INTO outcomes ${
          sql.insert({
            organizationId,
            id,
            name: input.name,
            agentKey: input.agentKey,
            description: input.description ?? null,
            marginPercent: toSql(input.marginPercent),
            basePrice: toSql(basePrice),
            pricePerOutcome: toSql(withMargin(basePrice, input.marginPercent))
          })
        }`.pipe(uniqueOr(() => outcomeKeyTaken(input.agentKey)))
        for (const [index, step] of input.steps.entries()) {
          const bundle = priced[index]!
          yield* insertStep(organizationId, id, {
            id: makeId("step"),
            isNew: true,
            name: step.name,
            agentKey: step.agentKey,
            priced: bundle,
            basePrice: bundle.basePrice
          }, index + 1, true).pipe(uniqueOr(() => stepKeyTaken(step.agentKey)))
        }
        // The row just written: not finding it is no answer of this request, but a defect.
        return yield* Effect.orDie(get(organizationId, id))
      }, sql.withTransaction, dieOnSqlError)

    const list = Effect.fn("Outcomes.list")(findCataloguePage(sql, Outcome, "outcomes"))

    const get = Effect.fn("Outcomes.get")((organizationId: OrganizationId, id: string) =>
      Effect.flatMap(findRow(organizationId, id), withSteps(organizationId)))

    const findActiveByAgentKey = Effect.fn("Outcomes.findActiveByAgentKey")((organizationId: OrganizationId, agentKey: string) =>
      findOne(
        Outcome,
        sql`SELECT * FROM outcomes WHERE organization_id = ${organizationId} AND agent_key = ${agentKey} AND is_active`
      ))

    const findStepByAgentKey = Effect.fn("Outcomes.findStepByAgentKey")(function*(organizationId: OrganizationId, agentKey: string) {
        const step = yield* findOne(
          StepWithOutcome,
          sql`SELECT ${stepColumns} FROM outcome_steps
              WHERE organization_id = ${organizationId} AND agent_key = ${agentKey} AND key_claimed`
        )
        if (Option.isNone(step)) return Option.none()
        const { outcomeId, ...fields } = step.value
        const outcome = yield* Effect.option(findRow(organizationId, outcomeId))
        return Option.map(outcome, (outcome) => ({ step: new OutcomeStep(fields), outcome }))
      })

    /** Works out the step list a PATCH asks for: kept steps by id, new ones without. */
    const planSteps = (organizationId: OrganizationId, current: ReadonlyArray<OutcomeStep>, sent: NonNullable<OutcomeUpdate["steps"]>) =>
      Effect.gen(function*() {
        const byId = new Map(current.map((step) => [step.id, step] as const))
        const keptIds = new Set<string>()
        for (const [index, step] of sent.entries()) {
          if (step.id === undefined) {
            if (step.name === undefined || step.agentKey === undefined || step.modelBundle === undefined) {
              return yield* new InvalidOutcomeSteps({
                message: `steps.${index}: a new step (sent without id) needs name, agentKey and modelBundle`
              })
            }
          } else {
            if (!byId.has(step.id)) {
              return yield* new InvalidOutcomeSteps({ message: `steps.${index}.id: ${step.id} is not a step of this outcome` })
            }
            if (keptIds.has(step.id)) {
              return yield* new InvalidOutcomeSteps({ message: `steps.${index}.id: step ${step.id} is sent more than once` })
            }
            keptIds.add(step.id)
          }
        }
        const keys = sent.map((step) => step.agentKey ?? byId.get(step.id!)!.agentKey)
        const repeated = repeatedStepKey(keys)
        if (repeated) return yield* repeated
        const toPrice = sent.flatMap((step, index) =>
          step.modelBundle === undefined ? [] : [{ index, path: `steps.${index}.modelBundle`, items: step.modelBundle }]
        )
        const priced = yield* models.priceBundles(organizationId, toPrice)
        const pricedAt = new Map(toPrice.map((entry, i) => [entry.index, priced[i]!] as const))
        return sent.map((step, index): PlannedStep => {
          const kept = step.id === undefined ? undefined : byId.get(step.id)
          const bundle = pricedAt.get(index)
          return {
            id: kept?.id ?? makeId("step"),
            isNew: kept === undefined,
            name: step.name ?? kept!.name,
            agentKey: keys[index]!,
            priced: bundle,
            basePrice: bundle?.basePrice ?? kept!.basePrice
          }
        })
      })

    /**
     * Replaces the live steps with `planned`. Every live step gives up its key
     * first and the final list claims keys in one statement, so steps may swap
     * keys within the outcome while a clash with another outcome is still 409.
     */
    const writeSteps = (organizationId: OrganizationId, outcome: Outcome, planned: ReadonlyArray<PlannedStep>) =>
      Effect.gen(function*() {
        const keptIds = planned.filter((step) => !step.isNew).map((step) => step.id)
        yield* sql`UPDATE outcome_steps SET key_claimed = false
                   WHERE organization_id = ${organizationId} AND outcome_id = ${outcome.id} AND removed_at IS NULL`
        yield* sql`UPDATE outcome_steps SET removed_at = now(), updated_at = now()
                   WHERE organization_id = ${organizationId} AND outcome_id = ${outcome.id} AND removed_at IS NULL
                     AND ${keptIds.length === 0 ? sql`true` : sql`id NOT IN ${sql.in(keptIds)}`}`
        for (const [index, step] of planned.entries()) {
          if (step.isNew) {
            yield* insertStep(organizationId, outcome.id, step, index + 1, false)
          } else {
            const repriced = step.priced === undefined
              ? {}
              : { modelBundle: bundleToJson(step.priced.items), basePrice: toSql(step.basePrice) }
            yield* sql`UPDATE outcome_steps SET ${
              sql.update({ name: step.name, agentKey: step.agentKey, position: index + 1, ...repriced, updatedAt: yield* currentTime })
            } WHERE organization_id = ${organizationId} AND id = ${step.id}`
          }
        }
        yield* sql`UPDATE outcome_steps SET key_claimed = ${outcome.isActive}
                   WHERE organization_id = ${organizationId} AND outcome_id = ${outcome.id} AND removed_at IS NULL`.pipe(
          uniqueOr(() => stepKeyTaken())
        )
      })

    /**
     * Only the fields sent change. `steps` re-prices the outcome from the new
     * list (kept steps without a new bundle keep their stored price); a new
     * marginPercent alone re-prices pricePerOutcome from the stored basePrice.
     */
    const update = Effect.fn("Outcomes.update")(function*(organizationId: OrganizationId, id: string, patch: OutcomeUpdate) {
        const current = yield* findRow(organizationId, id, true)
        const changes: Record<string, string | null> = {}
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.agentKey !== undefined) changes.agentKey = patch.agentKey
        if (patch.description !== undefined) changes.description = patch.description
        let basePrice: Decimal = current.basePrice
        if (patch.steps !== undefined) {
          const planned = yield* planSteps(organizationId, yield* liveSteps(organizationId, id), patch.steps)
          if (current.isActive) {
            const held = yield* stepKeyHeldElsewhere(organizationId, id, planned.map((step) => step.agentKey))
            if (held !== undefined) return yield* stepKeyTaken(held)
          }
          yield* writeSteps(organizationId, current, planned)
          basePrice = sum(planned.map((step) => step.basePrice))
          changes.basePrice = toSql(basePrice)
        }
        if (patch.steps !== undefined || patch.marginPercent !== undefined) {
          const margin = patch.marginPercent ?? current.marginPercent
          changes.marginPercent = toSql(margin)
          changes.pricePerOutcome = toSql(withMargin(basePrice, margin))
        }
        if (Object.keys(changes).length > 0) {
          yield* sql`UPDATE outcomes SET ${sql.update({ ...changes, updatedAt: yield* currentTime })}
                     WHERE organization_id = ${organizationId} AND id = ${id}`.pipe(
            uniqueOr(() => outcomeKeyTaken(patch.agentKey ?? current.agentKey))
          )
        }
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /** Archives; nothing is deleted, the steps give up their keys, and archiving twice answers the same outcome. */
    const archive = Effect.fn("Outcomes.archive")(function*(organizationId: OrganizationId, id: string) {
        yield* findRow(organizationId, id, true)
        yield* sql`UPDATE outcomes SET is_active = false, updated_at = now()
                   WHERE organization_id = ${organizationId} AND id = ${id}`
        yield* sql`UPDATE outcome_steps SET key_claimed = false
                   WHERE organization_id = ${organizationId} AND outcome_id = ${id}`
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /** Makes the outcome active again: 409 when its key or a step's key was taken meanwhile. */
    const unarchive = Effect.fn("Outcomes.unarchive")(function*(organizationId: OrganizationId, id: string) {
        const found = yield* findRow(organizationId, id, true)
        yield* sql`UPDATE outcomes SET is_active = true, updated_at = now()
                   WHERE organization_id = ${organizationId} AND id = ${id}`.pipe(
          uniqueOr(() => outcomeKeyTaken(found.agentKey))
        )
        const steps = yield* liveSteps(organizationId, id)
        const held = yield* stepKeyHeldElsewhere(organizationId, id, steps.map((step) => step.agentKey))
        if (held !== undefined) return yield* stepKeyTaken(held)
        yield* sql`UPDATE outcome_steps SET key_claimed = true
                   WHERE organization_id = ${organizationId} AND outcome_id = ${id} AND removed_at IS NULL`.pipe(
          uniqueOr(() => stepKeyTaken())
        )
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    return { create, list, get, findActiveByAgentKey, findStepByAgentKey, update, archive, unarchive } as const
  }),
  dependencies: [Models.Default]
}) {}

