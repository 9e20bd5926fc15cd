/**
 * A worker you can watch: `billing worker --once` ends with a summary per job
 * and organisation; not on a terminal each batch that did work is one JSON
 * line; on a terminal a live view shows a line per job and `q` leaves it.
 * Real signals, priced by the real CLI process, on the test's database.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, clientOf, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { query } from "./signals-fixtures.ts"
import { eventually } from "./support/Eventually.ts"
import { workerJobNames, workerJobs } from "../src/app/Jobs.ts"
import { type PtyProcess, startInPty, stripAnsi } from "./support/Pty.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const TIMEOUT = 180_000

let app: TestApp
const terminals: Array<PtyProcess> = []

interface Shop {
  readonly tenant: Tenant
  readonly customerId: string
  readonly unitKey: string
}

const openShop = async (name: string): Promise<Shop> => {
  const tenant = await app.tenant(name)
  const client = clientOf(app, tenant)
  const unit = await makeUnit(client, { flatPrice: 0.5 })
  const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
  const customer = await makeCustomer(client)
  await buy(client, customer.id, plan.id)
  return { tenant, customerId: customer.id, unitKey: unit.agentKey }
}

/** Two workspaces of the calling test's own: the counts it asserts are its signals alone. */
const twoShops = async (): Promise<[Shop, Shop]> => [await openShop("Watch A"), await openShop("Watch B")]

/** Queues `priced` signals that will price and `failed` ones that will fail (an unknown unit). */
const queueSignals = async (shop: Shop, priced: number, failed: number) => {
  const client = clientOf(app, shop.tenant)
  for (let i = 0; i < priced; i++) {
    ok(await client.post("/signal/unit", { customerId: shop.customerId, agentKey: shop.unitKey }), 202)
  }
  for (let i = 0; i < failed; i++) {
    ok(await client.post("/signal/unit", { customerId: shop.customerId, agentKey: "no-such-unit" }), 202)
  }
}

const statuses = async (shop: Shop) =>
  Object.fromEntries(
    (await query<{ status: string; n: string }>(
      app,
      "SELECT status, count(*)::text AS n FROM signals WHERE organization_id = $1 GROUP BY status",
      [shop.tenant.organizationId]
    )).map((row) => [row.status, Number(row.n)])
  )

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  for (const terminal of terminals) terminal.kill()
  await app.close()
})

describe("the worker's jobs", () => {
  it("are built from the services, and the view's list of names is theirs, in order", async () => {
    const jobs = await app.run(workerJobs)
    expect(jobs.map((job) => job.name)).toEqual(workerJobNames)
  })
})

describe("billing worker --once", () => {
  it("ends with one JSON document: per job, per organisation", async () => {
    const [a, b] = await twoShops()
    await queueSignals(a, 3, 1)
    await queueSignals(b, 2, 0)
    const result = await app.cli(["worker", "--once", "--json"])
    expect(result.code, result.stderr).toBe(0)
    expect(result.json.handled).toBeGreaterThanOrEqual(6)
    const signals = result.json.jobs.find((job: any) => job.job === "signals")
    expect(signals.handled).toBe(6)
    expect(signals.byOrganization).toEqual({
      [a.tenant.organizationId]: { priced: 3, failed: 1 },
      [b.tenant.organizationId]: { priced: 2 }
    })
    expect(result.json.jobs.map((job: any) => job.job).sort()).toEqual(["billing-cycles", "history", "signals", "webhooks"])
    expect(await statuses(a)).toEqual({ PROCESSED: 3, FAILED: 1 })
    expect(await statuses(b)).toEqual({ PROCESSED: 2 })
  }, TIMEOUT)

  it("writes one JSON line per batch that did work through a pipe, then the summary", async () => {
    const [a, b] = await twoShops()
    await queueSignals(a, 2, 0)
    await queueSignals(b, 1, 1)
    const result = await app.cli(["worker", "--once"])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).not.toMatch(/\u001b\[/)
    const lines = result.stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    expect(lines.length).toBeGreaterThan(0)
    for (const line of lines) {
      expect(line).toMatchObject({ level: "INFO", message: "worker batch", job: expect.any(String), handled: expect.any(Number) })
      expect(line.handled).toBeGreaterThan(0)
    }
    const signalLines = lines.filter((line) => line.job === "signals")
    const total = (org: string, counter: string) =>
      signalLines.reduce((sum, line) => sum + (line.byOrganization[org]?.[counter] ?? 0), 0)
    expect(total(a.tenant.organizationId, "priced")).toBe(2)
    expect(total(b.tenant.organizationId, "priced")).toBe(1)
    expect(total(b.tenant.organizationId, "failed")).toBe(1)
    expect(signalLines.at(-1).queue).toEqual({ depth: 0, lagMs: 0 })
    expect(result.stdout).toContain("signals: 4 in")
    expect(result.stdout).toContain(`${a.tenant.organizationId}  priced 2`)
  }, TIMEOUT)

  it("starts a process with a batch of 100 signals and doubles it after each batch (docs/signals.md)", async () => {
    const shop = await openShop("Watch ramp")
    const signals = Array.from({ length: 350 }, () => ({ type: "unit", customerId: shop.customerId, agentKey: shop.unitKey }))
    ok(await clientOf(app, shop.tenant).post("/signal/batch", { signals }), 202)
    // One batch a round, so each JSON line is one batch's size: with several side by side (the default on a
    // database reached by URL, the embedded one's socket included) a round's line sums its batches, and on the
    // one-session embedded database the second batch of a round takes what the first left.
    const result = await app.cli(["worker", "--once"], { BILLING_SIGNAL_CONCURRENCY: "1" })
    expect(result.code, result.stderr).toBe(0)
    const batches = result.stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
      .filter((line) => line.job === "signals").map((line) => line.handled)
    expect(batches).toEqual([100, 200, 50])
    expect(await statuses(shop)).toEqual({ PROCESSED: 350 })
  }, TIMEOUT)
})

describe("billing worker (looping)", () => {
  it("writes JSON lines when not on a terminal and stops cleanly on SIGTERM", async () => {
    const a = await openShop("Watch A")
    const child = spawn(process.execPath, [bin, "worker"], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_WORKER_POLL_MS: "50" }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    await queueSignals(a, 2, 0)
    const priced = await eventually(() => {
      const lines = stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
      const count = lines.filter((line) => line.job === "signals")
        .reduce((sum, line) => sum + (line.byOrganization[a.tenant.organizationId]?.priced ?? 0), 0)
      expect(count, stdout + stderr).toBe(2)
      return lines
    })
    expect(priced.every((line) => line.handled > 0)).toBe(true)
    child.kill("SIGTERM")
    expect(await exited).toBe(0)
  }, TIMEOUT)

  it("shows a live line per job on a terminal, and q leaves with exit code 0", async () => {
    const b = await openShop("Watch B")
    const processedBefore = (await statuses(b)).PROCESSED ?? 0
    await queueSignals(b, 3, 0)
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_WORKER_POLL_MS: "50" }
    delete env.NO_COLOR
    const terminal = startInPty([process.execPath, bin, "worker"], env)
    terminals.push(terminal)
    await eventually(() => {
      const screen = stripAnsi(terminal.output())
      expect(screen, screen).toMatch(/signals +priced [\d.]+\/s \(3\)/)
      expect(screen).toMatch(/webhooks +sent [\d.]+\/s/)
      expect(screen).toMatch(/billing-cycles +renewed [\d.]+\/s/)
      expect(screen).toMatch(/queue 0 +lag 0ms/)
      expect(screen).toContain("q or Ctrl-C to stop")
    })
    terminal.type("q")
    expect(await terminal.exited).toBe(0)
    expect((await statuses(b)).PROCESSED).toBe(processedBefore + 3)
  }, TIMEOUT)
})
