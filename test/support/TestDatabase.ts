/**
 * A database of its own for each test file: with DATABASE_URL a freshly created
 * PostgreSQL database (dropped afterwards), without it an in-memory embedded
 * database. Either way it is reached over the PostgreSQL wire by the same
 * client as production, and `url` lets a spawned CLI or worker reach it too.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { fromUrl } from "../../src/db/Database.ts"
import { serveInMemory } from "../../src/db/Embedded.ts"
import { randomToken } from "../../src/ids.ts"

export class TestDatabaseUrl extends Context.Tag("TestDatabaseUrl")<TestDatabaseUrl, string>() {}

export const usesRealPostgres = (process.env.DATABASE_URL ?? "") !== ""

/** One statement on its own short-lived connection (CREATE DATABASE cannot run in a pool's transaction). */
const runAlone = (url: string, statement: string) =>
  Effect.scoped(
    Effect.flatMap(
      Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
      (context) => Context.get(context, SqlClient.SqlClient).unsafe(statement)
    )
  )

const freshPostgresDatabase = (adminUrl: string) =>
  Effect.gen(function*() {
    const name = `billing_test_${randomToken(5)}`
    yield* Effect.acquireRelease(
      Effect.orDie(runAlone(adminUrl, `CREATE DATABASE "${name}"`)),
      () => Effect.ignore(runAlone(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
    )
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    return url.toString()
  })

const inMemoryDatabase = Effect.map(
  serveInMemory,
  (address) => `postgres://postgres@${address.host}:${address.port}/postgres`
)

/** SqlClient and PgClient on a fresh database, plus its URL. */
export const TestDatabaseLive = Layer.unwrapScoped(
  Effect.gen(function*() {
    const url = usesRealPostgres ? yield* freshPostgresDatabase(process.env.DATABASE_URL!) : yield* inMemoryDatabase
    // The embedded socket multiplexes one session, so keep its pool small.
    return Layer.merge(fromUrl(Redacted.make(url), usesRealPostgres ? 10 : 4), Layer.succeed(TestDatabaseUrl, url))
  })
)
