/**
 * Checks that catalogue ids named by a composite or a plan are records of the
 * same organisation: an unknown id (or another organisation's) is a 400 naming
 * it; an archived record cannot be sold anew, which is a 409.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { orDie } from "../db/Sql.ts"
import { CatalogueItemArchived, UnknownCatalogueItem } from "../errors.ts"
import type { OrganizationId } from "../ids.ts"

export type CatalogueKind = "credit" | "outcome" | "unit" | "composite"

const tableOf: Record<CatalogueKind, string> = {
  credit: "credits",
  outcome: "outcomes",
  unit: "units",
  composite: "composites"
}

export const checkReferences = (
  sql: SqlClient.SqlClient,
  organizationId: OrganizationId,
  kind: CatalogueKind,
  ids: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    if (ids.length === 0) return
    const rows = yield* orDie(sql<{ id: string; isActive: boolean }>`
      SELECT id, is_active FROM ${sql(tableOf[kind])}
      WHERE organization_id = ${organizationId} AND id IN ${sql.in(ids)}`)
    const found = new Map(rows.map((row) => [row.id, row.isActive]))
    const missing = ids.filter((id) => !found.has(id))
    if (missing.length > 0) {
      return yield* new UnknownCatalogueItem({ message: `${kind} ${missing.join(", ")} not found in this organisation` })
    }
    const archived = ids.filter((id) => found.get(id) === false)
    if (archived.length > 0) {
      return yield* new CatalogueItemArchived({ message: `${kind} ${archived.join(", ")} is archived; unarchive it first` })
    }
  })
