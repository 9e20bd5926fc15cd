/**
 * What every loader of a batch's context shares: the key of a row in the
 * batch's maps, the distinct keys a statement reads as `unnest` arrays, and
 * the lock clause that only the drain's reading takes.
 */
import type { SqlClient, Statement } from "@effect/sql"

/** A key within its organisation, for maps of a batch's rows. */
export const scoped = (organizationId: string, key: string) => `${organizationId}/${key}`

/** Distinct (organization, key) pairs as two parallel arrays, sorted, for `unnest`. */
export const pairs = (items: Iterable<readonly [string, string]>) => {
  const unique = new Map<string, readonly [string, string]>()
  for (const item of items) unique.set(scoped(item[0], item[1]), item)
  const sorted = [...unique.values()].sort((a, b) => (scoped(a[0], a[1]) < scoped(b[0], b[1]) ? -1 : 1))
  return { size: sorted.length, organizations: sorted.map((p) => p[0]), keys: sorted.map((p) => p[1]) }
}

/** A statement's lock clause: the clause when the context is read to be moved, nothing when only read. */
export type LockClause = (clause: string) => Statement.Fragment

export const lockClause = (sql: SqlClient.SqlClient, lock: boolean): LockClause => (clause) =>
  sql.literal(lock ? clause : "")
