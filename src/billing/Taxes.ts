/**
 * Taxes: percentages added to every invoice issued while they are active.
 * Never deleted: deactivating one (`active: false`) stops it applying to new
 * invoices and leaves issued invoices as they were.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { activeClause, dieOnSqlError, findAll, findByIdOr, knownCursor, pageClause } from "../db/Sql.ts"
import { InvalidTaxRate, TaxNotFound } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import type { Page } from "../Page.ts"
import { type Decimal, HUNDRED, toSql, ZERO } from "../money.ts"
import { Money, MoneyInput, Name, strict, Timestamp } from "../schema.ts"

export class Tax extends Schema.Class<Tax>("Tax")({
  id: Schema.String,
  name: Schema.String,
  ratePercent: Money,
  active: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

const RatePercent = MoneyInput.annotations({
  jsonSchema: { type: "number", minimum: 0, maximum: 100, description: "The rate in percent, 0 to 100; fractions allowed." }
})

export const TaxCreate = Schema.Struct({
  name: Name,
  ratePercent: RatePercent
}).annotations(strict)
export type TaxCreate = typeof TaxCreate.Type

export const TaxUpdate = Schema.Struct({
  name: Schema.optional(Name),
  ratePercent: Schema.optional(RatePercent),
  active: Schema.optional(Schema.Boolean).annotations({
    description: "Whether the tax applies to invoices created from now on."
  })
}).annotations(strict)
export type TaxUpdate = typeof TaxUpdate.Type

const checkRate = (rate: Decimal | undefined) =>
  rate !== undefined && (BigDecimal.lessThan(rate, ZERO) || BigDecimal.greaterThan(rate, HUNDRED))
    ? Effect.fail(new InvalidTaxRate({ message: "ratePercent must be from 0 to 100" }))
    : Effect.void

const taxColumns = "id, name, rate_percent, is_active AS active, created_at, updated_at"
const selectTaxes = `SELECT ${taxColumns} FROM taxes`

export class Taxes extends Effect.Service<Taxes>()("Taxes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * Oldest first, archived included unless `activeOnly`, a page at a time
     * like every list (cursor: the previous page's last id).
     */
    const list = Effect.fn("Taxes.list")((organizationId: OrganizationId, activeOnly: boolean, page: Page) =>
      Effect.zipRight(
        knownCursor(sql, "taxes", organizationId, page),
        findAll(
          Tax,
          sql`${sql.unsafe(selectTaxes)} WHERE organization_id = ${organizationId}
                ${activeClause(sql, activeOnly ? true : undefined)} ${pageClause(sql, page)}`
        )
      ))

    const findRow = findByIdOr(sql, Tax, "taxes", (id) => new TaxNotFound({ message: `Tax ${id} not found` }), {
      columns: taxColumns
    })
    const get = Effect.fn("Taxes.get")((organizationId: OrganizationId, id: string) => findRow(organizationId, id))

    const create = Effect.fn("Taxes.create")(function*(organizationId: OrganizationId, input: TaxCreate) {
        yield* checkRate(input.ratePercent)
        const id = makeId("tax")
        yield* sql`INSERT INTO taxes ${
          sql.insert({ organizationId, id, name: input.name, ratePercent: toSql(input.ratePercent) })
        }`
        // The row just written: not finding it is no answer of this request, but a defect.
        return yield* Effect.orDie(get(organizationId, id))
      }, dieOnSqlError)

    const update = Effect.fn("Taxes.update")(function*(organizationId: OrganizationId, id: string, patch: TaxUpdate) {
        yield* checkRate(patch.ratePercent)
        yield* get(organizationId, id)
        yield* sql`UPDATE taxes SET
              name = coalesce(${patch.name ?? null}, name),
              rate_percent = coalesce(${patch.ratePercent ? toSql(patch.ratePercent) : null}::numeric, rate_percent),
              is_active = coalesce(${patch.active ?? null}::boolean, is_active),
              updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* get(organizationId, id)
      }, dieOnSqlError)

    return { list, get, create, update } as const
  })
}) {}
