/**
 * Migration 0022 (issue 38, docs/billing.md "Due dates and overdue"): the
 * invoices finalised before payment terms existed were due at once, so each is
 * given a due date when it was issued, or, a usage invoice finalised after its
 * grace period, when that period ended; a DRAFT none. From then on the
 * database refuses a final invoice without a due date, and terms out of range.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { EmptyTestDatabaseLive } from "./support/TestDatabase.ts"

const dir = new URL("../migrations/", import.meta.url)
const migrationFiles = fs.readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()

describe("0022_payment_terms", () => {
  it.scoped("gives the invoices finalised before it a due date, leaves drafts without, and holds the rule from then on", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const file of migrationFiles.filter((file) => Number(file.slice(0, 4)) < 22)) {
        yield* sql.unsafe(fs.readFileSync(new URL(file, dir), "utf8"))
      }
      yield* sql`INSERT INTO organizations (id, name) VALUES ('org_a', 'A')`
      yield* sql`INSERT INTO customers (organization_id, id, slug, name, email, currency_code)
                 VALUES ('org_a', 'cus_a', 'a', 'A', 'a@example.com', 'USD')`
      const invoice = (id: string, status: string, number: number | null, issuedAt: string) =>
        sql`INSERT INTO invoices (organization_id, id, customer_id, kind, status, currency_code, subtotal, tax_total, total,
                                  issued_at, created_at, sequence_number, number)
            VALUES ('org_a', ${id}, 'cus_a', 'USAGE', ${status}, 'USD', 1, 0, 1, ${issuedAt}, ${issuedAt},
                    ${number}, ${number === null ? null : `INV-${String(number).padStart(6, "0")}`})`
      yield* invoice("inv_open", "OPEN", 1, "2026-01-01T00:00:00Z")
      yield* invoice("inv_paid", "PAID", 2, "2026-01-02T00:00:00Z")
      yield* invoice("inv_void", "VOID", 3, "2026-01-03T00:00:00Z")
      yield* invoice("inv_finalised", "OPEN", 4, "2026-02-01T00:00:00Z")
      yield* invoice("inv_draft", "DRAFT", null, "2026-03-01T00:00:00Z")
      // inv_finalised was a DRAFT of a cycle whose grace period ended 2026-02-02T00:00Z.
      yield* sql`INSERT INTO plans (organization_id, id, name, billing_cycle, currency_code)
                 VALUES ('org_a', 'plan_a', 'Plan', 'MONTHLY', 'USD')`
      yield* sql`INSERT INTO purchases (organization_id, id, customer_id, plan_id, status, billing_date, snapshot)
                 VALUES ('org_a', 'pur_a', 'cus_a', 'plan_a', 'ACTIVE', '2026-01-01T00:00:00Z', '{}')`
      yield* sql`INSERT INTO purchase_cycles (organization_id, purchase_id, cycle_index, customer_id, period_start, period_end,
                                              status, usage_invoice_id, finalize_at)
                 VALUES ('org_a', 'pur_a', 0, 'cus_a', '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z', 'FINAL',
                         'inv_finalised', '2026-02-02T00:00:00Z')`
      const terms = migrationFiles.find((file) => file.startsWith("0022"))!
      yield* sql.unsafe(fs.readFileSync(new URL(terms, dir), "utf8"))

      const rows = yield* sql<{ id: string; dueDate: Date | string | null; overdueAt: Date | null }>`
        SELECT id, due_date, overdue_at FROM invoices ORDER BY id`
      expect(rows.map((row) => [row.id, row.dueDate === null ? null : new Date(row.dueDate).toISOString(), row.overdueAt])).toEqual([
        ["inv_draft", null, null],
        ["inv_finalised", "2026-02-02T00:00:00.000Z", null],
        ["inv_open", "2026-01-01T00:00:00.000Z", null],
        ["inv_paid", "2026-01-02T00:00:00.000Z", null],
        ["inv_void", "2026-01-03T00:00:00.000Z", null]
      ])
      const [organization] = yield* sql<{ paymentTermsDays: number }>`SELECT payment_terms_days FROM organizations`
      expect(organization!.paymentTermsDays).toBe(0)
      const [customer] = yield* sql<{ paymentTermsDays: number | null }>`SELECT payment_terms_days FROM customers`
      expect(customer!.paymentTermsDays).toBeNull()

      // A final invoice without a due date, or terms out of range, are refused from now on.
      const undated = yield* Effect.either(invoice("inv_undated", "OPEN", 5, "2026-04-01T00:00:00Z"))
      expect(undated._tag).toBe("Left")
      const negative = yield* Effect.either(sql`UPDATE organizations SET payment_terms_days = -1`)
      expect(negative._tag).toBe("Left")
      const absurd = yield* Effect.either(sql`UPDATE customers SET payment_terms_days = 10000`)
      expect(absurd._tag).toBe("Left")
    }).pipe(Effect.provide(EmptyTestDatabaseLive)), { timeout: 60_000 })
})
