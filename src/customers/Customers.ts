/**
 * Customers: create, read, update, archive, and the resolution of a request's
 * `customerId` / `externalId` (the spec's rules 1-6). Nothing is deleted: a
 * DELETE archives, and an archived customer's externalId may be taken again.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { decodeRows, dieOnSqlError, findAll, findByIdOr, findOne, foundOr, knownCursor, pageClause, uniqueOr } from "../db/Sql.ts"
import { CustomerNotFound, CustomerRefMissing, ExternalIdTaken, ValidationFailed } from "../errors.ts"
import type { Page } from "../Page.ts"
import { CustomerId, makeId, type OrganizationId, randomToken } from "../ids.ts"
import { CustomerArrivals } from "./CustomerArrivals.ts"
import {
  Customer,
  type CustomerCreate,
  type CustomerRef,
  type CustomerUpdate,
  ensureActive,
  namedCustomer
} from "./Customer.ts"
import { currentTime } from "../time.ts"
import { prepared } from "../db/Prepared.ts"

const externalIdPattern = /^[A-Za-z0-9-]{1,32}$/

const slugify = (name: string) =>
  name.toLowerCase().normalize("NFKD").replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "customer"

const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

const notFound = (what: string) => new CustomerNotFound({ message: `Customer ${what} not found` })

const externalIdTaken = (externalId: string) =>
  new ExternalIdTaken({ message: `externalId ${externalId} is already held by another active customer` })


export interface CustomerListQuery {
  readonly page: Page
  readonly q?: string | undefined
  readonly includeArchived?: boolean | undefined
}

/**
 * Declares no dependencies: its one need besides the database is the
 * `CustomerArrivals` port, answered from the signals floor above, so
 * `Customers.Default` (and every service built on it) leaves that port open for
 * the composition root to fill (src/app/Services.ts).
 */
export class Customers extends Effect.Service<Customers>()("Customers", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const arrivals = yield* CustomerArrivals

    const create = Effect.fn("Customers.create")(function*(organizationId: OrganizationId, input: CustomerCreate) {
        const id = CustomerId.make(makeId("cus"))
        const [currency] = yield* sql<{ currencyCode: string }>`
          SELECT currency_code FROM organizations WHERE id = ${organizationId}`
        // The externalId index answers races that a read-then-write check would miss.
        const rows = yield* sql`INSERT INTO customers ${
            sql.insert({
              organizationId,
              id,
              externalId: input.externalId ?? null,
              slug: `${slugify(input.name)}-${randomToken(4)}`,
              name: input.name.trim(),
              email: input.email,
              description: input.description ?? null,
              website: input.website ?? null,
              phone: input.phone ?? null,
              legalName: input.legalName ?? null,
              addressLine1: input.addressLine1 ?? null,
              city: input.city ?? null,
              state: input.state ?? null,
              country: input.country ?? null,
              pincode: input.pincode ?? null,
              taxId: input.taxId ?? null,
              currencyCode: input.currencyCode ?? currency?.currencyCode ?? "USD",
              paymentTermsDays: input.paymentTermsDays ?? null
            })
          } RETURNING *`.pipe(uniqueOr(() => externalIdTaken(input.externalId ?? "")), Effect.flatMap(decodeRows(Customer)))
        if (input.externalId) yield* arrivals.arrived(organizationId, input.externalId)
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    const list = Effect.fn("Customers.list")((organizationId: OrganizationId, query: CustomerListQuery) => {
      const pattern = query.q ? `%${escapeLike(query.q)}%` : null
      return Effect.zipRight(knownCursor(sql, "customers", organizationId, query.page), findAll(
        Customer,
        sql`SELECT * FROM customers
            WHERE organization_id = ${organizationId}
              AND (${query.includeArchived ?? false} OR archived_at IS NULL)
              AND (${pattern}::text IS NULL OR name ILIKE ${pattern} OR email ILIKE ${pattern})
              ${pageClause(sql, query.page)}`
      ))
    })

    /** A customer by the service's id, archived or not. */
    const findRow = findByIdOr(sql, Customer, "customers", notFound)
    const get = Effect.fn("Customers.get")((organizationId: OrganizationId, id: CustomerId) => findRow(organizationId, id))

    /** An active customer by the caller's externalId; a malformed value is 400. */
    const getByExternalId = Effect.fn("Customers.getByExternalId")(function*(organizationId: OrganizationId, externalId: string) {
        if (!externalIdPattern.test(externalId)) {
          const message = "must be 1 to 32 characters from letters, numbers and -"
          return yield* new ValidationFailed({ message: `Invalid request: externalId: ${message}`, errors: [{ field: "externalId", message }] })
        }
        return yield* foundOr(() => notFound(`with externalId ${externalId}`))(findOne(
          Customer,
          prepared(sql)`SELECT * FROM customers
              WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND archived_at IS NULL`
        ))
      })

    /** The spec's resolution rules: customerId wins, then externalId, and one of them is required. */
    const resolve = Effect.fn("Customers.resolve")((
      organizationId: OrganizationId,
      ref: CustomerRef
    ): Effect.Effect<Customer, CustomerNotFound | ValidationFailed | CustomerRefMissing> =>
      Effect.flatMap(namedCustomer(ref), (named) =>
        named._tag === "ById"
          // The client's id, looked up as sent: one that names nothing is a not-found.
          ? get(organizationId, CustomerId.make(named.customerId))
          : getByExternalId(organizationId, named.externalId)))

    const update = Effect.fn("Customers.update")(function*(organizationId: OrganizationId, id: CustomerId, patch: CustomerUpdate) {
        const current = yield* findRow(organizationId, id, true)
        yield* ensureActive(current)
        const changes: Record<string, unknown> = {}
        for (const [field, value] of Object.entries(patch)) {
          if (value === undefined) continue
          changes[field] = typeof value === "string" && field === "name" ? value.trim() : value
        }
        if (Object.keys(changes).length === 0) return current
        const rows = yield* sql`UPDATE customers SET ${sql.update({ ...changes, updatedAt: yield* currentTime })}
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`.pipe(
          uniqueOr(() => externalIdTaken(patch.externalId ?? "")),
          Effect.flatMap(decodeRows(Customer))
        )
        if (patch.externalId) yield* arrivals.arrived(organizationId, patch.externalId)
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    /** Archives (the spec's DELETE); archiving twice answers the same customer. */
    const archive = Effect.fn("Customers.archive")(function*(organizationId: OrganizationId, id: CustomerId) {
        yield* get(organizationId, id)
        const rows = yield* findAll(
          Customer,
          sql`UPDATE customers SET archived_at = coalesce(archived_at, now()), updated_at = now()
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`
        )
        return rows[0]!
      })

    /** Customers are addressed by id or externalId alike by the `/customers/ext/...` twins. */
    const idOfExternal = Effect.fn("Customers.idOfExternal")((organizationId: OrganizationId, externalId: string) =>
      Effect.map(getByExternalId(organizationId, externalId), (customer) => customer.id))

    /** The customer a write acts on: unknown is 404, archived 409 (`ensureActive`). */
    const requireActive = Effect.fn("Customers.requireActive")((organizationId: OrganizationId, id: CustomerId) => Effect.flatMap(get(organizationId, id), ensureActive))

    return { create, list, get, getByExternalId, resolve, update, archive, idOfExternal, requireActive } as const
  })
}) {}
