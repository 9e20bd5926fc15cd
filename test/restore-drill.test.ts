/**
 * The restore drill (docs/operations.md, "Backups and restore"): a cluster
 * whose WAL pgBackRest archives (scripts/backup-drill.sh), the service on it
 * (`billing migrate`, `billing serve`, `billing worker` as child processes), a
 * full backup, a first burst of signals priced, the named restore point
 * `between`, a second burst priced; then a restore to `between` into a fresh
 * cluster and `billing serve` on it. Through the API, the restored service
 * holds exactly the first burst's usage, none of the second's, the balances
 * as they were after the first burst, and Σ usage-row costs = Σ balance and
 * wallet moves. A retry of a first-burst signal gets its original rawId; a
 * retry of a second-burst signal is accepted again, as a new signal, because
 * its idempotency key went with the restore.
 *
 * Slow (two clusters, a backup and a restore: a few minutes beside other
 * work) and it installs pgbackrest when missing, so it runs only with
 * BILLING_RESTORE_DRILL=1, as its own CI step; it needs root (the clusters run
 * as the `postgres` user through runuser). Without the variable it is skipped.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { BigDecimal } from "effect"
import Pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gpt4oBundle } from "./signals-fixtures.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { apiCaller, spawnServe } from "./support/ServeProcess.ts"

const drillEnabled = process.env.BILLING_RESTORE_DRILL === "1"
const root = fileURLToPath(new URL("..", import.meta.url))
const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const script = fileURLToPath(new URL("../scripts/backup-drill.sh", import.meta.url))
const run = promisify(execFile)
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** 1000 gpt-4o input tokens: 0.4 credits (20 % margin on the bundle); off the wallet 0.0025 USD. */
const usage = { model: "gpt-4o", inputTokens: 1000 }
const CUSTOMERS = 3
const WALLET_GRANT = 100

/** A folder of its own (pgBackRest's repository, both clusters), so a drill left running by hand is not touched. */
const backupEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  BACKUP_DIR: process.env.BACKUP_DIR ?? mkdtempSync(join(tmpdir(), "billing-restore-drill-"))
})
let drillEnv: NodeJS.ProcessEnv = {}
const timings: Record<string, number> = {}

/** scripts/backup-drill.sh `args`; its stdout, timed under `args[0]`. */
const drill = async (...args: Array<string>) => {
  const started = Date.now()
  const { stdout } = await run("bash", [script, ...args], { env: drillEnv, timeout: 3 * HANG_GUARD_MS })
  timings[args[0]!] = (timings[args[0]!] ?? 0) + (Date.now() - started)
  return stdout.trim()
}

const children: Array<ChildProcess> = []

/** `billing serve` on `databaseUrl`: the process and its API's base URL once it listens. */
const startServe = async (databaseUrl: string) => {
  const serve = await spawnServe({ ...process.env, DATABASE_URL: databaseUrl })
  children.push(serve.child)
  return { child: serve.child, url: serve.baseUrl }
}

const startWorker = (databaseUrl: string) => {
  const child = spawn(process.execPath, [bin, "worker"], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: databaseUrl, BILLING_WORKER_POLL_MS: "50" },
    stdio: "ignore"
  })
  children.push(child)
  return child
}

const stop = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.kill("SIGTERM")
  await Promise.race([exited, pause(10_000).then(() => child.kill("SIGKILL"))])
}

/** Requests to one `billing serve` as the organisation. */
const apiOf = (baseUrl: string, apiKey: string) => {
  const { call } = apiCaller(baseUrl, apiKey)
  const ok = async (method: string, path: string, body?: unknown, status = 200) => {
    const answer = await call(method, path, body)
    if (answer.status !== status) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`)
    return answer.body.result
  }
  /** Every row of a paged list (`limit=200` and the last row's id as the cursor). */
  const all = async (path: string, field: string) => {
    const rows: Array<any> = []
    for (let cursor: string | undefined; ;) {
      const separator = path.includes("?") ? "&" : "?"
      const page = (await ok("GET", `${path}${separator}limit=200${cursor === undefined ? "" : `&cursor=${cursor}`}`))[field]
      rows.push(...page)
      if (page.length < 200) return rows
      cursor = page[page.length - 1].id
    }
  }
  return { call, ok, all }
}
type Api = ReturnType<typeof apiOf>

interface Sent {
  readonly key: string
  readonly rawId: string
  readonly customerId: string
  readonly route: "credit" | "wallet"
}

/**
 * One burst: for each customer, single credit and wallet signals and one
 * `POST /signal/batch` of both kinds, every one with its own idempotency key.
 */
const sendBurst = async (api: Api, customers: ReadonlyArray<string>, tag: string, singles: number, batch: number) => {
  const sent: Array<Sent> = []
  await Promise.all(customers.map(async (customerId, c) => {
    for (let index = 0; index < singles; index++) {
      const route = index % 2 === 0 ? "credit" : "wallet"
      const key = `${tag}-${c}-single-${index}`
      const body = route === "credit" ? { customerId, agentKey: "chat", usage, idempotencyKey: key } : { customerId, usage, idempotencyKey: key }
      const result = await api.ok("POST", `/signal/${route}`, body, 202)
      sent.push({ key, rawId: result.rawId, customerId, route })
    }
    const items = Array.from({ length: batch }, (_, index) => {
      const key = `${tag}-${c}-batch-${index}`
      return index % 2 === 0
        ? { type: "credit" as const, customerId, agentKey: "chat", usage, idempotencyKey: key }
        : { type: "wallet" as const, customerId, usage, idempotencyKey: key }
    })
    const result = await api.ok("POST", "/signal/batch", { signals: items }, 202)
    result.results.forEach((item: { rawId: string }, index: number) =>
      sent.push({ key: items[index]!.idempotencyKey, rawId: item.rawId, customerId, route: items[index]!.type })
    )
  }))
  return sent
}

/** Every customer's usage-log rows, read through `GET /signal/usage-log`. */
const usageRows = async (api: Api, customers: ReadonlyArray<string>) =>
  (await Promise.all(customers.map((customerId) => api.all(`/signal/usage-log?customerId=${customerId}`, "usageLogs")))).flat()

/** Waits until the usage log holds a row for each of `rawIds`. */
const waitPriced = (api: Api, customers: ReadonlyArray<string>, rawIds: ReadonlyArray<string>) =>
  eventually(async () => {
    const priced = new Set((await usageRows(api, customers)).map((row) => row.rawId))
    expect(rawIds.filter((rawId) => !priced.has(rawId))).toEqual([])
  }, { timeoutMs: 2 * HANG_GUARD_MS, intervalMs: 250 })

/** Each customer's credits used and wallet balance, through `GET /customers/{id}/balances`. */
const balancesOf = async (api: Api, customers: ReadonlyArray<string>) =>
  Object.fromEntries(await Promise.all(customers.map(async (customerId) => {
    const balances = await api.ok("GET", `/customers/${customerId}/balances`)
    return [customerId, { creditsUsed: balances.credits[0].used, wallet: balances.wallet.balance }] as const
  })))

/** An exact sum of API amounts (JSON numbers of at most 12 places), as text. */
const sum = (amounts: ReadonlyArray<number | string>) =>
  BigDecimal.format(BigDecimal.normalize(
    amounts.reduce<BigDecimal.BigDecimal>((total, amount) => BigDecimal.sum(total, BigDecimal.unsafeFromString(String(amount))), BigDecimal.fromBigInt(0n))
  ))

describe.skipIf(!drillEnabled)("a restore drill with pgBackRest (runs only with BILLING_RESTORE_DRILL=1: its own CI step)", () => {
  beforeAll(() => {
    drillEnv = backupEnv()
  })

  afterAll(async () => {
    for (const child of children) await stop(child)
    // Both clusters stopped and the folder removed, whatever happened above.
    await run("bash", [script, "down"], { env: drillEnv, timeout: 2 * HANG_GUARD_MS }).catch((error) =>
      console.error(`backup-drill.sh down failed: ${error}`)
    )
  }, 3 * HANG_GUARD_MS)

  it("restores to a restore point between two bursts: exactly the first burst's usage, balances as then, sums equal", async () => {
    const started = Date.now()
    const databaseUrl = (await drill("up")).split("\n").at(-1)!
    expect(databaseUrl).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/billing$/)
    const env = { ...process.env, DATABASE_URL: databaseUrl }
    const migrated = await spawnBilling(["migrate"], env)
    expect(migrated.code, migrated.stderr).toBe(0)
    const org = await spawnBilling(["org", "create", "--name", "Restore drill", "--json"], env)
    expect(org.code, org.stderr).toBe(0)
    const apiKey: string = org.json.apiKey
    const organizationId: string = org.json.organization.id

    const serve = await startServe(databaseUrl)
    const worker = startWorker(databaseUrl)
    const api = apiOf(serve.url, apiKey)

    const chat = (await api.ok("POST", "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, 201)).credit.id
    const planId = (await api.ok("POST", "/plans", {
      name: "Drill",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 100000 },
        { type: "WALLET", billingMode: "ADVANCE", amount: WALLET_GRANT }
      ]
    }, 201)).plan.id
    const customers: Array<string> = []
    for (let index = 0; index < CUSTOMERS; index++) {
      const customerId = (await api.ok("POST", "/customers", { name: `Drill ${index}`, email: `drill${index}@example.com` }, 201)).customer.id
      await api.ok("POST", "/purchases", { customerId, planId }, 201)
      customers.push(customerId)
    }

    await drill("backup")

    // Burst 1, priced, then the restore point.
    const first = await sendBurst(api, customers, "first", 10, 20)
    await waitPriced(api, customers, first.map((signal) => signal.rawId))
    const balancesAfterFirst = await balancesOf(api, customers)
    await drill("restore-point", "between")

    // Burst 2, priced: the balances move on.
    const second = await sendBurst(api, customers, "second", 6, 14)
    await waitPriced(api, customers, second.map((signal) => signal.rawId))
    expect(await balancesOf(api, customers)).not.toEqual(balancesAfterFirst)
    expect(first.length).toBe(90)
    expect(second.length).toBe(60)

    // The machine is lost: the service stops; the restore brings the database back as it was at `between`.
    await stop(worker)
    await stop(serve.child)
    const restoredUrl = (await drill("restore", "between")).split("\n").at(-1)!
    expect(restoredUrl).not.toBe(databaseUrl)
    const restored = apiOf((await startServe(restoredUrl)).url, apiKey)

    // Exactly the first burst's usage, none of the second's, read through the API.
    const rows = await usageRows(restored, customers)
    expect(rows.map((row) => row.rawId).sort()).toEqual(first.map((signal) => signal.rawId).sort())
    expect(rows).toHaveLength(first.length)
    expect((await restored.call("GET", `/signals/${first[0]!.rawId}`)).body.result.signal.status).toBe("PROCESSED")
    for (const signal of second.slice(0, 5)) expect((await restored.call("GET", `/signals/${signal.rawId}`)).status).toBe(404)

    // Balances as after the first burst.
    expect(await balancesOf(restored, customers)).toEqual(balancesAfterFirst)

    // Σ usage-row costs = Σ balance and wallet moves, per customer: the credit rows' quantities are the
    // credits the allowance moved, the wallet rows' costs the wallet ledger's usage debits.
    const db = new Pg.Client({ connectionString: restoredUrl })
    await db.connect()
    try {
      for (const customerId of customers) {
        const mine = rows.filter((row) => row.customerId === customerId)
        const creditRows = mine.filter((row) => row.meter === "CREDIT")
        const walletRows = mine.filter((row) => row.meter === "WALLET")
        expect(creditRows.length + walletRows.length).toBe(mine.length)
        const ledger = await restored.all(`/customers/${customerId}/wallet/ledger`, "entries")
        const usageDebits = ledger.filter((entry) => entry.type === "USAGE_LOG")
        expect(usageDebits.map((entry) => entry.usageLogId).sort()).toEqual(walletRows.map((row) => row.id).sort())
        const balances = balancesAfterFirst[customerId]!
        expect(sum(creditRows.map((row) => row.quantity))).toBe(sum([balances.creditsUsed]))
        expect(sum(walletRows.map((row) => row.customerCost))).toBe(sum(usageDebits.map((entry) => -entry.delta)))
        expect(sum(walletRows.map((row) => row.customerCost))).toBe(sum([WALLET_GRANT, -balances.wallet]))
        // 0.4 credits and 0.0025 USD a signal: what the first burst sent for this customer, nothing more.
        const sent = first.filter((signal) => signal.customerId === customerId)
        expect(sum(creditRows.map((row) => row.quantity))).toBe(sum(sent.filter((s) => s.route === "credit").map(() => 0.4)))
        expect(sum(walletRows.map((row) => row.customerCost))).toBe(sum(sent.filter((s) => s.route === "wallet").map(() => 0.0025)))
      }
      // The same on the restored cluster's tables, for the whole organisation: no API sums them.
      const { rows: [totals] } = await db.query<Record<string, string>>(
        `SELECT (SELECT sum(quantity) FROM usage_log WHERE organization_id = $1 AND meter = 'CREDIT')::text AS credit_usage,
                (SELECT sum(used) FROM purchase_balances WHERE organization_id = $1 AND type = 'CREDIT')::text AS credits_used,
                (SELECT sum(customer_cost) FROM usage_log WHERE organization_id = $1 AND meter = 'WALLET')::text AS wallet_usage,
                (SELECT -sum(delta) FROM wallet_ledger WHERE organization_id = $1 AND type = 'USAGE_LOG')::text AS wallet_debits,
                (SELECT count(*) FROM signals WHERE organization_id = $1)::text AS signals`,
        [organizationId]
      )
      expect(sum([totals!.credit_usage!])).toBe(sum([totals!.credits_used!]))
      expect(sum([totals!.wallet_usage!])).toBe(sum([totals!.wallet_debits!]))
      expect(totals!.signals).toBe(String(first.length))
    } finally {
      await db.end()
    }

    // Retries after the restore: a first-burst key is answered as the first time; a second-burst key
    // was lost with the restore, so the same request is accepted again as a new signal, and priced.
    const again = first.find((signal) => signal.route === "credit" && signal.key.includes("single"))!
    const replay = await restored.ok("POST", "/signal/credit", { customerId: again.customerId, agentKey: "chat", usage, idempotencyKey: again.key }, 202)
    expect(replay.rawId).toBe(again.rawId)
    const lost = second.find((signal) => signal.route === "credit" && signal.key.includes("single"))!
    const retried = await restored.ok("POST", "/signal/credit", { customerId: lost.customerId, agentKey: "chat", usage, idempotencyKey: lost.key }, 202)
    expect(retried.rawId).not.toBe(lost.rawId)
    startWorker(restoredUrl)
    await waitPriced(restored, [lost.customerId], [retried.rawId])

    const seconds = (ms: number | undefined) => `${((ms ?? 0) / 1000).toFixed(1)} s`
    console.log(
      `restore drill: ${first.length} + ${second.length} signals; up ${seconds(timings.up)}, full backup ${seconds(timings.backup)}, ` +
        `restore point ${seconds(timings["restore-point"])}, restore to "between" ${seconds(timings.restore)}; ` +
        `whole test ${seconds(Date.now() - started)}`
    )
  }, 10 * HANG_GUARD_MS)
})
