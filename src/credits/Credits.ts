/**
 * Credits: create, list, read, change, archive and unarchive. Prices are
 * computed here from the model bundle at the workspace's current rates and
 * stored: tokensPerCredit and basePrice are the bundle's sums, pricePerCredit
 * is basePrice with the margin. An agentKey is unique among the organisation's
 * active credits (the partial unique index decides, so races answer 409 too).
 *
 * Lookups other features use (stable):
 * - `get(organizationId, id)`: the credit, active or archived; 404 when missing
 *   or another organisation's.
 * - `findActiveByAgentKey(organizationId, agentKey)`: `Option<Credit>`, the
 *   active credit holding the key.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { decodeRows, dieOnSqlError, findByIdOr, findCataloguePage, findOne, uniqueOr } from "../db/Sql.ts"
import { AgentKeyTaken, CreditNotFound } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { bundleToJson, Models } from "../models/Models.ts"
import { type Decimal, toSql } from "../money.ts"
import { withMargin } from "../pricing/Pricing.ts"
import { Credit, type CreditCreate, type CreditUpdate } from "./Credit.ts"
import { currentTime } from "../time.ts"
import { archiveDoors } from "../db/ActiveFlag.ts"

const notFound = (id: string) => new CreditNotFound({ message: `Credit ${id} not found` })

const agentKeyTaken = (agentKey: string) =>
  new AgentKeyTaken({ message: `agentKey ${agentKey} is already used by another active credit` })

export class Credits extends Effect.Service<Credits>()("Credits", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const models = yield* Models

    const create = Effect.fn("Credits.create")(function*(organizationId: OrganizationId, input: CreditCreate) {
        const [bundle] = yield* models.priceBundles(organizationId, [{ path: "modelBundle", items: input.modelBundle }])
        const rows = yield* sql`INSERT INTO credits ${
          sql.insert({
            organizationId,
            id: makeId("cred"),
            name: input.name,
            agentKey: input.agentKey,
            description: input.description ?? null,
            marginPercent: toSql(input.marginPercent),
            modelBundle: bundleToJson(bundle!.items),
            tokensPerCredit: toSql(bundle!.tokensPerCredit),
            basePrice: toSql(bundle!.basePrice),
            pricePerCredit: toSql(withMargin(bundle!.basePrice, input.marginPercent))
          })
        } RETURNING *`.pipe(uniqueOr(() => agentKeyTaken(input.agentKey)), Effect.flatMap(decodeRows(Credit)))
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    const list = Effect.fn("Credits.list")(findCataloguePage(sql, Credit, "credits"))

    const findRow = findByIdOr(sql, Credit, "credits", notFound)
    const get = Effect.fn("Credits.get")((organizationId: OrganizationId, id: string) => findRow(organizationId, id))

    const findActiveByAgentKey = Effect.fn("Credits.findActiveByAgentKey")((organizationId: OrganizationId, agentKey: string) =>
      findOne(
        Credit,
        sql`SELECT * FROM credits WHERE organization_id = ${organizationId} AND agent_key = ${agentKey} AND is_active`
      ))

    /**
     * Only the fields sent change. A new modelBundle is priced at the current
     * rates; a new marginPercent alone re-prices pricePerCredit from the stored
     * basePrice, so a margin change never depends on today's rates.
     */
    const update = Effect.fn("Credits.update")(function*(organizationId: OrganizationId, id: string, patch: CreditUpdate) {
        const current = yield* findRow(organizationId, id, true)
        const changes: Record<string, string | null> = {}
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.agentKey !== undefined) changes.agentKey = patch.agentKey
        if (patch.description !== undefined) changes.description = patch.description
        let basePrice: Decimal = current.basePrice
        if (patch.modelBundle !== undefined) {
          const [bundle] = yield* models.priceBundles(organizationId, [{ path: "modelBundle", items: patch.modelBundle }])
          basePrice = bundle!.basePrice
          changes.modelBundle = bundleToJson(bundle!.items)
          changes.tokensPerCredit = toSql(bundle!.tokensPerCredit)
          changes.basePrice = toSql(basePrice)
        }
        if (patch.modelBundle !== undefined || patch.marginPercent !== undefined) {
          const margin = patch.marginPercent ?? current.marginPercent
          changes.marginPercent = toSql(margin)
          changes.pricePerCredit = toSql(withMargin(basePrice, margin))
        }
        if (Object.keys(changes).length === 0) return current
        const rows = yield* sql`UPDATE credits SET ${sql.update({ ...changes, updatedAt: yield* currentTime })}
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`.pipe(
          uniqueOr(() => agentKeyTaken(patch.agentKey ?? current.agentKey)),
          Effect.flatMap(decodeRows(Credit))
        )
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    /** Archiving twice answers the same credit; unarchiving is a 409 when another active credit took its agentKey meanwhile. */
    const setActive = (isActive: boolean) => (organizationId: OrganizationId, id: string) =>
      Effect.gen(function*() {
        const current = yield* get(organizationId, id)
        const rows = yield* sql`UPDATE credits SET is_active = ${isActive}, updated_at = now()
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`.pipe(
          uniqueOr(() => agentKeyTaken(current.agentKey)),
          Effect.flatMap(decodeRows(Credit))
        )
        return rows[0]!
      }).pipe(dieOnSqlError)

    return {
      create,
      list,
      get,
      findActiveByAgentKey,
      update,
      ...archiveDoors("Credits", (organizationId, id, active) => setActive(active)(organizationId, id))
    } as const
  }),
  dependencies: [Models.Default]
}) {}
