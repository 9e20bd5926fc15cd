/**
 * Units: create, list, read, change, archive and unarchive. A FLAT unit carries
 * `flatPrice`; a SLAB or VOLUME unit carries ascending tiers whose last one is
 * unbounded. Tier decimals are kept as strings in the jsonb column, so nothing
 * passes through a float. An agentKey is unique among the organisation's
 * active units (the partial unique index decides, so races answer 409 too).
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { decodeRows, dieOnSqlError, findByIdOr, findCataloguePage, orDie, uniqueOr } from "../db/Sql.ts"
import { AgentKeyTaken, InvalidUnitPricing, UnitNotFound } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { type Decimal, toSql, ZERO } from "../money.ts"
import { tierProblem } from "../pricing/Pricing.ts"
import { type PricingType, Unit, type UnitCreate, type UnitTier, type UnitUpdate } from "./Unit.ts"
import { currentTime } from "../time.ts"
import { archiveDoors } from "../db/ActiveFlag.ts"

/** Who creates a unit: an API key (its name is recorded) or an operator at the CLI. */
export type UnitAuthor = { readonly apiKeyId: string } | { readonly name: string }

interface StoredTier {
  readonly id: string
  readonly upTo: string | null
  readonly price: string
  readonly order: number
}

interface ResolvedPricing {
  readonly pricingType: PricingType
  readonly flatPrice: Decimal | null
  readonly tiers: ReadonlyArray<StoredTier>
}

const notFound = (id: string) => new UnitNotFound({ message: `Unit ${id} not found` })

const agentKeyTaken = (agentKey: string) =>
  new AgentKeyTaken({ message: `agentKey ${agentKey} is already used by another active unit` })

const storedTiers = (tiers: ReadonlyArray<{ readonly upTo: Decimal | null; readonly price: Decimal }>) =>
  tiers.map((tier, index): StoredTier => ({
    id: makeId("tier"),
    upTo: tier.upTo === null ? null : toSql(tier.upTo),
    price: toSql(tier.price),
    order: index + 1
  }))

const keptTiers = (tiers: ReadonlyArray<UnitTier>) =>
  tiers.map((tier): StoredTier => ({
    id: tier.id,
    upTo: tier.upTo === null ? null : toSql(tier.upTo),
    price: toSql(tier.price),
    order: tier.order
  }))

/**
 * The pricing a create or PATCH leaves the unit with. Fields of the other
 * pricing type that are only stored (not sent) are dropped when the type
 * changes; sending them with the wrong type is a 400.
 */
const resolvePricing = (
  input: Pick<UnitUpdate, "pricingType" | "flatPrice" | "tiers">,
  current: Unit | undefined
): Effect.Effect<ResolvedPricing, InvalidUnitPricing> => {
  const fail = (message: string) => Effect.fail(new InvalidUnitPricing({ message }))
  const pricingType = input.pricingType ?? current?.pricingType
  if (pricingType === undefined) return fail("pricingType is required")
  if (pricingType === "FLAT") {
    if (input.tiers !== undefined && input.tiers.length > 0) {
      return fail("tiers apply to SLAB and VOLUME units only; a FLAT unit is priced by flatPrice")
    }
    const flatPrice = input.flatPrice !== undefined
      ? input.flatPrice
      : current?.pricingType === "FLAT"
      ? current.flatPrice
      : null
    if (flatPrice === null) return fail("flatPrice is required for a FLAT unit")
    if (BigDecimal.lessThan(flatPrice, ZERO)) return fail("flatPrice must be 0 or more")
    return Effect.succeed({ pricingType, flatPrice, tiers: [] })
  }
  // A tiered unit answers flatPrice 0; a client sending that 0 back means "not set".
  if (input.flatPrice !== undefined && input.flatPrice !== null && !BigDecimal.isZero(input.flatPrice)) {
    return fail(`flatPrice applies to FLAT units only; a ${pricingType} unit is priced by its tiers`)
  }
  if (input.tiers === undefined && current !== undefined && current.pricingType !== "FLAT") {
    return Effect.succeed({ pricingType, flatPrice: null, tiers: keptTiers(current.tiers) })
  }
  const tiers = input.tiers ?? []
  if (tiers.length === 0) return fail(`tiers are required for a ${pricingType} unit`)
  const problem = tierProblem(tiers)
  if (problem !== undefined) return fail(problem)
  return Effect.succeed({ pricingType, flatPrice: null, tiers: storedTiers(tiers) })
}

const pricingColumns = (pricing: ResolvedPricing) => ({
  pricingType: pricing.pricingType,
  flatPrice: toSql(pricing.flatPrice ?? ZERO),
  tiers: JSON.stringify(pricing.tiers)
})

export class Units extends Effect.Service<Units>()("Units", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const authorName = (organizationId: OrganizationId, author: UnitAuthor) =>
      "name" in author
        ? Effect.succeed(author.name)
        : Effect.map(
          orDie(sql<{ name: string }>`
            SELECT name FROM api_keys WHERE organization_id = ${organizationId} AND id = ${author.apiKeyId}`),
          (rows) => rows[0]?.name ?? "api"
        )

    const create = Effect.fn("Units.create")(function*(organizationId: OrganizationId, input: UnitCreate, author: UnitAuthor) {
        const pricing = yield* resolvePricing(input, undefined)
        const rows = yield* sql`INSERT INTO units ${
          sql.insert({
            organizationId,
            id: makeId("unit"),
            name: input.name,
            agentKey: input.agentKey,
            description: input.description ?? null,
            ...pricingColumns(pricing),
            createdByName: yield* authorName(organizationId, author)
          })
        } RETURNING *`.pipe(uniqueOr(() => agentKeyTaken(input.agentKey)), Effect.flatMap(decodeRows(Unit)))
        return rows[0]!
      }, dieOnSqlError)

    const list = Effect.fn("Units.list")(findCataloguePage(sql, Unit, "units"))

    const find = findByIdOr(sql, Unit, "units", notFound)

    /** A unit by id, archived or not. */
    const get = Effect.fn("Units.get")((organizationId: OrganizationId, id: string) => find(organizationId, id, false))

    const update = Effect.fn("Units.update")(function*(organizationId: OrganizationId, id: string, patch: UnitUpdate) {
        const current = yield* find(organizationId, id, true)
        const pricing = yield* resolvePricing(patch, current)
        const changes: Record<string, unknown> = { ...pricingColumns(pricing), updatedAt: yield* currentTime }
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.agentKey !== undefined) changes.agentKey = patch.agentKey
        if (patch.description !== undefined) changes.description = patch.description
        const rows = yield* sql`UPDATE units SET ${sql.update(changes)}
            WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`.pipe(
          uniqueOr(() => agentKeyTaken(patch.agentKey ?? current.agentKey)),
          Effect.flatMap(decodeRows(Unit))
        )
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    /**
     * Archives or unarchives; doing it twice answers the same unit. Unarchiving
     * a unit whose agentKey another active unit has taken since is a 409.
     */
    const setActive = (organizationId: OrganizationId, id: string, active: boolean) =>
      Effect.gen(function*() {
        const current = yield* find(organizationId, id, true)
        if (current.isActive === active) return current
        const rows = yield* sql`UPDATE units SET is_active = ${active}, updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`.pipe(
          uniqueOr(() => agentKeyTaken(current.agentKey)),
          Effect.flatMap(decodeRows(Unit))
        )
        return rows[0]!
      }).pipe(sql.withTransaction, dieOnSqlError)

    return {
      create,
      list,
      get,
      update,
      ...archiveDoors("Units", setActive)
    } as const
  })
}) {}
