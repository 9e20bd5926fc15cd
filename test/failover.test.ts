/**
 * What a 202 promises, on a highly available PostgreSQL (docs/operations.md):
 * a pg_auto_failover formation of two nodes with synchronous replication
 * (scripts/ha-formation.sh), `billing serve` and `billing worker` on its
 * multi-host URL, clients sending signals through the single routes and
 * `POST /signal/batch` and retrying 5xx answers and network errors with the
 * same idempotency keys, and the primary's postmaster killed (kill -9) in the
 * middle. Afterwards every signal that got a 202 is priced exactly once,
 * none twice, balances are exact, a retry that straddles the failover gets
 * the original answer, and nothing answered 500.
 *
 * Needs the formation: CI's formation step runs it with
 * `BILLING_HA_URL=$(scripts/ha-formation.sh uri)`; without it the test is skipped.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import Pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gpt4oBundle } from "./signals-fixtures.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { type Answer, apiCaller, spawnServe } from "./support/ServeProcess.ts"

const haUrl = process.env.BILLING_HA_URL
const root = fileURLToPath(new URL("..", import.meta.url))
const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const formation = fileURLToPath(new URL("../scripts/ha-formation.sh", import.meta.url))
const run = promisify(execFile)

/** 1000 gpt-4o input tokens: 0.4 credits (20 % margin on the bundle); off the wallet 0.0025 USD. */
const usage = { model: "gpt-4o", inputTokens: 1000 }
const CREDITS_PER_SIGNAL = 0.4
const WALLET_PER_SIGNAL = 0.0025
const CUSTOMERS = 4
const CLIENTS = 8
const BATCH_SIZE = 10
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const children: Array<ChildProcess> = []
let env: NodeJS.ProcessEnv = {}

let call: ReturnType<typeof apiCaller>["call"] = () => Promise.reject(new Error("no server yet"))
let created: ReturnType<typeof apiCaller>["created"] = () => Promise.reject(new Error("no server yet"))

/** Every answer a client saw that was no success, by status and code: 503s are expected, 500s never. */
const failures = new Map<string, number>()
const countFailure = (what: string) => failures.set(what, (failures.get(what) ?? 0) + 1)

/**
 * Sends one request until it is answered with a success or a client error,
 * as a client of ours should: 5xx and network errors are retried with the
 * same body (so the same idempotency keys), after `Retry-After` when given.
 */
const untilAnswered = async (path: string, body: unknown): Promise<{ answer: Answer; tries: number }> => {
  for (let tries = 1; ; tries++) {
    try {
      const answer = await call("POST", path, body)
      if (answer.status < 500) return { answer, tries }
      countFailure(`${answer.status} ${answer.body?.statusDetail?.code}`)
      const retryAfter = Number(answer.headers.get("retry-after") ?? "0")
      await pause(Math.min(retryAfter * 1000, 500) || 100)
    } catch (error) {
      countFailure(`network: ${(error as Error).cause ?? (error as Error).message}`)
      await pause(100)
    }
  }
}

interface Accepted {
  readonly key: string
  readonly rawId: string
  readonly customerId: string
  readonly route: "credit" | "wallet"
  /** When its request was first sent, and when its 202 came, on this process's clock. */
  readonly sentAt: number
  readonly at: number
}

const primaryClient = async () => {
  const { stdout } = await run("bash", [formation, "primary"])
  const client = new Pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${stdout.trim()}/billing` })
  await client.connect()
  return client
}

beforeAll(async () => {
  if (haUrl === undefined) return
  // A node killed by an earlier run rejoins first (at once when the pair is healthy).
  await run("bash", [formation, "heal"], { timeout: 2 * HANG_GUARD_MS })
  env = { ...process.env, DATABASE_URL: haUrl, BILLING_WORKER_POLL_MS: "50" }
  const migrated = await spawnBilling(["migrate"], env)
  expect(migrated.code, migrated.stderr).toBe(0)
  const org = await spawnBilling(["org", "create", "--name", `Failover ${Date.now()}`, "--json"], env)
  expect(org.code, org.stderr).toBe(0)
  const serve = await spawnServe(env)
  children.push(serve.child)
  ;({ call, created } = apiCaller(serve.baseUrl, org.json.apiKey))
  children.push(spawn(process.execPath, [bin, "worker"], { cwd: root, env, stdio: "ignore" }))
}, 2 * HANG_GUARD_MS)

afterAll(async () => {
  for (const child of children) child.kill("SIGTERM")
  await pause(500)
  for (const child of children) child.kill("SIGKILL")
})

describe.skipIf(haUrl === undefined)("a failover of the primary (needs the formation: BILLING_HA_URL)", () => {
  it("keeps every 202: each accepted signal priced exactly once, balances exact, retries answered as the first time", async () => {
    const chat = await created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
    const planId = await created("/plans", {
      name: "Failover",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 1000000 },
        { type: "WALLET", billingMode: "ADVANCE", amount: 1000 }
      ]
    }, "plan")
    const customers: Array<string> = []
    for (let index = 0; index < CUSTOMERS; index++) {
      const id = await created("/customers", { name: `Failover ${index}`, email: `failover${index}@example.com` }, "customer")
      expect((await call("POST", "/purchases", { customerId: id, planId })).status).toBe(201)
      customers.push(id)
    }

    const runTag = Date.now().toString(36)
    const accepted: Array<Accepted> = []
    /** Every rawId each key was ever answered with: one each, or a retry was answered as a new signal. */
    const answersByKey = new Map<string, Set<string>>()
    const record = (key: string, rawId: string, customerId: string, route: "credit" | "wallet", sentAt: number) => {
      const seen = answersByKey.get(key) ?? new Set<string>()
      if (seen.size === 0) accepted.push({ key, rawId, customerId, route, sentAt, at: Date.now() })
      seen.add(rawId)
      answersByKey.set(key, seen)
    }
    let sequence = 0
    let stop = false
    let killedAt = 0
    let acceptedAfterKill = 0

    const client = async (n: number) => {
      while (!stop) {
        const customerId = customers[(sequence++) % CUSTOMERS]!
        if (n % 2 === 0) {
          const key = `${runTag}-single-${sequence}`
          const route = sequence % 2 === 0 ? "credit" : "wallet"
          const body = route === "credit" ? { customerId, agentKey: "chat", usage, idempotencyKey: key } : { customerId, usage, idempotencyKey: key }
          const sentAt = Date.now()
          const { answer } = await untilAnswered(`/signal/${route}`, body)
          expect(answer.status, JSON.stringify(answer.body)).toBe(202)
          record(key, answer.body.result.rawId, customerId, route, sentAt)
        } else {
          const items = Array.from({ length: BATCH_SIZE }, (_, index) => {
            const key = `${runTag}-batch-${sequence}-${index}`
            return index % 2 === 0
              ? { type: "credit", customerId, agentKey: "chat", usage, idempotencyKey: key }
              : { type: "wallet", customerId, usage, idempotencyKey: key }
          })
          const sentAt = Date.now()
          const { answer } = await untilAnswered("/signal/batch", { signals: items })
          expect(answer.status, JSON.stringify(answer.body)).toBe(202)
          answer.body.result.results.forEach((result: { queued: boolean; rawId: string; error?: unknown }, index: number) => {
            // No item is refused for a database that is away: the whole request answers 503 instead.
            expect(result.queued, JSON.stringify(result)).toBe(true)
            record(items[index]!.idempotencyKey, result.rawId, customerId, items[index]!.type as "credit" | "wallet", sentAt)
          })
        }
        if (killedAt > 0) acceptedAfterKill++
      }
    }

    const clients = Array.from({ length: CLIENTS }, (_, n) => client(n))
    await eventually(() => expect(accepted.length).toBeGreaterThan(200))
    const beforeKill = [...accepted]

    // The script kills, says when (seconds since the epoch), then waits until the other node takes writes.
    const killing = run_("failover")
    killedAt = Date.now()
    const failover = await killing
    killedAt = Math.round(Number(/killed at ([\d.]+)/.exec(failover)![1]) * 1000)
    // Signals keep coming until the new primary has taken a good number of them.
    await eventually(() => expect(acceptedAfterKill).toBeGreaterThan(50), { timeoutMs: 2 * HANG_GUARD_MS })
    stop = true
    await Promise.all(clients)

    // A retry of a request answered before the kill, sent after it, gets that first answer.
    for (const earlier of beforeKill.slice(0, 20)) {
      const body = earlier.route === "credit"
        ? { customerId: earlier.customerId, agentKey: "chat", usage, idempotencyKey: earlier.key }
        : { customerId: earlier.customerId, usage, idempotencyKey: earlier.key }
      const { answer } = earlier.key.includes("-batch-")
        ? await untilAnswered("/signal/batch", { signals: [{ type: earlier.route, ...body }] })
        : await untilAnswered(`/signal/${earlier.route}`, body)
      const rawId = earlier.key.includes("-batch-") ? answer.body.result.results[0].rawId : answer.body.result.rawId
      expect(rawId).toBe(earlier.rawId)
    }

    for (const [key, rawIds] of answersByKey) expect([...rawIds], key).toHaveLength(1)
    expect([...failures.keys()].filter((what) => what.startsWith("500")), JSON.stringify([...failures])).toEqual([])

    // Every accepted signal priced exactly once, on the new primary.
    const rawIds = accepted.map((signal) => signal.rawId)
    const db = await primaryClient()
    try {
      const firstPricedAfterKill = await eventually(async () => {
        const { rows } = await db.query<{ processed: string; usage_rows: string; distinct_signals: string }>(
          `SELECT (SELECT count(*) FROM signals WHERE id = ANY($1) AND status = 'PROCESSED') AS processed,
                  (SELECT count(*) FROM usage_log WHERE signal_id = ANY($1)) AS usage_rows,
                  (SELECT count(DISTINCT signal_id) FROM usage_log WHERE signal_id = ANY($1)) AS distinct_signals`,
          [rawIds]
        )
        expect({ processed: Number(rows[0]!.processed), usageRows: Number(rows[0]!.usage_rows), distinct: Number(rows[0]!.distinct_signals) })
          .toEqual({ processed: rawIds.length, usageRows: rawIds.length, distinct: rawIds.length })
        // The window a client meets: from the kill to the first signal sent after it being priced.
        const firstAfter = accepted.filter((signal) => signal.sentAt > killedAt).sort((a, b) => a.at - b.at)[0]!
        const priced = await db.query<{ created_at: Date }>("SELECT created_at FROM usage_log WHERE signal_id = $1", [firstAfter.rawId])
        return { acceptedAt: firstAfter.at, pricedAt: priced.rows[0]!.created_at.getTime() }
      }, { timeoutMs: 2 * HANG_GUARD_MS })
      const seconds = (at: number) => ((at - killedAt) / 1000).toFixed(1)

      // Balances exact: each customer's credits and wallet are what its accepted signals add up to.
      for (const customerId of customers) {
        const credits = accepted.filter((signal) => signal.customerId === customerId && signal.route === "credit").length
        const wallet = accepted.filter((signal) => signal.customerId === customerId && signal.route === "wallet").length
        const balances = (await call("GET", `/customers/${customerId}/balances`)).body.result
        expect(balances.credits[0].used).toBeCloseTo(credits * CREDITS_PER_SIGNAL, 9)
        expect(balances.wallet.balance).toBeCloseTo(1000 - wallet * WALLET_PER_SIGNAL, 9)
      }
      console.log(
        `failover: ${failover.trim()}; ${accepted.length} signals accepted (${beforeKill.length} before the kill); ` +
          `the first signal sent after the kill was accepted ${seconds(firstPricedAfterKill.acceptedAt)} s after it ` +
          `and priced ${seconds(firstPricedAfterKill.pricedAt)} s after it; ` +
          `failed answers the clients retried: ${JSON.stringify(Object.fromEntries(failures))}`
      )
    } finally {
      await db.end()
    }
  }, 6 * HANG_GUARD_MS)
})

const run_ = async (command: string) => (await run("bash", [formation, command], { timeout: 2 * HANG_GUARD_MS })).stdout
