/**
 * bench/outside: the hot path measured the way a user meets it, from outside the
 * processes, against real PostgreSQL. Run by hand, never by `npm test`:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/outside.ts \
 *     [--backlog 40000] [--customers 16] [--connections 64] [--yardstick 20000] \
 *     [--batches 600] [--batch-size 100] [--purchases 2000] [--phases drain,drain2,batch,purchases] \
 *     [--child-node-args "--cpu-prof --cpu-prof-dir=/tmp/prof"] [--worker-pg-options "-c log_min_duration_statement=0"]
 *     [--server-pg-options "-c log_min_duration_statement=0"]
 *     [--report results.json] [--timeline batch-requests.json] [--root OTHER_CHECKOUT] [--keep]
 *     [--allowance 1000000000] [--webhook-events balance.threshold.crossed,wallet.balance.update]
 *     [--idempotency-header] [--analyze]
 *
 * In one run, on a database of its own (dropped at the end), every process started
 * through the package's bin (`bin/billing.mjs`) with the environment a user has:
 *  1. the yardstick: plain single-row INSERTs through node-postgres, a pool of 10,
 *     64 callers, a table without index (bench/support.ts `plainInsertYardstick`);
 *  2. `billing serve --no-worker`; through the API a credit, a plan with a large
 *     ADVANCE allowance of it, `--customers` customers with a purchase each, and one
 *     credit signal each, priced by `billing worker --once`: the credits one signal
 *     uses, read from `GET /customers/{id}/balances`;
 *  3. drain (`drain`): `--backlog` credit signals posted to `/signal/credit` over
 *     `--connections` keep-alive connections, each with its own idempotency key,
 *     interleaved over the customers; then one looping `billing worker` spawned, and
 *     progress read only from `GET /customers/{id}/balances` every 50 ms: signals/s
 *     from spawn to the last signal priced, the first priced signal's delay after
 *     spawn, the steady rate (first to last priced); for the backlog's intake and
 *     for the drain, the CPU a signal of the service's process and of every
 *     PostgreSQL process on the machine (`cpuMeter`, bench/support.ts);
 *  4. `drain2`: the same with two looping workers spawned at once;
 *  5. `batch`: `--batches` requests of `--batch-size` credit signals to
 *     `/signal/batch` over `--connections` connections: signals/s, request p50 and
 *     p99; beside it the batch yardstick, the same rows as bare multi-row INSERTs of
 *     `--batch-size` rows a statement (node-postgres, pool of 10, 64 callers);
 *  6. `purchases`: `--purchases` customers created (untimed), then each sold the
 *     plan through `POST /purchases` by 16 callers: purchases/s; beside it what a
 *     purchase cost the machine while they ran: CPU ms of the server process and of
 *     the PostgreSQL backends of the bench's database (from /proc, Linux only), and
 *     transactions and rows read (`pg_stat_database`). With `--idempotency-header`
 *     each customer's creation and purchase carries an `Idempotency-Key` header of
 *     its own, as `@billing/client` sends it on every POST that has no body key:
 *     the keyed path (the key claimed, the answer recorded) instead of the plain one.
 *     `--analyze` runs ANALYZE once the customers exist, before the purchases are
 *     timed, as autovacuum would on a server that runs it (this machine's does not):
 *     without statistics the planner may check an invoice line's invoice by
 *     scanning the organisation's invoices (docs/benchmarks.md).
 * `--allowance N` sets the plan's ADVANCE credits (default 1e9, never used up) and
 * adds an ARREAR credit component for what goes past them, so a small allowance
 * makes every customer's balance cross the alert thresholds (50, 80, 100 % used)
 * during the drain and go on in arrears. `--webhook-events LIST` subscribes an
 * endpoint to those event types before anything is sold, served by a receiver in
 * this process that answers 204 (the looping workers deliver while they drain);
 * the report counts the events stored and received.
 * `backlog` only queues the backlog; `--keep` leaves the database in place (to
 * EXPLAIN the worker's statements on it) instead of dropping it.
 * Every figure is also stated as a ratio to the yardstick of the same run.
 */
import { benchPort, apiClient, benchCustomer, benchDatabase, buyPlan, chatCreditPlan, cliOutputOf, cpuMeter, cpuOf, flag, plainInsertYardstick, load, multiRowInsertYardstick, percentile, secondsUntil, exitOf, textFlag } from "./support.ts"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import pg from "pg"

const backlog = flag("backlog", 40_000)
const customerCount = flag("customers", 16)
const connections = flag("connections", 64)
const yardstickCount = flag("yardstick", 20_000)
const batchCount = flag("batches", 600)
const batchSize = flag("batch-size", 100)
const purchaseCount = flag("purchases", 2_000)
const phases = new Set((textFlag("phases") ?? "drain,drain2,batch,purchases").split(","))
const reportFile = textFlag("report")
const keep = process.argv.includes("--keep")
// The batch phase's requests, each {start, ms} in the order sent, for a closer look at where the latency goes.
const timelineFile = textFlag("timeline")
const root = textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url))
const allowance = flag("allowance", 1_000_000_000)
const webhookEvents = textFlag("webhook-events")
const cliPath = `${root.replace(/\/$/, "")}/bin/billing.mjs`
const childNodeArgs = textFlag("child-node-args")?.split(" ").filter((arg) => arg !== "") ?? []
// PostgreSQL settings for the drain's workers only (PGOPTIONS), e.g. "-c log_min_duration_statement=0" to see where their time goes.
const workerPgOptions = textFlag("worker-pg-options")
// The same for `billing serve` (the API), e.g. the statement log of the purchases phase.
const serverPgOptions = textFlag("server-pg-options")
// The purchases phase's writes each with an Idempotency-Key header (the middleware's keyed path).
const idempotencyHeader = process.argv.includes("--idempotency-header")
// ANALYZE the bench's database once its customers exist, before the purchases are timed (as autovacuum would).
const analyzeBeforePurchases = process.argv.includes("--analyze")

const { adminUrl, databaseName, databaseUrl } = benchDatabase("outside", "billing_bench_outside_")
const env = { ...process.env, DATABASE_URL: databaseUrl }

/** One statement on the bench's database, on a connection of its own. */
const onBenchDatabase = async (statement: string) => {
  const bench = new pg.Client({ connectionString: databaseUrl })
  await bench.connect()
  try {
    return await bench.query(statement)
  } finally {
    await bench.end()
  }
}
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

/**
 * Request latencies by wave of `size` requests (in the order sent): p50 and max of each,
 * the wave's first start (ms into the phase). The first wave meets a cold server at once.
 */
const wavesOf = (timeline: ReadonlyArray<{ start: number; ms: number }>, size: number) => {
  const waves: Array<{ from: number; startMs: number; p50Ms: number; maxMs: number }> = []
  for (let from = 0; from < timeline.length; from += size) {
    const wave = timeline.slice(from, from + size)
    const sorted = wave.map((r) => r.ms).sort((a, b) => a - b)
    waves.push({ from, startMs: round(wave[0]!.start, 0), p50Ms: round(percentile(sorted, 0.5), 0), maxMs: round(sorted.at(-1)!, 0) })
  }
  const rest = timeline.slice(size).map((r) => r.ms).sort((a, b) => a - b)
  return { afterFirstWave: { p50Ms: round(percentile(rest, 0.5), 1), p99Ms: round(percentile(rest, 0.99), 1) }, waves }
}

const running = new Set<ChildProcess>()
const spawnCli = (args: ReadonlyArray<string>, stdout: "ignore" | "pipe" = "ignore", childEnv: NodeJS.ProcessEnv = env) => {
  const child = spawn(process.execPath, [...childNodeArgs, cliPath, ...args], { cwd: root, env: childEnv, stdio: ["ignore", stdout, "inherit"] })
  running.add(child)
  child.on("exit", () => running.delete(child))
  return child
}
const cli = cliOutputOf(spawnCli)
const stop = async (child: ChildProcess) => {
  const done = exitOf(child)
  child.kill("SIGTERM")
  await done
}

/** User plus system CPU of a process in ms (Linux /proc; 0 elsewhere or once it is gone). */
const cpuMsOf = (pid: number | undefined) => cpuOf(pid) * 1000

/**
 * What the machine has spent so far on the server and on the bench database's
 * PostgreSQL backends (the server's pool, which stays connected), and the
 * database's committed transactions and rows returned.
 */
const machineCost = async (admin: pg.Client, server: ChildProcess) => {
  const backends = await admin.query(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [databaseName])
  const stats = await admin.query(`SELECT xact_commit + xact_rollback AS transactions, tup_returned + tup_fetched AS returned
    FROM pg_stat_database WHERE datname = $1`, [databaseName])
  return {
    serverMs: cpuMsOf(server.pid),
    postgresMs: backends.rows.reduce((sum, row) => sum + cpuMsOf(row.pid), 0),
    transactions: Number(stats.rows[0]?.transactions ?? 0),
    returned: Number(stats.rows[0]?.returned ?? 0)
  }
}

/** The CPU ms of every PostgreSQL backend serving the bench's database, by pid. */
const backendCpu = async (admin: pg.Client) => {
  const { rows } = await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [databaseName])
  return new Map(rows.map((row) => [row.pid, cpuMsOf(row.pid)]))
}

const main = async () => {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE "${databaseName}"`)
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGb: Math.round(os.totalmem() / 2 ** 30) }
  }
  try {
    await cli(["migrate"])
    const { apiKey, organization } = JSON.parse(await cli(["org", "create", "--name", "Bench", "--json"]))
    let webhookReceived = 0
    if (webhookEvents !== undefined) {
      const receiver = http.createServer((request, response) => {
        request.resume()
        request.on("end", () => {
          webhookReceived++
          response.writeHead(204).end()
        })
      })
      await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve()))
      receiver.unref()
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`
      await cli(["webhook", "add", "--url", url, "--events", webhookEvents, "--threshold", "0", "--org", organization.id, "--json"])
      report.webhook = { events: webhookEvents.split(",") }
    }
    report.allowance = allowance

    const yardstick = await plainInsertYardstick(databaseUrl, yardstickCount)
    report.yardstick = { rows: yardstickCount, rate: yardstick.rate }
    progress(`yardstick: ${yardstick.rate} single-row INSERTs/s`)
    const ofYardstick = (rate: number) => round(rate / yardstick.rate)

    const port = benchPort()
    const api = apiClient(port, apiKey, connections)
    const server = spawnCli(["serve", "--no-worker", "--port", String(port)], "ignore",
      serverPgOptions === undefined ? env : { ...env, PGOPTIONS: serverPgOptions })
    await secondsUntil(async () => (await api.request("GET", "/customers?limit=1")).status === 200)

    const planId = await chatCreditPlan(api, allowance)
    const createCustomer = (index: number) => benchCustomer(api, index)
    const buy = (customerId: string) => buyPlan(api, customerId, planId)
    const sell = async (index: number) => {
      const customerId = await createCustomer(index)
      await buy(customerId)
      return customerId
    }
    const customers: Array<string> = []
    await load(customerCount, 8, async (index) => {
      customers[index] = await sell(index)
    })
    const creditSignal = (index: number) => ({
      customerId: customers[index % customers.length]!,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 },
      idempotencyKey: `k-${index}`
    })
    const usedOf = async (customerId: string) => {
      const answer = await api.request("GET", `/customers/${customerId}/balances`)
      return Number(answer.json.result.credits[0].used)
    }
    const usedByAll = async () => (await Promise.all(customers.map(usedOf))).reduce((sum, used) => sum + used, 0)
    let sent = 0
    const send = async (count: number) => {
      const first = sent
      sent += count
      const result = await load(count, connections, async (index) => {
        const answer = await api.request("POST", "/signal/credit", creditSignal(first + index))
        if (answer.status !== 202) throw new Error(`signal: ${answer.status} ${JSON.stringify(answer.json)}`)
      })
      return result
    }
    // One signal each, priced by a worker run, tells what one signal uses.
    await send(customers.length)
    await cli(["worker", "--once"])
    const perSignal = (await usedByAll()) / customers.length
    progress(`one signal uses ${perSignal} credits`)

    const drain = async (workers: number) => {
      const before = await usedByAll()
      // CPU a signal of the whole service: its processes and every PostgreSQL process on the machine
      // (on a formation: both nodes and the monitor, so the standby's replay is counted).
      const intakeCpu = cpuMeter(() => ({ serve: server.pid }))
      const intake = await send(backlog)
      const intakeCpuMs = intakeCpu.msPer(backlog)
      progress(`backlog of ${backlog} queued through the intake at ${intake.rate}/s`)
      const backendsAtSpawn = await backendCpu(admin)
      const spawnedAt = performance.now()
      const workerEnv = workerPgOptions === undefined ? env : { ...env, PGOPTIONS: workerPgOptions }
      const children = Array.from({ length: workers }, () => spawnCli(["worker"], "ignore", workerEnv))
      const drainCpu = cpuMeter(() => Object.fromEntries(children.map((child, index) => [`worker${index}`, child.pid])))
      let first = NaN
      let last = NaN
      for (;;) {
        const used = await usedByAll()
        const seconds = (performance.now() - spawnedAt) / 1000
        if (Number.isNaN(first) && used > before) first = seconds
        if (Math.round((used - before) / perSignal) >= backlog) {
          last = seconds
          break
        }
        if (seconds > 600) throw new Error(`drain stalled: ${(used - before) / perSignal} of ${backlog} priced`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      // CPU per signal: the workers', and their database's (every backend of the bench's database, the API's reads included).
      const workerCpuMs = children.reduce((sum, child) => sum + cpuMsOf(child.pid), 0)
      const drainCpuMs = drainCpu.msPer(backlog)
      let databaseCpuMs = 0
      for (const [pid, ms] of await backendCpu(admin)) databaseCpuMs += ms - (backendsAtSpawn.get(pid) ?? 0)
      await Promise.all(children.map(stop))
      const rate = backlog / last
      const steady = backlog / (last - first)
      progress(`${workers} worker(s): ${Math.round(rate)}/s from spawn (${ofYardstick(rate)} x), first priced ${first.toFixed(2)} s after spawn`)
      return {
        workers,
        signals: backlog,
        intakeRate: intake.rate,
        intakeCpuMsPerSignal: intakeCpuMs,
        seconds: round(last),
        rate: Math.round(rate),
        ofYardstick: ofYardstick(rate),
        steadyRate: Math.round(steady),
        firstPricedSeconds: round(first),
        workerCpuUsPerSignal: Math.round(workerCpuMs * 1e3 / backlog),
        databaseCpuUsPerSignal: Math.round(databaseCpuMs * 1e3 / backlog),
        drainCpuMsPerSignal: drainCpuMs
      }
    }
    // `backlog`: only queue the backlog (with `--keep`, a database to EXPLAIN the claim on).
    if (phases.has("backlog")) report.backlog = await send(backlog)
    if (phases.has("drain")) report.drain = await drain(1)
    if (phases.has("drain2")) {
      report.drain2 = await drain(2)
      if (report.drain) (report.drain2 as Record<string, unknown>).ofOneWorker = round((report.drain2 as { rate: number }).rate / (report.drain as { rate: number }).rate)
    }

    if (phases.has("batch")) {
      let accepted = 0
      // Each request's start (ms into the phase) and latency: whether p99 is the first wave or the steady state.
      const timeline = new Array<{ start: number; ms: number }>(batchCount)
      const phaseStart = performance.now()
      const startedAt = Date.now()
      const costBefore = await machineCost(admin, server)
      const benchCpuBefore = process.cpuUsage()
      const batch = await load(batchCount, connections, async (index) => {
        const signals = Array.from({ length: batchSize }, (_, i) => ({ type: "credit", ...creditSignal(sent + index * batchSize + i) }))
        const t0 = performance.now()
        const answer = await api.request("POST", "/signal/batch", { signals })
        timeline[index] = { start: t0 - phaseStart, ms: performance.now() - t0 }
        if (answer.status !== 202) throw new Error(`batch: ${answer.status} ${JSON.stringify(answer.json).slice(0, 300)}`)
        for (const result of answer.json.result.results as Array<{ queued: boolean }>) if (result.queued) accepted++
      })
      const endedAt = Date.now()
      const costAfter = await machineCost(admin, server)
      const benchCpu = process.cpuUsage(benchCpuBefore)
      const usPerSignal = (ms: number) => round((ms * 1000) / (batchCount * batchSize), 1)
      sent += batchCount * batchSize
      if (timelineFile) fs.writeFileSync(timelineFile, `${JSON.stringify(timeline)}\n`)
      const rate = accepted / batch.seconds
      const bare = await multiRowInsertYardstick(databaseUrl, batchCount, batchSize)
      report.batch = {
        requests: batchCount,
        batchSize,
        connections,
        accepted,
        rate: Math.round(rate),
        ofYardstick: ofYardstick(rate),
        p50RequestMs: round(batch.p50, 1),
        p99RequestMs: round(batch.p99, 1),
        // What a signal cost the machine: the server's CPU, its PostgreSQL backends', and this load generator's own.
        serverCpuUsPerSignal: usPerSignal(costAfter.serverMs - costBefore.serverMs),
        postgresCpuUsPerSignal: usPerSignal(costAfter.postgresMs - costBefore.postgresMs),
        loadCpuUsPerSignal: usPerSignal((benchCpu.user + benchCpu.system) / 1000),
        waves: wavesOf(timeline, connections),
        // The phase's wall-clock bounds (epoch ms): to line up other processes' samples with it.
        startedAt,
        endedAt,
        bareMultiRowRate: bare.rate,
        bareMultiRowOfYardstick: ofYardstick(bare.rate)
      }
      const afterFirst = (report.batch as { waves: ReturnType<typeof wavesOf> }).waves.afterFirstWave
      progress(`batch intake: ${Math.round(rate)}/s (${ofYardstick(rate)} x), p99 ${batch.p99.toFixed(0)} ms ` +
        `(after the first wave: p50 ${afterFirst.p50Ms} ms, p99 ${afterFirst.p99Ms} ms); bare multi-row ${bare.rate}/s`)
    }

    if (phases.has("purchases")) {
      // The customers first, untimed: the figure is purchases.
      const buyers: Array<string> = []
      const beforeCustomers = await machineCost(admin, server)
      const keyed = (what: string, index: number): Record<string, string> =>
        idempotencyHeader ? { "idempotency-key": `bench-${what}-${index}` } : {}
      const created = await load(purchaseCount, 16, async (index) => {
        buyers[index] = await benchCustomer(api, customerCount + index, keyed("customer", index))
      })
      const afterCustomers = await machineCost(admin, server)
      if (analyzeBeforePurchases) await onBenchDatabase("ANALYZE")
      const before = await machineCost(admin, server)
      const result = await load(purchaseCount, 16, (index) => buyPlan(api, buyers[index]!, planId, keyed("purchase", index)))
      const after = await machineCost(admin, server)
      const rate = purchaseCount / result.seconds
      const per = (value: number, digits = 2) => round(value / purchaseCount, digits)
      report.purchases = {
        purchases: purchaseCount,
        callers: 16,
        idempotencyHeader,
        analyzed: analyzeBeforePurchases,
        rate: Math.round(rate),
        ofYardstick: ofYardstick(rate),
        p50Ms: round(result.p50, 1),
        p99Ms: round(result.p99, 1),
        serverCpuMsPerPurchase: per(after.serverMs - before.serverMs),
        postgresCpuMsPerPurchase: per(after.postgresMs - before.postgresMs),
        transactionsPerPurchase: per(after.transactions - before.transactions),
        rowsReturnedPerPurchase: per(after.returned - before.returned, 1),
        // For scale: the customers' POST /customers (one INSERT each) before it, at the same 16 callers.
        customersCreatedRate: created.rate,
        serverCpuMsPerCustomerCreated: per(afterCustomers.serverMs - beforeCustomers.serverMs),
        postgresCpuMsPerCustomerCreated: per(afterCustomers.postgresMs - beforeCustomers.postgresMs)
      }
      progress(`purchases: ${Math.round(rate)}/s at 16 callers (${ofYardstick(rate)} x), ` +
        `server ${per(after.serverMs - before.serverMs)} ms CPU and PostgreSQL ${per(after.postgresMs - before.postgresMs)} ms CPU a purchase`)
    }

    api.close()
    if (webhookEvents !== undefined) {
      const stored = await onBenchDatabase(`SELECT event_type, count(*)::int AS n FROM webhook_events GROUP BY 1 ORDER BY 1`)
      Object.assign(report.webhook as object, {
        stored: Object.fromEntries(stored.rows.map((row) => [row.event_type, row.n])),
        received: webhookReceived
      })
      progress(`webhook events stored ${JSON.stringify((report.webhook as { stored: unknown }).stored)}, ${webhookReceived} received`)
    }
    await stop(server)
  } finally {
    await Promise.all([...running].map(stop))
    if (keep) progress(`kept ${databaseUrl}`)
    else await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.end()
  }
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  if (reportFile) fs.writeFileSync(reportFile, `${JSON.stringify(report, null, 2)}\n`)
}

await main()
