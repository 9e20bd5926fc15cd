import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import pg from "pg"
import { randomToken } from "../src/ids.ts"

/** What the benchmarks share: their command-line flags, a bounded-concurrency load runner with latency percentiles, the yardsticks, an API client. */

/** `--name N` on the command line, or `fallback`. */
export const flag = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? Number(process.argv[index + 1]) : fallback
}

/**
 * A bench's own database, named `prefix` and a random token, on the PostgreSQL
 * of DATABASE_URL (an admin connection); without DATABASE_URL the bench stops.
 */
export const benchDatabase = (bench: string, prefix: string) => {
  const adminUrl = process.env.DATABASE_URL
  if (!adminUrl) {
    process.stderr.write(`bench/${bench} needs DATABASE_URL (an admin connection to PostgreSQL)\n`)
    process.exit(2)
  }
  const databaseName = `${prefix}${randomToken(5)}`
  const url = new URL(adminUrl)
  url.pathname = `/${databaseName}`
  return { adminUrl, databaseName, databaseUrl: url.toString() }
}

/** `--name TEXT` on the command line, or undefined. */
export const textFlag = (name: string) => {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? process.argv[index + 1] : undefined
}

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

/** Runs `count` tasks `concurrency` at a time; the rate per second, per-task latency percentiles in ms, and the elapsed seconds. */
export const load = async (count: number, concurrency: number, task: (index: number) => Promise<void>) => {
  const latencies = new Array<number>(count)
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const index = next++
      const t0 = performance.now()
      await task(index)
      latencies[index] = performance.now() - t0
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const sorted = [...latencies].sort((a, b) => a - b)
  return { rate: Math.round(count / seconds), p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), seconds }
}

/**
 * The yardstick every figure is stated against (docs/benchmarks.md): plain
 * single-row INSERTs of a signal-sized JSONB row through node-postgres, a pool
 * of 10, 64 concurrent callers, into a table without any index. Run in the
 * same minutes as what it is compared with, on the same database.
 */
export const plainInsertYardstick = async (url: string, count: number, callers = 64) => {
  const table = `bench_yardstick_${process.pid}`
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  try {
    await pool.query(`CREATE TABLE ${table} (id text, body jsonb)`)
    const body = JSON.stringify({ agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } })
    const result = await load(count, callers, async (index) => {
      await pool.query(`INSERT INTO ${table} (id, body) VALUES ($1, $2::jsonb)`, [`y${index}`, body])
    })
    await pool.query(`DROP TABLE ${table}`)
    return result
  } finally {
    await pool.end()
  }
}

/** A CLI process's exit code and output (stderr: its last 8,000 characters). */
export interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Spawns `node [--import preload] [nodeArgs] bin/billing.mjs ...args` (the node
 * process itself, so its pid is the CLI's), keeping every child in `running`
 * so a bench can end them all on Ctrl-C. With `statsFile`, the statement
 * counter (bench/count-statements.mjs) appends its line there on exit.
 */
export const cliProcesses = (options: {
  readonly root: string
  readonly cliPath: string
  readonly preload: string
  readonly env: NodeJS.ProcessEnv
  readonly nodeArgs: ReadonlyArray<string>
}) => {
  const running = new Set<ChildProcess>()
  const spawnCli = (args: ReadonlyArray<string>, statsFile?: string) => {
    const child = spawn(
      process.execPath,
      [...(statsFile ? ["--import", options.preload] : []), ...options.nodeArgs, options.cliPath, ...args],
      {
        cwd: options.root,
        env: statsFile ? { ...options.env, BENCH_STATEMENTS_FILE: statsFile } : options.env,
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    running.add(child)
    return child
  }
  const finished = (child: ChildProcess) =>
    new Promise<Finished>((resolve) => {
      let stdout = ""
      let stderr = ""
      child.stdout?.on("data", (chunk) => (stdout += chunk))
      child.stderr?.on("data", (chunk) => (stderr = (stderr + chunk).slice(-8000)))
      child.on("close", (code) => {
        running.delete(child)
        resolve({ code, stdout, stderr })
      })
    })
  return { running, spawnCli, finished }
}

/** A spawned process's exit code and stdout (a pipe, or nothing), once it has exited. */
export const exitOf = (child: ChildProcess) =>
  new Promise<{ code: number | null; stdout: string }>((resolve) => {
    let stdout = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    if (child.exitCode !== null) resolve({ code: child.exitCode, stdout })
    else child.on("exit", (code) => resolve({ code, stdout }))
  })

/**
 * `seconds` of POSTs of `body` to `path` from wrk (Debian's package; one
 * thread, `connections` connections; bench/wrk-post.lua), round-robin over
 * `customers` (`{customer}` in the body): a load generator in C that takes a
 * fraction of the CPU a node:http client takes from the two cores it shares
 * with the server and PostgreSQL. `unexpected` counts the 200 answers that
 * lack `expected` (when given).
 */
export const wrkLoad = async (options: {
  readonly url: string
  readonly apiKey: string
  readonly path: string
  readonly body: string
  readonly expected?: string
  readonly customers: ReadonlyArray<string>
  readonly connections: number
  readonly seconds: number
}) => {
  const script = new URL("wrk-post.lua", import.meta.url).pathname
  const child = spawn("wrk", [
    "-t1", `-c${options.connections}`, `-d${options.seconds}s`, "-s", script, options.url, "--",
    `Bearer ${options.apiKey}`, options.path, options.body, options.expected ?? "", ...options.customers
  ], { stdio: ["ignore", "pipe", "inherit"] })
  const spawnFailed = new Promise<never>((_, reject) => child.on("error", (error) => reject(new Error(`wrk: ${error.message} (install Debian's wrk)`))))
  const { code, stdout } = await Promise.race([exitOf(child), spawnFailed])
  const line = stdout.split("\n").find((text) => text.startsWith("WRK "))
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit ${code}): ${stdout}`)
  const result = JSON.parse(line.slice(4)) as {
    requests: number; seconds: number; statusErrors: number; connectErrors: number; readErrors: number
    writeErrors: number; timeouts: number; p50Ms: number; p99Ms: number; maxMs: number; unexpected: number
  }
  return { ...result, rate: (result.requests - result.statusErrors) / result.seconds }
}

/**
 * The bench's `billing` processes: `spawnCli(args)` starts one in `env` from
 * `root` (its stdout ignored or piped, node's own flags before the bin), `running` holds those not exited yet
 * (to stop at the end), `cli(args)` runs one to its end for its output.
 */
export const billingProcesses = (root: string, env: NodeJS.ProcessEnv) => {
  const running = new Set<ChildProcess>()
  const spawnCli = (args: ReadonlyArray<string>, stdout: "ignore" | "pipe" = "ignore", nodeArgs: ReadonlyArray<string> = []) => {
    const child = spawn(process.execPath, [...nodeArgs, `${root.replace(/\/$/, "")}/bin/billing.mjs`, ...args], { cwd: root, env, stdio: ["ignore", stdout, "inherit"] })
    running.add(child)
    child.on("exit", () => running.delete(child))
    return child
  }
  return { running, spawnCli, cli: cliOutputOf(spawnCli) }
}

/** `billing ...args` through a bench's `spawnCli`, its stdout piped: the output, or a throw when it fails. */
export const cliOutputOf =
  (spawnCli: (args: ReadonlyArray<string>, stdout: "pipe") => ChildProcess) => async (args: ReadonlyArray<string>) => {
    const result = await exitOf(spawnCli(args, "pipe"))
    if (result.code !== 0) throw new Error(`billing ${args.join(" ")} failed (exit ${result.code})`)
    return result.stdout
  }

/**
 * The batch yardstick: the same rows as `plainInsertYardstick`, `rowsPerStatement`
 * to one multi-row INSERT, `statements` of them from 64 callers over a pool of 10:
 * what PostgreSQL itself takes when rows arrive in batches.
 */
export const multiRowInsertYardstick = async (url: string, statements: number, rowsPerStatement: number, callers = 64) => {
  const table = `bench_batch_yardstick_${process.pid}`
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  try {
    await pool.query(`CREATE TABLE ${table} (id text, body jsonb)`)
    const body = JSON.stringify({ agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } })
    const placeholders = Array.from({ length: rowsPerStatement }, (_, i) => `($${2 * i + 1}, $${2 * i + 2}::jsonb)`).join(", ")
    const result = await load(statements, callers, async (index) => {
      const values = Array.from({ length: rowsPerStatement }, (_, i) => [`y${index}-${i}`, body]).flat()
      await pool.query(`INSERT INTO ${table} (id, body) VALUES ${placeholders}`, values)
    })
    await pool.query(`DROP TABLE ${table}`)
    return { ...result, rate: Math.round((statements * rowsPerStatement) / result.seconds) }
  } finally {
    await pool.end()
  }
}

/** An answer of the API: its status and parsed JSON body. */
export interface Answer {
  readonly status: number
  readonly json: any
}

/**
 * A client of the API over node:http with a keep-alive agent (lighter than
 * fetch: it shares the machine's two cores with the server and PostgreSQL).
 */
export const apiClient = (port: number, apiKey: string, maxSockets: number) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets })
  const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body)
      const req = http.request({
        host: "127.0.0.1",
        port,
        path: `/api/v1${path}`,
        method,
        agent,
        headers: {
          ...headers,
          authorization: `Bearer ${apiKey}`,
          ...(payload === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(payload) })
        }
      }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk) => chunks.push(chunk))
        res.on("end", () => {
          try {
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
          } catch (error) {
            reject(error)
          }
        })
      })
      req.on("error", reject)
      req.end(payload)
    })
  return { request, close: () => agent.destroy() }
}

/** Polls `ready` every 10 ms until it holds or `timeoutMs` passes; the seconds it took, NaN on time-out. */
export const secondsUntil = async (ready: () => Promise<boolean>, timeoutMs = 30_000) => {
  const started = performance.now()
  while (performance.now() - started < timeoutMs) {
    try {
      if (await ready()) return (performance.now() - started) / 1000
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return NaN
}

type BenchApi = ReturnType<typeof apiClient>

/**
 * Over the API: the credit "chat" (gpt-4o) and the plan "Bench" selling
 * `allowance` of it ADVANCE (never used up by default), with an ARREAR credit
 * component for what goes past a smaller allowance. The plan's id.
 */
export const chatCreditPlan = async (api: BenchApi, allowance = 1_000_000_000): Promise<string> => {
  const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
  const credit = (await api.request("POST", "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: bundle })).json
  const creditId = credit.result.credit.id
  return (await api.request("POST", "/plans", {
    name: "Bench",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: allowance },
      ...(allowance < 1_000_000_000 ? [{ type: "CREDIT", billingMode: "ARREAR", creditId }] : [])
    ]
  })).json.result.plan.id
}

/** Over the API: customer `index` (`Customer N`, `cN@example.com`); its id. */
export const benchCustomer = async (api: BenchApi, index: number, headers?: Record<string, string>): Promise<string> => {
  const created = await api.request("POST", "/customers", { name: `Customer ${index}`, email: `c${index}@example.com` }, headers)
  if (created.status !== 201) throw new Error(`customer: ${created.status} ${JSON.stringify(created.json)}`)
  return created.json.result.customer.id
}

/** Over the API: `planId` sold to `customerId`, or a throw with the answer. */
export const buyPlan = async (api: BenchApi, customerId: string, planId: string, headers?: Record<string, string>): Promise<void> => {
  const bought = await api.request("POST", "/purchases", { customerId, planId }, headers)
  if (bought.status !== 201) throw new Error(`purchase: ${bought.status} ${JSON.stringify(bought.json)}`)
}


/** Stops a bench's processes still running: SIGTERM, then SIGKILL half a second later. */
export const stopProcesses = async (running: ReadonlySet<ChildProcess>) => {
  for (const child of running) child.kill("SIGTERM")
  await new Promise((resolve) => setTimeout(resolve, 500))
  for (const child of running) child.kill("SIGKILL")
}

/** A bench's report: printed as JSON, and written to `file` when one is given. */
export const printReport = (report: unknown, file: string | undefined) => {
  const text = JSON.stringify(report, null, 2)
  process.stdout.write(`${text}\n`)
  if (file) fs.writeFileSync(file, `${text}\n`)
}

/** Runs a bench's `main`; on Ctrl-C or a failure its processes are killed, the failure printed, the exit code non-zero. */
export const runBench = (main: () => Promise<void>, running: ReadonlySet<ChildProcess>) => {
  process.on("SIGINT", () => {
    for (const child of running) child.kill("SIGKILL")
    process.exit(130)
  })
  main().catch((error) => {
    for (const child of running) child.kill("SIGKILL")
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  })
}

/**
 * A port for the bench's `billing serve`, drawn below Linux's ephemeral range
 * (32768-60999): a port drawn from that range was sometimes held by one of the
 * bench's own outgoing connections, and serve refused to start (2026-12-04).
 */
export const benchPort = () => 20000 + Math.floor(Math.random() * 12000)

/**
 * The start both open-loop benches share, on a bench database already created:
 * `billing migrate`, an organisation, the yardstick, then `billing serve
 * --no-worker` on a random port, waited for. `observer` is connected here.
 */
export const startServedBench = async (options: {
  readonly cli: (args: ReadonlyArray<string>) => Promise<string>
  readonly spawnCli: (args: ReadonlyArray<string>) => ChildProcess
  readonly observer: pg.Client
  readonly databaseUrl: string
  readonly yardstickCount: number
  readonly connections: number
  readonly progress: (text: string) => void
}) => {
  const { cli, connections, databaseUrl, observer, progress, spawnCli, yardstickCount } = options
  await cli(["migrate"])
  await observer.connect()
  const { apiKey, organization } = JSON.parse(await cli(["org", "create", "--name", "Bench", "--json"]))
  const organizationId: string = organization?.id ?? (await observer.query("SELECT id FROM organizations LIMIT 1")).rows[0].id
  const yardstick = await plainInsertYardstick(databaseUrl, yardstickCount)
  progress(`yardstick: ${yardstick.rate} single-row INSERTs/s`)
  const port = benchPort()
  const api = apiClient(port, apiKey, connections)
  const serve = spawnCli(["serve", "--no-worker", "--port", String(port)])
  await secondsUntil(async () => (await api.request("GET", "/customers?limit=1")).status === 200, 60_000)
  return { apiKey, organizationId, yardstick, port, api, serve }
}

/**
 * A bench's own database created on the server of `adminUrl`: `admin`
 * (connected) drops it at the end, `observer` is a client of it, not yet
 * connected (`startServedBench` connects it once it is migrated).
 */
export const createBenchDatabase = async (adminUrl: string, databaseName: string, databaseUrl: string) => {
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE "${databaseName}"`)
  return { admin, observer: new pg.Client({ connectionString: databaseUrl }) }
}

/** The head of a bench's report: when, what (`extra`), which checkout, the load and the machine. */
export const reportHead = (root: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  date: new Date().toISOString(),
  ...extra,
  root,
  loadAverage: os.loadavg().map((v) => Math.round(v * 100) / 100),
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model }
})

const roundTo = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits

/**
 * CPU seconds (user + system) of one process from /proc; with `reaped`, its
 * exited children's too (the postmaster's: a backend that exits passes its
 * time to it, so the sum over PostgreSQL's processes never loses a
 * connection closed during a step).
 */
const TICKS = 100
const cpuOfStat = (stat: string, reaped = false) => {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const own = Number(fields[11]) + Number(fields[12])
  return (reaped ? own + Number(fields[13]) + Number(fields[14]) : own) / TICKS
}
/** User plus system CPU seconds of a process (Linux /proc; 0 elsewhere or once it is gone). */
export const cpuOf = (pid: number | undefined) => {
  try {
    return pid === undefined ? 0 : cpuOfStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return 0
  }
}
const postgresCpu = () =>
  fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).reduce((sum, pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      return stat.includes("(postgres)") ? sum + cpuOfStat(stat, true) : sum
    } catch {
      return sum
    }
  }, 0)

/**
 * CPU of the named processes and of PostgreSQL from now: `msPer(units)` gives
 * the ms of CPU a unit since, in all and by process.
 */
export const cpuMeter = (pids: () => Record<string, number | undefined>) => {
  const sample = (): Record<string, number> => ({ ...Object.fromEntries(Object.entries(pids()).map(([name, pid]) => [name, cpuOf(pid)])), postgres: postgresCpu() })
  const start = sample()
  return {
    msPer: (units: number) => {
      const now = sample()
      const byProcess = Object.fromEntries(Object.entries(now).map(([name, seconds]) => [name, roundTo(((seconds - (start[name] ?? 0)) * 1000) / units, 3)]))
      return { total: roundTo(Object.values(byProcess).reduce((a, b) => a + b, 0), 3), byProcess }
    }
  }
}
