/**
 * What every loader of a batch's context shares: the key of a row in the
 * batch's maps and the distinct keys a statement reads as `unnest` arrays
 * (src/db/KeyPairs.ts), and the lock clause that only the drain's reading takes.
 */
import type { SqlClient, Statement } from "@effect/sql"

export { keyPairs as pairs, scoped } from "../db/KeyPairs.ts"

/** A statement's lock clause: the clause when the context is read to be moved, nothing when only read. */
export type LockClause = (clause: string) => Statement.Fragment

export const lockClause = (sql: SqlClient.SqlClient, lock: boolean): LockClause => (clause) =>
  sql.literal(lock ? clause : "")
