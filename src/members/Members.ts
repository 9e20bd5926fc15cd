/**
 * Members of a customer: the people whose usage signals are attributed to the
 * customer (`member` on a signal is one of these e-mails). An e-mail is unique
 * within its customer, compared case-insensitively; a removed member is deleted.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Email } from "../customers/Customer.ts"
import { Customers } from "../customers/Customers.ts"
import { decodeRows, dieOnSqlError, findAll, findOne, foundOr, knownCursor, pageClause, uniqueOr } from "../db/Sql.ts"
import { MemberEmailTaken, MemberNotFound } from "../errors.ts"
import type { Page } from "../Page.ts"
import { type CustomerId, makeId, type OrganizationId } from "../ids.ts"
import { strict, Timestamp } from "../schema.ts"

export const MemberRole = Schema.Literal("OWNER", "ADMIN", "MEMBER").annotations({
  description: "The member's role at the customer: OWNER, ADMIN or MEMBER (the default)."
})

export class Member extends Schema.Class<Member>("Member")({
  id: Schema.String,
  customerId: Schema.String,
  email: Schema.String,
  name: Schema.NullOr(Schema.String),
  role: MemberRole,
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

const MemberName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(200, { message: () => "must be at most 200 characters" })
).annotations({ description: "The member's name, 1 to 200 characters; null clears it." })

export const MemberCreate = Schema.Struct({
  email: Email,
  name: Schema.optional(Schema.NullOr(MemberName)),
  role: Schema.optional(MemberRole)
}).annotations(strict)
export type MemberCreate = typeof MemberCreate.Type

export const MemberUpdate = Schema.Struct({
  email: Schema.optional(Email),
  name: Schema.optional(Schema.NullOr(MemberName)),
  role: Schema.optional(MemberRole)
}).annotations(strict)
export type MemberUpdate = typeof MemberUpdate.Type

const duplicate = (email: string) => new MemberEmailTaken({ message: `A member with e-mail ${email} already exists for this customer` })

export class Members extends Effect.Service<Members>()("Members", {
  dependencies: [Customers.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers

    const get = Effect.fn("Members.get")((organizationId: OrganizationId, customerId: CustomerId, id: string) =>
      foundOr(() => new MemberNotFound({ message: `Member ${id} not found` }))(findOne(
        Member,
        sql`SELECT * FROM customer_members
            WHERE organization_id = ${organizationId} AND customer_id = ${customerId} AND id = ${id}`
      )))

    const list = Effect.fn("Members.list")((organizationId: OrganizationId, customerId: CustomerId, page: Page) =>
      Effect.zipRight(
        Effect.zipRight(customers.get(organizationId, customerId), knownCursor(sql, "customer_members", organizationId, page)),
        findAll(
          Member,
          sql`SELECT * FROM customer_members
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                ${pageClause(sql, page)}`
        )
      ))

    const create = Effect.fn("Members.create")(function*(organizationId: OrganizationId, customerId: CustomerId, input: MemberCreate) {
        yield* customers.requireActive(organizationId, customerId)
        const rows = yield* sql`INSERT INTO customer_members ${
          sql.insert({
            organizationId,
            id: makeId("mem"),
            customerId,
            email: input.email,
            name: input.name ?? null,
            role: input.role ?? "MEMBER"
          })
        } RETURNING *`.pipe(uniqueOr(() => duplicate(input.email)), Effect.flatMap(decodeRows(Member)))
        return rows[0]!
      }, dieOnSqlError)

    const update = Effect.fn("Members.update")(function*(organizationId: OrganizationId, customerId: CustomerId, id: string, patch: MemberUpdate) {
        yield* customers.requireActive(organizationId, customerId)
        yield* get(organizationId, customerId, id)
        yield* sql`UPDATE customer_members SET
              email = coalesce(${patch.email ?? null}, email),
              name = CASE WHEN ${patch.name !== undefined} THEN ${patch.name ?? null} ELSE name END,
              role = coalesce(${patch.role ?? null}, role),
              updated_at = now()
            WHERE organization_id = ${organizationId} AND customer_id = ${customerId} AND id = ${id}`.pipe(
          uniqueOr(() => duplicate(patch.email ?? ""))
        )
        return yield* get(organizationId, customerId, id)
      }, sql.withTransaction, dieOnSqlError)

    const remove = Effect.fn("Members.remove")(function*(organizationId: OrganizationId, customerId: CustomerId, id: string) {
        yield* customers.requireActive(organizationId, customerId)
        const member = yield* get(organizationId, customerId, id)
        yield* sql`DELETE FROM customer_members
            WHERE organization_id = ${organizationId} AND customer_id = ${customerId} AND id = ${id}`
        return member
      }, sql.withTransaction, dieOnSqlError)

    /** The member a signal names by e-mail, matched case-insensitively. */
    const findByEmail = Effect.fn("Members.findByEmail")((organizationId: OrganizationId, customerId: CustomerId, email: string) =>
      findOne(
        Member,
        sql`SELECT * FROM customer_members WHERE organization_id = ${organizationId}
              AND customer_id = ${customerId} AND lower(email) = lower(${email})`
      ))

    return { list, get, create, update, remove, findByEmail } as const
  })
}) {}
