/**
 * The organisation's model catalogue (docs/catalogue-credits-outcomes.md): the built-in models copied in
 * when the organisation was created, plus its own models and rates.
 *
 * Lookups other features use:
 * - `ratesFor(organizationId, modelIds)`: the enabled models by id (a `Model` is
 *   a pricing `ModelRates`); an unknown or disabled model fails 422.
 * - `priceBundles(organizationId, bundles)`: prices model bundles (credits,
 *   outcome steps) at the current rates; 422 for a model not enabled, 400 for
 *   weights that break the rules.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findOne, foundOr, uniqueOr } from "../db/Sql.ts"
import { InvalidModelBundle, ModelCreatedConcurrently, ModelNotEnabled, ModelNotFound, NewModelIncomplete } from "../errors.ts"
import { toSql } from "../money.ts"
import { type BundlePrice, bundleWeightProblem, priceBundle } from "../pricing/Pricing.ts"
import { type BundleItem, type BundleItemInput, BundleJson, Model, type ModelSet } from "./Model.ts"
import type { OrganizationId } from "../ids.ts"
import { currentTime } from "../time.ts"

const columns = (sql: SqlClient.SqlClient) =>
  sql`id, name, input_rate AS input, output_rate AS output, cache_read_rate AS cache_read,
      cache_write_rate AS cache_write, enabled, built_in, created_at, updated_at`

const notEnabled = (modelId: string) => new ModelNotEnabled({ message: `model ${modelId} is not enabled in this workspace` })

/** A bundle to price, with the request path its errors are reported under (`modelBundle`, `steps.1.modelBundle`). */
export interface BundleToPrice {
  readonly path: string
  readonly items: ReadonlyArray<BundleItemInput>
}

export interface PricedBundle extends BundlePrice {
  readonly items: ReadonlyArray<BundleItem>
}

/** The jsonb text of a priced bundle: decimals as exact strings. */
export const bundleToJson = (items: ReadonlyArray<BundleItem>): string =>
  JSON.stringify(Schema.encodeSync(BundleJson)(items))

export class Models extends Effect.Service<Models>()("Models", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const find = (organizationId: OrganizationId, id: string) =>
      findOne(Model, sql`SELECT ${columns(sql)} FROM models WHERE organization_id = ${organizationId} AND id = ${id}`)

    const get = Effect.fn("Models.get")((organizationId: OrganizationId, id: string) =>
      foundOr(() => new ModelNotFound({ message: `Model ${id} not found` }))(find(organizationId, id)))

    const list = Effect.fn("Models.list")((organizationId: OrganizationId) =>
      findAll(Model, sql`SELECT ${columns(sql)} FROM models WHERE organization_id = ${organizationId} ORDER BY id`))

    /** Creates the model or changes the fields given; a new model needs name, input and output. */
    const set = Effect.fn("Models.set")(function*(organizationId: OrganizationId, input: ModelSet) {
        const current = yield* findOne(
          Model,
          sql`SELECT ${columns(sql)} FROM models
              WHERE organization_id = ${organizationId} AND id = ${input.id} FOR UPDATE`
        )
        const optionalRate = (rate: typeof input.cacheRead) => rate === undefined || rate === null ? null : toSql(rate)
        if (Option.isNone(current)) {
          if (input.name === undefined || input.input === undefined || input.output === undefined) {
            return yield* new NewModelIncomplete({
              message: `model ${input.id} is new: name, input and output rates are required`
            })
          }
          yield* sql`INSERT INTO models ${
            sql.insert({
              organizationId,
              id: input.id,
              name: input.name.trim(),
              inputRate: toSql(input.input),
              outputRate: toSql(input.output),
              cacheReadRate: optionalRate(input.cacheRead),
              cacheWriteRate: optionalRate(input.cacheWrite)
            })
          }`.pipe(uniqueOr(() => new ModelCreatedConcurrently({ message: `model ${input.id} was just created by someone else; try again` })))
        } else {
          const changes: Record<string, string | null> = {}
          if (input.name !== undefined) changes.name = input.name.trim()
          if (input.input !== undefined) changes.inputRate = toSql(input.input)
          if (input.output !== undefined) changes.outputRate = toSql(input.output)
          if (input.cacheRead !== undefined) changes.cacheReadRate = optionalRate(input.cacheRead)
          if (input.cacheWrite !== undefined) changes.cacheWriteRate = optionalRate(input.cacheWrite)
          if (Object.keys(changes).length > 0) {
            yield* sql`UPDATE models SET ${sql.update({ ...changes, updatedAt: yield* currentTime })}
                       WHERE organization_id = ${organizationId} AND id = ${input.id}`
          }
        }
        return yield* get(organizationId, input.id)
      }, sql.withTransaction, dieOnSqlError)

    const setEnabled = (enabled: boolean) => (organizationId: OrganizationId, id: string) =>
      Effect.gen(function*() {
        const rows = yield* findAll(
          Model,
          sql`UPDATE models SET enabled = ${enabled}, updated_at = now()
              WHERE organization_id = ${organizationId} AND id = ${id}
              RETURNING ${columns(sql)}`
        )
        const model = rows[0]
        if (model === undefined) return yield* new ModelNotFound({ message: `Model ${id} not found` })
        return model
      })

    /** The enabled models by id; any id that is unknown or disabled fails 422. */
    const ratesFor = Effect.fn("Models.ratesFor")(function*(organizationId: OrganizationId, modelIds: ReadonlyArray<string>) {
        const wanted = [...new Set(modelIds)]
        const found = wanted.length === 0 ? [] : yield* findAll(
          Model,
          sql`SELECT ${columns(sql)} FROM models
              WHERE organization_id = ${organizationId} AND enabled AND id IN ${sql.in(wanted)}`
        )
        const byId = new Map(found.map((model) => [model.id, model] as const))
        const missing = wanted.find((id) => !byId.has(id))
        if (missing !== undefined) return yield* notEnabled(missing)
        return byId as ReadonlyMap<string, Model>
      })

    /**
     * Prices each bundle at the workspace's current rates. Every model of every
     * bundle must be enabled (422) and every item's weights valid (400).
     */
    const priceBundles = Effect.fn("Models.priceBundles")(function*(organizationId: OrganizationId, bundles: ReadonlyArray<BundleToPrice>) {
        const models = yield* ratesFor(organizationId, bundles.flatMap((bundle) => bundle.items.map((i) => i.modelId)))
        const modelOf = (id: string) => models.get(id)!
        for (const bundle of bundles) {
          for (const [index, item] of bundle.items.entries()) {
            const problem = bundleWeightProblem(item, modelOf(item.modelId))
            if (problem !== undefined) return yield* new InvalidModelBundle({ message: `${bundle.path}.${index}: ${problem}` })
          }
        }
        return bundles.map((bundle): PricedBundle => ({
          ...priceBundle(bundle.items, modelOf),
          items: bundle.items.map((item) => ({ ...item, modelName: modelOf(item.modelId).name }))
        }))
      })

    return {
      list,
      get,
      set,
      enable: Effect.fn("Models.enable")(setEnabled(true)),
      disable: Effect.fn("Models.disable")(setEnabled(false)),
      ratesFor,
      priceBundles
    } as const
  })
}) {}
