/**
 * A new embedded database starts from the cluster template the build writes
 * (src/db/EmbeddedTemplate.ts) instead of running initdb: the folder holds a
 * whole cluster with initdb's settings, it takes our migrations, and it
 * reopens as any folder does (the template is only for a folder with no
 * cluster: loading it over one would break it).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fromEmbedded } from "../src/db/Database.ts"
import { serveDataDir } from "../src/db/Embedded.ts"
import { ensureTemplate, holdsNoCluster, readTemplate } from "../src/db/EmbeddedTemplate.ts"
import { runMigrations } from "../src/db/Migrations.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

/** Runs `use` on the folder's database, opened (and closed) by this process. */
const onFolder = <A>(dataDir: string, use: Effect.Effect<A, unknown, SqlClient.SqlClient>) =>
  Effect.scoped(Effect.flatMap(serveDataDir(dataDir), (address) => Effect.provide(use, Layer.orDie(fromEmbedded(address)))))

describe.skipIf(usesRealPostgres)("the embedded cluster template (embedded database only)", () => {
  it.live("starts a new folder as a whole cluster that takes the migrations and reopens with its data", () =>
    Effect.gen(function*() {
      const file = yield* Effect.promise(() => ensureTemplate())
      expect(file).toMatch(/node_modules\/\.cache\/billing\/pglite-[\d.]+-cluster\.tar\.gz$/)
      expect(readTemplate()?.size).toBeGreaterThan(1_000_000)

      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-template-"))
      expect(holdsNoCluster(dataDir)).toBe(true)
      const settings = yield* onFolder(dataDir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* runMigrations
        yield* sql`INSERT INTO organizations (id, name, currency_code) VALUES ('org_template', 'Template Co', 'USD')`
        return yield* sql<{ name: string; setting: string }>`
          SELECT name, setting FROM pg_settings
          WHERE name IN ('server_encoding', 'lc_collate', 'lc_ctype', 'TimeZone', 'server_version_num') ORDER BY name`
      }))
      expect(holdsNoCluster(dataDir)).toBe(false)
      expect(Object.fromEntries(settings.map((row) => [row.name, row.setting]))).toMatchObject({ server_encoding: "UTF8" })

      // Opened again: the cluster as it was left, not a new copy of the template.
      const names = yield* onFolder(dataDir, Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ name: string }>`SELECT name FROM organizations WHERE id = 'org_template'`))
      expect(names.map((row) => row.name)).toEqual(["Template Co"])
      fs.rmSync(dataDir, { recursive: true, force: true })
    }))
})
