/**
 * bench/drain: how fast `billing worker --once` prices a backlog of queued credit
 * signals, against real PostgreSQL. Run by hand, never by `npm test`:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/drain.ts \
 *     [--backlog 100000] [--customers 16] [--yardstick 20000] [--connections 64] \
 *     [--rss-mark 10000] [--late-share 0.1] [--report results.json] [--keep] [--root OTHER_CHECKOUT]
 *
 * It only drives the CLI (`bin/billing.mjs`) and reads the tables, so it measures
 * whatever the worker is at the time. On a database of its own (dropped at the end
 * unless --keep):
 *
 *  1. setup: `billing migrate`, `billing org create`; then `billing serve --no-worker`
 *     for a credit, a plan with a large ADVANCE credit allowance, the customers and
 *     their purchases, and one real credit signal per customer posted to
 *     `/signal/credit`: those rows are the templates of the backlog, which is
 *     inserted with multi-row INSERTs cloning them (new id and message_id, all else
 *     as the intake wrote it);
 *  2. an idle `billing worker --once` (empty queue): the fixed cost of a worker
 *     process (start, migrations check, idle jobs) in seconds and statements;
 *  3. the yardstick: plain single-row INSERTs through node-postgres, 64 concurrent callers,
 *     pool of 10, a table without index
 *     (as bench/signals.ts);
 *     Every purchase is then one cycle old: its dates are moved a month back and
 *     `billing cycle run` ends its first cycle, so usage can be late for it;
 *  4. four drains of a fresh backlog each: 1 worker over all customers, 2 workers
 *     over all customers, 1 worker over one customer, and 1 worker over all
 *     customers with `--late-share` of the backlog timestamped in the previous,
 *     closed cycle (the backfill lane, priced against that cycle's balances);
 *  5. a backfill: `--backfill` late signals queued, one worker draining them while
 *     one on-time signal is queued every 250 ms: how long today's signals wait
 *     behind the backfill (received -> priced). Wall time includes process
 *     start. Statements are counted in the workers by bench/count-statements.mjs;
 *     resident memory is sampled from /proc/PID/status.
 *  5. after each drain, checks: every signal PROCESSED with exactly one usage-log row
 *     (the one `signals.usage_log_id` names), every usage row priced exactly from the
 *     model's rates and the credit, and each customer's ADVANCE credit balance `used`
 *     equal to the sum of its usage rows' quantity.
 */
import { SqlClient } from "@effect/sql"
import { benchPort, cliProcesses, flag, load, plainInsertYardstick, textFlag } from "./support.ts"
import { makeId, randomToken } from "../src/ids.ts"
import { PgClient } from "@effect/sql-pg"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"


/** The checkout whose CLI is measured: this one, or `--root DIR` (another version, to compare). */
const root = path.resolve(textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url)))
const cliPath = path.join(root, "bin", "billing.mjs")
const preload = pathToFileURL(fileURLToPath(new URL("./count-statements.mjs", import.meta.url))).href
const backlogCount = flag("backlog", 100_000)
const customerCount = flag("customers", 16)
const yardstickCount = flag("yardstick", 20_000)
const connections = flag("connections", 64)
/** RSS is reported after this many signals of the 1-worker drain, and at its end. */
const rssMark = flag("rss-mark", Math.min(10_000, Math.floor(backlogCount / 10)))
const rssSampleMs = flag("rss-sample-ms", 100)
const progressPollMs = flag("poll-ms", 200)
const reportFile = textFlag("report")
/** The share of the late drain's backlog timestamped in each purchase's closed first cycle. */
const lateShare = flag("late-share", 0.1)
/** The late signals of the backfill phase, queued before today's. */
const backfillCount = flag("backfill", 100_000)
const keep = process.argv.includes("--keep")

const adminUrl = process.env.DATABASE_URL
if (!adminUrl) {
  process.stderr.write("bench/drain needs DATABASE_URL (an admin connection to PostgreSQL)\n")
  process.exit(2)
}

// Ids from the service's own generator (src/ids.ts), so the backlog sorts and
// looks like the intake's; `token(n)` is n random base-32 characters.
const token = (length: number) => randomToken(8).slice(0, length)


// ---------------------------------------------------------------------------
// Databases

const databaseName = `billing_bench_drain_${token(6)}`
const databaseUrl = (() => {
  const url = new URL(adminUrl)
  url.pathname = `/${databaseName}`
  return url.toString()
})()

/** Every value comes back as PostgreSQL's text (numeric and timestamps untouched). */
const rawTypes = { getTypeParser: () => (value: string) => value }
const clientOn = (url: string, maxConnections: number) =>
  ManagedRuntime.make(PgClient.layer({ url: Redacted.make(url), maxConnections, types: rawTypes, applicationName: "bench" }))

const admin = clientOn(adminUrl, 1)
let bench: ReturnType<typeof clientOn> | undefined
type Row = Record<string, string | null>
const queryOn = (runtime: ReturnType<typeof clientOn>, text: string, params: ReadonlyArray<unknown> = []) =>
  runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Row>(text, params)))
const q = (text: string, params: ReadonlyArray<unknown> = []) => queryOn(bench!, text, params)
const num = (value: string | null | undefined) => Number(value ?? NaN)

// ---------------------------------------------------------------------------
// Processes

const env = { ...process.env, DATABASE_URL: databaseUrl, BILLING_WORKER_POLL_MS: "50" }
// BENCH_NODE_ARGS passes flags to the measured processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-drain-"))

const { finished, running, spawnCli } = cliProcesses({ root, cliPath, preload, env, nodeArgs })

const cli = async (args: ReadonlyArray<string>) => {
  const result = await finished(spawnCli([...args, "--json"]))
  if (result.code !== 0) throw new Error(`billing ${args.join(" ")} failed (${result.code}): ${result.stderr}`)
  return JSON.parse(result.stdout)
}

interface StatementLine {
  readonly pid: number
  readonly statements: number
  readonly byKind: Record<string, number>
  readonly maxRssKb: number
  readonly rssKb: number
}
/** The lines count-statements.mjs appended (one per exited process); a line being written is skipped. */
const readStatements = (file: string): Array<StatementLine> =>
  fs.existsSync(file)
    ? fs.readFileSync(file, "utf8").split("\n").flatMap((line) => {
      try {
        return line.trim() === "" ? [] : [JSON.parse(line) as StatementLine]
      } catch {
        return []
      }
    })
    : []

const memoryOf = (pid: number) => {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
    const rss = /VmRSS:\s+(\d+) kB/.exec(status)
    const hwm = /VmHWM:\s+(\d+) kB/.exec(status)
    return rss && hwm ? { rssKb: Number(rss[1]), hwmKb: Number(hwm[1]) } : undefined
  } catch {
    return undefined
  }
}

const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mb = (kb: number) => Math.round(kb / 1024)


// ---------------------------------------------------------------------------
// Setup through the API: catalogue, customers, purchases, template signals

interface Setup {
  readonly organizationId: string
  readonly customers: ReadonlyArray<string>
  /** The signals table's columns, as the intake writes them. */
  readonly signalColumns: ReadonlyArray<string>
}

const setup = async (): Promise<Setup> => {
  await cli(["migrate"])
  const { apiKey, organization } = await cli(["org", "create", "--name", "Bench drain"])
  const organizationId: string = organization.id
  const port = benchPort()
  const server = spawnCli(["serve", "--no-worker", "--port", String(port)])
  const serverDone = finished(server)
  const baseUrl = `http://127.0.0.1:${port}/api/v1`
  try {
    for (let tries = 0;; tries++) {
      try {
        await fetch(`${baseUrl}/openapi.json`)
        break
      } catch {
        if (tries > 600) throw new Error("billing serve did not start")
        await sleep(100)
      }
    }
    const post = async (route: string, body: unknown, expected: number) => {
      const response = await fetch(`${baseUrl}${route}`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      const json = (await response.json()) as { result: any; statusDetail?: { message?: string } }
      if (response.status !== expected) {
        throw new Error(`POST ${route}: ${response.status} ${json.statusDetail?.message ?? ""}`)
      }
      return json.result
    }
    const credit = await post("/credits", {
      name: "Chat",
      agentKey: "chat",
      marginPercent: 20,
      modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    }, 201)
    // 0.72 credits a signal; three drains of the backlog on one customer stay far inside it.
    const allowance = Math.max(10_000_000, backlogCount * 3)
    const plan = await post("/plans", {
      name: "Bench drain",
      billingCycle: "MONTHLY",
      entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.credit.id, quantity: allowance }]
    }, 201)
    const customers: Array<string> = []
    const templates: Array<string> = []
    await load(customerCount, 8, async (index) => {
      const created = await post("/customers", {
        name: `Customer ${index}`,
        email: `c${index}@bench.example.com`,
        externalId: `bench-${index}`
      }, 201)
      customers[index] = created.customer.id
      await post("/purchases", { customerId: created.customer.id, planId: plan.plan.id }, 201)
    })
    // Each purchase one cycle old: its first cycle ended a moment ago and is closed (FINAL),
    // its whole allowance expired, so late usage of that cycle draws it and never the current one.
    await q(`UPDATE purchases SET billing_date = billing_date - interval '1 month',
               period_start = period_start - interval '1 month', period_end = period_end - interval '1 month'`)
    await cli(["cycle", "run", "--now", new Date().toISOString()])
    const [closed] = await q(`SELECT count(*) AS n, min(period_start) AS start, max(period_end) AS end FROM purchase_cycles`)
    if (num(closed!.n) !== customerCount) throw new Error(`expected ${customerCount} closed cycles, found ${closed!.n}`)
    lateMoment = new Date((new Date(closed!.start!).getTime() + new Date(closed!.end!).getTime()) / 2).toISOString()
    await load(customerCount, 8, async (index) => {
      const accepted = await post("/signal/credit", {
        customerId: customers[index],
        agentKey: "chat",
        usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
      }, 202)
      templates[index] = accepted.rawId
    })
    server.kill("SIGTERM")
    await serverDone

    // The intake's rows become the templates of the backlog (slot i = customer i), out of the queue.
    await q(`CREATE SCHEMA bench`)
    await q(
      `CREATE TABLE bench.signal_templates AS
         SELECT (r.n - 1)::int AS bench_slot, s.*
         FROM signals s JOIN unnest($1::text[]) WITH ORDINALITY AS r(id, n) ON s.id = r.id`,
      [templates]
    )
    const [kept] = await q(`SELECT count(*) AS n, count(*) FILTER (WHERE status = 'QUEUED') AS queued FROM bench.signal_templates`)
    if (num(kept!.n) !== customerCount || num(kept!.queued) !== customerCount) {
      throw new Error(`expected ${customerCount} QUEUED template signals, found ${kept!.n} (${kept!.queued} queued)`)
    }
    await q(`DELETE FROM signals WHERE id = ANY($1::text[])`, [templates])
    const columns = await q(
      `SELECT column_name FROM information_schema.columns
       WHERE table_schema = 'public' AND table_name = 'signals' AND is_generated = 'NEVER'
       ORDER BY ordinal_position`
    )
    return { organizationId, customers, signalColumns: columns.map((c) => c.column_name!) }
  } finally {
    if (server.exitCode === null) server.kill("SIGTERM")
  }
}

/** A moment inside every purchase's closed first cycle (set by setup). */
let lateMoment = ""

/**
 * Adds `count` QUEUED signals cloned from the templates: signal k goes to customer
 * slotOf(k); when isLate(k), it happened in the closed cycle (`lateMoment`) and queues
 * in the backfill lane, as the intake would write a signal sent with that timestamp.
 */
const fillBacklog = async (
  setupInfo: Setup,
  count: number,
  slotOf: (k: number) => number,
  isLate: (k: number) => boolean = () => false
): Promise<Array<string>> => {
  const added: Array<string> = []
  const quote = (column: string) => `"${column.replace(/"/g, "\"\"")}"`
  const expression = (column: string) =>
    column === "id"
      ? "g.id"
      : column === "message_id"
      ? "g.message_id"
      : column === "received_at"
      ? "now()"
      : column === "occurred_at"
      ? `CASE WHEN g.late THEN $5::timestamptz ELSE t.occurred_at END`
      : column === "late"
      ? "g.late"
      : column === "body"
      ? `CASE WHEN g.late THEN t.body || jsonb_build_object('timestamp', $5::text) ELSE t.body END`
      : `t.${quote(column)}`
  const statement = `INSERT INTO signals (${setupInfo.signalColumns.map(quote).join(", ")})
    SELECT ${setupInfo.signalColumns.map(expression).join(", ")}
    FROM unnest($1::text[], $2::text[], $3::int[], $4::boolean[]) WITH ORDINALITY AS g(id, message_id, slot, late, n)
    JOIN bench.signal_templates t ON t.bench_slot = g.slot
    ORDER BY g.n`
  const chunk = 10_000
  for (let start = 0; start < count; start += chunk) {
    const size = Math.min(chunk, count - start)
    const ids: Array<string> = []
    const messageIds: Array<string> = []
    const slots: Array<number> = []
    const late: Array<boolean> = []
    for (let k = start; k < start + size; k++) {
      ids.push(makeId("sig"))
      messageIds.push(makeId("msg"))
      slots.push(slotOf(k))
      late.push(isLate(k))
    }
    await q(statement, [ids, messageIds, slots, late, lateMoment])
    added.push(...ids)
  }
  return added
}

// ---------------------------------------------------------------------------
// Checks

interface DrainCheck {
  readonly signals: number
  readonly processed: number
  readonly notProcessed: number
  readonly usageRows: number
  /** Signals without exactly one usage row, or whose usage_log_id is not that row; usage rows of no signal. */
  readonly unmatched: number
  /** Usage rows whose quantity, costs or mode differ from the rates and credit, computed in SQL. */
  readonly mispriced: number
  readonly balancesChecked: number
  /** ADVANCE credit balances whose used is not the sum of their usage rows (or remaining is not granted - used). */
  readonly inexactBalances: number
  readonly ok: boolean
}

const checkDrain = async (expectedSignals: number): Promise<DrainCheck> => {
  const [states] = await q(`SELECT count(*) AS total, count(*) FILTER (WHERE status = 'PROCESSED') AS processed FROM signals`)
  const [usage] = await q(`SELECT count(*) AS n FROM usage_log`)
  const [matching] = await q(`
    SELECT
      (SELECT count(*) FROM signals s
         LEFT JOIN (SELECT organization_id, signal_id, count(*) AS n, min(id) AS usage_id
                    FROM usage_log GROUP BY organization_id, signal_id) u
           ON u.organization_id = s.organization_id AND u.signal_id = s.id
         WHERE u.n IS DISTINCT FROM 1 OR s.usage_log_id IS DISTINCT FROM u.usage_id)
    + (SELECT count(*) FROM usage_log u
         WHERE NOT EXISTS (SELECT 1 FROM signals s WHERE s.organization_id = u.organization_id AND s.id = u.signal_id))
      AS unmatched`)
  const [priced] = await q(`
    SELECT count(*) AS checked, count(*) FILTER (WHERE
        u.meter <> 'CREDIT' OR u.billing_mode IS DISTINCT FROM 'ADVANCE'
        OR coalesce(u.cache_tokens, 0) <> 0 OR coalesce(u.cache_write_tokens, 0) <> 0
        OR u.provider_cost <> x.provider
        OR u.quantity <> round(x.provider / c.base_price, 12)
        OR u.customer_cost <> round(x.provider * (1 + c.margin_percent / 100), 12)) AS mispriced
    FROM usage_log u
    JOIN credits c ON c.organization_id = u.organization_id AND c.id = u.entitlement_id
    JOIN models m ON m.organization_id = u.organization_id AND m.id = u.model
    CROSS JOIN LATERAL (SELECT (u.input_tokens * m.input_rate + u.output_tokens * m.output_rate) / 1000000 AS provider) x`)
  // Each cycle's balance holds exactly its own usage rows: the current one (purchase_balances)
  // and the closed first cycle (cycle_balances, whose whole allowance expired and is drawn by late usage).
  const [balances] = await q(`
    SELECT count(*) AS checked, count(*) FILTER (WHERE
        b.used <> coalesce(u.quantity, 0) OR b.remaining <> b.granted - b.used OR b.cycle_quantity <> b.used) AS inexact
    FROM purchase_balances b
    JOIN purchases p ON p.organization_id = b.organization_id AND p.id = b.purchase_id AND p.status = 'ACTIVE'
    LEFT JOIN (SELECT organization_id, purchase_id, entitlement_id, cycle_index, sum(quantity) AS quantity
               FROM usage_log WHERE billing_mode = 'ADVANCE' GROUP BY 1, 2, 3, 4) u
      ON u.organization_id = b.organization_id AND u.purchase_id = b.purchase_id AND u.entitlement_id = b.target_id
     AND u.cycle_index = p.cycle_index
    WHERE b.billing_mode = 'ADVANCE' AND b.type = 'CREDIT'`)
  const [closedBalances] = await q(`
    SELECT count(*) FILTER (WHERE
        b.used <> coalesce(u.quantity, 0) OR b.cycle_quantity <> b.used OR b.remaining <> b.granted - b.used) AS inexact
    FROM cycle_balances b
    LEFT JOIN (SELECT organization_id, purchase_id, entitlement_id, cycle_index, sum(quantity) AS quantity
               FROM usage_log WHERE billing_mode = 'ADVANCE' GROUP BY 1, 2, 3, 4) u
      ON u.organization_id = b.organization_id AND u.purchase_id = b.purchase_id AND u.entitlement_id = b.target_id
     AND u.cycle_index = b.cycle_index
    WHERE b.billing_mode = 'ADVANCE' AND b.type = 'CREDIT'`)
  const signals = num(states!.total)
  const processed = num(states!.processed)
  const usageRows = num(usage!.n)
  const unmatched = num(matching!.unmatched)
  // Every usage row must have joined its credit and model: otherwise it was not checked.
  const mispriced = num(priced!.mispriced) + (usageRows - num(priced!.checked))
  const balancesChecked = num(balances!.checked)
  const inexactBalances = num(balances!.inexact) + num(closedBalances!.inexact)
  return {
    signals,
    processed,
    notProcessed: signals - processed,
    usageRows,
    unmatched,
    mispriced,
    balancesChecked,
    inexactBalances,
    ok: signals === expectedSignals && processed === signals && usageRows === signals && unmatched === 0 &&
      mispriced === 0 && inexactBalances === 0 && balancesChecked === customerCount
  }
}

// ---------------------------------------------------------------------------
// One drain

interface Phase {
  readonly label: string
  readonly workers: number
  readonly customers: number
  readonly signals: number
  readonly seconds: number
  readonly rate: number
  /** Signals over (wall time minus an idle worker's wall time): the rate without process start. */
  readonly rateNetOfStart: number
  readonly handled: number
  readonly statements: number
  readonly statementsPerSignal: number
  /** Statements net of the idle worker's fixed count, per signal. */
  readonly statementsPerSignalNet: number
  readonly byKind: Record<string, number>
  readonly peakRssMb: number
  /** The first RSS sample taken once `rssMark` signals were processed (1 worker only). */
  readonly rssAtMarkMb: number | null
  readonly processedAtMark: number | null
  /** The last RSS sample before the worker exited (1 worker only). */
  readonly rssAtEndMb: number | null
  readonly rssSamples: number
  readonly check: DrainCheck
}

interface Idle {
  readonly seconds: number
  readonly statements: number
  readonly peakRssMb: number
}

const drain = async (
  label: string,
  workers: number,
  customers: number,
  setupInfo: Setup,
  idle: Idle,
  totalBefore: number,
  share = 0
): Promise<Phase> => {
  progress(`${label}: queueing ${backlogCount} signals over ${customers} customer(s), ${share * 100}% late`)
  // Late signals spread evenly through the backlog: every (1/share)-th one.
  const every = share > 0 ? Math.round(1 / share) : 0
  await fillBacklog(setupInfo, backlogCount, (k) => k % customers, (k) => every > 0 && k % every === every - 1)
  await q(`VACUUM ANALYZE`)
  const statsFile = path.join(tmpDir, `${label.replace(/\W+/g, "-")}.jsonl`)
  progress(`${label}: draining with ${workers} worker(s)`)

  const started = performance.now()
  const children = Array.from({ length: workers }, () => spawnCli(["worker", "--once", "--json"], statsFile))
  const results = Promise.all(children.map(finished))

  // Resident memory from /proc, and the queue's progress from the database. A sample
  // counts only if the worker had not yet written its exit line (count-statements.mjs,
  // on 'exit') when /proc was read: after that line, Node tears the heap down and the
  // resident size falls, which is not the memory the drain held.
  const samples = new Map<number, Array<{ t: number; rssKb: number; hwmKb: number }>>()
  const exitedPids = () => new Set(readStatements(statsFile).map((line) => line.pid))
  const sample = () => {
    const read = children.flatMap((child) => {
      if (child.pid === undefined || child.exitCode !== null) return []
      const memory = memoryOf(child.pid)
      return memory ? [{ pid: child.pid, t: performance.now() - started, ...memory }] : []
    })
    if (read.length === 0) return
    const exited = exitedPids()
    for (const { pid, ...memory } of read) {
      if (exited.has(pid)) continue
      const list = samples.get(pid) ?? []
      list.push(memory)
      samples.set(pid, list)
    }
  }
  const sampler = setInterval(sample, rssSampleMs)
  // The queue is polled until `rssMark` signals are processed, in every drain alike (so all
  // pay the same), then no more; at that moment a single worker's resident memory is read.
  const state = { done: false, mark: undefined as { processed: number; rssKb: number | null } | undefined }
  const poller = (async () => {
    while (!state.done && !state.mark) {
      await sleep(progressPollMs)
      if (state.done) break
      const [row] = await q(`SELECT count(*) AS n FROM signals WHERE status = 'QUEUED'`)
      const processed = backlogCount - num(row!.n)
      if (processed < rssMark) continue
      const pid = children[0]!.pid
      let rssKb: number | null = null
      if (workers === 1 && pid !== undefined) {
        const memory = memoryOf(pid)
        // Read after the worker's exit line: it may be tearing down; its last sample before is the figure.
        const list = samples.get(pid) ?? []
        rssKb = memory && !exitedPids().has(pid) ? memory.rssKb : list[list.length - 1]?.rssKb ?? null
      }
      state.mark = { processed, rssKb }
    }
  })()

  const ended = await results
  const seconds = (performance.now() - started) / 1000
  clearInterval(sampler)
  state.done = true
  await poller
  progress(`${label}: drained in ${seconds.toFixed(1)} s`)

  ended.forEach((result, index) => {
    if (result.code !== 0) throw new Error(`worker ${index + 1} of ${label} exited ${result.code}: ${result.stderr}`)
  })
  const handled = ended.reduce((total, result) => total + Number(JSON.parse(result.stdout).handled ?? 0), 0)
  const counted = readStatements(statsFile)
  if (counted.length !== workers) throw new Error(`${label}: ${counted.length} statement counts for ${workers} worker(s)`)
  const statements = counted.reduce((total, line) => total + line.statements, 0)
  const byKind: Record<string, number> = {}
  for (const line of counted) {
    for (const [kind, n] of Object.entries(line.byKind)) byKind[kind] = (byKind[kind] ?? 0) + n
  }
  const peakKb = Math.max(
    ...counted.map((line) => line.maxRssKb),
    ...[...samples.values()].flat().map((s) => s.hwmKb)
  )
  const single = workers === 1 ? samples.get(children[0]!.pid!) ?? [] : []
  const last = single[single.length - 1]
  const check = await checkDrain(totalBefore + backlogCount)
  progress(`${label}: check ${check.ok ? "ok" : "FAILED"} ${JSON.stringify(check)}`)
  const net = Math.max(seconds - idle.seconds, 0.001)
  return {
    label,
    workers,
    customers,
    signals: backlogCount,
    seconds,
    rate: Math.round(backlogCount / seconds),
    rateNetOfStart: Math.round(backlogCount / net),
    handled,
    statements,
    statementsPerSignal: statements / backlogCount,
    statementsPerSignalNet: Math.max(statements - workers * idle.statements, 0) / backlogCount,
    byKind,
    peakRssMb: mb(peakKb),
    rssAtMarkMb: state.mark?.rssKb ? mb(state.mark.rssKb) : null,
    processedAtMark: state.mark?.processed ?? null,
    rssAtEndMb: last ? mb(last.rssKb) : null,
    rssSamples: single.length,
    check
  }
}

// ---------------------------------------------------------------------------
// A backfill beside today's signals

interface Backfill {
  readonly late: number
  readonly seconds: number
  readonly rate: number
  /** Today's signals queued while the backfill drained, and how long each waited to be priced. */
  readonly onTime: number
  readonly waitP50Ms: number
  readonly waitMaxMs: number
  /** Today's signals still queued when the worker ended (queued after its last look): not counted. */
  readonly leftQueued: number
  readonly check: DrainCheck
}

const backfill = async (setupInfo: Setup, totalBefore: number): Promise<Backfill> => {
  progress(`backfill: queueing ${backfillCount} late signals`)
  await fillBacklog(setupInfo, backfillCount, (k) => k % customerCount, () => true)
  await q(`VACUUM ANALYZE`)
  progress(`backfill: draining with 1 worker, one on-time signal every 250 ms`)
  const started = performance.now()
  const worker = spawnCli(["worker", "--once", "--json"])
  let exited = false
  const result = finished(worker).then((r) => {
    exited = true
    return r
  })
  const onTime: Array<string> = []
  for (let k = 0; !exited; k++) {
    onTime.push(...(await fillBacklog(setupInfo, 1, () => k % customerCount)))
    await sleep(250)
  }
  const ended = await result
  const seconds = (performance.now() - started) / 1000
  if (ended.code !== 0) throw new Error(`backfill worker exited ${ended.code}: ${ended.stderr}`)
  // What is left of today's (queued after the worker's last look) is priced now, for the checks.
  const [left] = await q(`SELECT count(*) AS n FROM signals WHERE status = 'QUEUED'`)
  const leftQueued = num(left!.n)
  const waits = (await q(
    `SELECT extract(epoch FROM processed_at - received_at) * 1000 AS ms FROM signals
     WHERE id = ANY($1::text[]) AND status = 'PROCESSED' ORDER BY 1`,
    [onTime]
  )).map((row) => num(row.ms))
  if (leftQueued > 0) {
    const rest = await finished(spawnCli(["worker", "--once", "--json"]))
    if (rest.code !== 0) throw new Error(`worker exited ${rest.code}: ${rest.stderr}`)
  }
  const check = await checkDrain(totalBefore + backfillCount + onTime.length)
  progress(`backfill: drained in ${seconds.toFixed(1)} s; check ${check.ok ? "ok" : "FAILED"}`)
  return {
    late: backfillCount,
    seconds,
    rate: Math.round(backfillCount / seconds),
    onTime: waits.length,
    waitP50Ms: waits[Math.floor(waits.length / 2)] ?? NaN,
    waitMaxMs: waits[waits.length - 1] ?? NaN,
    leftQueued,
    check
  }
}

// ---------------------------------------------------------------------------
// Report

const machine = () => {
  const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8")
  let nproc = os.cpus().length
  try {
    nproc = Number(execFileSync("nproc", { encoding: "utf8" }).trim())
  } catch {
    // os.cpus() then
  }
  return {
    nproc,
    cpu: /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1]?.trim() ?? "unknown",
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    load: os.loadavg().map((l) => Math.round(l * 100) / 100)
  }
}

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}
const markdown = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) =>
  [`| ${header.join(" | ")} |`, `|${header.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n")

const fmt = (n: number) => n.toLocaleString("en-US")
const ratio = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "n/a")

// ---------------------------------------------------------------------------

let dropped = false
const cleanup = async () => {
  for (const child of running) child.kill("SIGTERM")
  if (bench) await bench.dispose().catch(() => undefined)
  if (!keep && !dropped) {
    dropped = true
    await queryOn(admin, `DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`).catch((error) =>
      progress(`could not drop ${databaseName}: ${error}`)
    )
  }
  await admin.dispose().catch(() => undefined)
  fs.rmSync(tmpDir, { recursive: true, force: true })
}
process.once("SIGINT", () => {
  progress("interrupted; cleaning up")
  void cleanup().then(() => process.exit(130))
})

const main = async () => {
  const startedAt = new Date()
  const machineBefore = machine()
  progress(`database ${databaseName}; backlog ${backlogCount}, ${customerCount} customers, yardstick ${yardstickCount}`)
  await queryOn(admin, `CREATE DATABASE "${databaseName}"`)
  bench = clientOn(databaseUrl, 2)
  try {
    const setupInfo = await setup()
    progress(`setup done: ${setupInfo.customers.length} customers on the plan`)

    // The fixed cost of a worker process: start, migrations check, one idle pass of every job.
    const idleFile = path.join(tmpDir, "idle.jsonl")
    const idleStarted = performance.now()
    const idleRun = await finished(spawnCli(["worker", "--once", "--json"], idleFile))
    if (idleRun.code !== 0) throw new Error(`idle worker failed: ${idleRun.stderr}`)
    const [idleLine] = readStatements(idleFile)
    if (!idleLine || idleLine.statements <= 0) {
      throw new Error("bench/count-statements.mjs counted no statement: is `pg` patched in the worker process?")
    }
    const idle: Idle = {
      seconds: (performance.now() - idleStarted) / 1000,
      statements: idleLine.statements,
      peakRssMb: mb(idleLine.maxRssKb)
    }
    progress(`idle worker: ${idle.seconds.toFixed(1)} s, ${idle.statements} statements`)

    // The yardstick: plain single-row INSERTs (node-postgres, pool of 10, no index).
    const yardstick = await plainInsertYardstick(databaseUrl, yardstickCount, connections)
    progress(`yardstick: ${yardstick.rate} inserts/s (p50 ${yardstick.p50!.toFixed(1)} ms, p99 ${yardstick.p99!.toFixed(1)} ms)`)

    const phases: Array<Phase> = []
    const run = async (label: string, workers: number, customers: number, share = 0) => {
      const before = phases.length * backlogCount
      phases.push(await drain(label, workers, customers, setupInfo, idle, before, share))
    }
    await run("1 worker, all customers", 1, customerCount)
    await run("2 workers, all customers", 2, customerCount)
    await run("1 worker, 1 customer", 1, 1)
    await run(`1 worker, all customers, ${Math.round(lateShare * 100)}% late`, 1, customerCount, lateShare)

    const [one, two, single, late] = phases as [Phase, Phase, Phase, Phase]
    const backfilled = await backfill(setupInfo, phases.length * backlogCount)
    const totalStatements = phases.reduce((t, p) => t + p.statements, 0)
    const totalSignals = phases.reduce((t, p) => t + p.signals, 0)
    const statementsPerSignal = totalStatements / totalSignals
    const rssGrowth = one.rssAtMarkMb && one.rssAtEndMb ? one.rssAtEndMb / one.rssAtMarkMb - 1 : NaN
    const machineAfter = machine()

    const targets: Array<[string, string, string, boolean]> = [
      [
        `drain, 1 worker, ${customerCount} customers, as a share of the yardstick`,
        `${ratio(one.rate / yardstick.rate)} (${fmt(one.rate)}/s vs ${fmt(yardstick.rate)}/s); net of start ${ratio(one.rateNetOfStart / yardstick.rate)}`,
        ">= 0.5",
        one.rate / yardstick.rate >= 0.5
      ],
      [
        "drain, 2 workers vs 1 worker",
        `${ratio(two.rate / one.rate)} (${fmt(two.rate)}/s vs ${fmt(one.rate)}/s); net of start ${ratio(two.rateNetOfStart / one.rateNetOfStart)}`,
        ">= 1.3",
        two.rate / one.rate >= 1.3
      ],
      [
        `drain, 1 customer vs ${customerCount} customers (1 worker)`,
        `${ratio(single.rate / one.rate)} (${fmt(single.rate)}/s vs ${fmt(one.rate)}/s); net of start ${ratio(single.rateNetOfStart / one.rateNetOfStart)}`,
        ">= 0.8",
        single.rate / one.rate >= 0.8
      ],
      [
        `drain with ${Math.round(lateShare * 100)}% late signals vs all on time (1 worker, ${customerCount} customers)`,
        `${ratio(late.rate / one.rate)} (${fmt(late.rate)}/s vs ${fmt(one.rate)}/s); net of start ${ratio(late.rateNetOfStart / one.rateNetOfStart)}`,
        ">= 0.9",
        late.rate / one.rate >= 0.9
      ],
      [
        `today's signals while a backfill of ${fmt(backfillCount)} late signals drains (1 worker): wait received -> priced`,
        `max ${(backfilled.waitMaxMs / 1000).toFixed(2)} s, p50 ${(backfilled.waitP50Ms / 1000).toFixed(2)} s over ${backfilled.onTime} signals; ` +
        `the backfill took ${backfilled.seconds.toFixed(1)} s (${fmt(backfilled.rate)}/s)`,
        "max <= 3 s",
        backfilled.waitMaxMs <= 3000
      ],
      [
        "statements per priced signal (all drains)",
        `${statementsPerSignal.toFixed(3)} (${fmt(totalStatements)} / ${fmt(totalSignals)})`,
        "<= 0.1",
        statementsPerSignal <= 0.1
      ],
      [
        `worker RSS: end vs after the first ${fmt(one.processedAtMark ?? rssMark)} signals (1 worker)`,
        `${one.rssAtEndMb ?? "?"} MB vs ${one.rssAtMarkMb ?? "?"} MB (${Number.isFinite(rssGrowth) ? `${rssGrowth >= 0 ? "+" : ""}${(rssGrowth * 100).toFixed(0)}%` : "n/a"})`,
        "within 20%",
        Math.abs(rssGrowth) <= 0.2
      ],
      [
        "every signal PROCESSED, one usage row each, exact prices and balances",
        [...phases, backfilled].map((p) => (p.check.ok ? "ok" : "FAILED")).join(", "),
        "all ok",
        phases.every((p) => p.check.ok) && backfilled.check.ok
      ]
    ]

    const phaseHeader = [
      "Drain",
      "signals",
      "wall s",
      "signals/s",
      "x yardstick",
      "signals/s net of start",
      "statements/signal",
      "peak RSS MB",
      "RSS at mark / end MB",
      "check"
    ]
    const phaseRows = phases.map((p) => [
      p.label,
      fmt(p.signals),
      p.seconds.toFixed(1),
      fmt(p.rate),
      ratio(p.rate / yardstick.rate),
      fmt(p.rateNetOfStart),
      `${p.statementsPerSignal.toFixed(3)} (net ${p.statementsPerSignalNet.toFixed(3)})`,
      String(p.peakRssMb),
      p.workers === 1 ? `${p.rssAtMarkMb ?? "?"} @${fmt(p.processedAtMark ?? 0)} / ${p.rssAtEndMb ?? "?"}` : "-",
      p.check.ok ? "ok" : "FAILED"
    ])

    const out: Array<string> = []
    out.push("")
    out.push(`bench/drain: backlog ${fmt(backlogCount)} credit signals per drain, ${customerCount} customers`)
    out.push(`yardstick: ${fmt(yardstick.rate)} single-row INSERTs/s (node-postgres), ${connections} concurrent, pool of 10, no index (p50 ${yardstick.p50!.toFixed(1)} ms, p99 ${yardstick.p99!.toFixed(1)} ms)`)
    out.push(`idle worker process (start + migrations check + idle jobs): ${idle.seconds.toFixed(1)} s, ${idle.statements} statements, peak ${idle.peakRssMb} MB`)
    out.push("")
    out.push(table(phaseHeader, phaseRows))
    out.push("")
    out.push(table(["Target", "measured", "target", "met"], targets.map(([a, b, c, d]) => [a, b, c, d ? "yes" : "NO"])))
    out.push("")
    out.push("Statements by kind (all drains):")
    const kinds: Record<string, number> = {}
    for (const p of phases) for (const [k, n] of Object.entries(p.byKind)) kinds[k] = (kinds[k] ?? 0) + n
    out.push(`  ${Object.entries(kinds).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${fmt(n)}`).join(", ")}`)

    const m = machineAfter
    const snippet = [
      `#### Drain (\`bench/drain.ts\`), ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC`,
      "",
      `\`--backlog ${backlogCount} --customers ${customerCount} --yardstick ${yardstickCount}\`. Machine: ${m.nproc} CPUs (${m.cpu}), ${m.memoryGb} GB RAM, ` +
      `load average ${machineBefore.load.join(" ")} at the start and ${m.load.join(" ")} at the end; PostgreSQL and the benchmark on the same host.`,
      `Yardstick: ${fmt(yardstick.rate)} single-row INSERTs/s through node-postgres (${connections} concurrent callers, pool of 10, no index, p50 ${yardstick.p50!.toFixed(1)} ms, p99 ${yardstick.p99!.toFixed(1)} ms).`,
      `An idle \`worker --once\` takes ${idle.seconds.toFixed(1)} s and ${idle.statements} statements (process start, migrations check, idle jobs); ` +
      "wall times below include it, the \"net of start\" rate subtracts it.",
      "",
      markdown(phaseHeader, phaseRows),
      "",
      markdown(["Target", "measured", "target", "met"], targets.map(([a, b, c, d]) => [a, b, c, d ? "yes" : "**no**"])),
      ""
    ].join("\n")
    out.push("")
    out.push("Markdown for docs/benchmarks.md:")
    out.push("")
    out.push(snippet)
    process.stdout.write(`${out.join("\n")}\n`)

    if (reportFile) {
      fs.writeFileSync(reportFile, `${JSON.stringify({
        date: startedAt.toISOString(),
        machine: { before: machineBefore, after: machineAfter },
        options: { backlogCount, customerCount, yardstickCount, connections, rssMark },
        yardstick,
        idle,
        phases,
        backfill: backfilled,
        statementsPerSignal,
        targets: targets.map(([measure, value, target, met]) => ({ measure, value, target, met }))
      }, null, 2)}\n`)
    }
    if (!phases.every((p) => p.check.ok) || !backfilled.check.ok) process.exitCode = 1
  } finally {
    await cleanup()
  }
}

await main()
