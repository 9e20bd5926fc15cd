/**
 * The ledger, the one write path for money, through its Test layer on a real
 * database: moves aggregate per row, postings apply in order with one ledger
 * row each, events reach exactly the subscribed endpoints, and a rolled-back
 * transaction leaves nothing behind.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { BigDecimal, Effect } from "effect"
import { makeId } from "../src/ids.ts"
import { Ledger } from "../src/ledger/Ledger.ts"
import { decimal, ZERO } from "../src/money.ts"
import { LedgerTest } from "./support/Layers.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const d = decimal
const text = (value: BigDecimal.BigDecimal) => BigDecimal.format(BigDecimal.normalize(value))

/** An organisation with one customer, a purchase with one balance row, and webhook endpoints. */
const seed = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const organizationId = makeId("org")
  const customerId = makeId("cus")
  const planId = makeId("pln")
  const purchaseId = makeId("pur")
  yield* sql`INSERT INTO organizations (id, name) VALUES (${organizationId}, 'Ledger test')`
  yield* sql`INSERT INTO customers (organization_id, id, external_id, slug, name, email, currency_code)
             VALUES (${organizationId}, ${customerId}, 'ext-1', ${customerId}, 'Jo', 'jo@example.com', 'USD')`
  yield* sql`INSERT INTO plans (organization_id, id, name, billing_cycle, currency_code)
             VALUES (${organizationId}, ${planId}, 'Plan', 'MONTHLY', 'USD')`
  yield* sql`INSERT INTO purchases (organization_id, id, customer_id, plan_id, status, billing_date, snapshot)
             VALUES (${organizationId}, ${purchaseId}, ${customerId}, ${planId}, 'ACTIVE', now(), '{}')`
  yield* sql`INSERT INTO purchase_balances (organization_id, purchase_id, component_id, customer_id, type, billing_mode, granted, remaining)
             VALUES (${organizationId}, ${purchaseId}, 'cmp_1', ${customerId}, 'CREDIT', 'ADVANCE', 10, 10)`
  const endpoint = (events: ReadonlyArray<string>, threshold: string | null, enabled = true) =>
    sql`INSERT INTO webhook_endpoints (organization_id, id, url, events, threshold, enabled, secret)
        VALUES (${organizationId}, ${makeId("whe")}, 'http://127.0.0.1:9/hook', ${events}, ${threshold}::numeric, ${enabled}, 'whsec_x')`
  yield* endpoint(["wallet.balance.update", "wallet.balance.drop"], "5")
  yield* endpoint(["wallet.balance.update"], null, false)
  return { organizationId, customerId, purchaseId }
})

const balanceRow = (organizationId: string, purchaseId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ granted: string; used: string; remaining: string; cycleQuantity: string; arrearAmount: string }>`
      SELECT granted, used, remaining, cycle_quantity, arrear_amount FROM purchase_balances
      WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}`)

layer(LedgerTest, { timeout: 120_000 })("Ledger", (it) => {
  it.effect("aggregates balance moves per row into one exact update", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { organizationId, purchaseId } = yield* seed
      const move = (used: string) => ({
        organizationId,
        purchaseId,
        componentId: "cmp_1",
        granted: ZERO,
        used: d(used),
        remaining: BigDecimal.negate(d(used)),
        cycleQuantity: d(used),
        arrearAmount: ZERO
      })
      yield* ledger.moveBalances([move("1.363636363636"), move("0.000000000001"), move("2")])
      const [row] = yield* balanceRow(organizationId, purchaseId)
      expect(row).toMatchObject({ granted: "10", used: "3.363636363637", remaining: "6.636363636363", cycleQuantity: "3.363636363637" })
    }))

  it.effect("applies wallet postings in order: a ledger row each, the wallet written once, events to subscribers only", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const sql = yield* SqlClient.SqlClient
      const { customerId, organizationId } = yield* seed
      const key = { organizationId, customerId }
      const posted = yield* Effect.gen(function*() {
        const locked = yield* ledger.lockWallets([key, key])
        return yield* ledger.postToWallets(locked, [
          { ...key, delta: d("10"), type: "ADJUSTMENT" },
          { ...key, delta: d("-4.5"), type: "USAGE_LOG", usageLogId: "usg_1" },
          { ...key, delta: d("-1"), type: "USAGE_LOG", usageLogId: "usg_2" }
        ])
      }).pipe(sql.withTransaction)
      expect(posted.map((p) => [text(p.previousBalance), text(p.balance)])).toEqual([["0", "10"], ["10", "5.5"], ["5.5", "4.5"]])
      const ledgerRows = yield* sql<{ delta: string; balanceAfter: string }>`
        SELECT delta, balance_after FROM wallet_ledger WHERE organization_id = ${organizationId} ORDER BY id`
      expect(ledgerRows.map((r) => [r.delta, r.balanceAfter])).toEqual([["10", "10"], ["-4.5", "5.5"], ["-1", "4.5"]])
      const [wallet] = yield* sql<{ balance: string }>`SELECT balance FROM wallets WHERE organization_id = ${organizationId}`
      expect(wallet!.balance).toBe("4.5")
      // Three updates to the enabled endpoint; one drop (5.5 -> 4.5 crosses its threshold 5); none to the disabled one.
      const events = yield* sql<{ eventType: string; body: string }>`
        SELECT e.event_type, e.body FROM webhook_events e WHERE e.organization_id = ${organizationId} ORDER BY e.id`
      expect(events.map((e) => e.eventType)).toEqual([
        "wallet.balance.update",
        "wallet.balance.update",
        "wallet.balance.update",
        "wallet.balance.drop"
      ])
      expect(JSON.parse(events[3]!.body).data).toMatchObject({ previous_balance: 5.5, current_balance: 4.5, threshold: 5, usage_log_id: "usg_2" })
      const [deliveries] = yield* sql<{ count: string }>`
        SELECT count(*) FROM webhook_deliveries WHERE organization_id = ${organizationId}`
      expect(deliveries!.count).toBe("4")
    }))

  it.effect("leaves nothing behind when the caller's transaction rolls back", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const sql = yield* SqlClient.SqlClient
      const { customerId, organizationId, purchaseId } = yield* seed
      const failed = yield* ledger.moveWallet({ organizationId, customerId, delta: d("3"), type: "ADJUSTMENT" }).pipe(
        Effect.zipRight(ledger.addSpent([{ organizationId, purchaseId, amount: d("3") }])),
        Effect.zipRight(Effect.fail("abort" as const)),
        sql.withTransaction,
        Effect.flip
      )
      expect(failed).toBe("abort")
      const [counts] = yield* sql<{ ledger: string; events: string; spent: string }>`
        SELECT (SELECT count(*) FROM wallet_ledger WHERE organization_id = ${organizationId}) AS ledger,
               (SELECT count(*) FROM webhook_events WHERE organization_id = ${organizationId}) AS events,
               (SELECT spent_this_cycle FROM purchases WHERE organization_id = ${organizationId}) AS spent`
      expect(counts).toEqual({ ledger: "0", events: "0", spent: "0" })
    }))

  it.effect("floors the Reserved Wallet at zero and reports what was applied, with no ledger row or event", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const sql = yield* SqlClient.SqlClient
      const { customerId, organizationId } = yield* seed
      const up = yield* ledger.moveReservedWallet({ organizationId, customerId }, d("2"))
      const down = yield* ledger.moveReservedWallet({ organizationId, customerId }, d("-5"))
      expect([text(up.reservedBalance), text(up.applied), text(down.reservedBalance), text(down.applied)]).toEqual(["2", "2", "0", "-2"])
      const [counts] = yield* sql<{ ledger: string; events: string }>`
        SELECT (SELECT count(*) FROM wallet_ledger WHERE organization_id = ${organizationId}) AS ledger,
               (SELECT count(*) FROM webhook_events WHERE organization_id = ${organizationId}) AS events`
      expect(counts).toEqual({ ledger: "0", events: "0" })
    }))
  // The backend's per-transaction counters exist on real PostgreSQL only.
  it.effect.skipIf(!usesRealPostgres)(
    "moves a batch's balance rows by their keys, never reading the whole table (needs real PostgreSQL)",
    () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const { organizationId, customerId, purchaseId } = yield* seed
        // Thousands of balance rows, analysed: a drain batch's move of 60 of them was planned as a read
        // of the whole table, hashed (docs/benchmarks.md "A balance move read every balance row").
        yield* sql`INSERT INTO purchase_balances (organization_id, purchase_id, component_id, customer_id, type, billing_mode, granted, remaining)
                   SELECT ${organizationId}, ${purchaseId}, 'cmp_' || n, ${customerId}, 'CREDIT', 'ADVANCE', 10, 10
                   FROM generate_series(2, 4000) n`
        yield* sql`ANALYZE purchase_balances`
        const components = Array.from({ length: 60 }, (_, i) => `cmp_${i * 50 + 2}`)
        const scanned = yield* Effect.gen(function*() {
          // The caller's part: the rows locked before the moves are computed from them.
          yield* sql`SELECT 1 FROM purchase_balances WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId}
                     AND component_id IN ${sql.in(components)} FOR UPDATE`
          const before = yield* sql<{ rows: string }>`SELECT pg_stat_get_xact_tuples_returned('purchase_balances'::regclass) AS rows`
          yield* ledger.moveBalances(components.map((componentId, i) => ({
            organizationId,
            purchaseId,
            componentId,
            granted: ZERO,
            used: d(`${i}.5`),
            remaining: d(`-${i}.5`),
            cycleQuantity: d(`${i}.5`),
            arrearAmount: ZERO
          })))
          const after = yield* sql<{ rows: string }>`SELECT pg_stat_get_xact_tuples_returned('purchase_balances'::regclass) AS rows`
          return Number(after[0]!.rows) - Number(before[0]!.rows)
        }).pipe(sql.withTransaction)
        // Rows read by sequential scans during the move: none (the whole table would be 4,000).
        expect(scanned).toBe(0)
        const moved = yield* sql<{ componentId: string; used: string; remaining: string }>`
          SELECT component_id, used, remaining FROM purchase_balances
          WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId} AND component_id IN ${sql.in(components)}`
        expect(moved).toHaveLength(60)
        for (const row of moved) {
          const i = components.indexOf(row.componentId)
          expect([row.used, row.remaining]).toEqual([`${i}.5`, text(BigDecimal.subtract(d("10"), d(`${i}.5`)))])
        }
        // Nothing else moved.
        const [others] = yield* sql<{ moved: string }>`
          SELECT count(*) AS moved FROM purchase_balances
          WHERE organization_id = ${organizationId} AND purchase_id = ${purchaseId} AND used <> 0`
        expect(Number(others!.moved)).toBe(60)
      })
  )
})
