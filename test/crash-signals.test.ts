/**
 * A worker that dies after it claimed and wrote a batch, before the commit
 * (`BILLING_FAULT=signals.before-commit` SIGKILLs it there, every time): every
 * claimed signal is still QUEUED with nothing billed, and the next worker
 * prices each one exactly once. Runs on both databases.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let customerId: string

const counts = async () => {
  const [row] = await query<Record<string, string>>(
    app,
    `SELECT
       (SELECT count(*) FROM signals WHERE organization_id = $1 AND status = 'QUEUED') AS queued,
       (SELECT count(*) FROM signals WHERE organization_id = $1 AND status = 'PROCESSED') AS processed,
       (SELECT count(*) FROM usage_log WHERE organization_id = $1) AS usage_rows,
       (SELECT count(DISTINCT signal_id) FROM usage_log WHERE organization_id = $1) AS signals_billed,
       (SELECT count(*) FROM wallet_ledger WHERE organization_id = $1 AND type = 'USAGE_LOG') AS ledger_rows,
       (SELECT coalesce(sum(used), 0) FROM purchase_balances WHERE organization_id = $1 AND type = 'CREDIT') AS credits_used,
       (SELECT balance FROM wallets WHERE organization_id = $1 AND customer_id = $2) AS wallet`,
    [acme.organizationId, customerId]
  )
  return row!
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Crash")
  const api = client(app, acme)
  const credit = await api.created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  const plan = await api.created("/plans", {
    name: "Crash plan",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit, quantity: 1000 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
    ]
  }, "plan")
  customerId = await api.created("/customers", { name: "Jo", email: "jo@example.com", externalId: "jo-1" }, "customer")
  expect((await api.post("/purchases", { customerId, planId: plan })).status).toBe(201)
  for (let i = 0; i < 40; i++) {
    // credits: 0.0075 / 0.00625 = 1.2 each; wallet: 0.0075 each
    const path = i % 4 === 3 ? "/signal/wallet" : "/signal/credit"
    const body = i % 4 === 3
      ? { customerId, usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } }
      : { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } }
    expect((await api.post(path, body)).status).toBe(202)
  }
})
afterAll(() => app.close())

describe("a worker killed between its batch's writes and the commit", () => {
  it("leaves every claimed signal QUEUED and unbilled, and the next worker prices each exactly once", async () => {
    const before = await counts()
    expect(before.queued).toBe("40")

    const killed = await app.spawnCli(["worker", "--once"], { BILLING_FAULT: "signals.before-commit" })
    expect(killed.code).not.toBe(0)
    expect(await counts()).toEqual(before)

    const worker = await app.spawnCli(["worker", "--once", "--json"])
    expect(worker.code).toBe(0)
    const after = await counts()
    expect(after).toMatchObject({ queued: "0", processed: "40", usageRows: "40", signalsBilled: "40", ledgerRows: "10" })
    expect(after.creditsUsed).toBe("36") // 30 credit signals * 1.2
    expect(after.wallet).toBe("9.925") // 10 granted - 10 * 0.0075
  })
})
