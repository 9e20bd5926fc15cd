/**
 * bench/signals: the signal pipeline's speed against real PostgreSQL, run by hand
 * (not part of `npm test`). Results go to docs/benchmarks.md.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/signals.ts \
 *     [--intake 20000] [--backlog 100000] [--customers 500] [--connections 64]
 *
 * In one run, on a fresh database of its own:
 *  1. the yardstick: plain single-row INSERTs at 64-way concurrency through a
 *     pool configured like the server's (20 connections);
 *  2. intake: `billing serve --no-worker` in its own process, 64 concurrent
 *     keep-alive connections over loopback posting credit and wallet signals:
 *     accepted signals per second, p50/p99 latency, the server's peak memory;
 *  3. drain: a backlog of queued signals priced by `billing worker --once`,
 *     with 1 and then 2 worker processes: signals per second, peak memory.
 */
import { SqlClient } from "@effect/sql"
import { benchPort, flag, load } from "./support.ts"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { fromUrl } from "../src/db/Database.ts"
import { randomToken } from "../src/ids.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const cliPath = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

const intakeCount = flag("intake", 20_000)
const backlogCount = flag("backlog", 100_000)
const customerCount = flag("customers", 500)
const connections = flag("connections", 64)
const yardstickCount = flag("yardstick", 20_000)

const adminUrl = process.env.DATABASE_URL
if (!adminUrl) {
  process.stderr.write("bench/signals needs DATABASE_URL (an admin connection to PostgreSQL)\n")
  process.exit(2)
}

const databaseName = `billing_bench_${randomToken(5)}`
const databaseUrl = (() => {
  const url = new URL(adminUrl)
  url.pathname = `/${databaseName}`
  return url.toString()
})()

const admin = ManagedRuntime.make(fromUrl(Redacted.make(adminUrl), 1))
const runAdmin = (statement: string) => admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)))

/** The server's pool settings (src/db/Database.ts), so the yardstick and intake share a shape. */
const pool = ManagedRuntime.make(fromUrl(Redacted.make(databaseUrl)) as Layer.Layer<SqlClient.SqlClient>)
const sqlRun = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  pool.runPromise(Effect.flatMap(SqlClient.SqlClient, f))

const env = { ...process.env, DATABASE_URL: databaseUrl, BILLING_WORKER_POLL_MS: "50" }

/** A child under /usr/bin/time, which reports its peak resident memory (KB) on exit. */
// BENCH_NODE_ARGS passes flags to the measured processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")
const spawnMeasured = (args: ReadonlyArray<string>) =>
  spawn("/usr/bin/time", ["-f", "PEAK_RSS_KB=%M", process.execPath, ...nodeArgs, cliPath, ...args], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })

const finished = (child: ChildProcess) =>
  new Promise<{ code: number | null; stdout: string; peakMb: number }>((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    child.stderr?.on("data", (chunk) => (stderr += chunk))
    child.on("exit", (code) => {
      const peak = /PEAK_RSS_KB=(\d+)/.exec(stderr)
      resolve({ code, stdout, peakMb: peak ? Math.round(Number(peak[1]) / 1024) : NaN })
    })
  })

const cli = async (args: ReadonlyArray<string>) => {
  const result = await finished(spawnMeasured([...args, "--json"]))
  if (result.code !== 0) throw new Error(`billing ${args.join(" ")} failed`)
  return JSON.parse(result.stdout)
}

const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)

/** The peak resident memory of a running process (VmHWM), in MB. */
const peakMemoryMb = (pid: number) => {
  const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return match ? Math.round(Number(match[1]) / 1024) : NaN
}


const waitForServer = async (baseUrl: string) => {
  for (let tries = 0; tries < 600; tries++) {
    try {
      await fetch(`${baseUrl}/openapi.json`)
      return
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  throw new Error("server did not start")
}

const main = async () => {
  await runAdmin(`CREATE DATABASE "${databaseName}"`)
  try {
    await cli(["migrate"])
    const { apiKey, organization } = await cli(["org", "create", "--name", "Bench"])
    const organizationId: string = organization.id

    // The yardstick: what the pool does with the simplest possible write.
    await sqlRun((sql) => sql`CREATE TABLE bench_yardstick (id text PRIMARY KEY, body jsonb NOT NULL)`)
    const yardstick = await load(yardstickCount, connections, (index) =>
      sqlRun((sql) =>
        sql`INSERT INTO bench_yardstick (id, body) VALUES (${`y${index}`}, ${JSON.stringify({ index })}::jsonb)`
      ).then(() => undefined))

    progress(`yardstick: ${yardstick.rate} inserts/s`)
    const port = benchPort()
    // Not under /usr/bin/time: the signal must reach the server itself; its peak memory comes from /proc.
    const server = spawn(process.execPath, [...nodeArgs, cliPath, "serve", "--no-worker", "--port", String(port)], {
      cwd: root,
      env,
      stdio: ["ignore", "ignore", "inherit"]
    })
    const serverDone = new Promise((resolve) => server.on("exit", resolve))
    const baseUrl = `http://127.0.0.1:${port}/api/v1`
    await waitForServer(baseUrl)
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${baseUrl}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      const json = (await response.json()) as any
      return { status: response.status, result: json.result }
    }

    const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    const credit = await post("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: bundle })
    const plan = await post("/plans", {
      name: "Bench",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.result.credit.id, quantity: 10_000_000 },
        { type: "WALLET", billingMode: "ADVANCE", amount: 1000 }
      ]
    })
    progress("server up; creating customers")
    const customers: Array<string> = []
    await load(customerCount, 16, async (index) => {
      const created = await post("/customers", { name: `Customer ${index}`, email: `c${index}@example.com` })
      customers[index] = created.result.customer.id
      await post("/purchases", { customerId: created.result.customer.id, planId: plan.result.plan.id })
    })

    const signalBody = (index: number) => {
      const customerId = customers[index % customers.length]!
      return index % 2 === 0
        ? ["/signal/credit", { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } }] as const
        : ["/signal/wallet", { customerId, usage: { model: "gpt-4o", inputTokens: 1000 } }] as const
    }
    progress(`${customers.length} customers on the plan; intake`)
    const refused: Array<number> = []
    const intake = await load(intakeCount, connections, async (index) => {
      const [path, body] = signalBody(index)
      const answer = await post(path, body)
      if (answer.status !== 202) refused.push(answer.status)
    })
    progress(`intake: ${intake.rate} signals/s`)
    const serverPeak = peakMemoryMb(server.pid!)
    server.kill("SIGTERM")
    await serverDone

    /** Tops the queue up to `count` with rows shaped exactly like intake's. */
    const fillBacklog = async (count: number) => {
      const [queued] = await sqlRun((sql) => sql<{ n: string }>`SELECT count(*) AS n FROM signals WHERE status = 'QUEUED'`)
      const missing = count - Number(queued!.n)
      if (missing <= 0) return
      const tag = randomToken(3)
      await sqlRun((sql) =>
        sql`INSERT INTO signals (organization_id, id, message_id, route, customer_id, agent_key, body)
            SELECT ${organizationId}, 'sig_' || ${tag} || lpad(i::text, 9, '0'), 'msg_' || ${tag} || lpad(i::text, 9, '0'),
                   CASE WHEN i % 2 = 0 THEN 'CREDIT' ELSE 'WALLET' END,
                   (${customers}::text[])[1 + i % ${customers.length}],
                   CASE WHEN i % 2 = 0 THEN 'chat' END,
                   CASE WHEN i % 2 = 0
                     THEN jsonb_build_object('customerId', (${customers}::text[])[1 + i % ${customers.length}], 'agentKey', 'chat',
                            'usage', jsonb_build_object('model', 'gpt-4o', 'inputTokens', 1000, 'outputTokens', 200))
                     ELSE jsonb_build_object('customerId', (${customers}::text[])[1 + i % ${customers.length}],
                            'usage', jsonb_build_object('model', 'gpt-4o', 'inputTokens', 1000))
                   END
            FROM generate_series(1, ${missing}) AS i`
      )
    }

    const drain = async (workers: number) => {
      await fillBacklog(backlogCount)
      const started = performance.now()
      const results = await Promise.all(Array.from({ length: workers }, () => finished(spawnMeasured(["worker", "--once", "--json"]))))
      const seconds = (performance.now() - started) / 1000
      progress(`drained with ${workers} worker(s) in ${seconds.toFixed(1)} s`)
      const handled = results.reduce((total, result) => total + JSON.parse(result.stdout).handled, 0)
      return { workers, handled, seconds, rate: Math.round(handled / seconds), peakMb: Math.max(...results.map((r) => r.peakMb)) }
    }
    const drainOne = await drain(1)
    const drainTwo = await drain(2)

    const [counts] = await sqlRun((sql) =>
      sql<{ processed: string; failed: string; usageRows: string }>`SELECT
        (SELECT count(*) FROM signals WHERE status = 'PROCESSED') AS processed,
        (SELECT count(*) FROM signals WHERE status <> 'PROCESSED') AS failed,
        (SELECT count(*) FROM usage_log) AS usage_rows`)

    const report = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGb: Math.round(os.totalmem() / 2 ** 30), load: os.loadavg() },
      yardstick: { inserts: yardstickCount, connections, rate: yardstick.rate, p50Ms: yardstick.p50, p99Ms: yardstick.p99 },
      intake: {
        signals: intakeCount,
        connections,
        rate: intake.rate,
        p50Ms: intake.p50,
        p99Ms: intake.p99,
        refused: refused.length,
        ofYardstick: Math.round((intake.rate / yardstick.rate) * 100) / 100,
        serverPeakMb: serverPeak
      },
      drain: [drainOne, drainTwo],
      check: counts
    }
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  } finally {
    await pool.dispose()
    await runAdmin(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.dispose()
  }
}

await main()
