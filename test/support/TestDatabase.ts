/**
 * A database of its own for each test file: the test process's database,
 * emptied for the file (with DATABASE_URL a PostgreSQL database made for the
 * run and process, without it an in-memory embedded database). Either way it
 * is reached over the PostgreSQL wire by the same client as production, and
 * `url` lets a spawned CLI or worker reach it too.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { fromUrl, sharedSessionParameter } from "../../src/db/Database.ts"
import { serveInMemory } from "../../src/db/Embedded.ts"
import { randomToken } from "../../src/ids.ts"

/** The names of a test run's databases begin with this (test/support/GlobalSetup.ts drops them). */
export const testRunDatabasePrefix = (run: string) => `billing_run_${run}_`

export class TestDatabaseUrl extends Context.Tag("TestDatabaseUrl")<TestDatabaseUrl, string>() {}

export const usesRealPostgres = (process.env.DATABASE_URL ?? "") !== ""

/** One statement on its own short-lived connection (CREATE DATABASE cannot run in a pool's transaction). */
export const runAlone = (url: string, statement: string) =>
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
    return databaseUrl(adminUrl, name)
  })

/** The URL of database `name` on the server of `adminUrl`. */
const databaseUrl = (adminUrl: string, name: string) => {
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

const inMemoryDatabase = Effect.map(
  serveInMemory,
  // Processes started on it must not prepare statements by name in its one shared session (src/db/Database.ts).
  (address) => `postgres://postgres@${address.host}:${address.port}/postgres?${sharedSessionParameter}`
)

/**
 * Starting PGlite costs seconds and creating a migrated PostgreSQL database
 * most of one, more than many test files take; and the files of a test
 * process run one after another (vitest.config.ts). So each test process
 * makes one database, kept until the run ends, and a file takes it emptied:
 * migrations stay applied, and no migration inserts rows, so truncating every
 * other table leaves what a fresh, migrated database holds.
 *
 * On PostgreSQL the database is named after the run (`BILLING_TEST_RUN`, set
 * by test/support/GlobalSetup.ts, which drops the run's databases at its end)
 * and the process; embedded, it is the process's in-memory database.
 */
let sharedDatabase: Promise<string> | undefined
let sharedHolders = 0

const processPostgresDatabase = (adminUrl: string) =>
  Effect.gen(function*() {
    const name = `${testRunDatabasePrefix(process.env.BILLING_TEST_RUN ?? `solo${process.pid}`)}${process.pid}`
    yield* Effect.orDie(runAlone(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
    yield* Effect.orDie(runAlone(adminUrl, `CREATE DATABASE "${name}"`))
    return databaseUrl(adminUrl, name)
  })

const startSharedDatabase = () =>
  Effect.runPromise(Effect.gen(function*() {
    if (usesRealPostgres) return yield* processPostgresDatabase(process.env.DATABASE_URL!)
    // Never closed: the database lives as long as the test process.
    const scope = yield* Scope.make()
    return yield* Scope.extend(inMemoryDatabase, scope).pipe(
      Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
    )
  }))

/**
 * Every row gone, and any schema a test made (test/shard-readiness.test.ts makes
 * one) dropped. A lock held by something the last file left running would make
 * this wait: it fails after 10 s instead, naming the cause.
 */
const emptyTables = `DO $$
DECLARE tables text; other name;
BEGIN
  SET LOCAL lock_timeout = '10s';
  FOR other IN SELECT nspname FROM pg_namespace
    WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\\_%'
  LOOP
    EXECUTE format('DROP SCHEMA %I CASCADE', other);
  END LOOP;
  SELECT string_agg(format('%I', tablename), ', ') INTO tables
  FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations';
  IF tables IS NOT NULL THEN EXECUTE 'TRUNCATE ' || tables; END IF;
END $$`

/** The process's database for one holder; emptied when nobody else holds it. */
const sharedDatabaseFor = Effect.acquireRelease(
  Effect.gen(function*() {
    sharedDatabase ??= startSharedDatabase()
    const url = yield* Effect.promise(() => sharedDatabase!)
    if (sharedHolders++ === 0) yield* Effect.orDie(runAlone(url, emptyTables))
    return url
  }),
  () =>
    Effect.sync(() => {
      sharedHolders--
    })
)

const databaseLayer = (url: string) =>
  // The embedded socket multiplexes one session, so keep its pool small.
  Layer.merge(fromUrl(Redacted.make(url), usesRealPostgres ? 10 : 4, usesRealPostgres), Layer.succeed(TestDatabaseUrl, url))

/** SqlClient and PgClient on a database of the file's own, plus its URL. */
export const TestDatabaseLive = Layer.unwrapScoped(Effect.map(sharedDatabaseFor, databaseLayer))

/** Like `TestDatabaseLive`, but an empty database with no migrations applied, even embedded. */
export const EmptyTestDatabaseLive = Layer.unwrapScoped(
  Effect.map(
    usesRealPostgres ? freshPostgresDatabase(process.env.DATABASE_URL!) : inMemoryDatabase,
    databaseLayer
  )
)
