/**
 * Numbered plain-SQL migrations from `migrations/NNNN_name.sql`, applied by the
 * `@effect/sql` Migrator: all pending ones in one transaction, behind a table
 * lock, so concurrent starts are serialised and a second run is a no-op.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * The project's `migrations/` folder: the nearest one above this module, which
 * is `src/db/` when run from the sources and `dist/` when run compiled.
 */
const findMigrationsDir = () => {
  let dir = fileURLToPath(new URL(".", import.meta.url))
  for (;;) {
    if (fs.existsSync(`${dir}migrations/0001_foundation.sql`)) return `${dir}migrations/`
    const parent = fileURLToPath(new URL("..", `file://${dir}`))
    if (parent === dir) return fileURLToPath(new URL("../../migrations/", import.meta.url))
    dir = parent
  }
}

const migrationsDir = findMigrationsDir()

const sqlFileLoader: Migrator.Loader = Effect.try({
  try: () =>
    fs.readdirSync(migrationsDir)
      .flatMap((file): Array<Migrator.ResolvedMigration> => {
        const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file)
        if (!match) return []
        const text = fs.readFileSync(`${migrationsDir}${file}`, "utf8")
        const run = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text))
        return [[Number(match[1]), match[2]!, Effect.succeed(run)]]
      })
      .sort(([a], [b]) => a - b),
  catch: (cause) => new Migrator.MigrationError({ reason: "failed", message: `cannot read ${migrationsDir}: ${cause}` })
})

const migrate = Migrator.make({})

/**
 * The Migrator creates its table with a plain CREATE TABLE when a lookup finds
 * none, outside its transaction: two processes starting on a fresh database
 * (several CLI commands on a new embedded folder) both tried, and the second
 * failed with "Failed to execute statement". Creating it first, idempotently,
 * closes that race; the Migrator then finds it.
 */
const ensureMigrationsTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`CREATE TABLE IF NOT EXISTS schema_migrations (
        migration_id integer primary key,
        created_at timestamp with time zone not null default now(),
        name text not null
      )`)

/** Applies pending migrations; returns the ones applied now. */
export const runMigrations = Effect.zipRight(
  ensureMigrationsTable,
  migrate({ loader: sqlFileLoader, table: "schema_migrations" })
)

export const MigrationsLive = Layer.effectDiscard(runMigrations)
