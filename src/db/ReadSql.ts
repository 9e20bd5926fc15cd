/**
 * The SQL client of reads that tolerate lag (docs/operations.md, "Reads off
 * the primary"): a pool onto `DATABASE_READ_URL` (a standby, or the
 * formation's hosts with `target_session_attrs=prefer-standby`) when the
 * process has one, else the primary's own client.
 *
 * A `Context.Reference` whose default is "none": a service that reads through
 * `readClient` is built the same way everywhere, and only `billing serve`
 * provides a read pool (`ReadSqlLive`). The worker, the CLI and the tests that
 * build services themselves read from the primary without naming anything.
 * Only plain reads use it, never a statement inside a transaction that writes
 * and never a read the API promises to show its creator at once.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { DatabaseConfig, ReadDatabaseConfig } from "../config.ts"
import { fromUrl } from "./Database.ts"

export class ReadSql extends Context.Reference<ReadSql>()("billing/ReadSql", {
  defaultValue: (): Option.Option<SqlClient.SqlClient> => Option.none()
}) {}

/** The client a lag-tolerant read runs on: the read pool when there is one, else the primary's. */
export const readClient: Effect.Effect<SqlClient.SqlClient, never, SqlClient.SqlClient> = Effect.flatMap(
  ReadSql,
  Option.match({ onNone: () => SqlClient.SqlClient, onSome: Effect.succeed })
)

/**
 * The read pool of `DATABASE_READ_URL`, of at most `maxConnections`, when it
 * is set and the service runs on PostgreSQL. The embedded database has no
 * standby: there the variable is ignored, with a warning. The pool connects
 * at its first read, so a standby that is away does not stop the service
 * from starting; its reads answer 503 `database_unavailable` meanwhile.
 */
export const ReadSqlLive = (maxConnections = 10) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const readUrl = yield* ReadDatabaseConfig
    if (Option.isNone(readUrl)) return Layer.succeed(ReadSql, Option.none())
    const database = yield* DatabaseConfig
    if (Option.isNone(database.url)) {
      yield* Effect.logWarning("DATABASE_READ_URL is ignored: the embedded database has no standby; reads go to it")
      return Layer.succeed(ReadSql, Option.none())
    }
    return Layer.effect(ReadSql, Effect.map(SqlClient.SqlClient, Option.some)).pipe(
      Layer.provide(fromUrl(readUrl.value, maxConnections, true, "read"))
    )
  }))
