/**
 * A fault costs seconds, not minutes (docs/signals.md, "When a batch fails"):
 * - the worker's connections killed while a batch of 1,000 is in flight: the
 *   batch is tried again whole once the database answers (the try that prices
 *   it begun within seconds), all 1,000 priced in one transaction, nothing
 *   isolated, nothing billed twice;
 * - one signal the database refuses (a test trigger raising SQLSTATE 22023 for
 *   its usage row) among 1,000: it fails alone (FAILED, 500) and the others are
 *   priced, in O(log n) transactions.
 *
 * Transactions are counted by what they leave: `processed_at` is each
 * transaction's now(), so the distinct values among a set of signals are the
 * transactions that ended them; and a sequence bumped by a statement trigger
 * on the usage log counts every batch that wrote usage, rolled back or not
 * (a sequence is not transactional).
 *
 * Needs real PostgreSQL: the embedded database has no other backend to kill
 * and no lock to wait on.
 */
import Pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, customerWithChatCredits, drain, query } from "./signals-fixtures.ts"
import { HANG_GUARD_MS } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

/** What one credit signal costs: 1.2 credits (1,000 in / 500 out of gpt-4o at a 20% margin). */
const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
const CREDITS_PER_SIGNAL = 1.2

/** The worker's full batch (src/signals/SignalProcessor.ts `SignalBatchSize`, 1,000 unless BILLING_SIGNAL_BATCH says). */
const BATCH = 1000

describe.skipIf(!usesRealPostgres)("a fault in the signals worker (needs real PostgreSQL)", () => {
  let app: TestApp
  let acme: Tenant
  let customerId: string
  let priced = 0

  /** Queues `count` credit signals in one `POST /signal/batch`; their ids in order. */
  const send = async (count: number): Promise<Array<string>> => {
    const answer = await client(app, acme).post("/signal/batch", {
      signals: Array.from({ length: count }, () => ({ type: "credit", customerId, agentKey: "chat", usage }))
    })
    expect(answer.status).toBe(202)
    const results = answer.body.result.results as Array<{ queued: boolean; rawId: string }>
    expect(results.every((result) => result.queued)).toBe(true)
    return results.map((result) => result.rawId)
  }

  /** How the signals ended: status counts, usage rows per signal, and the transactions that ended them. */
  const ended = async (ids: ReadonlyArray<string>) =>
    (await query<{ statuses: Record<string, number>; usageRows: Array<number>; transactions: number }>(
      app,
      `SELECT (SELECT jsonb_object_agg(status || coalesce(':' || error_status, ''), n) FROM (
                 SELECT status, error_status, count(*)::int AS n FROM signals
                 WHERE organization_id = $1 AND id = ANY($2) GROUP BY 1, 2) s) AS statuses,
              (SELECT array_agg(DISTINCT n) FROM (
                 SELECT (SELECT count(*)::int FROM usage_log u WHERE u.organization_id = s.organization_id AND u.signal_id = s.id) AS n
                 FROM signals s WHERE s.organization_id = $1 AND s.id = ANY($2) AND s.status = 'PROCESSED') c) AS usage_rows,
              (SELECT count(DISTINCT processed_at)::int FROM signals WHERE organization_id = $1 AND id = ANY($2)) AS transactions`,
      [acme.organizationId, ids]
    ))[0]!

  const creditsUsed = async () =>
    Number((await query<{ used: string }>(app, "SELECT used FROM purchase_balances WHERE organization_id = $1 AND type = 'CREDIT'", [
      acme.organizationId
    ]))[0]!.used)

  const connect = async () => {
    const connection = new Pg.Client({ connectionString: app.databaseUrl })
    await connection.connect()
    return connection
  }

  beforeAll(async () => {
    app = await startTestApp()
    acme = await app.tenant("Faults")
    customerId = await customerWithChatCredits(app, acme, {}, 1_000_000)
    // A worker starts with batches of 100 and doubles them as they commit: 100 + 200 + 400 + 800 signals
    // bring it to full batches of 1,000, as a worker that has been running has.
    const warmUp = [...await send(1000), ...await send(500)]
    await drain(app)
    priced += warmUp.length
    expect((await ended(warmUp)).statuses).toEqual({ PROCESSED: 1500 })
  })
  afterAll(() => app?.close())

  it("prices the next batch of 1,000 whole, tried again within seconds of the database answering again after its connections were killed mid-batch", async () => {
    const ids = await send(BATCH)
    // A transaction of the test's holds the customer's balance rows, so the worker's batch, claimed and
    // priced, waits on them inside its transaction: in flight.
    const holder = await connect()
    const killer = await connect()
    try {
      await holder.query("BEGIN")
      await holder.query("SELECT 1 FROM purchase_balances WHERE organization_id = $1 FOR UPDATE", [acme.organizationId])
      const holderPid = (await holder.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid
      const draining = drain(app)
      const waitingBatch = async () =>
        (await killer.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
          [holderPid]
        )).rows[0]!.n
      const seenBy = Date.now() + HANG_GUARD_MS
      while ((await waitingBatch()) === 0) {
        if (Date.now() > seenBy) throw new Error("the worker's batch was never seen waiting on the balance rows")
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      // The outage: for a second, every backend of the database but the test's own is terminated as soon as
      // it shows (the in-flight batch first, then each connection the worker opens to try again).
      let killed = 0
      const outageEnds = Date.now() + 1000
      while (Date.now() < outageEnds) {
        killed += (await killer.query<{ n: number }>(
          `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND backend_type = 'client backend' AND pid NOT IN (pg_backend_pid(), $1)`,
          [holderPid]
        )).rows[0]!.n
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      expect(killed).toBeGreaterThan(0)
      await holder.query("ROLLBACK")
      const answering = Date.now()
      await draining
      priced += BATCH
      // When the transaction that priced them began (processed_at, its now()), against when the database
      // answered again: the worker's notice, which the back-off keeps within half a second (tested alone in
      // test/faults.test.ts); the pricing after it is the batch's own work, as long as the machine makes it.
      // (Below 0 when that try was already waiting on the lock.) A back-off grown to minutes fails here.
      const began = (await query<{ at: Date }>(app, "SELECT min(processed_at) AS at FROM signals WHERE organization_id = $1 AND id = ANY($2)", [
        acme.organizationId,
        ids
      ]))[0]!.at
      expect(new Date(began).getTime() - answering).toBeLessThan(5000)
      const after = await ended(ids)
      // All 1,000 in one transaction: the batch was tried again whole, never taken apart.
      expect(after).toEqual({ statuses: { PROCESSED: BATCH }, usageRows: [1], transactions: 1 })
      expect(await creditsUsed()).toBeCloseTo(priced * CREDITS_PER_SIGNAL, 9)
    } finally {
      await holder.end().catch(() => {})
      await killer.end().catch(() => {})
    }
  })

  it("fails one signal the database refuses alone, pricing the other 999, in O(log n) transactions", async () => {
    const ids = await send(BATCH)
    const poisoned = ids[337]!
    await query(app, "CREATE SEQUENCE fault_usage_writes")
    await query(app, `CREATE FUNCTION fault_count_usage_writes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM nextval('fault_usage_writes'); RETURN NULL; END $$`)
    await query(app, `CREATE TRIGGER fault_count_usage_writes BEFORE INSERT ON usage_log
      FOR EACH STATEMENT EXECUTE FUNCTION fault_count_usage_writes()`)
    await query(app, `CREATE FUNCTION fault_refuse_poisoned() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.signal_id = '${poisoned}' THEN
          RAISE EXCEPTION 'signal poisoned by the test' USING ERRCODE = '22023';
        END IF;
        RETURN NEW;
      END $$`)
    await query(app, `CREATE TRIGGER fault_refuse_poisoned BEFORE INSERT ON usage_log
      FOR EACH ROW EXECUTE FUNCTION fault_refuse_poisoned()`)
    try {
      await drain(app)
      priced += BATCH - 1
      expect(await ended([poisoned])).toEqual({ statuses: { "FAILED:500": 1 }, usageRows: null, transactions: 1 })
      const others = ids.filter((id) => id !== poisoned)
      const after = await ended(others)
      expect(after.statuses).toEqual({ PROCESSED: BATCH - 1 })
      expect(after.usageRows).toEqual([1])
      expect(await creditsUsed()).toBeCloseTo(priced * CREDITS_PER_SIGNAL, 9)
      // Halving 1,000 down to 1: ten levels, each a half that fails and a half that commits, after the
      // batch that failed first; then the signal alone. One by one would have been ~1,000.
      const writes = Number((await query<{ n: string }>(app, "SELECT last_value AS n FROM fault_usage_writes"))[0]!.n)
      const bound = 2 * Math.log2(BATCH) + 2
      expect(writes).toBeLessThanOrEqual(bound)
      expect(after.transactions).toBeLessThanOrEqual(Math.log2(BATCH) + 1)
    } finally {
      await query(app, "DROP TRIGGER fault_refuse_poisoned ON usage_log")
      await query(app, "DROP FUNCTION fault_refuse_poisoned()")
      await query(app, "DROP TRIGGER fault_count_usage_writes ON usage_log")
      await query(app, "DROP FUNCTION fault_count_usage_writes()")
      await query(app, "DROP SEQUENCE fault_usage_writes")
    }
  })
})
