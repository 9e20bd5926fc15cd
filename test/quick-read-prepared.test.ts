/**
 * The check's one-statement read (src/entitlements/QuickRead.ts) is sent to
 * PostgreSQL as a named prepared statement (src/db/Pool.ts), so that each
 * connection plans it once. Real PostgreSQL only: the embedded database's
 * clients share one session, where it is sent unnamed.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Entitlements } from "../src/entitlements/Entitlements.ts"
import { customerWithChatCredits } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
let customerId: string

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Prepared")
  customerId = await customerWithChatCredits(app, acme, { externalId: "prepared-ext" })
}, 60_000)
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
})
