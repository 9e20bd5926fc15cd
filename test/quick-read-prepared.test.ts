/**
 * The check's one-statement read (src/entitlements/QuickRead.ts) is sent to
 * PostgreSQL as a named prepared statement (src/db/Pool.ts), so that each
 * connection plans it once; so is every statement marked `/* prepared *\/`
 * (the drain's hot path, the intake's insert, a sale's statements, a customer's usage-log page), named after its text. Real PostgreSQL only: the embedded database's
 * clients share one session, where it is sent unnamed.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Purchases } from "../src/billing/Purchases.ts"
import type { CustomerId, OrganizationId } from "../src/ids.ts"
import { UsageLog } from "../src/usage/UsageLog.ts"
import { insertSignals } from "../src/signals/InboxInsert.ts"
import { Entitlements } from "../src/entitlements/Entitlements.ts"
import { clientOf, makeCustomer, makePlan, makeUnit } from "./billing-support.ts"
import { customerWithChatCredits, queuedCredit } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
let customerId: string

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Prepared")
  customerId = await customerWithChatCredits(app, acme, { externalId: "prepared-ext" })
})
afterAll(() => app.close())

describe.skipIf(!usesRealPostgres)("the check's quick read (needs real PostgreSQL)", () => {
  it("is a named prepared statement of the connection that ran it, by id and by externalId", async () => {
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    const prepared = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entitlements = yield* Entitlements
      // One transaction: the checks and the look-up run on one connection.
      return yield* sql.withTransaction(Effect.gen(function*() {
        const byId = yield* entitlements.check(acme.organizationId, { customerId, meter: "CREDIT", agentKey: "chat", usage })
        const byExternalId = yield* entitlements.check(acme.organizationId, { externalId: "prepared-ext", meter: "CREDIT", agentKey: "chat", usage })
        expect([byId.allowed, byExternalId.customerId]).toEqual([true, customerId])
        return yield* sql<{ name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`
      }))
    }))
    expect(prepared.map((row) => row.name)).toEqual(expect.arrayContaining([
      "entitlements.quick_read.by_external_id",
      "entitlements.quick_read.by_id"
    ]))
  })

  it("names a statement marked `/* prepared */` after its text: one prepared statement a variant, the same one again", async () => {
    const prepared = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.withTransaction(Effect.gen(function*() {
        for (const lane of ["late", "NOT late", "late"]) {
          yield* sql`/* prepared */ SELECT count(*) FROM signals WHERE organization_id = ${acme.organizationId} AND ${sql.literal(lane)}`
        }
        return yield* sql<{ name: string; statement: string }>`
          SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '/* prepared */ SELECT count(*) FROM signals%'`
      }))
    }))
    expect(prepared.map((row) => row.statement.includes("NOT late")).sort()).toEqual([false, true])
    expect(prepared.every((row) => /^t_[0-9a-z]+_[0-9a-z]+_[0-9a-z]+$/.test(row.name))).toBe(true)
    expect(new Set(prepared.map((row) => row.name)).size).toBe(2)
  })

  it("prepares a sale's three statements: the customer, the plan's snapshot and the one write", async () => {
    const client = clientOf(app, acme)
    const unit = await makeUnit(client)
    const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 3 }])
    const buyer = (await makeCustomer(client)).id
    const planId = plan.id
    const { prepared, sold } = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const purchases = yield* Purchases
      return yield* sql.withTransaction(Effect.gen(function*() {
        const sold = yield* purchases.create(acme.organizationId as OrganizationId, { customerId: buyer, planId })
        const prepared = yield* sql<{ statement: string }>`
          SELECT statement FROM pg_prepared_statements WHERE statement LIKE '/* prepared */%' ORDER BY statement`
        return { prepared, sold }
      }))
    }))
    expect([sold.customerId, sold.planId, sold.status]).toEqual([buyer, planId, "ACTIVE"])
    const texts = prepared.map((row) => row.statement.replace(/\s+/g, " "))
    expect(texts.some((text) => text.startsWith('/* prepared */ SELECT * FROM "customers" WHERE organization_id = $1 AND id = $2'))).toBe(true)
    expect(texts.some((text) => text.startsWith("/* prepared */ SELECT p.id AS plan_row_id"))).toBe(true)
    expect(texts.some((text) => text.startsWith("/* prepared */ WITH write_0 AS (INSERT INTO purchases"))).toBe(true)
  })
})

describe.skipIf(!usesRealPostgres)("a customer's usage log (needs real PostgreSQL)", () => {
  it("keeps one generic plan for a customer's usage-log page, so a request does not plan the months again", async () => {
    // PostgreSQL plans a prepared statement for its values five times, then keeps a generic plan when it is
    // estimated no dearer: with `LIMIT $n` or `$n IS NULL OR ...` filters it never was, and every request
    // planned every month of the usage log again (src/usage/UsageLog.ts, docs/operations.md).
    const plans = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const usageLog = yield* UsageLog
      // A customer with history: with its statistics, a generic plan that reads a tenth of the customer's rows
      // for `LIMIT $n` is estimated ten times dearer than a page's custom plan (and was never kept).
      yield* sql`INSERT INTO usage_log (organization_id, id, customer_id, meter, quantity, provider_cost, customer_cost, signal_id, message_id)
                 SELECT ${acme.organizationId}, 'usg_history' || lpad(n::text, 6, '0'), ${customerId}, 'CREDIT', 1, 0, 0,
                        'sig_history' || n, 'msg_history' || n
                 FROM generate_series(1, 5000) n`
      yield* sql`ANALYZE usage_log`
      return yield* sql.withTransaction(Effect.gen(function*() {
        for (let run = 0; run < 8; run++) {
          const page = yield* usageLog.forCustomer(acme.organizationId as OrganizationId, customerId as CustomerId, { page: { limit: 50, cursor: undefined } })
          expect(page.length).toBe(50)
        }
        // A range is planned for its values each time (how many of a customer's rows fall in it differs by
        // customer): never prepared, so it adds no statement of its own.
        const ranged = yield* usageLog.forCustomer(acme.organizationId as OrganizationId, customerId as CustomerId, {
          page: { limit: 50, cursor: undefined },
          from: new Date(Date.now() - 3_600_000)
        })
        expect(ranged.length).toBe(50)
        return yield* sql<{ generic: number; custom: number }>`
          SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
          WHERE statement LIKE '/* prepared */ SELECT u.*%FROM usage_log u%'`
      }))
    }))
    expect(plans).toEqual([{ generic: 3, custom: 5 }])
  })
})

describe.skipIf(!usesRealPostgres)("the intake in an organisation with many customers (needs real PostgreSQL)", () => {
  it("looks each row's customer up by its key, never reading the organisation's customers whole; its insert prepared", async () => {
    // The planner guesses 100 rows for any json_to_recordset: as a plain join, 10,000 customers got a hash
    // join that read and hashed all of them on every intake statement (src/signals/InboxInsert.ts).
    const scans = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO customers (organization_id, id, external_id, slug, name, email, currency_code)
                 SELECT ${acme.organizationId}, 'cus_many' || lpad(n::text, 6, '0'), 'many-' || n, 'many-' || n,
                        'Many ' || n, 'many-' || n || '@example.com', 'USD'
                 FROM generate_series(1, 10000) n`
      yield* sql`ANALYZE customers`
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = Array.from({ length: 20 }, (_, index) =>
          queuedCredit(acme.organizationId, index % 2 === 0 ? customerId : `cus_many${String(index).padStart(6, "0")}`, `many-${index}`))
        const written = yield* insertSignals(sql, rows)
        expect(written.every((exit) => exit._tag === "Success")).toBe(true)
        // Planned once a connection: planning it at every statement was 0.4 ms of PostgreSQL a statement
        // (docs/benchmarks.md "One head a round").
        const prepared = yield* sql<{ statement: string }>`
          SELECT statement FROM pg_prepared_statements WHERE statement LIKE '/* prepared */ WITH input AS (%'`
        expect(prepared.some((row) => row.statement.includes("INSERT INTO signals"))).toBe(true)
        return yield* sql<{ seqScan: number }>`
          SELECT seq_scan::int AS seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'customers'`
      }))
    }))
    expect(scans).toEqual([{ seqScan: 0 }])
  })
})
