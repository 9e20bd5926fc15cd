/**
 * bench/history: does history slow the present? (issue 35, item 6;
 * docs/operations.md "History: retention of the inbox and partitions of the
 * usage log"). Run by hand, never by `npm test`, against real PostgreSQL.
 *
 * Seed only, into a database already migrated, for an organisation of it:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/billing npx tsx bench/history.ts seed --org org_... \
 *     [--signals 10000000] [--customers 10000] [--months 24] [--into archive|inbox] [--chunk 250000]
 *
 * writes `--signals` priced credit signals and their usage rows (one each),
 * spread evenly over the last `--months` months and over `--customers` new
 * customers of the organisation, each signal with its own idempotency key. The
 * rows are made by PostgreSQL itself (`INSERT ... SELECT` over
 * `generate_series`, `--chunk` signals a statement, signal and usage row in one
 * statement), with time-ordered ids as the service makes them. `--into archive`
 * (the default) leaves the database as the history job keeps it: signals older
 * than BILLING_SIGNAL_RETENTION_DAYS (35) in `signals_archive`, the rest in the
 * inbox, and usage months older than BILLING_USAGE_LOG_MONTHS (24) detached;
 * `--into inbox` puts every signal in the inbox and detaches nothing (the
 * service before retention, or a backlog for the job to move: `billing worker
 * --once`). Then VACUUM ANALYZE and a CHECKPOINT, as an old database would have been.
 *
 * The comparison, in one run, on two databases of its own (dropped at the end):
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/history.ts compare \
 *     [--signals 10000000] [--customers 10000] [--months 24] [--into archive|inbox] \
 *     [--intake 20000] [--checks 20000] [--reads 5000] [--connections 64] [--bench-customers 16] \
 *     [--yardstick 10000] [--rounds 3] [--report results.json] [--keep] [--reuse EMPTY_DB,HISTORY_DB] [--no-vacuum]
 *
 *  1. two databases, "empty" and "history", each with `billing migrate`, an
 *     organisation, its own `billing serve --no-worker`, and through the API a
 *     credit plan and `--bench-customers` customers holding it; a warm-up of each,
 *     untimed (1,000 signals taken in and priced, 500 checks and usage-log reads);
 *  2. the history seeded into "history" (as `seed` above, the bench customers
 *     among the customers it is spread over, so the customer read has history too),
 *     then a wait until no autovacuum worker has run on it for 10 s (at most 15 minutes);
 *  3. `--rounds` rounds, each measuring "empty" then "history": single intake
 *     (`--intake` credit signals to /signal/credit over `--connections`
 *     keep-alive connections, each with its own key); the drain of what was just
 *     queued by one looping `billing worker` (spawn to empty queue); the check
 *     (`--checks` POST /entitlements/check); one customer's usage log (`--reads`
 *     GET /signal/usage-log?customerId=..., the first page, and the page of this
 *     month: `from` = the month's first instant). Each measure right after a
 *     yardstick of its own on the same database (bench/support.ts
 *     `plainInsertYardstick`, `--yardstick` rows).
 * Every rate is stated as a ratio to the yardstick beside it; each round gives
 * each measure's ratio with history over its ratio without (1.00: history
 * costs nothing; the issue asks for at least 0.90), and the report their median.
 * Interleaving the two databases, not measuring one before the other, is what
 * makes 10 % visible on a VM whose speed moves by a third between minutes.
 * Each measure also gives the CPU it cost a unit (signal, check, read): serve's,
 * every PostgreSQL process's and, for the drain, its worker's; their ratio,
 * history over empty, does not move with the VM's speed. `--keep` leaves both
 * databases behind; `--reuse EMPTY_DB,HISTORY_DB` measures such a pair again,
 * without a new seed (a new API key for each side's organisation, the bench's
 * customers found by their names). Before each round both databases are
 * vacuumed and analysed, untimed (`--no-vacuum` leaves that out): a server
 * whose autovacuum is off (this machine's is) otherwise carries every round's
 * dead rows and stale statistics into the next, and the measures drift
 * apart round by round for a reason no production server has.
 */
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { randomToken } from "../src/ids.ts"
import { monthsToDetach } from "../src/usage/Partitions.ts"
import {
  apiClient,
  benchCustomer,
  benchDatabase,
  benchPort,
  buyPlan,
  chatCreditPlan,
  billingProcesses,
  cpuMeter,
  cpuOf,
  exitOf,
  flag,
  load,
  plainInsertYardstick,
  secondsUntil,
  textFlag
} from "./support.ts"

const DAY_MS = 86_400_000
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

export interface HistoryOptions {
  /** Priced signals (and usage rows) to write. */
  readonly signals: number
  /** New customers the history is spread over. */
  readonly customers: number
  /** Months back the history reaches (it ends an hour ago). */
  readonly months: number
  /** Where signals older than the retention window go. */
  readonly into: "archive" | "inbox"
  readonly retentionDays: number
  readonly usageLogMonths: number
  /** Signals one statement writes. */
  readonly chunk: number
  /** Customers of the organisation that get history too (the bench's own). */
  readonly alsoCustomers?: ReadonlyArray<string>
}

export interface Seeded {
  readonly signals: number
  readonly inInbox: number
  readonly inArchive: number
  readonly customers: number
  readonly months: number
  readonly detachedMonths: ReadonlyArray<string>
  readonly seconds: number
  readonly signalsPerSecond: number
}

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

/** SQL text: the 10 characters of milliseconds `ms` (a bigint expression) as src/ids.ts writes them. */
const timePart = (ms: string) =>
  Array.from({ length: 10 }, (_, i) => `substr('${ALPHABET}', ((${ms} >> ${5 * (9 - i)}) & 31)::int + 1, 1)`).join(" || ")

/**
 * Writes the history into the database of `databaseUrl` for `organizationId`
 * (see the header). Rows of a chunk: signal n at `start + n * step`, customer
 * n mod the customers, key `h<run>-n`, ids `sig_|msg_|usg_` + that instant +
 * n in hex (unique, and of the service's alphabet).
 */
export const seedHistory = async (databaseUrl: string, organizationId: string, options: HistoryOptions): Promise<Seeded> => {
  const started = performance.now()
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    // A bench's bulk load: a crash loses the seed, never anything else.
    await client.query("SET synchronous_commit = off")
    const run = randomToken(3)
    const [{ now }] = (await client.query<{ now: Date }>("SELECT now() AS now")).rows as [{ now: Date }]
    const end = now.getTime() - 3_600_000
    const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - options.months, now.getUTCDate(), now.getUTCHours())
    const step = (end - start) / options.signals

    await client.query(`CREATE TEMP TABLE history_customers (k int PRIMARY KEY, id text NOT NULL)`)
    await client.query(
      `WITH made AS (
         INSERT INTO customers (organization_id, id, slug, name, email, currency_code, created_at, updated_at)
         SELECT $1, 'cus_' || ${timePart("$2::bigint")} || lpad(to_hex(k), 16, '0'), 'history-' || $3 || '-' || k,
                'History ' || k, 'history-' || $3 || '-' || k || '@example.com', 'USD', to_timestamp($2::bigint / 1000.0),
                to_timestamp($2::bigint / 1000.0)
         FROM generate_series(0, $4::int - 1) k
         RETURNING id
       )
       INSERT INTO history_customers SELECT row_number() OVER (ORDER BY id) - 1, id FROM made`,
      [organizationId, start, run, options.customers]
    )
    const also = options.alsoCustomers ?? []
    for (const [index, id] of also.entries()) {
      await client.query("INSERT INTO history_customers VALUES ($1, $2)", [options.customers + index, id])
    }
    const customerCount = options.customers + also.length

    // Every month's partition exists before its rows (a row of a month without one would go to DEFAULT,
    // and that month's partition could no longer be created).
    for (let month = 0; month <= options.months + 1; month++) {
      const day = new Date(Date.UTC(new Date(start).getUTCFullYear(), new Date(start).getUTCMonth() + month, 1))
      await client.query("SELECT ensure_usage_log_month($1)", [day])
    }

    // Signals before this instant are older than the window (as if the history job had run).
    const cutoff = now.getTime() - options.retentionDays * DAY_MS
    const firstInWindow = Math.min(options.signals, Math.max(0, Math.ceil((cutoff - start) / step)))
    let inArchive = 0
    let written = 0
    const write = async (from: number, to: number, archived: boolean) => {
      const table = archived ? "signals_archive" : "signals"
      await client.query(
        `WITH g AS MATERIALIZED (
           SELECT n, ms, ${timePart("ms")} || lpad(to_hex(n), 16, '0') AS suffix, hc.id AS customer_id
           FROM (SELECT n, ($1::bigint + floor(n * $2::float8))::bigint AS ms FROM generate_series($3::bigint, $4::bigint - 1) n) x
           JOIN history_customers hc ON hc.k = (x.n % $5::int)
         ),
         priced AS (
           INSERT INTO ${table} (organization_id, id, message_id, route, status, customer_id, idempotency_key, agent_key,
                                 body, attempts, usage_log_id, received_at, processed_at${archived ? ", archived_at" : ""})
           SELECT $6, 'sig_' || suffix, 'msg_' || suffix, 'CREDIT', 'PROCESSED', customer_id, 'h' || $7 || '-' || n, 'chat',
                  jsonb_build_object('customerId', customer_id, 'agentKey', 'chat', 'idempotencyKey', 'h' || $7 || '-' || n,
                                     'usage', jsonb_build_object('model', 'gpt-4o', 'inputTokens', 1000, 'outputTokens', 200)),
                  1, 'usg_' || suffix, to_timestamp(ms / 1000.0), to_timestamp(ms / 1000.0) + interval '1 second'
                  ${archived ? `, to_timestamp(ms / 1000.0) + interval '${options.retentionDays} days 10 minutes'` : ""}
           FROM g
         )
         INSERT INTO usage_log (organization_id, id, customer_id, meter, entitlement_id, entitlement_name, agent_key, model,
                                input_tokens, output_tokens, cache_tokens, cache_write_tokens, quantity, provider_cost,
                                customer_cost, billing_mode, balance_remaining, signal_id, message_id, created_at, occurred_at)
         SELECT $6, 'usg_' || suffix, customer_id, 'CREDIT', 'crd_history', 'Chat', 'chat', 'gpt-4o', 1000, 200, 0, 0,
                0.72, 0.0045, 0.0054, 'ADVANCE', 1000, 'sig_' || suffix, 'msg_' || suffix,
                to_timestamp(ms / 1000.0) + interval '1 second', to_timestamp(ms / 1000.0)
         FROM g`,
        [start, step, from, to, customerCount, organizationId, run]
      )
      written += to - from
      if (archived) inArchive += to - from
    }
    for (let from = 0; from < options.signals; from += options.chunk) {
      const to = Math.min(options.signals, from + options.chunk)
      const split = options.into === "archive" ? Math.min(Math.max(firstInWindow, from), to) : from
      if (split > from) await write(from, split, true)
      if (to > split) await write(split, to, false)
      progress(`history: ${written} of ${options.signals} signals written (${Math.round(written / ((performance.now() - started) / 1000))}/s)`)
    }

    const detached: Array<string> = []
    if (options.into === "archive") {
      const attached = await client.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_log'::regclass`
      )
      for (const name of monthsToDetach(attached.rows.map((row) => row.name), now, options.usageLogMonths)) {
        await client.query(`ALTER TABLE usage_log DETACH PARTITION "${name}"`)
        detached.push(name)
      }
    }
    progress("history: VACUUM ANALYZE")
    await client.query("VACUUM ANALYZE customers, signals, signals_archive, usage_log")
    // Its pages written out, as an old database's are: a checkpoint of the whole seed during the next round
    // measured the seed, not the history (intake fell to 0.67 of the empty round's in two runs without it).
    progress("history: CHECKPOINT")
    await client.query("CHECKPOINT")
    const seconds = (performance.now() - started) / 1000
    return {
      signals: written,
      inInbox: written - inArchive,
      inArchive,
      customers: customerCount,
      months: options.months,
      detachedMonths: detached,
      seconds: round(seconds, 1),
      signalsPerSecond: Math.round(written / seconds)
    }
  } finally {
    await client.end()
  }
}

const optionsOf = (alsoCustomers?: ReadonlyArray<string>): HistoryOptions => {
  const into = textFlag("into") ?? "archive"
  if (into !== "archive" && into !== "inbox") throw new Error(`--into takes archive or inbox, not ${into}`)
  if (!(flag("months", 24) >= 1)) throw new Error("--months takes a whole number of months from 1")
  return {
    signals: flag("signals", 10_000_000),
    customers: flag("customers", 10_000),
    months: flag("months", 24),
    into,
    retentionDays: Number(process.env.BILLING_SIGNAL_RETENTION_DAYS ?? 35),
    usageLogMonths: Number(process.env.BILLING_USAGE_LOG_MONTHS ?? 24),
    chunk: flag("chunk", 250_000),
    ...(alsoCustomers === undefined ? {} : { alsoCustomers })
  }
}

const seedCommand = async () => {
  const databaseUrl = process.env.DATABASE_URL
  const organizationId = textFlag("org")
  if (!databaseUrl || !organizationId) {
    process.stderr.write("bench/history.ts seed needs DATABASE_URL (a migrated database) and --org ORG\n")
    process.exit(2)
  }
  const seeded = await seedHistory(databaseUrl, organizationId, optionsOf())
  process.stdout.write(`${JSON.stringify(seeded, null, 2)}\n`)
}

/** One database of the comparison: its own `billing serve`, organisation, bench customers and worker. */
interface Side {
  readonly name: string
  readonly databaseName: string
  readonly databaseUrl: string
  readonly organizationId: string
  readonly customers: ReadonlyArray<string>
  readonly api: ReturnType<typeof apiClient>
  readonly db: pg.Pool
  readonly spawnCli: ReturnType<typeof billingProcesses>["spawnCli"]
  readonly cli: ReturnType<typeof billingProcesses>["cli"]
  readonly running: ReturnType<typeof billingProcesses>["running"]
  readonly serve: ChildProcess
}

const PHASES = ["intake", "drain", "check", "usageLogFirstPage", "usageLogThisMonth"] as const
type Phase = typeof PHASES[number]

const compareCommand = async () => {
  const { adminUrl } = benchDatabase("history", "billing_bench_history_")
  const root = fileURLToPath(new URL("..", import.meta.url))
  const stopChild = async (child: ChildProcess) => {
    const done = exitOf(child)
    child.kill("SIGTERM")
    await done
  }
  const sides: Array<Side> = []
  process.on("SIGINT", () => {
    for (const side of sides) for (const child of side.running) child.kill("SIGKILL")
    process.exit(130)
  })

  const intakeCount = flag("intake", 20_000)
  const checkCount = flag("checks", 20_000)
  const readCount = flag("reads", 5_000)
  const connections = flag("connections", 64)
  const benchCustomers = flag("bench-customers", 16)
  const yardstickCount = flag("yardstick", 10_000)
  const rounds = flag("rounds", 3)
  const reportFile = textFlag("report")
  const keep = process.argv.includes("--keep")
  // In the intake's keys, so that a measure of reused databases never meets an earlier run's keys.
  const runToken = randomToken(4)
  // Two databases kept by an earlier `--keep` run (empty, history): measured again without a new seed.
  const vacuum = !process.argv.includes("--no-vacuum")
  const reuse = textFlag("reuse")?.split(",")
  if (reuse !== undefined && reuse.length !== 2) throw new Error("--reuse takes two database names: EMPTY,HISTORY")

  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  const servers: Array<ChildProcess> = []
  // Every database made and its pool, dropped at the end even when a side failed half-way.
  const created: Array<{ readonly databaseName: string; readonly db: pg.Pool }> = []
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGb: Math.round(os.totalmem() / 2 ** 30) },
    loadBefore: os.loadavg()
  }
  const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
  const monthStart = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)).toISOString()

  const openSide = async (name: string, kept?: string): Promise<Side> => {
    const fresh = benchDatabase("history", "billing_bench_history_")
    const databaseName = kept ?? fresh.databaseName
    const databaseUrl = Object.assign(new URL(fresh.databaseUrl), { pathname: `/${databaseName}` }).toString()
    if (kept === undefined) await admin.query(`CREATE DATABASE "${databaseName}"`)
    // History left in the inbox (`--into inbox`) is the service before retention: its history job must not move it meanwhile.
    const env = { ...process.env, DATABASE_URL: databaseUrl, ...(textFlag("into") === "inbox" ? { BILLING_SIGNAL_RETENTION_DAYS: "0" } : {}) }
    const { running, spawnCli, cli } = billingProcesses(root, env)
    const db = new pg.Pool({ connectionString: databaseUrl, max: 2 })
    created.push({ databaseName, db })
    let organizationId: string
    let apiKey: string
    if (kept === undefined) {
      await cli(["migrate"])
      const made = JSON.parse(await cli(["org", "create", "--name", "History", "--json"]))
      organizationId = made.organization.id
      apiKey = made.apiKey
    } else {
      organizationId = (await db.query("SELECT id FROM organizations ORDER BY created_at LIMIT 1")).rows[0].id
      apiKey = JSON.parse(await cli(["key", "create", "--org", organizationId, "--name", "bench", "--json"])).apiKey
    }
    const port = benchPort()
    const api = apiClient(port, apiKey, connections)
    const serve = spawnCli(["serve", "--no-worker", "--port", String(port)])
    servers.push(serve)
    const side = { name, databaseName, databaseUrl, db, spawnCli, cli, running, serve }
    await secondsUntil(async () => (await api.request("GET", "/customers?limit=1")).status === 200, 120_000)
    const customers: Array<string> = []
    if (kept === undefined) {
      const planId = await chatCreditPlan(api)
      await load(benchCustomers, 8, async (index) => {
        customers[index] = await benchCustomer(api, index)
        await buyPlan(api, customers[index]!, planId)
      })
    } else {
      // The bench's customers are the ones it named "Customer N" (the seed's have no name of that form).
      const named = await db.query("SELECT id, name FROM customers WHERE organization_id = $1 AND name LIKE 'Customer %'", [organizationId])
      for (const row of named.rows) customers[Number(String(row.name).slice("Customer ".length))] = row.id
    }
    // Untimed: the server's and PostgreSQL's first requests of each kind (JIT of Node, plans, caches).
    await load(1000, connections, async (index) => {
      await api.request("POST", "/signal/credit", { customerId: customers[index % customers.length], agentKey: "chat", usage, idempotencyKey: `warm-${runToken}-${index}` })
    })
    await cli(["worker", "--once"])
    await load(500, connections, async (index) => {
      await api.request("POST", "/entitlements/check", { customerId: customers[index % customers.length], meter: "CREDIT", agentKey: "chat", usage })
      await api.request("GET", `/signal/usage-log?customerId=${customers[index % customers.length]}`)
    })
    const opened = { ...side, organizationId, customers, api }
    sides.push(opened)
    return opened
  }

  /**
   * Each measure right after a yardstick of its own, on the side's database: the VM's speed moves by a third
   * between minutes, so a ratio is only as good as the yardstick beside it.
   */
  const measureRound = async (side: Side, round_: number) => {
    const { api, customers, db, spawnCli } = side
    const label = `${side.name} ${round_}`
    const measure = async (
      phase: Phase,
      units: number,
      run: () => Promise<{ rate: number; p50?: number; p99?: number; workerCpuSeconds?: number; extra?: Record<string, unknown> }>
    ) => {
      const yardstick = await plainInsertYardstick(side.databaseUrl, yardstickCount)
      // serve's and every PostgreSQL process's CPU over the measure (the drain adds its worker's), a unit.
      const cpu = cpuMeter(() => ({ serve: side.serve.pid }))
      const result = await run()
      const measured = cpu.msPer(units)
      const cpuMs = round(measured.total + ((result.workerCpuSeconds ?? 0) * 1000) / units, 3)
      const ofYardstick = round(result.rate / yardstick.rate, 4)
      progress(`${label}: ${phase} ${result.rate}/s, yardstick ${yardstick.rate}/s: ${ofYardstick} x, ${cpuMs} ms of CPU each`)
      return {
        rate: result.rate,
        yardstick: yardstick.rate,
        ofYardstick,
        cpuMs,
        cpuMsByProcess: { ...measured.byProcess, ...(result.workerCpuSeconds === undefined ? {} : { worker: round((result.workerCpuSeconds * 1000) / units, 3) }) },
        ...(result.p50 === undefined ? {} : { p50Ms: round(result.p50, 1), p99Ms: round(result.p99 ?? 0, 1) }),
        ...result.extra
      }
    }
    const intake = await measure("intake", intakeCount, () =>
      load(intakeCount, connections, async (index) => {
        const answer = await api.request("POST", "/signal/credit", {
          customerId: customers[index % customers.length],
          agentKey: "chat",
          usage,
          idempotencyKey: `${label}-${runToken}-${index}`
        })
        if (answer.status !== 202) throw new Error(`signal: ${answer.status} ${JSON.stringify(answer.json)}`)
      }))
    const drain = await measure("drain", intakeCount, async () => {
      const queued = async () => Number((await db.query("SELECT count(*) AS n FROM signals WHERE status = 'QUEUED'")).rows[0].n)
      const spawnedAt = performance.now()
      const worker = spawnCli(["worker"])
      let first = NaN
      let last = NaN
      for (;;) {
        const left = await queued()
        const seconds = (performance.now() - spawnedAt) / 1000
        if (Number.isNaN(first) && left < intakeCount) first = seconds
        if (left === 0) {
          last = seconds
          break
        }
        if (seconds > 900) throw new Error(`drain stalled with ${left} queued`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      const workerCpuSeconds = cpuOf(worker.pid)
      await stopChild(worker)
      return { rate: Math.round(intakeCount / last), workerCpuSeconds, extra: { steadyRate: Math.round(intakeCount / (last - first)), firstPricedSeconds: round(first) } }
    })
    const check = (index: number) =>
      api.request("POST", "/entitlements/check", { customerId: customers[index % customers.length], meter: "CREDIT", agentKey: "chat", usage })
    const checks = await measure("check", checkCount, () =>
      load(checkCount, connections, async (index) => {
        const answer = await check(index)
        if (answer.status !== 200 || answer.json.result.allowed !== true) throw new Error(`check: ${answer.status} ${JSON.stringify(answer.json)}`)
      }))
    const read = (query: string) => () =>
      load(readCount, connections, async (index) => {
        const answer = await api.request("GET", `/signal/usage-log?customerId=${customers[index % customers.length]}${query}`)
        if (answer.status !== 200 || answer.json.result.usageLogs.length === 0) throw new Error(`usage log: ${answer.status}`)
      })
    const usageLogFirstPage = await measure("usageLogFirstPage", readCount, read(""))
    const usageLogThisMonth = await measure("usageLogThisMonth", readCount, read(`&from=${encodeURIComponent(monthStart)}`))
    return { intake, drain, check: checks, usageLogFirstPage, usageLogThisMonth }
  }

  try {
    const empty = await openSide("empty", reuse?.[0])
    const history = await openSide("history", reuse?.[1])
    const seeded = reuse === undefined
      ? await seedHistory(history.databaseUrl, history.organizationId, optionsOf(history.customers))
      : { reused: reuse }
    progress(`history seeded: ${JSON.stringify(seeded)}`)
    // An old database's autovacuum is done with its history; a fresh seed's is not, for minutes (it took the
    // first round's CPU in an earlier run). Wait for it, at most 15 minutes, and say how long.
    const settleStarted = performance.now()
    const vacuuming = async () => Number((await admin.query(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND datname = $1", [history.databaseName]
    )).rows[0].n)
    let quietSamples = 0
    while (quietSamples < 10 && performance.now() - settleStarted < 900_000) {
      quietSamples = (await vacuuming()) === 0 ? quietSamples + 1 : 0
      await new Promise((resolve) => setTimeout(resolve, 1000))
    }
    const settleSeconds = round((performance.now() - settleStarted) / 1000)
    progress(`history: autovacuum settled after ${settleSeconds} s`)
    // Interleaved, so that both databases meet the machine's slow minutes and fast ones alike.
    const measured: Array<{ empty: Awaited<ReturnType<typeof measureRound>>; history: Awaited<ReturnType<typeof measureRound>> }> = []
    for (let index = 1; index <= rounds; index++) {
      // What autovacuum would have done since the last round (this machine's server runs with it off):
      // untimed, both databases alike, so neither meets the other's dead rows or stale statistics.
      if (vacuum) for (const side of [empty, history]) await side.db.query("VACUUM ANALYZE")
      const emptyRound = await measureRound(empty, index)
      const historyRound = await measureRound(history, index)
      measured.push({ empty: emptyRound, history: historyRound })
    }
    const sizes = (await history.db.query(`SELECT relname AS name, pg_size_pretty(pg_total_relation_size(oid)) AS size
      FROM pg_class WHERE relname IN ('signals', 'signals_archive', 'usage_log') ORDER BY relname`)).rows
    const median = (values: ReadonlyArray<number>) => {
      const sorted = [...values].sort((a, b) => a - b)
      const middle = Math.floor(sorted.length / 2)
      return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
    }
    const ratiosOf = (phase: Phase) => measured.map((pair) => round(pair.history[phase].ofYardstick / pair.empty[phase].ofYardstick))
    // CPU a unit, history over empty: above 1.00 history costs more work, whatever the VM's speed did meanwhile.
    const cpuRatiosOf = (phase: Phase) => measured.map((pair) => round(pair.history[phase].cpuMs / pair.empty[phase].cpuMs))
    const historyOverEmpty = Object.fromEntries(PHASES.map((phase) => [phase, {
      rounds: ratiosOf(phase),
      median: round(median(ratiosOf(phase))),
      cpuRounds: cpuRatiosOf(phase),
      cpuMedian: round(median(cpuRatiosOf(phase)))
    }]))
    Object.assign(report, { seeded, settleSeconds, rounds: measured, sizes, historyOverEmpty, loadAfter: os.loadavg() })
    const table = [
      `| measure | ${measured.map((_, index) => `round ${index + 1}: empty, history (× yardstick; ms of CPU each)`).join(" | ")} | history / empty by round | median | CPU each, history / empty by round | median |`,
      `|---|${measured.map(() => "---|").join("")}---|---|---|---|`,
      ...PHASES.map((phase) =>
        `| ${phase} | ${measured.map((pair) => `${pair.empty[phase].ofYardstick}, ${pair.history[phase].ofYardstick}; ${pair.empty[phase].cpuMs}, ${pair.history[phase].cpuMs}`).join(" | ")} | ` +
        `${ratiosOf(phase).join(", ")} | ${historyOverEmpty[phase]!.median} | ${cpuRatiosOf(phase).join(", ")} | ${historyOverEmpty[phase]!.cpuMedian} |`
      )
    ]
    process.stdout.write(`${table.join("\n")}\n`)
    if (reportFile) fs.writeFileSync(reportFile, `${JSON.stringify(report, null, 2)}\n`)
    for (const side of sides) side.api.close()
  } finally {
    for (const server of servers) await stopChild(server)
    for (const { databaseName, db } of created) {
      await db.end()
      if (!keep) await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
      else progress(`kept the database ${databaseName}`)
    }
    await admin.end()
  }
}

const command = process.argv[2]
if (command === "seed") await seedCommand()
else if (command === "compare") await compareCommand()
else {
  process.stderr.write("usage: npx tsx bench/history.ts seed|compare [flags] (see the file's header)\n")
  process.exit(2)
}
