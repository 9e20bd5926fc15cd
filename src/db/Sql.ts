/**
 * Small helpers every repository uses.
 *
 * Repositories decode rows with Schema; a row that fails to decode is a bug of
 * ours, not of the client, so it must become a defect (a ParseError that
 * escaped would be reported to the client as a 400). Unexpected SQL errors are
 * defects too; the expected ones (unique violations) are caught by code.
 */
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import type { Row } from "@effect/sql/SqlConnection"
import { Effect, Option, type ParseResult, Schema, String } from "effect"
import type { CatalogueListQuery, Page } from "../Page.ts"
import { UnknownCursor } from "../errors.ts"
import { prepared } from "./Prepared.ts"

/** PostgreSQL's SQLSTATE of a failed statement, when there is one. */
export const sqlState = (error: SqlError.SqlError): string | undefined => {
  const cause = error.cause as { code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

export const isUniqueViolation = (error: SqlError.SqlError) => sqlState(error) === "23505"

/** Runs a repository effect, turning unexpected SQL and row-decoding failures into defects. */
export const orDie = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> => Effect.orDie(effect)

/**
 * The decoder of an array of `schema`, built once per schema: building it is
 * several times the cost of running it, and repositories decode on every call.
 */
const arrayDecoders = new WeakMap<Schema.Schema.Any, (rows: unknown) => Effect.Effect<any, any, any>>()
const arrayDecoder = <A, I, R>(schema: Schema.Schema<A, I, R>) => {
  let decoder = arrayDecoders.get(schema)
  if (decoder === undefined) {
    decoder = Schema.decodeUnknown(Schema.Array(schema))
    arrayDecoders.set(schema, decoder)
  }
  return decoder as (rows: unknown) => Effect.Effect<ReadonlyArray<A>, ParseResult.ParseError, R>
}

const rowDecoders = new WeakMap<Schema.Schema.Any, (row: unknown) => Effect.Effect<any, any, any>>()
const rowDecoder = <A, I, R>(schema: Schema.Schema<A, I, R>) => {
  let decoder = rowDecoders.get(schema)
  if (decoder === undefined) {
    decoder = Schema.decodeUnknown(schema)
    rowDecoders.set(schema, decoder)
  }
  return decoder as (row: unknown) => Effect.Effect<A, ParseResult.ParseError, R>
}

/**
 * `effect` run with the planner's bitmap scans off, inside the caller's
 * transaction (`SET LOCAL`), then the setting back to the session's. For
 * statements that read a queue's head by an ordered index (`ORDER BY id LIMIT
 * n` on a partial index): on a table not analysed yet (a new installation),
 * PostgreSQL estimated a few dozen queued rows during a backlog and read them
 * all by bitmap, then sorted them, for every claim, instead of the index's
 * first `n` rows. The choice hangs on that estimate, so statistics taken
 * before a backlog can lead there too.
 */
export const withoutBitmapScans = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>) =>
  orDie(sql`SET LOCAL enable_bitmapscan = off`).pipe(
    Effect.zipRight(effect),
    // Only after a success: a failure ends the transaction, and its SET LOCAL with it.
    Effect.tap(() => orDie(sql`SET LOCAL enable_bitmapscan TO DEFAULT`))
  )

/** Every row of `query`, decoded by `schema`. */
export const findAll = <A, I, R>(
  schema: Schema.Schema<A, I, R>,
  query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
) => orDie(Effect.flatMap(query, arrayDecoder(schema)))

/** The first row of `query`, decoded by `schema`, if there is one. */
export const findOne = <A, I, R>(
  schema: Schema.Schema<A, I, R>,
  query: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
): Effect.Effect<Option.Option<A>, never, R> =>
  orDie(
    Effect.flatMap(query, (rows) =>
      rows.length === 0 ? Effect.succeedNone : Effect.asSome(rowDecoder(schema)(rows[0])))
  )

/** The value `find` found, or the failure `notFound` gives when it found none. */
export const foundOr = <E>(notFound: () => E) => <A, R>(find: Effect.Effect<Option.Option<A>, never, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(find, Option.match({ onNone: () => Effect.fail(notFound()), onSome: Effect.succeed }))

/**
 * Looks rows of `table` up by id within an organisation; a missing row (or one
 * of another organisation) is the failure `notFound` gives. `lock` takes the
 * row FOR UPDATE, for a change later in the same transaction. `columns` is the
 * select list where it is not `*` (SQL text of ours, never input), `where` a
 * further condition every row found must meet (`removed_at IS NULL`).
 */
export const findByIdOr = <A, I, R, E>(
  sql: SqlClient.SqlClient,
  schema: Schema.Schema<A, I, R>,
  table: string,
  notFound: (id: string) => E,
  options: { readonly columns?: string; readonly where?: string } = {}
) =>
(organizationId: string, id: string, lock = false): Effect.Effect<A, E, R> =>
  foundOr(() => notFound(id))(
    findOne(
      schema,
      // Prepared (src/db/Pool.ts): one text per table and lock, run on nearly every request that names a row.
      prepared(sql)`SELECT ${sql.literal(options.columns ?? "*")} FROM ${sql(table)}
          WHERE organization_id = ${organizationId} AND id = ${id} ${
        sql.literal(options.where === undefined ? "" : `AND ${options.where}`)
      } ${sql.literal(lock ? "FOR UPDATE" : "")}`
    )
  )

/**
 * The end of a list statement: the rows after the page's cursor (before it
 * when the page is newest first), in id order, at most the page's limit:
 * `AND id > cursor ORDER BY id LIMIT 50`. `id` names the id column where the
 * statement joins (`u.id`). The text has the cursor's condition only when
 * there is a cursor, and the limit (an integer the edge decoded) as a literal:
 * a prepared list statement then gets a generic plan as good as a custom one
 * (src/usage/UsageLog.ts says why that matters).
 */
export const pageClause = (sql: SqlClient.SqlClient, page: Page, id = "id") => {
  const column = sql.literal(id)
  if (!Number.isSafeInteger(page.limit) || page.limit < 1) throw new RangeError(`a page's limit is a positive integer, not ${page.limit}`)
  const limit = sql.literal(`${page.limit}`)
  const cursor = page.cursor
  return page.newestFirst
    ? sql`${cursor === undefined ? sql`` : sql`AND ${column} < ${cursor}`} ORDER BY ${column} DESC LIMIT ${limit}`
    : sql`${cursor === undefined ? sql`` : sql`AND ${column} > ${cursor}`} ORDER BY ${column} LIMIT ${limit}`
}

/**
 * A page's cursor must name a row of the list it pages: the rows after an id
 * that names nothing (`cursor=zzz`) were an empty page answered 200, which
 * reads as "no more rows". Checked by primary key in `table` within the
 * organisation, only when a cursor is given (the second page on): an unknown
 * or malformed cursor is 400 (`UnknownCursor`), on every list.
 */
export const knownCursor = (sql: SqlClient.SqlClient, table: string, organizationId: string, page: Page) =>
  page.cursor === undefined
    ? Effect.void
    : Effect.flatMap(
      orDie(sql`SELECT 1 AS found FROM ${sql(table)} WHERE organization_id = ${organizationId} AND id = ${page.cursor}`),
      (rows) =>
        rows.length > 0
          ? Effect.void
          : Effect.fail(
            new UnknownCursor({
              message: `cursor ${JSON.stringify(page.cursor)} names no row of this list: pass the id of the last row of the previous page`
            })
          )
    )

/** The catalogue lists' `active` filter: only active rows, only inactive ones, or (undefined) all. */
export const activeClause = (sql: SqlClient.SqlClient, active: boolean | undefined) =>
  sql`AND (${active ?? null}::boolean IS NULL OR is_active = ${active ?? null})`

/** A catalogue resource's list: an organisation's rows of `table`, filtered on `active`, a page at a time. */
export const findCataloguePage = <A, I, R>(sql: SqlClient.SqlClient, schema: Schema.Schema<A, I, R>, table: string) =>
(organizationId: string, query: CatalogueListQuery) =>
  Effect.zipRight(
    knownCursor(sql, table, organizationId, query.page),
    findAll(
      schema,
      sql`SELECT * FROM ${sql(table)}
          WHERE organization_id = ${organizationId} ${activeClause(sql, query.active)} ${pageClause(sql, query.page)}`
    )
  )

/** Decodes rows that a statement returned; a row that does not decode is a defect. */
export const decodeRows = <A, I, R>(schema: Schema.Schema<A, I, R>) => (rows: ReadonlyArray<unknown>) =>
  Effect.orDie(arrayDecoder(schema)(rows))

/**
 * For statements guarded by a unique index: a unique violation becomes the
 * typed failure `onViolation` gives, any other SQL error a defect.
 */
export const uniqueOr = <E>(onViolation: (error: SqlError.SqlError) => E) =>
<A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>): Effect.Effect<A, E, R> =>
  Effect.catchAll(effect, (error) => isUniqueViolation(error) ? Effect.fail(onViolation(error)) : Effect.die(error))

/** Keeps the typed failures of `effect` and turns its SQL errors into defects. */
export const dieOnSqlError = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, SqlError.SqlError>, R> =>
  Effect.catchIf(effect, (error): error is Extract<E, SqlError.SqlError> =>
    typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError", Effect.die) as any

/**
 * One multi-row INSERT of `rows` (camelCase keys, the same in every row) sent
 * as a single JSON parameter: the statement and its parameter count do not
 * grow with the batch, and PostgreSQL casts each field to its column's type.
 * Columns no row names take their defaults. Values must be JSON as the column
 * reads it: decimals as strings, timestamps as ISO strings, jsonb as the value.
 * Undefined when there are no rows (nothing to write).
 */
export const insertRowsStatement = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, unknown>>
): Statement.Statement<Row> | undefined => {
  if (rows.length === 0) return undefined
  const { columns, json } = recordsetOf(rows)
  const list = sql.literal(columns.map((column) => `"${column}"`).join(", "))
  // Its text depends on the table and the columns only: one prepared statement each (src/db/Pool.ts).
  return prepared(sql)`INSERT INTO ${sql(table)} (${list}) SELECT ${list} FROM json_populate_recordset(NULL::${sql(table)}, ${json}::json)`
}

/**
 * Rows (camelCase keys, the same in every row) as `insertRowsStatement` sends
 * them: their snake_case column names and one JSON text for
 * `json_populate_recordset`, for a statement that selects from them itself.
 */
export const recordsetOf = (rows: ReadonlyArray<Record<string, unknown>>) => {
  const keys = rows.length === 0 ? [] : Object.keys(rows[0]!)
  const columns = keys.map(String.camelToSnake)
  return { columns, json: rowsJson(keys, columns, rows) }
}

/**
 * `JSON.stringify` of the rows with their keys renamed to `columns` (a missing
 * value as null). Each copy is built by assigning the columns in order, so
 * every copy shares one shape and JSON.stringify takes its fast path:
 * Object.fromEntries made dictionary objects (twice the time), and writing the
 * text field by field made a string per field (three times the collections),
 * on the cycle job's thousands of rows a batch.
 */
const rowsJson = (keys: ReadonlyArray<string>, columns: ReadonlyArray<string>, rows: ReadonlyArray<Record<string, unknown>>) => {
  const copies = new Array<Record<string, unknown>>(rows.length)
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]!
    const copy: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) copy[columns[i]!] = row[keys[i]!] ?? null
    copies[r] = copy
  }
  return JSON.stringify(copies)
}

/** `insertRowsStatement`, run. */
export const insertRows = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, unknown>>
): Effect.Effect<void> => Effect.asVoid(writeTogether(sql, [insertRowsStatement(sql, table, rows)]))

/**
 * A write that the others of its `writeTogether` read by name: its WITH
 * clause is called `name`, and a sibling selects from its RETURNING rows
 * (the invoice counter, whose numbers the invoices' INSERT takes).
 */
export class NamedWrite {
  constructor(readonly name: string, readonly statement: Statement.Statement<Row>) {}
}

export type Write = Statement.Statement<Row> | NamedWrite | undefined

const statementOf = (write: Statement.Statement<Row> | NamedWrite) => write instanceof NamedWrite ? write.statement : write

/**
 * Writes (INSERT, UPDATE or DELETE statements, undefined for none) sent as one
 * statement of data-modifying WITH clauses: one round trip instead of one a
 * write, which is most of what a small transaction costs. They run on one
 * snapshot and none sees another's rows, so no two may touch the same row
 * (a write reads another's RETURNING rows only by its name, `NamedWrite`);
 * foreign keys are checked at the end of the statement, so parents and their
 * children may go together. The rows of `returningOf` (one of the writes, with
 * a RETURNING clause) come back; none otherwise.
 */
export const writeTogether = (
  sql: SqlClient.SqlClient,
  writes: ReadonlyArray<Write>,
  returningOf?: Statement.Statement<Row>
): Effect.Effect<ReadonlyArray<Row>> => {
  const statement = writeTogetherStatement(sql, writes, returningOf)
  if (statement === undefined) return Effect.succeed([])
  // A lone write goes as it is: its rows are wanted only when it is `returningOf`.
  return statement !== returningOf && writes.filter((write) => write !== undefined).length === 1
    ? Effect.as(orDie(statement), [])
    : orDie(statement)
}

/**
 * `writeTogether`'s statement, not run (undefined when there is nothing to
 * write), for a caller that answers some of its SQL errors itself (`uniqueOr`).
 */
export const writeTogetherStatement = (
  sql: SqlClient.SqlClient,
  writes: ReadonlyArray<Write>,
  returningOf?: Statement.Statement<Row>
): Statement.Statement<Row> | undefined => {
  const present = presentWrites(writes)
  if (present.length <= 1) return present[0] === undefined ? undefined : statementOf(present[0])
  const returned = returningOf === undefined ? -1 : present.findIndex((write) => statementOf(write) === returningOf)
  const result = returned < 0
    ? sql.literal("SELECT 1 WHERE false")
    : sql.literal(`SELECT * FROM ${nameOfWrite(present[returned]!, returned)}`)
  return sql`WITH ${sql.join(", ", false)(writeClauses(sql, present))} ${result}`
}

const presentWrites = (writes: ReadonlyArray<Write>) =>
  writes.filter((write): write is Statement.Statement<Row> | NamedWrite => write !== undefined)

const nameOfWrite = (write: Statement.Statement<Row> | NamedWrite, index: number) =>
  write instanceof NamedWrite ? write.name : `write_${index}`

const writeClauses = (sql: SqlClient.SqlClient, present: ReadonlyArray<Statement.Statement<Row> | NamedWrite>) =>
  present.map((write, index) => sql`${sql.literal(nameOfWrite(write, index))} AS (${statementOf(write)})`)

/**
 * `writes` as the first WITH clauses of a statement of the caller's (each
 * followed by a comma), for a write whose own rows come back (a balance move
 * returning the thresholds it crossed): the same one round trip as
 * `writeTogether`, on the same terms. Empty when there is nothing to write.
 */
export const leadingWrites = (sql: SqlClient.SqlClient, writes: ReadonlyArray<Write>): Statement.Fragment => {
  const present = presentWrites(writes)
  return present.length === 0 ? sql.literal("") : sql`${sql.join(", ", false)(writeClauses(sql, present))},`
}
