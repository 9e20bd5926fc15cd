/**
 * The worker as separate processes: several of them side by side, one killed
 * with SIGKILL in the middle of a batch, and the worker under Deno. Each signal
 * must be priced exactly once and every balance must come out exact.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, gpt4oBundle, query, sendMany } from "./signals-fixtures.ts"
import { HANG_GUARD_MS } from "./support/Eventually.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const cliPath = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

let app: TestApp
let acme: Tenant
let planId: string

/** 1000 gpt-4o input tokens: providerCost 0.0025, 0.4 credits, customerCost 0.003 (margin 20). */
const creditSignal = { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000 } }
/** 1000 gpt-4o input tokens off the wallet: 0.0025. */
const walletSignal = { usage: { model: "gpt-4o", inputTokens: 1000 } }

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  const as = client(app, acme)
  const chat = await as.created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  planId = await as.created("/plans", {
    name: "Workers",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 100000 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 100 }
    ]
  }, "plan")
})
afterAll(() => app.close())

/** Customers on the plan, by id. */
const customersOnPlan = async (count: number, prefix: string) => {
  const as = client(app, acme)
  return sendMany(count, 8, async (index) => {
    const id = await as.created("/customers", { name: `${prefix} ${index}`, email: `${prefix}${index}@example.com` }, "customer")
    const purchase = await as.post("/purchases", { customerId: id, planId })
    expect(purchase.status).toBe(201)
    return id
  })
}

/**
 * Sends `count` signals spread over the customers, alternating credit and wallet
 * signals, through `POST /signal/batch` (500 a request): these tests are about
 * the workers, and the batch route queues exactly what the single routes do.
 */
const sendSignals = async (customers: ReadonlyArray<string>, count: number) => {
  const as = client(app, acme)
  const items = Array.from({ length: count }, (_, index) => {
    const customerId = customers[index % customers.length]!
    // Each customer gets credit and wallet signals in turn.
    return Math.floor(index / customers.length) % 2 === 0
      ? { type: "credit", customerId, ...creditSignal }
      : { type: "wallet", customerId, ...walletSignal }
  })
  const batches = Array.from({ length: Math.ceil(count / 500) }, (_, n) => items.slice(n * 500, n * 500 + 500))
  const answers = await sendMany(batches.length, 4, (n) => as.post("/signal/batch", { signals: batches[n] }))
  expect(answers.every((answer) => answer.status === 202)).toBe(true)
  const results = answers.flatMap((answer) => answer.body.result.results as Array<{ queued: boolean; rawId: string }>)
  expect(results.every((result) => result.queued)).toBe(true)
  return results.map((result) => result.rawId)
}

const startWorker = (args: ReadonlyArray<string>, command: ReadonlyArray<string> = [process.execPath, cliPath]) =>
  spawn(command[0]!, [...command.slice(1), ...args], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_WORKER_POLL_MS: "50" },
    stdio: ["ignore", "pipe", "pipe"]
  })

const exited = (child: ChildProcess) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    child.stderr?.on("data", (chunk) => (stderr += chunk))
    child.on("exit", (code) => resolve({ code, stdout, stderr }))
  })

const countBy = async (rawIds: ReadonlyArray<string>) => {
  const [row] = await query<{ processed: string; usageRows: string; distinctSignals: string }>(
    app,
    `SELECT (SELECT count(*) FROM signals WHERE id = ANY($1) AND status = 'PROCESSED') AS processed,
            (SELECT count(*) FROM usage_log WHERE signal_id = ANY($1)) AS usage_rows,
            (SELECT count(DISTINCT signal_id) FROM usage_log WHERE signal_id = ANY($1)) AS distinct_signals`,
    [rawIds]
  )
  return { processed: Number(row!.processed), usageRows: Number(row!.usageRows), distinctSignals: Number(row!.distinctSignals) }
}

interface Expected {
  readonly creditsUsed: number
  readonly creditsRemaining: number
  readonly wallet: number
}

/** Every customer's credits and wallet must equal what its own signals add up to, exactly. */
const expectExactBalances = async (customers: ReadonlyArray<string>, expected: Expected) => {
  const as = client(app, acme)
  for (const customerId of customers) {
    const balances = (await as.get(`/customers/${customerId}/balances`)).body.result
    expect(balances.credits[0], JSON.stringify(balances)).toMatchObject({ used: expected.creditsUsed, remaining: expected.creditsRemaining })
    expect(balances.wallet.balance).toBe(expected.wallet)
  }
}

describe.skipIf(!usesRealPostgres)("parallel workers (needs real PostgreSQL)", () => {
  it("4 worker processes drain 4,000 signals: each priced exactly once, balances exact", async () => {
    const customers = await customersOnPlan(20, "par")
    const rawIds = await sendSignals(customers, 4000)
    const workers = Array.from({ length: 4 }, () => startWorker(["worker", "--once", "--json"]))
    const results = await Promise.all(workers.map(exited))
    for (const result of results) expect(result.code, result.stderr).toBe(0)
    const handled = results.map((result) => JSON.parse(result.stdout).handled as number)
    expect(handled.reduce((a, b) => a + b, 0)).toBe(4000)
    expect(handled.filter((n) => n > 0).length).toBeGreaterThan(1)
    expect(await countBy(rawIds)).toEqual({ processed: 4000, usageRows: 4000, distinctSignals: 4000 })
    // 100 credit signals of 0.4 credits and 100 wallet signals of 0.0025 USD per customer.
    await expectExactBalances(customers, { creditsUsed: 40, creditsRemaining: 99960, wallet: 99.75 })
  }, 600_000)

  it("a worker killed with SIGKILL mid-batch: restarted, nothing lost or billed twice", async () => {
    const customers = await customersOnPlan(10, "kill")
    const sendStarted = Date.now()
    const rawIds = await sendSignals(customers, 3000)
    console.log(`sent 3000 in ${Date.now() - sendStarted} ms`)
    const victim = startWorker(["worker"])
    const victimExit = exited(victim)
    // Kill it once it has committed some batches, so it dies holding a claimed, uncommitted one.
    for (const giveUpAt = Date.now() + HANG_GUARD_MS; Date.now() < giveUpAt;) {
      const { processed } = await countBy(rawIds)
      if (processed >= 300) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    victim.kill("SIGKILL")
    await victimExit
    const afterKill = await countBy(rawIds)
    expect(afterKill.processed).toBeGreaterThan(0)
    expect(afterKill.processed).toBeLessThan(3000)
    expect(afterKill.usageRows).toBe(afterKill.processed)

    const restartedAt = Date.now()
    const restarted = await exited(startWorker(["worker", "--once", "--json"]))
    expect(restarted.code, restarted.stderr).toBe(0)
    console.log(`restarted worker drained ${3000 - afterKill.processed} in ${Date.now() - restartedAt} ms`)
    expect(await countBy(rawIds)).toEqual({ processed: 3000, usageRows: 3000, distinctSignals: 3000 })
    await expectExactBalances(customers, { creditsUsed: 60, creditsRemaining: 99940, wallet: 99.625 })
  }, 600_000)
})

describe("the worker under Deno", () => {
  it("deno run -A worker/main.ts --once prices queued signals", async () => {
    const customers = await customersOnPlan(2, "deno")
    const rawIds = await sendSignals(customers, 40)
    const deno = fileURLToPath(new URL("../node_modules/.bin/deno", import.meta.url))
    const result = await exited(startWorker(["run", "-A", "worker/main.ts", "--once"], [deno]))
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain("worker drained")
    expect(await countBy(rawIds)).toEqual({ processed: 40, usageRows: 40, distinctSignals: 40 })
    await expectExactBalances(customers, { creditsUsed: 4, creditsRemaining: 99996, wallet: 99.975 })
  })
})
