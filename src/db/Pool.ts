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
import { type Duration, Effect } from "effect"
import Pg from "pg"

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
 * The pool for `PgClient.layerFromPool`, checked with `SELECT 1` (within
 * `connectTimeout`) and ended with its scope.
 */
export const acquirePool = (config: Pg.PoolConfig, connectTimeout: Duration.DurationInput = "5 seconds") =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const pool = new NoCancelPool(config)
        // An idle connection that drops is replaced on next use; the pool must not crash the process.
        pool.on("error", () => {})
        await pool.query("SELECT 1")
        return pool
      },
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1000))
  ).pipe(
    Effect.timeoutFail({
      duration: connectTimeout,
      onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    })
  )
