/**
 * The live catalogue a batch's signals name (credits, outcome steps, units,
 * composites and models), read in one statement whatever the batch, and
 * served per organisation as the meters' `Catalogue`.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import type {
  Catalogue,
  CompositeTarget,
  CreditTarget,
  StepTarget,
  UnitTarget
} from "../pricing/meters/Context.ts"
import type { ModelRates } from "../pricing/Pricing.ts"
import { Money } from "../schema.ts"
import { pairs, scoped } from "./BatchKeys.ts"
import type { DecodedSignal, SignalRecord } from "./ClaimedSignal.ts"
import { prepared } from "../db/Prepared.ts"

/**
 * The statement is one UNION, so its columns are shared: a credit's three
 * prices and a model's rates come in the same four columns, named for both.
 */
const sharedColumn = <S extends Schema.Schema.Any>(schema: S, column: string) =>
  Schema.propertySignature(schema).pipe(Schema.fromKey(column))

/** An active credit, by its agent key. */
const CreditRow = Schema.Struct({
  kind: Schema.Literal("CREDIT"),
  organizationId: Schema.String,
  /** Its agent key. */
  key: Schema.String,
  id: Schema.String,
  name: Schema.String,
  basePrice: sharedColumn(Money, "basePriceOrInputRate"),
  tokensPerCredit: sharedColumn(Money, "tokensPerCreditOrOutputRate"),
  marginPercent: sharedColumn(Money, "marginPercentOrCacheReadRate")
})

/** A live step of an active outcome, by its agent key: the outcome's id and name, and the step's name. */
const OutcomeStepRow = Schema.Struct({
  kind: Schema.Literal("OUTCOME"),
  organizationId: Schema.String,
  /** Its agent key. */
  key: Schema.String,
  /** The outcome's. */
  id: Schema.String,
  /** The outcome's. */
  name: Schema.String,
  stepName: Schema.String
})

/** An active unit, by its agent key. */
const UnitRow = Schema.Struct({
  kind: Schema.Literal("UNIT"),
  organizationId: Schema.String,
  /** Its agent key. */
  key: Schema.String,
  id: Schema.String,
  name: Schema.String
})

/** An active composite, by its ref id. */
const CompositeRow = Schema.Struct({
  kind: Schema.Literal("COMPOSITE"),
  organizationId: Schema.String,
  /** Its ref id. */
  key: Schema.String,
  id: Schema.String,
  name: Schema.String
})

/** An enabled model's rates, by its id. */
const ModelRow = Schema.Struct({
  kind: Schema.Literal("MODEL"),
  organizationId: Schema.String,
  /** Its id. */
  key: Schema.String,
  inputRate: sharedColumn(Money, "basePriceOrInputRate"),
  outputRate: sharedColumn(Money, "tokensPerCreditOrOutputRate"),
  cacheReadRate: sharedColumn(Schema.NullOr(Money), "marginPercentOrCacheReadRate"),
  cacheWriteRate: Schema.NullOr(Money)
})

/** A row of the live catalogue a batch names, by its kind. */
const CatalogueRow = Schema.Union(CreditRow, OutcomeStepRow, UnitRow, CompositeRow, ModelRow)

/** Reads the catalogue `signals` name; gives each organisation's, built on first use. */
export const loadCatalogue = (
  sql: SqlClient.SqlClient,
  signals: ReadonlyArray<DecodedSignal>,
  records: ReadonlyArray<SignalRecord>
) =>
  Effect.gen(function*() {
    // The catalogue the signals name.
    const agentKeys = (route: SignalRecord["route"]) =>
      pairs(signals.flatMap((s) =>
        s.record.route === route && s.body.agentKey !== undefined ? [[s.record.organizationId, s.body.agentKey] as const] : []
      ))
    const creditKeys = agentKeys("CREDIT")
    const stepKeys = agentKeys("OUTCOME")
    const unitKeys = agentKeys("UNIT")
    const refKeys = pairs(records.flatMap((r) => (r.compositeRef === null ? [] : [[r.organizationId, r.compositeRef] as const])))
    const modelKeys = pairs(signals.flatMap((s) => (s.body.usage === undefined ? [] : [[s.record.organizationId, s.body.usage.model] as const])))
    // One statement for all five (a round trip each weighed on a short queue's batch): an arm whose
    // keys are empty reads nothing.
    const catalogueRows = creditKeys.size + stepKeys.size + unitKeys.size + refKeys.size + modelKeys.size === 0 ? [] : yield* findAll(
      CatalogueRow,
      prepared(sql)`SELECT 'CREDIT' AS kind, organization_id, agent_key AS key, id, name, NULL::text AS step_name,
                 base_price AS base_price_or_input_rate, tokens_per_credit AS tokens_per_credit_or_output_rate, margin_percent AS margin_percent_or_cache_read_rate, NULL::numeric AS cache_write_rate
          FROM credits
          WHERE is_active AND (organization_id, agent_key) IN (
            SELECT * FROM unnest(${creditKeys.organizations}::text[], ${creditKeys.keys}::text[]))
          UNION ALL
          (SELECT DISTINCT ON (s.organization_id, s.agent_key)
                  'OUTCOME', s.organization_id, s.agent_key, o.id, o.name, s.name, NULL, NULL, NULL, NULL
           FROM outcome_steps s
           JOIN outcomes o ON o.organization_id = s.organization_id AND o.id = s.outcome_id
           WHERE s.removed_at IS NULL AND o.is_active AND (s.organization_id, s.agent_key) IN (
             SELECT * FROM unnest(${stepKeys.organizations}::text[], ${stepKeys.keys}::text[]))
           ORDER BY s.organization_id, s.agent_key, o.id)
          UNION ALL
          SELECT 'UNIT', organization_id, agent_key, id, name, NULL, NULL, NULL, NULL, NULL
          FROM units
          WHERE is_active AND (organization_id, agent_key) IN (
            SELECT * FROM unnest(${unitKeys.organizations}::text[], ${unitKeys.keys}::text[]))
          UNION ALL
          SELECT 'COMPOSITE', organization_id, ref_id, id, name, NULL, NULL, NULL, NULL, NULL
          FROM composites
          WHERE is_active AND (organization_id, ref_id) IN (
            SELECT * FROM unnest(${refKeys.organizations}::text[], ${refKeys.keys}::text[]))
          UNION ALL
          SELECT 'MODEL', organization_id, id, id, NULL, NULL, input_rate, output_rate, cache_read_rate, cache_write_rate
          FROM models
          WHERE enabled AND (organization_id, id) IN (
            SELECT * FROM unnest(${modelKeys.organizations}::text[], ${modelKeys.keys}::text[]))`
    )
    const creditMap = new Map<string, CreditTarget>()
    const stepMap = new Map<string, StepTarget>()
    const unitMap = new Map<string, UnitTarget>()
    const compositeMap = new Map<string, CompositeTarget>()
    const modelMap = new Map<string, ModelRates>()
    for (const row of catalogueRows) {
      const key = scoped(row.organizationId, row.key)
      switch (row.kind) {
        case "CREDIT":
          creditMap.set(key, { id: row.id, name: row.name, basePrice: row.basePrice, tokensPerCredit: row.tokensPerCredit, marginPercent: row.marginPercent })
          break
        case "OUTCOME":
          stepMap.set(key, { outcomeId: row.id, outcomeName: row.name, stepName: row.stepName })
          break
        case "UNIT":
          unitMap.set(key, { id: row.id, name: row.name })
          break
        case "COMPOSITE":
          compositeMap.set(key, { id: row.id, name: row.name, refId: row.key })
          break
        case "MODEL":
          modelMap.set(key, { input: row.inputRate, output: row.outputRate, cacheRead: row.cacheReadRate, cacheWrite: row.cacheWriteRate })
          break
      }
    }

    const catalogues = new Map<string, Catalogue>()
    return (organizationId: string): Catalogue => {
      const known = catalogues.get(organizationId)
      if (known !== undefined) return known
      const catalogue: Catalogue = {
        credit: (agentKey) => creditMap.get(scoped(organizationId, agentKey)),
        outcomeStep: (agentKey) => stepMap.get(scoped(organizationId, agentKey)),
        unit: (agentKey) => unitMap.get(scoped(organizationId, agentKey)),
        composite: (refId) => compositeMap.get(scoped(organizationId, refId)),
        model: (modelId) => modelMap.get(scoped(organizationId, modelId))
      }
      catalogues.set(organizationId, catalogue)
      return catalogue
    }
  })
