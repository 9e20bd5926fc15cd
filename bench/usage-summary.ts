/**
 * bench/usage-summary: `GET /usage/summary` on a long history (issue 37,
 * point 3; docs/benchmarks.md "Usage summaries"). Run by hand, never by `npm
 * test`, against real PostgreSQL, under nice on a shared machine:
 *
 *   npm run build && DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres nice -n 10 npx tsx bench/usage-summary.ts \
 *     [--rows 3000000] [--customers 1000] [--months 12] [--sample 5000] [--requests 300] [--connections 8] \
 *     [--yardstick 10000] [--report results.json] [--keep]
 *
 * In one run, on a database of its own (dropped at the end unless `--keep`):
 *  1. `billing migrate`, an organisation, the yardstick (bench/support.ts
 *     `plainInsertYardstick`: single-row INSERTs through node-postgres, a pool of
 *     10, 64 callers, a table without index), then `billing serve --no-worker`;
 *  2. the way users make usage, for a sample: over the API a credit plan and a
 *     unit, 8 customers holding it (their cycles moved to have begun 40 days ago,
 *     as if bought then), members, `--sample` signals through `POST /signal/batch`
 *     (credit and unit signals, each with a `timestamp` in the last 30 days, a
 *     member on some, `custom` on half), priced by `billing worker --once`, and
 *     1 % of the rows reversed through `POST /signal/usage-log/{id}/reverse`;
 *  3. the history, made by PostgreSQL itself (`INSERT ... SELECT` over
 *     `generate_series`, as bench/history.ts does): `--rows` usage rows over the
 *     last `--months` months and `--customers` customers of the organisation,
 *     with the service's time-ordered ids, four agent keys on two meters, three
 *     models, members, a `custom.team` on half the rows, 2 % of the rows late
 *     (their usage up to 30 days before they were priced) and 0.5 % reversed (a
 *     reversing row beside each). One customer in ten rows is the bench's "big"
 *     customer (a tenth of the history); the sample's customers get their share
 *     too. Then VACUUM ANALYZE and a CHECKPOINT, as an old database would have;
 *  4. each shape below, `--requests` requests over `--connections` keep-alive
 *     connections, through HTTP: rate, p50, p99, the CPU a request cost (serve's
 *     and every PostgreSQL process's), its rate over the yardstick's; and each
 *     shape's statement explained (EXPLAIN ANALYZE, BUFFERS: the months it read,
 *     how, and its time), the statement written here as the service writes it.
 *
 * The shapes: a small customer's last 30 days by day and agentKey (the "usage
 * this week by agent" of an integrator's page); the big customer's the same;
 * the big customer's 12 months by month and meter; the big customer's month of
 * six months ago by day and custom.team (a range of the past: every later
 * month is probed too); the big customer's last 31 days by hour; the
 * organisation's last 7 days by day and customerId.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { randomToken } from "../src/ids.ts"
import {
  benchDatabase,
  billingProcesses,
  cpuMeter,
  createBenchDatabase,
  exitOf,
  flag,
  load,
  reportHead,
  runBench,
  startServedBench,
  stopProcesses,
  textFlag
} from "./support.ts"

const rowCount = flag("rows", 3_000_000)
const customerCount = flag("customers", 1000)
const months = flag("months", 12)
const sampleCount = flag("sample", 5000)
const requests = flag("requests", 300)
const connections = flag("connections", 8)
const yardstickCount = flag("yardstick", 10_000)
const reportFile = textFlag("report")
const keep = process.argv.includes("--keep")

const DAY = 86_400_000
const root = fileURLToPath(new URL("..", import.meta.url))
const { adminUrl, databaseName, databaseUrl } = benchDatabase("usage-summary", "billing_bench_summary_")
const { running, spawnCli, cli } = billingProcesses(root, { ...process.env, DATABASE_URL: databaseUrl })
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
/** SQL text: the 10 characters of milliseconds `ms` (a bigint expression) as src/ids.ts writes them. */
const timePart = (ms: string) =>
  Array.from({ length: 10 }, (_, i) => `substr('${ALPHABET}', ((${ms} >> ${5 * (9 - i)}) & 31)::int + 1, 1)`).join(" || ")

/**
 * The history (see the header), `chunk` rows a statement. Row n is written at
 * `start + n * step`; its customer is the big one for n % 10 = 0, else one of
 * the others by n; a reversed row's reversing row is written in the same
 * statement a minute later, with the same moment.
 */
const seedHistory = async (db: pg.Client, organizationId: string, big: string, others: ReadonlyArray<string>) => {
  const started = performance.now()
  await db.query("SET synchronous_commit = off")
  const run = randomToken(3)
  const [{ now }] = (await db.query<{ now: Date }>("SELECT now() AS now")).rows as [{ now: Date }]
  const end = now.getTime() - 3_600_000
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - months, now.getUTCDate(), now.getUTCHours())
  const step = (end - start) / rowCount
  for (let month = -1; month <= months + 1; month++) {
    await db.query("SELECT ensure_usage_log_month($1)", [new Date(Date.UTC(new Date(start).getUTCFullYear(), new Date(start).getUTCMonth() + month, 1))])
  }
  await db.query("CREATE TEMP TABLE seed_customers (k int PRIMARY KEY, id text NOT NULL)")
  await db.query(
    `INSERT INTO seed_customers SELECT k - 1, id FROM unnest($1::text[]) WITH ORDINALITY AS c(id, k)`,
    [others]
  )
  const chunk = 250_000
  for (let from = 0; from < rowCount; from += chunk) {
    const to = Math.min(rowCount, from + chunk)
    await db.query(
      `WITH g AS MATERIALIZED (
         SELECT n, ms, ${timePart("ms")} || lpad(to_hex(n), 16, '0') AS suffix,
                CASE WHEN n % 10 = 0 THEN $7 ELSE sc.id END AS customer_id,
                (ARRAY['chat', 'search', 'summarize', 'pages'])[n % 4 + 1] AS agent_key,
                CASE WHEN n % 50 = 7 THEN to_timestamp(ms / 1000.0) - make_interval(days => (n % 30)::int)
                     ELSE to_timestamp(ms / 1000.0) - interval '2 seconds' END AS occurred_at,
                n % 200 = 3 AS reversed
         FROM (SELECT n, ($1::bigint + floor(n * $2::float8))::bigint AS ms FROM generate_series($3::bigint, $4::bigint - 1) n) x
         JOIN seed_customers sc ON sc.k = (x.n % $5::int)
       ),
       rows AS (
         SELECT g.*, agent_key = 'pages' AS unit,
                CASE WHEN agent_key = 'pages' THEN NULL ELSE (ARRAY['gpt-4o', 'gpt-4o-mini', 'claude-sonnet'])[n % 3 + 1] END AS model,
                CASE WHEN n % 6 < 4 THEN 'user' || (n % 6) || '@example.com' END AS member,
                CASE WHEN n % 2 = 0 THEN jsonb_build_object('team', (ARRAY['research', 'support', 'ops'])[n % 3 + 1]) END AS custom,
                CASE WHEN agent_key = 'pages' THEN (n % 5 + 1)::numeric ELSE round(0.8 + (n % 97) * 0.0123, 12) END AS quantity,
                CASE WHEN agent_key = 'pages' THEN 0 ELSE round(0.005 + (n % 97) * 0.0000769, 12) END AS provider_cost
         FROM g
       )
       INSERT INTO usage_log (organization_id, id, customer_id, meter, entitlement_id, entitlement_name, agent_key, model,
                              input_tokens, output_tokens, cache_tokens, cache_write_tokens, quantity, provider_cost,
                              customer_cost, billing_mode, balance_remaining, signal_id, message_id, member, custom,
                              created_at, occurred_at, reverses, reversed_by)
       SELECT $6, 'usg_' || suffix, customer_id, CASE WHEN unit THEN 'UNIT' ELSE 'CREDIT' END, 'ent_' || agent_key,
              initcap(agent_key), agent_key, model, CASE WHEN unit THEN NULL ELSE 1000 END, CASE WHEN unit THEN NULL ELSE 200 END,
              CASE WHEN unit THEN NULL ELSE 0 END, CASE WHEN unit THEN NULL ELSE 0 END, quantity, provider_cost,
              CASE WHEN unit THEN quantity * 0.5 ELSE round(provider_cost * 1.2, 12) END, 'ADVANCE', 1000,
              'sig_' || suffix, 'msg_' || suffix, member, custom, to_timestamp(ms / 1000.0), occurred_at,
              NULL, CASE WHEN reversed THEN 'usg_' || suffix || 'r' END
       FROM rows
       UNION ALL
       SELECT $6, 'usg_' || suffix || 'r', customer_id, CASE WHEN unit THEN 'UNIT' ELSE 'CREDIT' END, 'ent_' || agent_key,
              initcap(agent_key), agent_key, model, NULL, NULL, NULL, NULL, -quantity, -provider_cost,
              -(CASE WHEN unit THEN quantity * 0.5 ELSE round(provider_cost * 1.2, 12) END), 'ADVANCE', 1000,
              'sig_' || suffix, 'msg_' || suffix || 'r', member, custom, to_timestamp(ms / 1000.0) + interval '1 minute',
              occurred_at, 'usg_' || suffix, NULL
       FROM rows WHERE reversed AND to_timestamp(ms / 1000.0) + interval '1 minute' < now()`,
      [start, step, from, to, others.length, organizationId, big]
    )
    progress(`history: ${to} of ${rowCount} rows (${Math.round(to / ((performance.now() - started) / 1000))}/s)`)
  }
  progress("history: VACUUM ANALYZE, CHECKPOINT")
  await db.query("VACUUM ANALYZE usage_log")
  await db.query("CHECKPOINT")
  const seconds = (performance.now() - started) / 1000
  return { rows: rowCount, months, customers: others.length + 1, seconds: round(seconds, 1), run }
}

/**
 * A shape's statement as src/usage/UsageSummary.ts writes it (the bounds as
 * values, the months before `from` less 5 minutes left out when it is planned),
 * for EXPLAIN.
 */
const statementOf = (organizationId: string, shape: Shape): [string, Array<unknown>] => {
  const unit = { HOUR: "hour", DAY: "day", MONTH: "month" }[shape.window]
  const columns: Record<string, string> = {
    agentKey: `u.agent_key COLLATE "C"`,
    meter: `u.meter COLLATE "C"`,
    customerId: `u.customer_id COLLATE "C"`,
    "custom.team": `nullif(u.custom #> string_to_array('team', '.'), 'null'::jsonb)::text COLLATE "C"`
  }
  const groups = shape.groupBy.map((field, index) => `, ${columns[field]} AS g${index}`).join("")
  const positions = shape.groupBy.map((_, index) => `, ${index + 2}`).join("")
  const params: Array<unknown> = [organizationId, shape.from, shape.to, new Date(shape.from.getTime() - 5 * 60_000)]
  if (shape.customerId !== undefined) params.push(shape.customerId)
  return [
    `SELECT date_trunc('${unit}', coalesce(u.occurred_at, u.created_at), 'UTC') AS window_start${groups},
            sum(u.quantity) AS quantity, sum(u.customer_cost) AS cost, sum(u.provider_cost) AS provider_cost,
            sum(CASE WHEN u.reverses IS NULL THEN 1 ELSE -1 END)::int AS count
     FROM usage_log u
     WHERE u.organization_id = $1 ${shape.customerId === undefined ? "" : "AND u.customer_id = $5"}
       AND coalesce(u.occurred_at, u.created_at) >= $2 AND coalesce(u.occurred_at, u.created_at) < $3
       AND u.created_at >= $4
     GROUP BY 1${positions} ORDER BY 1${positions} LIMIT 10001`,
    params
  ]
}

interface Shape {
  readonly name: string
  readonly customerId?: string
  readonly from: Date
  readonly to: Date
  readonly window: "HOUR" | "DAY" | "MONTH"
  readonly groupBy: ReadonlyArray<string>
}

const main = async () => {
  const { admin, observer } = await createBenchDatabase(adminUrl, databaseName, databaseUrl)
  const head = reportHead(root, { bench: "usage-summary", rows: rowCount, customers: customerCount, months, sample: sampleCount, requests, connections })
  try {
    const { api, organizationId, serve, yardstick } = await startServedBench({
      cli,
      spawnCli: (args) => spawnCli(args),
      observer,
      databaseUrl,
      yardstickCount,
      connections: Math.max(connections, 16),
      progress
    })

    // 2. The sample, the way users make it.
    const sampleStarted = performance.now()
    const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    const creditId = (await api.request("POST", "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: bundle })).json.result.credit.id
    const unitId = (await api.request("POST", "/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 })).json.result.unit.id
    const planId = (await api.request("POST", "/plans", {
      name: "Bench",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 1_000_000_000 },
        { type: "UNIT", billingMode: "ARREAR", unitId }
      ]
    })).json.result.plan.id
    const sampleCustomers: Array<string> = []
    for (let index = 0; index < 8; index++) {
      const id = (await api.request("POST", "/customers", { name: `Sample ${index}`, email: `s${index}@example.com` })).json.result.customer.id
      const bought = await api.request("POST", "/purchases", { customerId: id, planId })
      if (bought.status !== 201) throw new Error(`purchase: ${bought.status} ${JSON.stringify(bought.json)}`)
      for (const user of ["ann", "bob"]) await api.request("POST", `/customers/${id}/members`, { email: `${user}@example.com` })
      sampleCustomers.push(id)
    }
    // As if bought 40 days ago: usage of the last 30 days falls in the current cycle.
    await observer.query(
      `UPDATE purchases SET period_start = now() - interval '40 days', period_end = now() + interval '20 days' WHERE organization_id = $1`,
      [organizationId]
    )
    const now = Date.now()
    const signal = (index: number) => {
      const customerId = sampleCustomers[index % sampleCustomers.length]
      const timestamp = new Date(now - ((index * 7919) % (30 * 24 * 60)) * 60_000 - 60_000).toISOString()
      const extra = {
        ...(index % 3 === 0 ? { member: ["ann@example.com", "Bob@Example.com"][index % 2] } : {}),
        ...(index % 2 === 0 ? { custom: { team: ["research", "support", "ops"][index % 3] } } : {})
      }
      return index % 4 === 3
        ? { type: "unit", customerId, agentKey: "pages", quantity: (index % 5) + 1, timestamp, ...extra }
        : { type: "credit", customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 500 + (index % 997), outputTokens: 100 + (index % 389) }, timestamp, ...extra }
    }
    await load(Math.ceil(sampleCount / 100), 4, async (batch) => {
      const signals = Array.from({ length: Math.min(100, sampleCount - batch * 100) }, (_, i) => signal(batch * 100 + i))
      const answer = await api.request("POST", "/signal/batch", { signals })
      if (answer.status !== 202 && answer.status !== 200) throw new Error(`batch: ${answer.status} ${JSON.stringify(answer.json)}`)
    })
    const worker = await exitOf(spawnCli(["worker", "--once"]))
    if (worker.code !== 0) throw new Error(`worker --once: exit ${worker.code}`)
    const priced = (await observer.query("SELECT id FROM usage_log WHERE organization_id = $1 ORDER BY id", [organizationId])).rows
    let reversed = 0
    for (const [index, row] of priced.entries()) {
      if (index % 100 !== 0) continue
      const answer = await api.request("POST", `/signal/usage-log/${row.id}/reverse`, { reason: "bench" })
      if (answer.status !== 200) throw new Error(`reverse: ${answer.status} ${JSON.stringify(answer.json)}`)
      reversed++
    }
    const sample = { signals: sampleCount, priced: priced.length, reversed, seconds: round((performance.now() - sampleStarted) / 1000, 1) }
    progress(`sample: ${JSON.stringify(sample)}`)

    // 3. The history, made by PostgreSQL.
    const made = await observer.query(
      `INSERT INTO customers (organization_id, id, slug, name, email, currency_code)
       SELECT $1, 'cus_' || lpad(to_hex(k), 26, '0'), 'history-' || k, 'History ' || k, 'history-' || k || '@example.com', 'USD'
       FROM generate_series(1, $2::int) k RETURNING id`,
      [organizationId, customerCount]
    )
    const big = made.rows[0].id as string
    const others = [...made.rows.slice(1).map((row) => row.id as string), ...sampleCustomers]
    const seeded = await seedHistory(observer, organizationId, big, others)
    const sizes = (await observer.query(
      `SELECT count(*)::int AS rows, pg_size_pretty(sum(pg_total_relation_size(c.oid))) AS size
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_log'::regclass`
    )).rows[0]
    const total = Number((await observer.query("SELECT count(*) AS n FROM usage_log")).rows[0].n)
    progress(`history: ${JSON.stringify(seeded)}, ${total} rows in all, ${JSON.stringify(sizes)}`)

    // 4. The shapes, through HTTP.
    const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate())
    const month = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)
    const sixMonthsAgo = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() - 6, 1))
    const shapes: ReadonlyArray<Shape> = [
      { name: "small customer, 30 days by day and agentKey", customerId: sampleCustomers[0]!, from: new Date(today - 29 * DAY), to: new Date(today + DAY), window: "DAY", groupBy: ["agentKey"] },
      { name: "big customer, 30 days by day and agentKey", customerId: big, from: new Date(today - 29 * DAY), to: new Date(today + DAY), window: "DAY", groupBy: ["agentKey"] },
      { name: "big customer, 12 months by month and meter", customerId: big, from: new Date(Date.UTC(new Date(month).getUTCFullYear(), new Date(month).getUTCMonth() - 11, 1)), to: new Date(Date.UTC(new Date(month).getUTCFullYear(), new Date(month).getUTCMonth() + 1, 1)), window: "MONTH", groupBy: ["meter"] },
      { name: "big customer, the month 6 months ago by day and custom.team", customerId: big, from: sixMonthsAgo, to: new Date(Date.UTC(sixMonthsAgo.getUTCFullYear(), sixMonthsAgo.getUTCMonth() + 1, 1)), window: "DAY", groupBy: ["custom.team"] },
      { name: "big customer, 31 days by hour", customerId: big, from: new Date(today - 30 * DAY), to: new Date(today + DAY), window: "HOUR", groupBy: [] },
      { name: "organisation, 7 days by day and customerId", from: new Date(today - 6 * DAY), to: new Date(today + DAY), window: "DAY", groupBy: ["customerId"] }
    ]
    const measured = []
    for (const shape of shapes) {
      const query = new URLSearchParams({
        ...(shape.customerId === undefined ? {} : { customerId: shape.customerId }),
        from: shape.from.toISOString(),
        to: shape.to.toISOString(),
        window: shape.window,
        ...(shape.groupBy.length === 0 ? {} : { groupBy: shape.groupBy.join(",") })
      })
      const first = await api.request("GET", `/usage/summary?${query}`)
      if (first.status !== 200) throw new Error(`${shape.name}: ${first.status} ${JSON.stringify(first.json)}`)
      const rows = first.json.result.rows.length
      const counted = first.json.result.rows.reduce((sum: number, row: { count: number }) => sum + row.count, 0)
      // Warm: the months' pages in the cache, as a page shown again and again finds them.
      await load(Math.min(20, requests), connections, async () => void (await api.request("GET", `/usage/summary?${query}`)))
      const cpu = cpuMeter(() => ({ serve: serve.pid }))
      const result = await load(requests, connections, async () => {
        const answer = await api.request("GET", `/usage/summary?${query}`)
        if (answer.status !== 200) throw new Error(`${shape.name}: ${answer.status}`)
      })
      const cpuMs = cpu.msPer(requests)
      const [text, params] = statementOf(organizationId, shape)
      const plan = (await observer.query(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params)).rows.map((row) => row["QUERY PLAN"] as string)
      const entry = {
        shape: shape.name,
        rows,
        usageRowsCounted: counted,
        rate: result.rate,
        ofYardstick: round(result.rate / yardstick.rate, 4),
        p50Ms: round(result.p50, 1),
        p99Ms: round(result.p99, 1),
        cpuMs: cpuMs.total,
        cpuMsByProcess: cpuMs.byProcess,
        plan
      }
      progress(`${shape.name}: ${rows} rows (${counted} usage rows), ${result.rate}/s = ${entry.ofYardstick} x yardstick, p50 ${entry.p50Ms} ms, p99 ${entry.p99Ms} ms, ${cpuMs.total} ms CPU each`)
      measured.push(entry)
    }
    const report = { ...head, yardstick, sample, seeded: { ...seeded, totalRows: total, ...sizes }, shapes: measured, loadAfter: os.loadavg() }
    if (reportFile) fs.writeFileSync(reportFile, `${JSON.stringify(report, null, 2)}\n`)
    process.stdout.write(`${JSON.stringify({ ...report, shapes: measured.map(({ plan: _, ...rest }) => rest) }, null, 2)}\n`)
    process.stdout.write(`| shape | rows answered | usage rows | req/s | × yardstick | p50 ms | p99 ms | CPU ms a request |\n|---|---|---|---|---|---|---|---|\n`)
    for (const entry of measured) {
      process.stdout.write(`| ${entry.shape} | ${entry.rows} | ${entry.usageRowsCounted} | ${entry.rate} | ${entry.ofYardstick} | ${entry.p50Ms} | ${entry.p99Ms} | ${entry.cpuMs} |\n`)
    }
    api.close()
  } finally {
    await stopProcesses(running)
    await observer.end().catch(() => {})
    if (keep) progress(`kept the database ${databaseName}`)
    else await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.end()
  }
}

runBench(main, running)
