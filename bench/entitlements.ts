/**
 * bench/entitlements: the check before spending (`POST /entitlements/check`,
 * issue 26) against real PostgreSQL, beside the same-run yardstick. Run by
 * hand, never by `npm test`; results in docs/benchmarks.md.
 *
 *   npm run build && DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/entitlements.ts \
 *     [--requests 20000] [--connections 64] [--customers 64] [--queued 5] [--yardstick 20000]
 *
 * In one run, on a database of its own (dropped at the end):
 *  1. the yardstick: plain single-row INSERTs through node-postgres, a pool of 10,
 *     64 callers, a table without index (bench/support.ts `plainInsertYardstick`);
 *  2. `billing serve --no-worker` through the package's bin; over the API a credit,
 *     a plan with an ADVANCE allowance of it, `--customers` customers with a
 *     purchase each and `--queued` credit signals each left QUEUED (no worker
 *     runs), so every check prices a queue in memory;
 *  3. `check`: `--requests` non-reserving CREDIT checks over `--connections`
 *     keep-alive connections, round-robin over the customers: rate, p50, p99;
 *  4. `reserve`: the same with `reserve` (a transaction, an advisory lock per
 *     customer and one INSERT each): rate, p50, p99;
 *  5. beside them, in the same run and through the same door: `GET /customers/{id}/balances`,
 *     a read route the API already had (five statements), as many requests as the check;
 *  6. the machine's load average before and after, since other work shares the cores.
 *
 * `--routes check,reserve,balances` picks the phases measured (all three unless told).
 * `--wrk-seconds N` (needs Debian's wrk) adds the check loaded for N seconds by wrk
 * (bench/wrk-post.lua, `--connections` connections), a load generator in C:
 * the node:http client of the other phases takes a share of the two cores it
 * shares with the server and PostgreSQL that a caller on another machine would not.
 * `--cpu-prof DIR` runs the server under `node --cpu-prof`, its profile written to DIR when it stops.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { benchPort, apiClient, benchCustomer, benchDatabase, buyPlan, chatCreditPlan, cliOutputOf, flag, plainInsertYardstick, load, secondsUntil, exitOf, textFlag, wrkLoad } from "./support.ts"

const requests = flag("requests", 20_000)
const connections = flag("connections", 64)
const customerCount = flag("customers", 64)
const queuedEach = flag("queued", 5)
const yardstickCount = flag("yardstick", 20_000)

const routes = textFlag("routes")?.split(",")
const measured = (route: string) => routes === undefined || routes.includes(route)
const skipped = { rate: 0, p50: 0, p99: 0 }
const wrkSeconds = flag("wrk-seconds", 0)

const root = fileURLToPath(new URL("..", import.meta.url))
const cliPath = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const { adminUrl, databaseName, databaseUrl } = benchDatabase("entitlements", "billing_bench_entitlements_")
const env = { ...process.env, DATABASE_URL: databaseUrl }
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

const cpuProfileDir = textFlag("cpu-prof")
const spawnCli = (args: ReadonlyArray<string>, stdout: "ignore" | "pipe" = "ignore", nodeArgs: ReadonlyArray<string> = []) =>
  spawn(process.execPath, [...nodeArgs, cliPath, ...args], { cwd: root, env, stdio: ["ignore", stdout, "inherit"] })
const cli = cliOutputOf(spawnCli)

const main = async () => {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE "${databaseName}"`)
  let server: ChildProcess | undefined
  try {
    const loadBefore = os.loadavg()
    await cli(["migrate"])
    const { apiKey } = JSON.parse(await cli(["org", "create", "--name", "Bench", "--json"]))
    const yardstick = await plainInsertYardstick(databaseUrl, yardstickCount)
    progress(`yardstick: ${yardstick.rate} single-row INSERTs/s`)

    const port = benchPort()
    const api = apiClient(port, apiKey, connections)
    server = spawnCli(
      ["serve", "--no-worker", "--port", String(port)],
      "ignore",
      cpuProfileDir === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", cpuProfileDir]
    )
    await secondsUntil(async () => (await api.request("GET", "/customers?limit=1")).status === 200)

    const planId = await chatCreditPlan(api)
    const customers: Array<string> = []
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
    await load(customerCount, 8, async (index) => {
      const customerId = await benchCustomer(api, index)
      await buyPlan(api, customerId, planId)
      for (let i = 0; i < queuedEach; i++) await api.request("POST", "/signal/credit", { customerId, agentKey: "chat", usage })
      customers[index] = customerId
    })
    const check = (index: number, reserve: boolean) =>
      api.request("POST", "/entitlements/check", {
        customerId: customers[index % customers.length],
        meter: "CREDIT",
        agentKey: "chat",
        usage,
        ...(reserve ? { reserve: { ttlSeconds: 60 } } : {})
      })
    const expectAllowed = async (index: number, reserve: boolean) => {
      const answer = await check(index, reserve)
      if (answer.status !== 200 || answer.json.result.allowed !== true) {
        throw new Error(`check: ${answer.status} ${JSON.stringify(answer.json)}`)
      }
    }
    const first = (await check(0, false)).json.result
    progress(`a check: ${JSON.stringify(first)}`)
    if (Number(first.pending) === 0 && queuedEach > 0) throw new Error("the queued signals were priced: is a worker running?")

    await load(1000, connections, (index) => expectAllowed(index, false))
    const checks = measured("check") ? await load(requests, connections, (index) => expectAllowed(index, false)) : skipped
    progress(`check: ${checks.rate}/s, p50 ${checks.p50.toFixed(1)} ms, p99 ${checks.p99.toFixed(1)} ms`)
    const wrkChecks = wrkSeconds === 0 ? undefined : await wrkLoad({
      url: `http://127.0.0.1:${port}`,
      apiKey,
      path: "/api/v1/entitlements/check",
      body: JSON.stringify({ customerId: "{customer}", meter: "CREDIT", agentKey: "chat", usage }),
      expected: '"allowed":true',
      customers,
      connections,
      seconds: wrkSeconds
    })
    if (wrkChecks !== undefined) {
      if (wrkChecks.statusErrors + wrkChecks.unexpected > 0) throw new Error(`wrk: ${JSON.stringify(wrkChecks)}`)
      progress(`check (wrk): ${Math.round(wrkChecks.rate)}/s, p50 ${wrkChecks.p50Ms.toFixed(1)} ms, p99 ${wrkChecks.p99Ms.toFixed(1)} ms`)
    }
    const reserves = measured("reserve")
      ? await load(Math.min(requests, 10_000), connections, (index) => expectAllowed(index, true))
      : skipped
    progress(`reserve: ${reserves.rate}/s, p50 ${reserves.p50.toFixed(1)} ms, p99 ${reserves.p99.toFixed(1)} ms`)
    const balances = measured("balances")
      ? await load(requests, connections, async (index) => {
        const answer = await api.request("GET", `/customers/${customers[index % customers.length]}/balances`)
        if (answer.status !== 200) throw new Error(`balances: ${answer.status}`)
      })
      : skipped
    progress(`balances: ${balances.rate}/s, p50 ${balances.p50.toFixed(1)} ms, p99 ${balances.p99.toFixed(1)} ms`)
    api.close()
    const loadAfter = os.loadavg()

    const line = (what: string, result: { rate: number; p50: number; p99: number }) =>
      `| ${what} | ${result.rate}/s | ${round(result.rate / yardstick.rate)} | ${result.p50.toFixed(1)} ms | ${result.p99.toFixed(1)} ms |`
    process.stdout.write([
      `${connections} connections, ${customerCount} customers with ${queuedEach} queued credit signals each; ` +
      `load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before, ${loadAfter.map((l) => l.toFixed(2)).join(" ")} after; ` +
      `${os.cpus().length} cores`,
      "",
      "| What | Rate | x yardstick | p50 | p99 |",
      "|---|---:|---:|---:|---:|",
      `| yardstick: plain single-row INSERTs, pool 10, ${connections} callers | ${yardstick.rate}/s | 1 | ${yardstick.p50.toFixed(1)} ms | ${yardstick.p99.toFixed(1)} ms |`,
      line("`POST /entitlements/check` (CREDIT, no hold)", checks),
      ...(wrkChecks === undefined ? [] : [
        line("`POST /entitlements/check` (CREDIT, no hold), load from wrk", {
          rate: Math.round(wrkChecks.rate),
          p50: wrkChecks.p50Ms,
          p99: wrkChecks.p99Ms
        })
      ]),
      line("`POST /entitlements/check` with `reserve` (a hold each)", reserves),
      line("`GET /customers/{id}/balances` (reference: an existing read route)", balances),
      ""
    ].join("\n"))
  } finally {
    if (server !== undefined) {
      const done = exitOf(server)
      server.kill("SIGTERM")
      await done
    }
    await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.end()
  }
}

await main()
