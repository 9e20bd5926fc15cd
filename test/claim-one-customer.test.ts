/**
 * The worker claims a customer's queued signals as one group whether they name
 * the customer by customerId or by the externalId it holds (docs/signals.md,
 * "The worker"). Two groups for one customer would let a full batch take one
 * group's later signals before the other's earlier ones, pricing them out of
 * send order. Shown here through the claim's lock: while another session
 * holds the customer's lock, a signal sent by externalId is not claimed either.
 * It needs two sessions at once, so real PostgreSQL.
 */
import { Effect, Option } from "effect"
import pg from "pg"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, drain, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
let customerId: string

const statusOf = async (id: string) =>
  (await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [
    acme.organizationId,
    id
  ]))[0]!.status

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("One key")
  const api = client(app, acme)
  const credit = await api.created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  const plan = await api.created("/plans", {
    name: "Plan",
    billingCycle: "MONTHLY",
    entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit, quantity: 1000 }]
  }, "plan")
  customerId = await api.created("/customers", { name: "Jo", email: "jo@example.com", externalId: "jo-1" }, "customer")
  expect((await api.post("/purchases", { customerId, planId: plan })).status).toBe(201)
}, 120_000)
afterAll(() => app.close())

// The embedded database serves one session at a time: a transaction held open would stop the worker itself.
describe.skipIf(!usesRealPostgres)("the worker's claim (needs real PostgreSQL)", () => {
  it("treats signals sent by externalId as the customer's own: locked together, priced in send order", async () => {
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    const byId = await client(app, acme).post("/signal/credit", { customerId, agentKey: "chat", usage })
    const byExternalId = await client(app, acme).post("/signal/credit", { externalId: "jo-1", agentKey: "chat", usage })
    expect([byId.status, byExternalId.status]).toEqual([202, 202])

    // Another worker's claim of this customer: the same advisory lock, held in an open transaction.
    const other = new pg.Client({ connectionString: app.databaseUrl })
    await other.connect()
    try {
      await other.query("BEGIN")
      const [lock] = (await other.query(
        "SELECT pg_try_advisory_xact_lock(hashtext($1), hashtext($2)) AS locked",
        [acme.organizationId, customerId]
      )).rows
      expect(lock.locked).toBe(true)
      // A worker finding only locked customers waits for them: a batch would end this wait with its count.
      const batch = await app.run(
        Effect.flatMap(SignalProcessor, (processor) => Effect.timeoutOption(processor.runOnce, "1 second"))
      )
      expect(Option.isNone(batch)).toBe(true)
      expect(await statusOf(byId.body.result.rawId)).toBe("QUEUED")
      expect(await statusOf(byExternalId.body.result.rawId)).toBe("QUEUED")
    } finally {
      await other.query("ROLLBACK")
      await other.end()
    }

    await drain(app)
    expect(await statusOf(byId.body.result.rawId)).toBe("PROCESSED")
    expect(await statusOf(byExternalId.body.result.rawId)).toBe("PROCESSED")
  })
})
