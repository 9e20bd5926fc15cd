/**
 * bench/freshness: how soon a signal's effect on balances is visible, with one
 * worker, while signals arrive at half of the single-signal intake rate
 * (issue 26). Run by hand against real PostgreSQL (never by `npm test`):
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/freshness.ts \
 *     [--customers 16] [--connections 64] [--yardstick 20000] [--intake 6000] [--seconds 10] \
 *     [--prefer] [--rate N] [--root OTHER_CHECKOUT] [--report results.json] [--worker-log FILE]
 *
 * In one run, on a database of its own (dropped at the end), every process
 * started through the checkout's bin (`--root`: another checkout, built, to
 * compare with):
 *  1. the yardstick: plain single-row INSERTs (bench/support.ts);
 *  2. `billing serve --no-worker`, a credit, a plan, `--customers` customers each
 *     with a purchase;
 *  3. the single-signal intake rate R: `--intake` credit signals posted to
 *     `/signal/credit` over `--connections` keep-alive connections (no worker);
 *  4. one looping `billing worker` spawned; once it has priced that queue,
 *     signals are sent open-loop at R/2 (or `--rate N`, to compare checkouts at one load) (signal i at i/(R/2) s) for `--seconds`,
 *     over the customers in turn. For each: sent, its 202, and when it was first
 *     seen priced (its inbox row no longer QUEUED, which commits with its balance
 *     moves) by a poller outside the service's processes (one SELECT of the
 *     signals still unseen, every 5 ms): 202 -> priced p50, p99, max;
 *  5. with `--prefer` (a checkout that has it): the same arrivals sent with
 *     `Prefer: wait=10`: the answer's time after sending (request sent -> priced
 *     result in hand: what a client waiting for the price meets), and how many
 *     were answered 200.
 */
import { freshnessOf, openLoopArrivals } from "./arrivals.ts"
import { apiClient, benchCustomer, benchDatabase, buyPlan, chatCreditPlan, billingProcesses, flag, load, createBenchDatabase, printReport, reportHead, runBench, secondsUntil, startServedBench, stopProcesses, exitOf, textFlag } from "./support.ts"
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"

const customerCount = flag("customers", 16)
const connections = flag("connections", 64)
const yardstickCount = flag("yardstick", 20_000)
const intakeCount = flag("intake", 6_000)
const seconds = flag("seconds", 10)
const withPrefer = process.argv.includes("--prefer")
// A fixed arrival rate instead of half the measured intake, to compare two checkouts at the same load.
const fixedRate = flag("rate", 0)
const reportFile = textFlag("report")
// The looping worker's log lines (one a batch round), for a closer look at where the time goes.
const workerLog = textFlag("worker-log")
const root = textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url))

const { adminUrl, databaseName, databaseUrl } = benchDatabase("freshness", "billing_bench_fresh_")
const env = { ...process.env, DATABASE_URL: databaseUrl }
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits

const { running, spawnCli, cli } = billingProcesses(root, env)

const main = async () => {
  const { admin, observer } = await createBenchDatabase(adminUrl, databaseName, databaseUrl)
  const report = reportHead(root)
  try {
    const { api, organizationId, yardstick, port, apiKey } = await startServedBench({
      cli, spawnCli, observer, databaseUrl, yardstickCount, connections, progress
    })
    report.yardstick = { rows: yardstickCount, rate: yardstick.rate }

    const planId = await chatCreditPlan(api)
    const customers: Array<string> = []
    await load(customerCount, 8, async (index) => {
      const customerId = await benchCustomer(api, index)
      await buyPlan(api, customerId, planId)
      customers[index] = customerId
    })
    let sent = 0
    const signal = () => {
      const index = sent++
      return {
        customerId: customers[index % customers.length]!,
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 },
        idempotencyKey: `k-${index}`
      }
    }

    // The single-signal intake rate of this run, nothing pricing meanwhile.
    const intake = await load(intakeCount, connections, async () => {
      const answer = await api.request("POST", "/signal/credit", signal())
      if (answer.status !== 202) throw new Error(`signal: ${answer.status} ${JSON.stringify(answer.json)}`)
    })
    const arrivalRate = fixedRate > 0 ? fixedRate : intake.rate / 2
    report.intake = { signals: intakeCount, connections, rate: intake.rate, ofYardstick: round(intake.rate / yardstick.rate, 2) }
    progress(`single-signal intake: ${intake.rate}/s; arrivals at ${arrivalRate}/s`)

    const queued = async () =>
      Number((await observer.query("SELECT count(*) AS n FROM signals WHERE status = 'QUEUED'")).rows[0].n)
    const worker = spawnCli(["worker"], workerLog === undefined ? "ignore" : "pipe")
    if (workerLog !== undefined) worker.stdout!.pipe(fs.createWriteStream(workerLog))
    await secondsUntil(async () => (await queued()) === 0, 300_000)
    progress("worker started; the intake's queue is priced")

    // Requests that wait for their price each hold a connection meanwhile: as many as arrive in the wait.
    const waiting = apiClient(port, apiKey, 20_000)
    const arrivals = async (client: typeof api, headers: Record<string, string>) => {
      const run = await openLoopArrivals({
        client,
        observer,
        organizationId,
        rate: arrivalRate,
        seconds,
        headers,
        signal: () => ({ path: "/signal/credit", body: signal(), group: "all" })
      })
      return { arrivalRate, achievedRate: run.achievedRate, ...freshnessOf(run.arrivals), neverSeen: run.neverSeen }
    }

    report.freshness = await arrivals(api, {})
    progress(`freshness: ${JSON.stringify(report.freshness)}`)
    if (withPrefer) {
      report.prefer = await arrivals(waiting, { prefer: "wait=10" })
      progress(`with Prefer: wait=10: ${JSON.stringify(report.prefer)}`)
    }
    const stopped = exitOf(worker)
    worker.kill("SIGTERM")
    const timer = setTimeout(() => worker.kill("SIGKILL"), 10_000)
    await stopped
    clearTimeout(timer)
    api.close()
    waiting.close()
  } finally {
    await stopProcesses(running)
    await observer.end().catch(() => {})
    await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.end()
  }
  report.loadAverageAfter = os.loadavg().map((v) => round(v, 2))
  printReport(report, reportFile)
}

runBench(main, running)
