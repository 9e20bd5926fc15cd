/**
 * Statements sent as named prepared statements: `prepared(sql)\`SELECT ...\``. Each
 * connection parses and plans such a statement once and PostgreSQL keeps its plan, for the
 * statements that run on every batch or hot request and cost more to plan than to run. The
 * transport is a marker comment at the head of the text, which the pool's clients read
 * (src/db/Pool.ts `preparedByText`): the statement is named after its text, so each variant
 * built from fragments (a lane's literal, a lock clause) is its own prepared statement. Only
 * for statements whose variants are few, never a text that grows with its values (an `IN`
 * list): pass such values as arrays for `unnest`.
 */
import type { SqlClient, SqlConnection, Statement } from "@effect/sql"

/** The marker the pool's clients look for at the head of a statement's text. */
export const PREPARED_MARKER = "/* prepared */"

// One marked copy of each template's strings: a template's strings are one object for the life of
// the process, so the copy is made once.
const marked = new WeakMap<TemplateStringsArray, TemplateStringsArray>()

const markedStrings = (strings: TemplateStringsArray): TemplateStringsArray => {
  let copy = marked.get(strings)
  if (copy === undefined) {
    copy = Object.assign([`${PREPARED_MARKER} ${strings[0]}`, ...strings.slice(1)], {
      raw: [`${PREPARED_MARKER} ${strings.raw[0]}`, ...strings.raw.slice(1)]
    }) as unknown as TemplateStringsArray
    marked.set(strings, copy)
  }
  return copy
}

/** The tag of a statement sent as a named prepared statement, on the given client. */
export const prepared = (sql: SqlClient.SqlClient) =>
<A extends object = SqlConnection.Row>(strings: TemplateStringsArray, ...args: Array<unknown>): Statement.Statement<A> =>
  sql<A>(markedStrings(strings), ...args)
