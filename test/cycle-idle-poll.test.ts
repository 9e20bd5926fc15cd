/**
 * The cycle job's idle poll asks whether anything is due (Purchases.anyDue)
 * after every claim that found nothing, which is nearly every poll of a
 * looping worker. Asked of each kind's partial index, it reads no purchase
 * when none is due. As one `OR` with `LIMIT 1`, on a table the statistics had
 * not seen (a fresh installation, a server without autovacuum), PostgreSQL
 * read every live purchase through the one-live-purchase index: 13 ms a
 * poll at 4,096 purchases, in the drain's window (docs/benchmarks.md "The
 * drain's own work at 4,096 customers").
 *
 * Shown by what the poll's own transaction read, in the backend's
 * per-transaction counters. Real PostgreSQL only: the embedded database keeps
 * no such counters.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Purchases } from "../src/billing/Purchases.ts"
import { customerWithChatCredits, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const live = 500

let app: TestApp
let acme: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Idle poll")
  await customerWithChatCredits(app, acme)
})
afterAll(() => app.close())

describe.skipIf(!usesRealPostgres)("the cycle job's idle poll (needs real PostgreSQL)", () => {
  it("reads no purchase when none is due, whatever the table's statistics", async () => {
    // Copies of the one customer and its ACTIVE purchase, each with keys of its own: none due before a month.
    await query(app, `
      INSERT INTO customers
      SELECT (jsonb_populate_record(c, jsonb_build_object(
        'id', c.id || '_' || n, 'external_id', c.external_id || '_' || n, 'slug', c.slug || '_' || n, 'email', n || c.email))).*
      FROM customers c, generate_series(1, $2) n WHERE c.organization_id = $1`, [acme.organizationId, live])
    await query(app, `
      INSERT INTO purchases
      SELECT (jsonb_populate_record(p, jsonb_build_object('id', p.id || '_' || n, 'customer_id', p.customer_id || '_' || n))).*
      FROM purchases p, generate_series(1, $2) n WHERE p.organization_id = $1 AND p.status = 'ACTIVE'`, [acme.organizationId, live])
    // As a fresh installation has it: never analysed.
    await query(app, "DELETE FROM pg_statistic WHERE starelid = 'purchases'::regclass")
    await query(app, "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = 'purchases'::regclass")

    const polled = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const purchases = yield* Purchases
      return yield* sql.withTransaction(Effect.gen(function*() {
        const due = yield* purchases.anyDue(new Date())
        // Rows read by sequential scans of the table, and entries read from every one of its indexes.
        const [counters] = yield* sql<{ tableRowsScanned: string; indexEntries: string }>`
          SELECT pg_stat_get_xact_tuples_returned('purchases'::regclass) AS table_rows_scanned,
                 (SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index
                  WHERE indrelid = 'purchases'::regclass) AS index_entries`
        return { due, ...counters! }
      }))
    }))

    const [active] = await query<{ count: string }>(app, "SELECT count(*) AS count FROM purchases WHERE status = 'ACTIVE'")
    expect(Number(active!.count)).toBeGreaterThan(live)
    expect(polled.due).toBe(false)
    expect(Number(polled.tableRowsScanned)).toBe(0)
    // The first entries of each partial index at most, never one a live purchase.
    expect(Number(polled.indexEntries)).toBeLessThan(10)
  })
})
