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

describe("0019_invoice_numbers", () => {
  it.scoped("numbers the invoices finalised before it per organisation in creation order, drafts left unnumbered", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const dir = new URL("../migrations/", import.meta.url)
      const files = migrationFiles.filter((file) => Number(file.slice(0, 4)) < 19).sort()
      for (const file of files) yield* sql.unsafe(fs.readFileSync(new URL(file, dir), "utf8"))
      yield* sql`INSERT INTO organizations (id, name) VALUES ('org_a', 'A'), ('org_b', 'B'), ('org_c', 'C')`
      yield* sql`INSERT INTO customers (organization_id, id, slug, name, email, currency_code)
                 VALUES ('org_a', 'cus_a', 'a', 'A', 'a@example.com', 'USD'), ('org_b', 'cus_b', 'b', 'B', 'b@example.com', 'USD')`
      const invoice = (org: string, id: string, status: string, createdAt: string) =>
        sql`INSERT INTO invoices (organization_id, id, customer_id, kind, status, currency_code, subtotal, tax_total, total, issued_at, created_at)
            VALUES (${org}, ${id}, ${org === "org_a" ? "cus_a" : "cus_b"}, 'PLAN', ${status}, 'USD', 1, 0, 1, ${createdAt}, ${createdAt})`
      // Ids out of creation order: the creation time decides, the id breaks ties.
      yield* invoice("org_a", "inv_3", "PAID", "2026-01-01T00:00:00Z")
      yield* invoice("org_a", "inv_1", "VOID", "2026-02-01T00:00:00Z")
      yield* invoice("org_a", "inv_2", "DRAFT", "2026-02-15T00:00:00Z")
      yield* invoice("org_a", "inv_0", "OPEN", "2026-03-01T00:00:00Z")
      yield* invoice("org_a", "inv_4", "OPEN", "2026-03-01T00:00:00Z")
      yield* invoice("org_b", "inv_9", "OPEN", "2026-01-01T00:00:00Z")
      const numbering = migrationFiles.find((file) => file.startsWith("0019"))!
      yield* sql.unsafe(fs.readFileSync(new URL(numbering, dir), "utf8"))
      const rows = yield* sql<{ organizationId: string; id: string; number: string | null }>`
        SELECT organization_id, id, number FROM invoices ORDER BY organization_id, id`
      expect(rows.map((row) => [row.id, row.number])).toEqual([
        ["inv_0", "INV-000003"],
        ["inv_1", "INV-000002"],
        ["inv_2", null],
        ["inv_3", "INV-000001"],
        ["inv_4", "INV-000004"],
        ["inv_9", "INV-000001"]
      ])
      const counters = yield* sql<{ organizationId: string; lastNumber: string }>`
        SELECT organization_id, last_number FROM invoice_counters ORDER BY organization_id`
      expect(counters.map((row) => [row.organizationId, Number(row.lastNumber)])).toEqual([["org_a", 4], ["org_b", 1]])
      // A final invoice without a number is refused from now on.
      const unnumbered = yield* Effect.either(invoice("org_b", "inv_10", "OPEN", "2026-04-01T00:00:00Z"))
      expect(unnumbered._tag).toBe("Left")
    }).pipe(Effect.provide(EmptyTestDatabaseLive)), { timeout: 60_000 })
})
