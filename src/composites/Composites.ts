/**
 * Composites: create, list, read, change, archive and unarchive. A composite
 * names the credits, outcomes and units it bills together (at least one, each
 * an active record of the same organisation); sending `entitlements` on a PATCH
 * replaces the whole set. A refId is unique among the organisation's active
 * composites (the partial unique index decides, so races answer 409 too).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findCataloguePage, uniqueOr } from "../db/Sql.ts"
import { CompositeNotFound, EmptyComposite, RefIdTaken } from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { toSql } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import type { CatalogueListQuery } from "../Page.ts"
import {
  Composite,
  type CompositeCreate,
  CompositeEntitlements,
  type CompositeEntitlementIds,
  CompositeMember,
  type CompositeUpdate
} from "./Composite.ts"
import { checkReferences } from "./References.ts"
import { currentTime } from "../time.ts"
import { archiveDoors } from "../db/ActiveFlag.ts"

const CompositeRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  refId: Schema.String,
  description: Schema.NullOr(Schema.String),
  price: Money,
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
type CompositeRow = typeof CompositeRow.Type

const MemberRow = Schema.Struct({
  compositeId: Schema.String,
  kind: Schema.Literal("CREDIT", "OUTCOME", "UNIT"),
  targetId: Schema.String,
  name: Schema.String,
  agentKey: Schema.String
})

const notFound = (id: string) => new CompositeNotFound({ message: `Composite ${id} not found` })

const refIdTaken = (refId: string) =>
  new RefIdTaken({ message: `refId ${refId} is already used by another active composite` })

const unique = (ids: ReadonlyArray<string> | undefined) => [...new Set(ids ?? [])]

export class Composites extends Effect.Service<Composites>()("Composites", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The members as rows to store, after checking every id; 400 when there are none. */
    const membersOf = (organizationId: OrganizationId, entitlements: CompositeEntitlementIds) =>
      Effect.gen(function*() {
        const byKind = [
          ["CREDIT", unique(entitlements.creditIds)],
          ["OUTCOME", unique(entitlements.outcomeIds)],
          ["UNIT", unique(entitlements.unitIds)]
        ] as const
        if (byKind.every(([, ids]) => ids.length === 0)) {
          return yield* new EmptyComposite({
            message: "entitlements must name at least one id in creditIds, outcomeIds or unitIds"
          })
        }
        for (const [kind, ids] of byKind) {
          yield* checkReferences(sql, organizationId, kind === "CREDIT" ? "credit" : kind === "OUTCOME" ? "outcome" : "unit", ids)
        }
        return byKind.flatMap(([kind, ids]) => ids.map((targetId, position) => ({ kind, targetId, position })))
      })

    const storeMembers = (
      organizationId: OrganizationId,
      compositeId: string,
      members: ReadonlyArray<{ readonly kind: string; readonly targetId: string; readonly position: number }>
    ) =>
      Effect.gen(function*() {
        yield* sql`DELETE FROM composite_entitlements
                   WHERE organization_id = ${organizationId} AND composite_id = ${compositeId}`
        yield* sql`INSERT INTO composite_entitlements ${
          sql.insert(members.map((member) => ({ organizationId, compositeId, ...member })))
        }`
      })

    /** Composite rows with their members, in the rows' order. */
    const withMembers = (organizationId: OrganizationId, rows: ReadonlyArray<CompositeRow>) =>
      Effect.gen(function*() {
        if (rows.length === 0) return []
        const members = yield* findAll(
          MemberRow,
          sql`SELECT ce.composite_id, ce.kind, ce.target_id,
                     coalesce(c.name, o.name, u.name) AS name,
                     coalesce(c.agent_key, o.agent_key, u.agent_key) AS agent_key
              FROM composite_entitlements ce
              LEFT JOIN credits c
                ON ce.kind = 'CREDIT' AND c.organization_id = ce.organization_id AND c.id = ce.target_id
              LEFT JOIN outcomes o
                ON ce.kind = 'OUTCOME' AND o.organization_id = ce.organization_id AND o.id = ce.target_id
              LEFT JOIN units u
                ON ce.kind = 'UNIT' AND u.organization_id = ce.organization_id AND u.id = ce.target_id
              WHERE ce.organization_id = ${organizationId} AND ce.composite_id IN ${sql.in(rows.map((row) => row.id))}
              ORDER BY ce.composite_id, ce.kind, ce.position`
        )
        return rows.map((row) => {
          const own = members.filter((member) => member.compositeId === row.id)
          const ofKind = (kind: typeof MemberRow.Type["kind"]) =>
            own.filter((member) => member.kind === kind).map((member) =>
              new CompositeMember({ id: member.targetId, name: member.name, agentKey: member.agentKey })
            )
          return new Composite({
            ...row,
            entitlements: new CompositeEntitlements({
              credits: ofKind("CREDIT"),
              outcomes: ofKind("OUTCOME"),
              units: ofKind("UNIT")
            })
          })
        })
      })

    const findRow = findByIdOr(sql, CompositeRow, "composites", notFound)

    /** A composite by id, archived or not, with its members. */
    const get = Effect.fn("Composites.get")((organizationId: OrganizationId, id: string) =>
      Effect.flatMap(findRow(organizationId, id, false), (row) =>
        Effect.map(withMembers(organizationId, [row]), (composites) => composites[0]!)))

    const create = Effect.fn("Composites.create")(function*(organizationId: OrganizationId, input: CompositeCreate) {
        const members = yield* membersOf(organizationId, input.entitlements)
        const id = makeId("comp")
        yield* sql`INSERT INTO composites ${
          sql.insert({
            organizationId,
            id,
            name: input.name,
            refId: input.refId,
            description: input.description ?? null,
            price: toSql(input.price)
          })
        }`.pipe(uniqueOr(() => refIdTaken(input.refId)))
        yield* storeMembers(organizationId, id, members)
        // The row just written: not finding it is no answer of this request, but a defect.
        return yield* Effect.orDie(get(organizationId, id))
      }, sql.withTransaction, dieOnSqlError)

    const page = findCataloguePage(sql, CompositeRow, "composites")
    const list = Effect.fn("Composites.list")((organizationId: OrganizationId, query: CatalogueListQuery) =>
      Effect.flatMap(
        page(organizationId, query),
        (rows) => withMembers(organizationId, rows)
      ))

    const update = Effect.fn("Composites.update")(function*(organizationId: OrganizationId, id: string, patch: CompositeUpdate) {
        const current = yield* findRow(organizationId, id, true)
        if (patch.entitlements !== undefined) {
          yield* storeMembers(organizationId, id, yield* membersOf(organizationId, patch.entitlements))
        }
        const changes: Record<string, unknown> = { updatedAt: yield* currentTime }
        if (patch.name !== undefined) changes.name = patch.name
        if (patch.refId !== undefined) changes.refId = patch.refId
        if (patch.description !== undefined) changes.description = patch.description
        if (patch.price !== undefined) changes.price = toSql(patch.price)
        yield* sql`UPDATE composites SET ${sql.update(changes)}
                   WHERE organization_id = ${organizationId} AND id = ${id}`.pipe(
          uniqueOr(() => refIdTaken(patch.refId ?? current.refId))
        )
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    /**
     * Archives or unarchives; doing it twice answers the same composite.
     * Unarchiving one whose refId another active composite has taken since is a 409.
     */
    const setActive = (organizationId: OrganizationId, id: string, active: boolean) =>
      Effect.gen(function*() {
        const current = yield* findRow(organizationId, id, true)
        if (current.isActive !== active) {
          yield* sql`UPDATE composites SET is_active = ${active}, updated_at = now()
                     WHERE organization_id = ${organizationId} AND id = ${id}`.pipe(
            uniqueOr(() => refIdTaken(current.refId))
          )
        }
        return yield* get(organizationId, id)
      }).pipe(sql.withTransaction, dieOnSqlError)

    return {
      create,
      list,
      get,
      update,
      ...archiveDoors("Composites", setActive)
    } as const
  })
}) {}
