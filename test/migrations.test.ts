import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { runMigrations } from "../src/db/Migrations.ts"
import { EmptyTestDatabaseLive } from "./support/TestDatabase.ts"

const migrationFiles = fs.readdirSync(new URL("../migrations/", import.meta.url)).filter((f) => f.endsWith(".sql"))

describe("migrations", () => {
  it.scoped("apply every file once; a second run changes nothing", () =>
    Effect.gen(function*() {
      const first = yield* runMigrations
      expect(first.map(([id]) => id)).toEqual(migrationFiles.map((file) => Number(file.slice(0, 4))).sort((a, b) => a - b))
      const second = yield* runMigrations
      expect(second).toEqual([])
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ count: string }>`SELECT count(*) FROM schema_migrations`
      expect(Number(row!.count)).toBe(migrationFiles.length)
    }).pipe(Effect.provide(EmptyTestDatabaseLive)), { timeout: 60_000 })
})
