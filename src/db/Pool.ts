/**
 * The `pg` pool under our SQL client, built by us rather than by `PgClient.layer`
 * for one reason: an interrupted statement must never be cancelled on the server.
 *
 * When a fiber running a statement is interrupted (a client that hangs up, a
 * race that another branch won, a shutdown), `@effect/sql-pg` 0.53 sends
 * `SELECT pg_cancel_backend(<pid of its connection>)` through the pool. It does
 * so even when the statement has already finished and the connection is back in
 * the pool, so the cancel can land on the next statement of whoever took the
 * connection: another request's INSERT fails with "canceling statement due to
 * user request" and answers 500. We drop those cancels instead. An interrupted
 * statement runs to its end (ours are short); one inside a transaction is
 * followed by the ROLLBACK that closing its scope sends, on the same connection.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect } from "effect"
import Pg from "pg"
import { describeConnectionString } from "./ConnectionString.ts"
import type { HostRouter } from "./HostRouting.ts"

/** The exact text `@effect/sql-pg` sends to cancel a connection's statement. */
export const cancelStatement = /^SELECT pg_cancel_backend\(\d+\)$/

/** A pool whose `query` answers a statement cancel at once, without sending it. */
export class NoCancelPool extends Pg.Pool {
  override query(...args: Array<any>): any {
    const [text, callback] = args
    if (typeof text === "string" && cancelStatement.test(text) && typeof callback === "function") {
      queueMicrotask(() => callback(undefined, { rows: [], rowCount: 0 }))
      return undefined
    }
    return (super.query as (...a: Array<any>) => any)(...args)
  }
}

/**
 * A statement's text that opens with the comment `prepared: <name>` (as
 * `/` `* prepared: entitlements.quick_read.by_id *` `/`) is sent as a
 * named prepared statement: each connection parses and plans it once, and
 * PostgreSQL keeps its plan (a generic one after five runs). For the few
 * statements that run on every hot request and cost more to plan than to run,
 * as the check's one-statement read (src/entitlements/QuickRead.ts) does
 * (docs/benchmarks.md, "Making the check fast"). The name must be unique to the text.
 * Only on real PostgreSQL: the embedded database multiplexes every client over
 * one session, where a second client's prepare of the same name fails.
 */
export const preparedName = /^\/\* prepared: ([A-Za-z0-9_.]{1,63}) \*\//

/**
 * `/` `* prepared *` `/` without a name (written by the `prepared` tag,
 * src/db/Prepared.ts, never by hand): the statement is named after its text
 * (a hash of it), so that each variant of a statement built from fragments
 * (a lane's literal, a lock clause) is its own prepared statement. Only for
 * statements whose variants are few: never a text that grows with its values.
 */
const preparedByText = /^\/\* prepared \*\//

/** The most statement texts named by their hash; past it, marked texts go unnamed (never an unbounded cache). */
const MAX_TEXT_NAMES = 500
const textNames = new Map<string, string>()

/** FNV-1a over the text, two 32-bit lanes: a name unique to the text for any set of statements a process has. */
const nameOfText = (text: string): string | undefined => {
  const known = textNames.get(text)
  if (known !== undefined || textNames.size >= MAX_TEXT_NAMES) return known
  let a = 0x811c9dc5
  let b = 0x01000193
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index)
    a = Math.imul(a ^ code, 0x01000193)
    b = Math.imul(b ^ code, 0x811c9dc5) ^ (b >>> 15)
  }
  const name = `t_${(a >>> 0).toString(36)}_${(b >>> 0).toString(36)}_${text.length.toString(36)}`
  textNames.set(text, name)
  return name
}

/** A client that sends the statements `preparedName` (or `preparedByText`) marks as named prepared statements. */
class PreparingClient extends Pg.Client {
  override query(...args: Array<any>): any {
    const [text, values, callback] = args
    if (typeof text === "string" && typeof callback === "function") {
      const name = preparedName.exec(text)?.[1] ?? (preparedByText.test(text) ? nameOfText(text) : undefined)
      if (name !== undefined) return (super.query as (...a: Array<any>) => any)({ name, text, values }, callback)
    }
    return (super.query as (...a: Array<any>) => any)(...args)
  }
}

/**
 * Where a pool connects, for a person: `host:port[,host:port]/database`, never
 * the user or the password (a `DATABASE_URL` carries both).
 */
export const targetOf = (config: Pg.PoolConfig): string =>
  config.connectionString !== undefined
    ? describeConnectionString(config.connectionString)
    : `${config.host ?? "localhost"}:${config.port ?? 5432}/${config.database ?? ""}`

/**
 * Why a connection failed, in the driver's words: its message, else its code
 * (Node gives `ECONNREFUSED` with an empty message when every address of a
 * name refused), else the first of its errors.
 */
export const connectCause = (cause: unknown): string => {
  if (typeof cause !== "object" || cause === null) return String(cause)
  const error = cause as { message?: unknown; code?: unknown; errors?: unknown }
  if (typeof error.message === "string" && error.message !== "") return error.message
  if (Array.isArray(error.errors) && error.errors.length > 0) return connectCause(error.errors[0])
  if (typeof error.code === "string") return error.code
  return "unknown cause"
}

export interface PoolOptions {
  /** Its clients prepare the statements `preparedName` marks. */
  readonly prepareMarked: boolean
  /** Its clients choose their host through this router (a multi-host `DATABASE_URL`, src/db/HostRouting.ts). */
  readonly router?: HostRouter | undefined
  /** Where it connects, for messages, when `config` alone does not say (a router's hosts). */
  readonly target?: string | undefined
  /**
   * Whether building the pool waits for a first `SELECT 1` (default true).
   * False for the read connection (src/db/ReadSql.ts): a standby that is away
   * must not stop the service from starting, since writes never need it; its
   * reads answer 503 until it is back.
   */
  readonly checkAtStart?: boolean | undefined
}

/**
 * The pool for `PgClient.layerFromPool`, checked with `SELECT 1` (within
 * `connectTimeout`) and ended with its scope.
 */
export const acquirePool = (
  config: Pg.PoolConfig,
  connectTimeout: Duration.DurationInput = "5 seconds",
  options: PoolOptions = { prepareMarked: false }
) => {
  const target = options.target ?? targetOf(config)
  const Base = options.prepareMarked ? PreparingClient : Pg.Client
  const Client = options.router?.routes === true ? options.router.clientClass(Base) : Base
  return Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const pool = new NoCancelPool(Client === Pg.Client ? config : { ...config, Client })
        // An idle connection that drops is replaced on next use; the pool must not crash the process.
        pool.on("error", () => {})
        if (options.checkAtStart !== false) await pool.query("SELECT 1")
        return pool
      },
      // The database named by host and name, and the cause: "Failed to connect" alone left a person guessing.
      catch: (cause) => new SqlError({ cause, message: `cannot connect to PostgreSQL at ${target}: ${connectCause(cause)}` })
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1000))
  ).pipe(
    Effect.timeoutFail({
      duration: connectTimeout,
      onTimeout: () =>
        new SqlError({
          cause: new Error("Connection timed out"),
          message: `cannot connect to PostgreSQL at ${target}: no answer within ${Duration.format(connectTimeout)}`
        })
    })
  )
}
