/**
 * Reads off the primary (docs/operations.md, "Reads off the primary"), on the
 * pg_auto_failover formation of scripts/ha-formation.sh: `billing serve` with
 * DATABASE_URL = the formation's read-write URI and DATABASE_READ_URL = the
 * same hosts with `target_session_attrs=prefer-standby`.
 *
 * - The routed lists (usage log, invoices, payments) are read on the standby:
 *   with the standby's WAL replay paused, a priced signal is in the primary's
 *   lookup at once but not in the list; once replay resumes, the list has it.
 *   The standby's pg_stat_activity shows the read pool (`billing-read`).
 * - A creator reads what it wrote at once: GET of a customer and of a
 *   purchase right after their POST, the customer's (empty) usage log, the
 *   `Prefer: wait` answer and a lookup of its row, all while replay is paused.
 * - With DATABASE_READ_URL on a host that refuses, the routed reads answer 503
 *   `database_unavailable` and writes and their reads work.
 *
 * Needs the formation: CI's formation step runs it with BILLING_HA_READS=1
 * (HA_DIR/HA_PORT say which formation, as for the script); otherwise skipped.
 */
import { type ChildProcess, execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import Pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gpt4oBundle } from "./signals-fixtures.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { apiCaller, spawnServe } from "./support/ServeProcess.ts"

const enabled = process.env.BILLING_HA_READS === "1"
const formation = fileURLToPath(new URL("../scripts/ha-formation.sh", import.meta.url))
const run = promisify(execFile)
const script = async (command: string) =>
  (await run("bash", [formation, command], { timeout: 2 * HANG_GUARD_MS })).stdout.trim()

const usage = { model: "gpt-4o", inputTokens: 1000 }
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const children: Array<ChildProcess> = []
let apiKey = ""
/** The serve whose reads go to the standby, and the one whose read URL refuses. */
let routed = ""
let refused = ""
let standby: Pg.Client | undefined
let primary: Pg.Client | undefined

const startServe = async (env: NodeJS.ProcessEnv, flags: ReadonlyArray<string> = []) => {
  const serve = await spawnServe(env, flags)
  children.push(serve.child)
  return serve.baseUrl
}

const call = (base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  apiCaller(base, apiKey).call(method, path, body, headers)

const created = (base: string, path: string, body: unknown, field: string) => apiCaller(base, apiKey).created(path, body, field)

const nodeClient = async (port: string) => {
  const client = new Pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/billing` })
  await client.connect()
  return client
}

/** Stops the standby applying WAL (it still receives and flushes it, so commits on the primary go on). */
const pauseReplay = () => standby!.query("SELECT pg_wal_replay_pause()")
const resumeReplay = () => standby?.query("SELECT pg_wal_replay_resume()").catch(() => undefined)

let planId = ""

beforeAll(async () => {
  if (!enabled) return
  // A node killed by the failover test rejoins first (at once when the pair is healthy).
  await script("heal")
  const uri = await script("uri")
  const readUri = uri.replace("target_session_attrs=read-write", "target_session_attrs=prefer-standby")
  expect(readUri).toContain("prefer-standby")
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: uri, BILLING_WORKER_POLL_MS: "50" }
  delete env.DATABASE_READ_URL
  const migrated = await spawnBilling(["migrate"], env)
  expect(migrated.code, migrated.stderr).toBe(0)
  const org = await spawnBilling(["org", "create", "--name", `Reads ${Date.now()}`, "--json"], env)
  expect(org.code, org.stderr).toBe(0)
  apiKey = org.json.apiKey
  standby = await nodeClient(await script("standby"))
  primary = await nodeClient(await script("primary"))
  ;[routed, refused] = await Promise.all([
    startServe({ ...env, DATABASE_READ_URL: readUri }),
    // Port 1 refuses at once: the read connection's host is away.
    startServe({ ...env, DATABASE_READ_URL: "postgres://postgres@127.0.0.1:1/billing" }, ["--no-worker"])
  ])
  const chat = await created(routed, "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  planId = await created(routed, "/plans", {
    name: "Reads",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 1000 },
      { type: "WALLET", billingMode: "ADVANCE", amount: 100 }
    ]
  }, "plan")
}, 3 * HANG_GUARD_MS)

afterAll(async () => {
  await resumeReplay()
  await standby?.end().catch(() => undefined)
  await primary?.end().catch(() => undefined)
  for (const child of children) child.kill("SIGTERM")
  await pause(500)
  for (const child of children) child.kill("SIGKILL")
})

describe.skipIf(!enabled)("reads off the primary (needs the formation: BILLING_HA_READS=1)", () => {
  it("the routed lists read the standby: a row priced while its replay is paused shows once replay resumes; the creator reads its writes at once", async () => {
    const customerId = await created(routed, "/customers", { name: "Reader", email: "reader@example.com" }, "customer")
    expect((await call(routed, "POST", "/purchases", { customerId, planId })).status).toBe(201)
    // The purchase's invoice is on the standby once replicated: the invoice list answers from there.
    const invoices = await eventually(async () => {
      const answer = await call(routed, "GET", `/invoices?customerId=${customerId}`)
      expect(answer.status).toBe(200)
      expect(answer.body.result.invoices.length).toBeGreaterThan(0)
      return answer.body.result.invoices as Array<{ id: string }>
    })
    const onPrimary = await primary!.query("SELECT id FROM invoices WHERE customer_id = $1 ORDER BY id", [customerId])
    expect(invoices.map((invoice) => invoice.id)).toEqual(onPrimary.rows.map((row) => row.id))

    await pauseReplay()
    try {
      // Written now, on the primary; the standby receives it but does not apply it.
      const fresh = await created(routed, "/customers", { name: "Fresh", email: "fresh@example.com" }, "customer")
      expect((await call(routed, "GET", `/customers/${fresh}`)).status).toBe(200)
      const purchase = await call(routed, "POST", "/purchases", { customerId: fresh, planId })
      expect(purchase.status).toBe(201)
      expect((await call(routed, "GET", `/purchases/${purchase.body.result.purchase.id}`)).status).toBe(200)
      // Its usage log: the customer is checked on the primary (an empty list, not a 404); the rows on the standby.
      const empty = await call(routed, "GET", `/signal/usage-log?customerId=${fresh}`)
      expect(empty.status, JSON.stringify(empty.body)).toBe(200)
      expect(empty.body.result.usageLogs).toEqual([])

      const priced = await call(routed, "POST", "/signal/wallet", { customerId, usage, idempotencyKey: `reads-${Date.now()}` }, { prefer: "wait=20" })
      expect(priced.status, JSON.stringify(priced.body)).toBe(200)
      const row = priced.body.result.usageLog
      expect(row).toMatchObject({ customerId, meter: "WALLET" })
      // The Prefer: wait answer's row, looked up by id at once: the lookup reads the primary.
      const lookup = await call(routed, "POST", "/signal/usage-log/lookup", { ids: [row.id] })
      expect(lookup.status).toBe(200)
      expect(lookup.body.result.notFound).toEqual([])
      // The list reads the standby, which has not applied the row yet.
      const before = await call(routed, "GET", `/signal/usage-log?customerId=${customerId}`)
      expect(before.status).toBe(200)
      expect(before.body.result.usageLogs.map((entry: { id: string }) => entry.id)).not.toContain(row.id)
      // The read pool's sessions are on the standby, named so.
      const sessions = await standby!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'billing-read'")
      expect(sessions.rows[0].n).toBeGreaterThan(0)
      const onThePrimary = await primary!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'billing-read'")
      expect(onThePrimary.rows[0].n).toBe(0)
    } finally {
      await resumeReplay()
    }
    // Replayed: the list has the row.
    await eventually(async () => {
      const after = await call(routed, "GET", `/signal/usage-log?customerId=${customerId}`)
      expect(after.status).toBe(200)
      expect(after.body.result.usageLogs.length).toBe(1)
    })
    const payments = await call(routed, "GET", `/payments?customerId=${customerId}`)
    expect(payments.status).toBe(200)
  }, 3 * HANG_GUARD_MS)

  it("with DATABASE_READ_URL on a host that refuses: the routed reads answer 503 database_unavailable, writes and their reads work", async () => {
    const customerId = await created(refused, "/customers", { name: "Refused", email: "refused@example.com" }, "customer")
    expect((await call(refused, "GET", `/customers/${customerId}`)).status).toBe(200)
    expect((await call(refused, "POST", "/purchases", { customerId, planId })).status).toBe(201)
    for (const path of [`/signal/usage-log?customerId=${customerId}`, `/invoices?customerId=${customerId}`, `/payments?customerId=${customerId}`]) {
      const answer = await call(refused, "GET", path)
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(503)
      expect(answer.body.statusDetail.code).toBe("database_unavailable")
      expect(answer.headers.get("retry-after")).not.toBeNull()
    }
    const signal = await call(refused, "POST", "/signal/wallet", { customerId, usage, idempotencyKey: `refused-${Date.now()}` })
    expect(signal.status, JSON.stringify(signal.body)).toBe(202)
  }, HANG_GUARD_MS)
})
