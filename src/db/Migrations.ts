/**
 * Numbered plain-SQL migrations from `migrations/NNNN_name.sql`, applied by the
 * `@effect/sql` Migrator: all pending ones in one transaction, behind a table
 * lock, so concurrent starts are serialised and a second run is a no-op.
 */
import { Migrator, SqlClient, type SqlError } from "@effect/sql"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { DatabaseLive } from "./Database.ts"

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

/** The migration files, `[id, name, file]` in id order (the folder listed, no file read). */
const migrationFiles = (): ReadonlyArray<readonly [number, string, string]> =>
  fs.readdirSync(migrationsDir)
    .flatMap((file): Array<readonly [number, string, string]> => {
      const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file)
      return match ? [[Number(match[1]), match[2]!, file]] : []
    })
    .sort(([a], [b]) => a - b)

/** Each file's text is read only when its migration runs: a database already current reads none. */
const sqlFileLoader: Migrator.Loader = Effect.try({
  try: () =>
    migrationFiles().map(([id, name, file]): Migrator.ResolvedMigration => {
      const run = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(fs.readFileSync(`${migrationsDir}${file}`, "utf8")))
      return [id, name, Effect.succeed(run)]
    }),
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

/** Applies pending migrations (the Migrator's run: table lock, one transaction); returns the ones applied now. */
const applyPending = Effect.zipRight(
  ensureMigrationsTable,
  migrate({ loader: sqlFileLoader, table: "schema_migrations" })
)

/**
 * Whether the database already has every migration file: its latest applied
 * id is at least the newest file's, which is when the Migrator would apply
 * nothing (it runs only files above the latest id). One statement instead of
 * the Migrator's seven (table check, BEGIN, LOCK, two reads, COMMIT), and no
 * file read: every CLI command and worker starts with this check. A missing
 * table, duplicate file ids or anything unexpected answer false, and the
 * Migrator, run as usual, decides.
 */
const alreadyCurrent = Effect.gen(function*() {
  const files = yield* Effect.try(migrationFiles)
  if (files.length === 0 || new Set(files.map(([id]) => id)).size !== files.length) return false
  const newest = files[files.length - 1]![0]
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly latest: number | null }>`SELECT max(migration_id) AS latest FROM schema_migrations`.withoutTransform
  const latest = rows[0]?.latest
  return typeof latest === "number" && latest >= newest
}).pipe(Effect.catchAll(() => Effect.succeed(false)))

/** Applies pending migrations; returns the ones applied now (none when the database is already current). */
export const runMigrations: Effect.Effect<ReadonlyArray<readonly [id: number, name: string]>, Migrator.MigrationError | SqlError.SqlError, SqlClient.SqlClient> =
  Effect.flatMap(alreadyCurrent, (current) => (current ? Effect.succeed([]) : applyPending))

export const MigrationsLive = Layer.effectDiscard(runMigrations)

/** The database of the environment, migrated before anything uses it. */
export const MigratedDatabaseLive = Layer.provideMerge(MigrationsLive, DatabaseLive)
