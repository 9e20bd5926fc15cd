/**
 * The worker's batch reads a backlog by its indexes, whatever the table's
 * statistics say (src/db/Sql.ts `withoutBitmapScans` around the claim,
 * BatchWrites.ts `finishStatement`). With statistics that have not seen
 * the backlog (here, as on a fresh installation, none at all), PostgreSQL
 * planned for every batch a bitmap scan of the whole queue to find its head,
 * and a scan of the whole table, hashed, to write the signals' end: a drain
 * that slowed as the backlog grew (docs/benchmarks.md). The end's scan was
 * planned on an analysed table too, while it holds fewer rows than many
 * batches.
 *
 * Shown by what the batch's own transaction read, in the backend's
 * per-transaction counters: index entries of the queue's index, rows read by
 * sequential scans of `signals`. Without the two changes, both are the whole
 * backlog. Real PostgreSQL only: the embedded database keeps no such counters.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { client, customerWithChatCredits, drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const backlog = 20_000

let app: TestApp
let acme: Tenant
let customerId: string

/** `count` copies of the priced signal, with `status`: rows as the intake writes them, many at once. */
const clone = (count: number, status: string, tag: string) =>
  query(app, `
    INSERT INTO signals (organization_id, id, message_id, route, status, customer_id, body)
    SELECT s.organization_id, s.id || '_' || $3 || md5(n::text), s.message_id || '_' || $3 || n, s.route, $4, s.customer_id, s.body
    FROM (SELECT * FROM signals WHERE organization_id = $1 LIMIT 1) s, generate_series(1, $2) n`, [
    acme.organizationId,
    count,
    tag,
    status
  ])

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Queue plans")
  customerId = await customerWithChatCredits(app, acme)
})
afterAll(() => app.close())

describe.skipIf(!usesRealPostgres)("a batch of a backlog the statistics have not seen (needs real PostgreSQL)", () => {
  it("reads the queue's head by its index and ends its signals by their keys, not by scanning the queue or the table", async () => {
    // One signal sent and priced: the row the backlog is cloned from.
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    expect((await client(app, acme).post("/signal/credit", { customerId, agentKey: "chat", usage })).status).toBe(202)
    await drain(app)
    // As a fresh installation has it: never analysed (reset here, for the table other tests filled).
    await query(app, "DELETE FROM pg_statistic WHERE starelid = 'signals'::regclass")
    await query(app, "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = 'signals'::regclass")
    // Then a backlog, queued before any ANALYZE.
    await clone(backlog, "QUEUED", "backlog")

    const read = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const processor = yield* SignalProcessor
      // One transaction on one connection: the batch (a savepoint in it) and the counters of what it read.
      return yield* sql.withTransaction(Effect.gen(function*() {
        const priced = yield* processor.runOnce
        const [counters] = yield* sql<{ queueIndexEntries: string; tableRowsScanned: string; bitmapScans: string }>`
          SELECT pg_stat_get_xact_tuples_returned('signals_queued'::regclass) AS queue_index_entries,
                 pg_stat_get_xact_tuples_returned('signals'::regclass) AS table_rows_scanned,
                 current_setting('enable_bitmapscan') AS bitmap_scans`
        return { priced, ...counters! }
      }))
    }))

    expect(read.priced).toBeGreaterThan(0)
    // The head: its first rows (64 a claim), never the whole queue.
    expect(Number(read.queueIndexEntries)).toBeGreaterThan(0)
    expect(Number(read.queueIndexEntries)).toBeLessThan(backlog / 10)
    // The end: each signal by its primary key; the table is never read whole.
    expect(Number(read.tableRowsScanned)).toBeLessThan(backlog / 10)
    // And the planner's setting is the session's again once the claim is done.
    expect(read.bitmapScans).toBe("on")
  })
})
