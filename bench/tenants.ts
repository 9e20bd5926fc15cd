/**
 * bench/tenants: the drain, freshness and the check as a real tenant mix meets
 * them (issue 40; docs/benchmarks.md "Many customers at once"). Run by hand
 * against real PostgreSQL, never by `npm test`:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/tenants.ts --mix 16|256|4096|hot \
 *     [--others 1000] [--backlog 30000] [--seconds 10] [--checks 4000] [--check-connections 8] \
 *     [--connections 64] [--yardstick 20000] [--root OTHER_CHECKOUT] [--report results.json] [--no-vacuum]
 *     [--payment-terms-days N]
 *
 * `--mix N` spreads the signals evenly over N customers, in turn; `--mix hot`
 * sends every other signal from one customer and the rest over `--others`
 * customers in turn (the hot one sends half of all signals). On a database of
 * its own (dropped at the end), every process started through the checkout's
 * bin:
 *  1. the yardstick (bench/support.ts `plainInsertYardstick`);
 *  2. `billing serve --no-worker`, a credit plan, the mix's customers each with
 *     a purchase (over the API, 16 at a time); `--payment-terms-days N` gives the
 *     organisation N days' terms first (unset: 0, so every purchase's OPEN
 *     invoice is overdue at the worker's first cycle run, in the drain's window);
 *  3. single intake: `--backlog` credit signals to /signal/credit over
 *     `--connections` keep-alive connections, the mix's order, no worker: the
 *     single-signal intake rate R, and the backlog of the drain;
 *  4. the drain from spawn: one looping `billing worker` started, the backlog
 *     priced (spawn to an empty queue: the backlog over that time);
 *  4b. VACUUM ANALYZE, untimed, as autovacuum would after a drain (`--no-vacuum`
 *     leaves it out: this machine's server runs with autovacuum off, and the
 *     drained backlog's dead rows and stale queue-index entries then stay);
 *  5. the check: `--checks` POST /entitlements/check over `--check-connections`
 *     connections, the mix's customers in turn (the worker idle beside it);
 *  6. freshness: signals open-loop at R/2 for `--seconds`, the mix's order,
 *     each seen priced when the worker announces it (a listener on
 *     `billing_signals_priced`, bench/arrivals.ts); with `--mix hot`,
 *     first the same rate spread evenly over the same customers (no hot one:
 *     what the others would meet at that load from well-spread traffic), then
 *     the hot mix: the others' p99 with the hot customer over without. The
 *     load is the same in both, so the ratio tells what the hot customer does
 *     to the others, not what twice the load does to the machine. Each
 *     freshness run also counts the batches that priced its signals (a batch
 *     is one transaction: one `processed_at` a batch) and their mean size.
 *     Where the server keeps commit timestamps (`track_commit_timestamp = on`),
 *     each run also reports `receivedToCommitted`: every signal's wait as the
 *     database saw it, from its intake to the commit of the batch that priced it.
 * `BENCH_KEEP_DATABASE=1` keeps the bench's database at the end (its name is
 * printed), to look at its signals afterwards.
 * Progress is read from the database (whether any signal is still queued, every
 * 20 ms during the drain; the worker's own announcements, and a look-up by
 * primary key of what they missed, during freshness), never through the API. CPU per signal: the user and system time of the measured
 * processes (serve, the worker, every PostgreSQL process) over the step, from
 * /proc, divided by its signals (or checks).
 */
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { freshnessOf, openLoopArrivals } from "./arrivals.ts"
import {
  apiClient,
  benchCustomer,
  benchDatabase,
  billingProcesses,
  buyPlan,
  chatCreditPlan,
  cpuMeter,
  exitOf,
  flag,
  load,
  createBenchDatabase,
  printReport,
  reportHead,
  runBench,
  startServedBench,
  stopProcesses,
  textFlag
} from "./support.ts"

const mixName = textFlag("mix") ?? "16"
const others = flag("others", 1000)
const backlogCount = flag("backlog", 30_000)
const seconds = flag("seconds", 10)
const checkCount = flag("checks", 4000)
const checkConnections = flag("check-connections", 8)
const connections = flag("connections", 64)
const yardstickCount = flag("yardstick", 20_000)
const reportFile = textFlag("report")
const vacuum = !process.argv.includes("--no-vacuum")
// The organisation's payment terms, set before any sale (PATCH /organization/settings); unset, the default 0.
const paymentTermsDays = flag("payment-terms-days", 0)
const root = textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url))

// BENCH_WORKER_NODE_ARGS: node's flags for the worker, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" or
// "--import ./bench/count-statements.mjs" (with BENCH_STATEMENTS_FILE).
const workerNodeArgs = (process.env.BENCH_WORKER_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")

const hot = mixName === "hot"
const customerCount = hot ? others + 1 : Number(mixName)
if (!Number.isInteger(customerCount) || customerCount < 1) {
  process.stderr.write(`--mix is a number of customers or "hot", not ${mixName}\n`)
  process.exit(2)
}

const { adminUrl, databaseName, databaseUrl } = benchDatabase("tenants", "billing_bench_tenants_")
const env = { ...process.env, DATABASE_URL: databaseUrl }
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits
const { running, spawnCli, cli } = billingProcesses(root, env)

const main = async () => {
  const { admin, observer } = await createBenchDatabase(adminUrl, databaseName, databaseUrl)
  const report = reportHead(root, { mix: hot ? `hot + ${others}` : `${customerCount} customers` })
  try {
    const { api, organizationId, serve, yardstick, port, apiKey } = await startServedBench({
      cli, spawnCli, observer, databaseUrl, yardstickCount, connections, progress
    })
    report.yardstick = { rows: yardstickCount, rate: yardstick.rate }
    const ofYardstick = (rate: number) => round(rate / yardstick.rate)

    if (paymentTermsDays !== 0) {
      const set = await api.request("PATCH", "/organization/settings", { paymentTermsDays })
      if (set.status !== 200) throw new Error(`payment terms: ${set.status} ${JSON.stringify(set.json)}`)
    }
    report.paymentTermsDays = paymentTermsDays
    const planId = await chatCreditPlan(api)
    const customers: Array<string> = []
    await load(customerCount, 16, async (index) => {
      const customerId = await benchCustomer(api, index)
      await buyPlan(api, customerId, planId)
      customers[index] = customerId
    })
    progress(`${customerCount} customers, each with a purchase`)

    /** Signal i's customer and group: the mix's order. */
    const customerOf = (index: number) =>
      hot
        ? index % 2 === 0 ? { customerId: customers[0]!, group: "hot" } : { customerId: customers[1 + ((index >> 1) % others)]!, group: "others" }
        : { customerId: customers[index % customerCount]!, group: "all" }
    let keys = 0
    const credit = (customerId: string) => ({
      path: "/signal/credit",
      body: { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }, idempotencyKey: `k-${keys++}` }
    })

    // 3. Single intake, no worker: the rate R and the drain's backlog.
    const intakeCpu = cpuMeter(() => ({ serve: serve.pid }))
    const intake = await load(backlogCount, connections, async (index) => {
      const { body, path } = credit(customerOf(index).customerId)
      const answer = await api.request("POST", path, body)
      if (answer.status !== 202) throw new Error(`signal: ${answer.status} ${JSON.stringify(answer.json)}`)
    })
    report.intake = { signals: backlogCount, connections, rate: intake.rate, ofYardstick: ofYardstick(intake.rate), cpuMsPerSignal: intakeCpu.msPer(backlogCount) }
    progress(`intake: ${JSON.stringify(report.intake)}`)

    // 4. The drain from spawn, progress read from the database.
    // Whether any signal is still queued: the worker's own idle check. A count of the queued rows every 20 ms
    // cost 5-7 ms of PostgreSQL a poll, a quarter of a core taken from the drain it measured; this check, under
    // 17 ms over a whole drain (docs/benchmarks.md, 2026-12-04).
    const anyQueued = async () => (await observer.query("SELECT 1 FROM signals WHERE status = 'QUEUED' LIMIT 1")).rows.length > 0
    let worker: ReturnType<typeof spawnCli> | undefined
    const drainCpu = cpuMeter(() => ({ worker: worker?.pid }))
    const spawned = performance.now()
    worker = spawnCli(["worker"], "ignore", workerNodeArgs)
    let drained = NaN
    while (performance.now() - spawned < 600_000) {
      if (!(await anyQueued())) {
        drained = (performance.now() - spawned) / 1000
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const drainRate = Math.round(backlogCount / drained)
    report.drain = { signals: backlogCount, secondsFromSpawn: round(drained), rate: drainRate, ofYardstick: ofYardstick(drainRate), cpuMsPerSignal: drainCpu.msPer(backlogCount) }
    progress(`drain: ${JSON.stringify(report.drain)}`)
    if (vacuum) {
      // What autovacuum would do after a drain (this machine's server runs with it off): the drained backlog's
      // dead rows and the queue indexes' stale entries gone, statistics taken. Untimed.
      const vacuumStarted = performance.now()
      await observer.query("VACUUM ANALYZE")
      report.vacuumSeconds = round((performance.now() - vacuumStarted) / 1000)
    }

    // 5. The check at `--check-connections`.
    const checker = apiClient(port, apiKey, checkConnections)
    const checkCpu = cpuMeter(() => ({ serve: serve.pid, worker: worker?.pid }))
    const checks = await load(checkCount, checkConnections, async (index) => {
      const answer = await checker.request("POST", "/entitlements/check", {
        customerId: customerOf(index).customerId,
        meter: "CREDIT",
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
      })
      if (answer.status !== 200) throw new Error(`check: ${answer.status} ${JSON.stringify(answer.json)}`)
    })
    report.check = {
      checks: checkCount,
      connections: checkConnections,
      rate: checks.rate,
      ofYardstick: ofYardstick(checks.rate),
      p50Ms: round(checks.p50, 1),
      p99Ms: round(checks.p99, 1),
      cpuMsPerCheck: checkCpu.msPer(checkCount)
    }
    checker.close()
    progress(`check: ${JSON.stringify(report.check)}`)

    /**
     * Freshness as the database saw it, where the server keeps commit timestamps (`track_commit_timestamp`,
     * off by default): each signal from its intake (`received_at`) to the commit of the batch that priced it
     * (the commit timestamp of its row's last version), by the hot customer and the others with `--mix hot`.
     * Read after the run, so it costs the run nothing; beside the observer's figures it tells the service's
     * part of a signal's wait from the part a client on this same machine adds (its own queue of answers and
     * announcements).
     */
    const receivedToCommitted = async (since: Date) => {
      const enabled = (await observer.query("SELECT current_setting('track_commit_timestamp') = 'on' AS on")).rows[0].on
      if (!enabled) return undefined
      const { rows } = await observer.query(
        `SELECT CASE WHEN $2::text IS NULL THEN 'all' WHEN customer_id = $2 THEN 'hot' ELSE 'others' END AS grp,
                percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
                max(ms) AS max
         FROM (SELECT customer_id, extract(epoch FROM pg_xact_commit_timestamp(xmin) - received_at) * 1000 AS ms
               FROM signals WHERE received_at >= $1 AND status = 'PROCESSED') priced
         GROUP BY ${hot ? "ROLLUP (1)" : "1"}`,
        [since, hot ? customers[0] : null]
      )
      const stats = (row: any) => ({ p50Ms: round(Number(row.p50), 1), p99Ms: round(Number(row.p99), 1), maxMs: round(Number(row.max), 1) })
      return Object.fromEntries(rows.map((row) => [row.grp === null ? "all" : row.grp, stats(row)]))
    }

    // 6. Freshness at R/2 (with the hot customer: the others alone first, at their share).
    const arrivalsAt = async (rate: number, signalAt: (index: number) => { customerId: string; group: string }) => {
      const cpu = cpuMeter(() => ({ serve: serve.pid, worker: worker?.pid }))
      const startedAt = (await observer.query("SELECT clock_timestamp() AS t")).rows[0].t as Date
      const run = await openLoopArrivals({
        client: api,
        observer,
        organizationId,
        rate,
        seconds,
        watch: "listen",
        databaseUrl,
        signal: (index) => {
          const { customerId, group } = signalAt(index)
          return { ...credit(customerId), group }
        }
      })
      const cpuMsPerSignal = cpu.msPer(run.arrivals.length)
      // The batches that priced them: each is one transaction, so one processed_at (its now()) a batch.
      const [shape] = (await observer.query(
        `SELECT count(*)::int AS signals, count(DISTINCT processed_at)::int AS batches FROM signals
         WHERE received_at >= $1 AND status = 'PROCESSED'`,
        [startedAt]
      )).rows
      const batches = { count: shape.batches, signalsPerBatch: round(shape.signals / Math.max(1, shape.batches), 1) }
      const committed = await receivedToCommitted(startedAt)
      const groups = [...new Set(run.arrivals.map((a) => a.group))]
      return {
        rate,
        achievedRate: run.achievedRate,
        neverSeen: run.neverSeen,
        cpuMsPerSignal,
        batches,
        ...(committed === undefined ? {} : { receivedToCommitted: committed }),
        ...Object.fromEntries(groups.map((group) => [group, freshnessOf(run.arrivals.filter((a) => a.group === group))]))
      }
    }
    if (hot) {
      // The same load without a hot customer: the same rate spread evenly over the same 1 + `others` customers.
      const withoutHot = await arrivalsAt(intake.rate / 2, (index) => {
        const position = index % customerCount
        return { customerId: customers[position]!, group: position === 0 ? "hot" : "others" }
      })
      progress(`freshness, the same rate spread evenly: ${JSON.stringify(withoutHot)}`)
      const withHot = await arrivalsAt(intake.rate / 2, customerOf)
      progress(`freshness, with the hot customer: ${JSON.stringify(withHot)}`)
      const p99 = (run: Record<string, any>) => run.others.acceptedToPriced.p99Ms as number
      report.freshness = { withoutHot, withHot, othersP99WithOverWithout: round(p99(withHot) / p99(withoutHot)) }
    } else {
      report.freshness = await arrivalsAt(intake.rate / 2, customerOf)
      progress(`freshness: ${JSON.stringify(report.freshness)}`)
    }

    const stopped = exitOf(worker)
    worker.kill("SIGTERM")
    const timer = setTimeout(() => worker?.kill("SIGKILL"), 10_000)
    await stopped
    clearTimeout(timer)
    api.close()
  } finally {
    await stopProcesses(running)
    await observer.end().catch(() => {})
    if (process.env.BENCH_KEEP_DATABASE === undefined) await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    else progress(`database kept: ${databaseName}`)
    await admin.end()
  }
  report.loadAverageAfter = os.loadavg().map((v) => round(v))
  printReport(report, reportFile)
}

runBench(main, running)
