/**
 * bench/intake: how fast the API takes signals in, and how fast the doors
 * start, against real PostgreSQL. Run by hand (never by `npm test`); results
 * go to docs/benchmarks.md.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/intake.ts \
 *     [--signals 20000] [--batches 400] [--batch-size 100] [--customers 100] [--connections 64] \
 *     [--batch-connections 16] [--yardstick 20000] [--warmup-seconds 3] [--processes 1] [--root OTHER_CHECKOUT] \
 *     [--child-node-args "--cpu-prof --cpu-prof-dir=/tmp/prof"] [--wrk-seconds 10] [--server-log FILE]
 *
 * In one run, on a database of its own (dropped at the end):
 *  1. the yardstick: plain single-row INSERTs of a small jsonb row, 64 concurrent
 *     callers, a pool of 20 (as bench/signals.ts and bench/drain.ts);
 *  2. `billing serve --no-worker` started, timed from spawn to its first answer;
 *  3. `billing --help` and `billing org list --json` (with the server running), timed;
 *  4. single-signal intake: credit signals posted to /signal/credit over
 *     `--connections` keep-alive connections, after `--warmup-seconds` of the
 *     same load (not measured): accepted/s, p50 and p99 latency;
 *  4b. with `--wrk-seconds N` (needs `wrk`, Debian package wrk): the same load
 *     for N seconds from wrk (one thread, bench/wrk-post.lua), a load
 *     generator in C that takes a fraction of the CPU the node:http client
 *     takes from the two cores it shares with the server and PostgreSQL;
 *  5. batch intake: `--batches` requests of `--batch-size` credit signals to
 *     /signal/batch over `--batch-connections` connections: signals/s;
 *  6. the server's resident memory (current and peak) after the load;
 *  7. a `billing worker --once` spawned on the queue: seconds until its first
 *     signal is PROCESSED (then stopped);
 *  8. a check that every accepted signal is in the inbox exactly once.
 * The load generator is node:http with a keep-alive agent (lighter than fetch:
 * it shares the two cores with the server and PostgreSQL), and wrk in 4b.
 */
import { SqlClient } from "@effect/sql"
import { benchPort, apiClient, benchDatabase, flag, load, textFlag, wrkLoad } from "./support.ts"
import { Effect, type Layer, ManagedRuntime, Redacted } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { fromUrl } from "../src/db/Database.ts"

const signalCount = flag("signals", 20_000)
const batchCount = flag("batches", 400)
const batchSize = flag("batch-size", 100)
const customerCount = flag("customers", 100)
const connections = flag("connections", 64)
const batchConnections = flag("batch-connections", 16)
const yardstickCount = flag("yardstick", 20_000)
const warmupSeconds = flag("warmup-seconds", 3)
const processes = flag("processes", 1)
const wrkSeconds = flag("wrk-seconds", 0)
// The server's stdout (its request log, and e.g. --trace-gc lines) goes to this file instead of nowhere.
const serverLog = textFlag("server-log")
const root = textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url))
const cliPath = `${root.replace(/\/$/, "")}/bin/billing.mjs`
// Node flags for the server and the worker, e.g. a CPU profile of each (NODE_OPTIONS refuses --cpu-prof).
const childNodeArgs = textFlag("child-node-args")?.split(" ").filter((arg) => arg !== "") ?? []

const { adminUrl, databaseName, databaseUrl } = benchDatabase("intake", "billing_bench_intake_")

const admin = ManagedRuntime.make(fromUrl(Redacted.make(adminUrl), 1))
const runAdmin = (statement: string) => admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)))
const pool = ManagedRuntime.make(fromUrl(Redacted.make(databaseUrl)) as Layer.Layer<SqlClient.SqlClient>)
const sqlRun = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) => pool.runPromise(Effect.flatMap(SqlClient.SqlClient, f))

const env = { ...process.env, DATABASE_URL: databaseUrl, BILLING_WORKER_POLL_MS: "50" }
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)

const finished = (child: ChildProcess) =>
  new Promise<{ code: number | null; stdout: string }>((resolve) => {
    let stdout = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    child.on("exit", (code) => resolve({ code, stdout }))
  })

/** A CLI command, timed from spawn to exit. */
const cli = async (args: ReadonlyArray<string>) => {
  const started = performance.now()
  const result = await finished(spawn(process.execPath, [cliPath, ...args], { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] }))
  const seconds = (performance.now() - started) / 1000
  if (result.code !== 0) throw new Error(`billing ${args.join(" ")} failed`)
  return { seconds, stdout: result.stdout }
}

const memoryMb = (pid: number) => {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const field = (name: string) => Math.round(Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) / 1024)
  return { rss: field("VmRSS"), peak: field("VmHWM") }
}

/** A process and its children (the --processes N case). */
const treePids = (pid: number) => {
  try {
    return [pid, ...fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)]
  } catch {
    return [pid]
  }
}

/** Resident memory of a process and its children. */
const treeMemoryMb = (pid: number) => treePids(pid).map((p) => ({ pid: p, ...memoryMb(p) }))

/** CPU seconds (user + system) a process and its children have used so far: per-request cost, steadier than rates on a noisy host. */
const treeCpuSeconds = (pid: number) => {
  const ticks = (p: number) => {
    const fields = fs.readFileSync(`/proc/${p}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    return Number(fields[11]) + Number(fields[12]) // utime, stime (fields 14 and 15 of proc(5))
  }
  const clockTicks = 100 // USER_HZ on Linux
  return treePids(pid).reduce((sum, p) => sum + ticks(p), 0) / clockTicks
}


/** `wrkSeconds` of single-signal load from wrk: its counts and latency percentiles. */
const wrk = (port: number, apiKey: string, customers: ReadonlyArray<string>) =>
  wrkLoad({
    url: `http://127.0.0.1:${port}`,
    apiKey,
    path: "/api/v1/signal/credit",
    body: '{"customerId":"{customer}","agentKey":"chat","usage":{"model":"gpt-4o","inputTokens":1000,"outputTokens":200}}',
    customers,
    connections,
    seconds: wrkSeconds
  })

const main = async () => {
  await runAdmin(`CREATE DATABASE "${databaseName}"`)
  let server: ChildProcess | undefined
  try {
    await cli(["migrate"])
    const { apiKey } = JSON.parse((await cli(["org", "create", "--name", "Bench", "--json"])).stdout)

    await sqlRun((sql) => sql`CREATE TABLE bench_yardstick (id text PRIMARY KEY, body jsonb NOT NULL)`)
    const yardstick = await load(yardstickCount, 64, (index) =>
      sqlRun((sql) => sql`INSERT INTO bench_yardstick (id, body) VALUES (${`y${index}`}, ${JSON.stringify({ index })}::jsonb)`)
        .then(() => undefined))
    progress(`yardstick: ${Math.round(yardstick.rate)} inserts/s`)

    const port = benchPort()
    const api = apiClient(port, apiKey, Math.max(connections, batchConnections))
    const request = api.request

    const spawnedAt = performance.now()
    server = spawn(process.execPath, [...childNodeArgs, cliPath, "serve", "--no-worker", "--port", String(port), ...(processes > 1 ? ["--processes", String(processes)] : [])], {
      cwd: root,
      env,
      stdio: ["ignore", serverLog === undefined ? "ignore" : fs.openSync(serverLog, "w"), "inherit"]
    })
    const serverDone = new Promise((resolve) => server!.on("exit", resolve))
    let serveSeconds = NaN
    for (let tries = 0; tries < 3000; tries++) {
      try {
        const answer = await request("GET", "/customers?limit=1")
        if (answer.status === 200) {
          serveSeconds = (performance.now() - spawnedAt) / 1000
          break
        }
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
    progress(`serve answered after ${serveSeconds.toFixed(2)} s`)

    const help = await cli(["--help"])
    const orgList = await cli(["org", "list", "--json"])
    progress(`--help ${help.seconds.toFixed(2)} s, org list ${orgList.seconds.toFixed(2)} s`)

    const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    const credit = await request("POST", "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: bundle })
    const plan = await request("POST", "/plans", {
      name: "Bench",
      billingCycle: "MONTHLY",
      entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.json.result.credit.id, quantity: 100_000_000 }]
    })
    const customers: Array<string> = []
    await load(customerCount, 8, async (index) => {
      const created = await request("POST", "/customers", { name: `Customer ${index}`, email: `c${index}@example.com` })
      customers[index] = created.json.result.customer.id
      await request("POST", "/purchases", { customerId: customers[index], planId: plan.json.result.plan.id })
    })
    const creditSignal = (index: number) => ({
      customerId: customers[index % customers.length]!,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
    })

    // Warm the server (JIT tiers, pools, heap size) before measuring: `--warmup-seconds` of the same load.
    // 500 requests (~0.2 s) left the first 1.4 s of the measured phase at twice the steady latency.
    let accepted = 0
    for (const warmStart = performance.now(); performance.now() - warmStart < warmupSeconds * 1000; accepted += 500) {
      await load(500, connections, (index) => request("POST", "/signal/credit", creditSignal(index)).then(() => undefined))
    }

    const refusedSingle: Record<string, number> = {}
    const cpuBeforeSingle = treeCpuSeconds(server.pid!)
    const single = await load(signalCount, connections, async (index) => {
      const answer = await request("POST", "/signal/credit", creditSignal(index))
      if (answer.status === 202) accepted++
      else refusedSingle[answer.status] = (refusedSingle[answer.status] ?? 0) + 1
    })
    progress(`single intake: ${Math.round(single.rate)}/s, p99 ${single.p99.toFixed(1)} ms`)
    const singleCpuUs = ((treeCpuSeconds(server.pid!) - cpuBeforeSingle) / signalCount) * 1e6
    const afterSingle = treeMemoryMb(server.pid!)

    // wrk stops mid-request when its time is up: those requests may be queued without the answer being read,
    // so the inbox may hold up to `connections` more rows than wrk counted.
    const cpuBeforeWrk = treeCpuSeconds(server.pid!)
    const wrkSingle = wrkSeconds > 0 ? await wrk(port, apiKey, customers) : undefined
    const wrkCpuUs = wrkSingle ? ((treeCpuSeconds(server.pid!) - cpuBeforeWrk) / wrkSingle.requests) * 1e6 : NaN
    if (wrkSingle) {
      accepted += wrkSingle.requests - wrkSingle.statusErrors
      progress(`single intake (wrk): ${Math.round(wrkSingle.rate)}/s, p99 ${wrkSingle.p99Ms.toFixed(1)} ms`)
    }

    const refusedBatch: Record<string, number> = {}
    let batchAccepted = 0
    const batch = await load(batchCount, batchConnections, async (index) => {
      const signals = Array.from({ length: batchSize }, (_, i) => ({ type: "credit", ...creditSignal(index * batchSize + i) }))
      const answer = await request("POST", "/signal/batch", { signals })
      if (answer.status !== 202) {
        refusedBatch[answer.status] = (refusedBatch[answer.status] ?? 0) + batchSize
        return
      }
      for (const result of answer.json.result.results as Array<{ queued: boolean }>) {
        if (result.queued) batchAccepted++
        else refusedBatch.item = (refusedBatch.item ?? 0) + 1
      }
    })
    accepted += batchAccepted
    const batchRate = batchAccepted / batch.seconds
    progress(`batch intake: ${Math.round(batchRate)} signals/s`)
    const afterBatch = treeMemoryMb(server.pid!)

    const [inbox] = await sqlRun((sql) =>
      sql<{ rows: string; distinct: string }>`SELECT count(*) AS rows, count(DISTINCT id) AS distinct FROM signals`)

    server.kill("SIGTERM")
    await serverDone
    server = undefined

    // A worker's first priced signal, from spawn.
    const workerSpawned = performance.now()
    const worker = spawn(process.execPath, [...childNodeArgs, cliPath, "worker"], { cwd: root, env, stdio: ["ignore", "ignore", "inherit"] })
    const workerDone = new Promise((resolve) => worker.on("exit", resolve))
    let firstSignalSeconds = NaN
    for (let tries = 0; tries < 2000; tries++) {
      const [row] = await sqlRun((sql) => sql<{ n: string }>`SELECT count(*) AS n FROM signals WHERE status = 'PROCESSED'`)
      if (Number(row!.n) > 0) {
        firstSignalSeconds = (performance.now() - workerSpawned) / 1000
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    worker.kill("SIGTERM")
    await workerDone
    progress(`worker priced its first signal ${firstSignalSeconds.toFixed(2)} s after spawn`)

    const peakRss = Math.max(...afterBatch.map((p) => p.peak), ...afterSingle.map((p) => p.peak))
    const report = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGb: Math.round(os.totalmem() / 2 ** 30), load: os.loadavg() },
      processes,
      yardstick: { inserts: yardstickCount, rate: Math.round(yardstick.rate), p50Ms: yardstick.p50, p99Ms: yardstick.p99 },
      single: {
        signals: signalCount,
        connections,
        rate: Math.round(single.rate),
        ofYardstick: Math.round((single.rate / yardstick.rate) * 100) / 100,
        p50Ms: Math.round(single.p50 * 10) / 10,
        p99Ms: Math.round(single.p99 * 10) / 10,
        serverCpuUsPerSignal: Math.round(singleCpuUs),
        refused: refusedSingle
      },
      batch: {
        requests: batchCount,
        batchSize,
        connections: batchConnections,
        rate: Math.round(batchRate),
        ofYardstick: Math.round((batchRate / yardstick.rate) * 100) / 100,
        p99RequestMs: Math.round(batch.p99 * 10) / 10,
        refused: refusedBatch
      },
      serverMemoryMb: { afterSingle, afterBatch, peak: peakRss },
      startSeconds: {
        help: Math.round(help.seconds * 100) / 100,
        orgListWithServer: Math.round(orgList.seconds * 100) / 100,
        serveFirstAnswer: Math.round(serveSeconds * 100) / 100,
        workerFirstSignal: Math.round(firstSignalSeconds * 100) / 100
      },
      ...(wrkSingle
        ? {
          singleWrk: {
            seconds: wrkSingle.seconds,
            connections,
            rate: Math.round(wrkSingle.rate),
            ofYardstick: Math.round((wrkSingle.rate / yardstick.rate) * 100) / 100,
            p50Ms: wrkSingle.p50Ms,
            p99Ms: wrkSingle.p99Ms,
            maxMs: wrkSingle.maxMs,
            serverCpuUsPerSignal: Math.round(wrkCpuUs),
            refused: wrkSingle.statusErrors,
            socketErrors: wrkSingle.connectErrors + wrkSingle.readErrors + wrkSingle.writeErrors + wrkSingle.timeouts
          }
        }
        : {}),
      check: {
        accepted,
        inboxRows: Number(inbox!.rows),
        distinctIds: Number(inbox!.distinct),
        unreadAnswersAllowed: wrkSingle ? connections : 0,
        ok: Number(inbox!.rows) === Number(inbox!.distinct) && Number(inbox!.rows) >= accepted &&
          Number(inbox!.rows) <= accepted + (wrkSingle ? connections : 0)
      }
    }
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
    const ok = (met: boolean) => (met ? "yes" : "**no**")
    process.stdout.write(`
| Measure | Figure | Target | Met |
|---|---:|---|---|
| Yardstick (single-row INSERTs, 64 callers) | ${report.yardstick.rate}/s, p50 ${report.yardstick.p50Ms.toFixed(1)} ms, p99 ${report.yardstick.p99Ms.toFixed(1)} ms | | |
| Single-signal intake, ${connections} connections | ${report.single.rate}/s (**${report.single.ofYardstick} ×**), p50 ${report.single.p50Ms} ms, p99 ${report.single.p99Ms} ms; server CPU ${report.single.serverCpuUsPerSignal} µs a signal | ≥ 0.25 ×, p99 < 50 ms | ${ok(report.single.ofYardstick >= 0.25 && report.single.p99Ms < 50)} |
${report.singleWrk ? `| Single-signal intake, ${connections} connections, from wrk | ${report.singleWrk.rate}/s (**${report.singleWrk.ofYardstick} ×**), p50 ${report.singleWrk.p50Ms} ms, p99 ${report.singleWrk.p99Ms} ms; server CPU ${report.singleWrk.serverCpuUsPerSignal} µs a signal | ≥ 0.25 ×, p99 < 50 ms | ${ok(report.singleWrk.ofYardstick >= 0.25 && report.singleWrk.p99Ms < 50)} |\n` : ""}| Batch intake, ${batchSize} a request, ${batchConnections} connections | ${report.batch.rate} signals/s (**${report.batch.ofYardstick} ×**) | ≥ 2 × | ${ok(report.batch.ofYardstick >= 2)} |
| Server resident memory under that load (peak) | ${peakRss} MB | < 250 MB | ${ok(peakRss < 250)} |
| \`billing --help\` | ${report.startSeconds.help} s | < 0.5 s | ${ok(report.startSeconds.help < 0.5)} |
| \`billing org list --json\`, server running | ${report.startSeconds.orgListWithServer} s | < 1 s | ${ok(report.startSeconds.orgListWithServer < 1)} |
| Worker's first priced signal after spawn | ${report.startSeconds.workerFirstSignal} s | < 1.5 s | ${ok(report.startSeconds.workerFirstSignal < 1.5)} |
| \`serve\` answers on PostgreSQL after spawn | ${report.startSeconds.serveFirstAnswer} s | < 2 s | ${ok(report.startSeconds.serveFirstAnswer < 2)} |
| Every accepted signal in the inbox once | ${report.check.accepted} accepted, ${report.check.inboxRows} rows | equal${wrkSingle ? ` (wrk: up to ${connections} more)` : ""} | ${ok(report.check.ok)} |
`)
    api.close()
  } finally {
    if (server) server.kill("SIGTERM")
    await pool.dispose()
    await runAdmin(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.dispose()
  }
}

await main()
