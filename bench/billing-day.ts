/**
 * bench/billing-day: how fast one `billing cycle run` renews a day's worth of due
 * purchases, and whether every renewal is exact. Run by hand, never by `npm test`:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/billing-day.ts \
 *     [--purchases 10000] [--usage-share 0.3] [--yardstick 10000] [--report results.json] [--keep] [--root OTHER_CHECKOUT]
 *
 * It only drives the CLI (`bin/billing.mjs`) and reads the tables. On a database of
 * its own (dropped at the end unless --keep):
 *
 *  1. setup through the service: `billing migrate`, `billing org create`, then
 *     `billing serve --no-worker` for a credit, an ARREAR unit, a tax, and a plan of
 *     an ADVANCE credit allowance, the ARREAR unit and an ADVANCE wallet amount
 *     (with a price adjustment); two template customers with an ACTIVE purchase
 *     each, one of them with a unit signal (ARREAR usage) and a credit signal
 *     (ADVANCE usage), priced by `billing worker --once`;
 *  2. the templates are cloned in SQL up to --purchases purchases (--usage-share of
 *     them with usage): every row that belongs to a template customer, in every
 *     table (found through the id columns, so tables added later are cloned too),
 *     is copied with fresh ids of the service's shape; nothing else changes;
 *  3. an idle `billing cycle run` (nothing due): the fixed cost of the process; then
 *     the yardstick (bench/support.ts `plainInsertYardstick`, --yardstick rows, 0 for
 *     none), so the run's rate can be read against the same minutes' machine;
 *  4. one `billing cycle run --now <the cycles' end + 1 day>`, timed: renewals/s,
 *     statements (bench/count-statements.mjs) and peak memory;
 *  5. checks, against the state before the run: every purchase renewed exactly once
 *     (cycle_index + 1, the next period, spent_this_cycle 0); exactly one new PLAN
 *     invoice each with the exact subtotal (ADVANCE charges + price adjustment, to
 *     the cent), tax per active tax and total, its lines adding up; exactly one
 *     USAGE invoice where the ended cycle had ARREAR charges, none elsewhere; every
 *     balance re-granted (ADVANCE: the plan quantity, used 0; ARREAR: zeroed); one
 *     CYCLE_GRANT ledger row per wallet with the plan's amount and the balance moved
 *     by it; no other new invoice or ledger row.
 */
import { SqlClient } from "@effect/sql"
import { benchPort, cliProcesses, flag, plainInsertYardstick, textFlag } from "./support.ts"
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

const purchaseCount = flag("purchases", 10_000)
const usageShare = flag("usage-share", 0.3)
const yardstickCount = flag("yardstick", 10_000)
const reportFile = textFlag("report")
const keep = process.argv.includes("--keep")

if (!(purchaseCount >= 2)) {
  process.stderr.write("--purchases must be at least 2\n")
  process.exit(2)
}
const adminUrl = process.env.DATABASE_URL
if (!adminUrl) {
  process.stderr.write("bench/billing-day needs DATABASE_URL (an admin connection to PostgreSQL)\n")
  process.exit(2)
}

/** The plan every customer buys, and the usage of the template with usage. */
const PLAN = {
  creditQuantity: 1000,
  walletAmount: 25,
  priceAdjustment: 4.99,
  unitPrice: 0.25,
  taxPercent: 18.5,
  unitsUsed: 12
} as const

// Ids from the service's own generator (src/ids.ts), so the backlog sorts and
// looks like the intake's; `token(n)` is n random base-32 characters.
const token = (length: number) => randomToken(8).slice(0, length)


// ---------------------------------------------------------------------------
// Databases

const databaseName = `billing_bench_day_${token(6)}`
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
const quote = (name: string) => `"${name.replace(/"/g, "\"\"")}"`

// ---------------------------------------------------------------------------
// Processes

const env = { ...process.env, DATABASE_URL: databaseUrl, BILLING_WORKER_POLL_MS: "50" }
// BENCH_NODE_ARGS passes flags to the measured processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-day-"))

const { finished, running, spawnCli } = cliProcesses({ root, cliPath, preload, env, nodeArgs })

const cli = async (args: ReadonlyArray<string>, statsFile?: string) => {
  const result = await finished(spawnCli([...args, "--json"], statsFile))
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

const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mb = (kb: number) => Math.round(kb / 1024)

// ---------------------------------------------------------------------------
// Setup through the service

interface Templates {
  readonly organizationId: string
  /** The template without usage and the one with usage. */
  readonly plain: string
  readonly used: string
}

const setup = async (): Promise<Templates> => {
  await cli(["migrate"])
  const { apiKey, organization } = await cli(["org", "create", "--name", "Bench billing day"])
  const organizationId: string = organization.id
  const port = benchPort()
  const server = spawnCli(["serve", "--no-worker", "--port", String(port)])
  const serverDone = finished(server)
  const baseUrl = `http://127.0.0.1:${port}/api/v1`
  let templates: { plain: string; used: string }
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
    const unit = await post("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: PLAN.unitPrice }, 201)
    await post("/taxes", { name: "VAT", ratePercent: PLAN.taxPercent }, 201)
    const plan = await post("/plans", {
      name: "Bench billing day",
      billingCycle: "MONTHLY",
      priceAdjustment: PLAN.priceAdjustment,
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.credit.id, quantity: PLAN.creditQuantity },
        { type: "UNIT", billingMode: "ARREAR", unitId: unit.unit.id },
        { type: "WALLET", billingMode: "ADVANCE", amount: PLAN.walletAmount }
      ]
    }, 201)
    const customerOnPlan = async (name: string, externalId: string) => {
      const created = await post("/customers", { name, email: `${externalId}@bench.example.com`, externalId }, 201)
      await post("/purchases", { customerId: created.customer.id, planId: plan.plan.id }, 201)
      return created.customer.id as string
    }
    const plain = await customerOnPlan("Template plain", "bench-template-plain")
    const used = await customerOnPlan("Template usage", "bench-template-usage")
    await post("/signal/unit", { customerId: used, agentKey: "pages", quantity: PLAN.unitsUsed }, 202)
    await post("/signal/credit", {
      customerId: used,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 }
    }, 202)
    templates = { plain, used }
  } finally {
    server.kill("SIGTERM")
    await serverDone
  }
  // The usage is priced by the worker, as in production.
  await cli(["worker", "--once"])
  const [priced] = await q(
    `SELECT count(*) FILTER (WHERE status = 'PROCESSED') AS processed, count(*) AS total FROM signals`
  )
  const [arrear] = await q(
    `SELECT coalesce(sum(arrear_amount), 0) AS amount FROM purchase_balances WHERE customer_id = $1 AND billing_mode = 'ARREAR'`,
    [templates.used]
  )
  if (num(priced!.processed) !== 2 || num(priced!.total) !== 2 || !(num(arrear!.amount) > 0)) {
    throw new Error(`the template's usage was not priced: ${JSON.stringify({ priced, arrear })}`)
  }
  return { organizationId, ...templates }
}

// ---------------------------------------------------------------------------
// Cloning a template customer with everything that belongs to it

interface Column {
  readonly name: string
  readonly type: string
}
interface Table {
  readonly name: string
  readonly columns: ReadonlyArray<Column>
}

const isText = (column: Column) => column.type === "text" || column.type === "varchar"
const isJson = (column: Column) => column.type === "json" || column.type === "jsonb"

const tablesOf = async (): Promise<Array<Table>> => {
  const names = await q(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`
  )
  const columns = await q(
    `SELECT table_name, column_name, udt_name FROM information_schema.columns
     WHERE table_schema = 'public' AND is_generated = 'NEVER' ORDER BY table_name, ordinal_position`
  )
  return names.map((t) => ({
    name: t.name!,
    columns: columns.filter((c) => c.table_name === t.name).map((c) => ({ name: c.column_name!, type: c.udt_name! }))
  }))
}

/**
 * Every row that belongs to the customer: rows whose id columns (`id`, `*_id` but
 * organization_id) hold the customer's id or the id of a row already found, until
 * nothing new is found. Returns them per table, and the ids they own.
 */
const ownedRows = async (tables: ReadonlyArray<Table>, organizationId: string, customerId: string) => {
  const rows = new Map<string, Map<string, Row>>()
  const ids = new Set<string>([customerId])
  for (let grew = true; grew;) {
    grew = false
    for (const table of tables) {
      const refs = table.columns.filter((c) =>
        isText(c) && c.name !== "organization_id" && (c.name === "id" || c.name.endsWith("_id"))
      )
      if (refs.length === 0 || !table.columns.some((c) => c.name === "organization_id")) continue
      const found = await q(
        `SELECT * FROM ${quote(table.name)} WHERE organization_id = $1
           AND (${refs.map((c) => `${quote(c.name)} = ANY($2::text[])`).join(" OR ")})`,
        [organizationId, [...ids]]
      )
      const known = rows.get(table.name) ?? new Map<string, Row>()
      for (const row of found) {
        const key = JSON.stringify(row)
        if (known.has(key)) continue
        known.set(key, row)
        grew = true
        for (const owned of ["id", "message_id"]) {
          const value = row[owned]
          if (typeof value === "string") ids.add(value)
        }
      }
      if (known.size > 0) rows.set(table.name, known)
    }
  }
  return { rows, ids }
}

/** Tables in an order that satisfies their foreign keys (parents first). */
const insertionOrder = async (names: ReadonlyArray<string>) => {
  const edges = await q(
    `SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent FROM pg_constraint WHERE contype = 'f'`
  )
  const set = new Set(names)
  const parents = new Map(names.map((name) => [name, new Set<string>()]))
  for (const edge of edges) {
    if (set.has(edge.child!) && set.has(edge.parent!) && edge.child !== edge.parent) parents.get(edge.child!)!.add(edge.parent!)
  }
  const order: Array<string> = []
  const placed = new Set<string>()
  while (order.length < names.length) {
    const ready = names.filter((name) => !placed.has(name) && [...parents.get(name)!].every((p) => placed.has(p)))
    if (ready.length === 0) throw new Error(`foreign key cycle among ${names.filter((n) => !placed.has(n)).join(", ")}`)
    for (const name of ready) {
      order.push(name)
      placed.add(name)
    }
  }
  return order
}

const slugify = (name: string) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40)

/**
 * Clones the template customer `copies` times: each copy is every owned row with
 * each owned id replaced by a fresh one of the same prefix (in jsonb values too),
 * and the customer's name, email, externalId and slug made its own.
 */
const cloneCustomer = async (
  tables: ReadonlyArray<Table>,
  organizationId: string,
  customerId: string,
  copies: number,
  firstNumber: number
) => {
  if (copies <= 0) return { rowsPerCopy: 0, inserted: 0 }
  const { rows, ids } = await ownedRows(tables, organizationId, customerId)
  const order = await insertionOrder([...rows.keys()])
  const rowsPerCopy = [...rows.values()].reduce((t, m) => t + m.size, 0)
  const maps = Array.from({ length: copies }, () =>
    new Map([...ids].map((id) => {
      const cut = id.indexOf("_")
      return [id, cut > 0 ? makeId(id.slice(0, cut)) : `${id}-${token(8)}`] as const
    })))
  const remapJson = (value: unknown, map: Map<string, string>): unknown => {
    if (typeof value === "string") return map.get(value) ?? value
    if (Array.isArray(value)) return value.map((v) => remapJson(v, map))
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, remapJson(v, map)]))
    }
    return value
  }
  const invoiceNumbers = { last: Number((await q(
    `SELECT coalesce((SELECT last_number FROM invoice_counters WHERE organization_id = $1), 0) AS last`,
    [organizationId]
  ))[0]!.last) }
  let inserted = 0
  for (const name of order) {
    const table = tables.find((t) => t.name === name)!
    const templateRows = [...rows.get(name)!.values()]
    const chunk = Math.max(1, Math.floor(2000 / templateRows.length))
    const columns = table.columns.map((c) => quote(c.name)).join(", ")
    for (let start = 0; start < copies; start += chunk) {
      const payload: Array<Record<string, unknown>> = []
      for (let copy = start; copy < Math.min(copies, start + chunk); copy++) {
        const map = maps[copy]!
        const n = firstNumber + copy
        for (const row of templateRows) {
          const out: Record<string, unknown> = {}
          for (const column of table.columns) {
            const value = row[column.name] ?? null
            out[column.name] = value === null
              ? null
              : isJson(column)
              ? remapJson(JSON.parse(value), map)
              : map.get(value) ?? value
          }
          if (name === "invoices" && out.sequence_number !== null && out.sequence_number !== undefined) {
            // A finalised invoice's number is its organisation's next one (gap-free, unique): not the template's.
            const next = ++invoiceNumbers.last
            out.sequence_number = next
            out.number = `INV-${String(next).padStart(6, "0")}`
          }
          if (name === "customers") {
            const customerName = `Customer ${n}`
            if ("name" in out) out.name = customerName
            if ("email" in out) out.email = `c${n}@bench.example.com`
            if (out.external_id !== null && out.external_id !== undefined) out.external_id = `bench-${n}`
            if ("slug" in out) out.slug = `${slugify(customerName)}-${token(4)}`
          }
          payload.push(out)
        }
      }
      await q(
        `INSERT INTO ${quote(name)} (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${quote(name)}, $1::json)`,
        [JSON.stringify(payload)]
      )
      inserted += payload.length
    }
  }
  await q(`UPDATE invoice_counters SET last_number = $2 WHERE organization_id = $1`, [organizationId, invoiceNumbers.last])
  return { rowsPerCopy, inserted, tables: Object.fromEntries([...rows].map(([t, m]) => [t, m.size])) }
}

// ---------------------------------------------------------------------------
// Checks

/** The state the run starts from, kept in schema `bench`, and what each purchase should become. */
const snapshotBefore = async () => {
  await q(`CREATE SCHEMA bench`)
  await q(`CREATE TABLE bench.purchases AS SELECT * FROM purchases`)
  await q(`CREATE TABLE bench.balances AS SELECT * FROM purchase_balances`)
  await q(`CREATE TABLE bench.wallets AS SELECT * FROM wallets`)
  await q(`CREATE TABLE bench.invoice_ids AS SELECT organization_id, id FROM invoices`)
  await q(`CREATE TABLE bench.ledger_ids AS SELECT organization_id, id FROM wallet_ledger`)
  // Cycle n is [anchor + n months, anchor + n+1 months) in UTC, the day clamped to the month's end.
  await q(`CREATE TABLE bench.expected AS
    SELECT b.organization_id, b.id AS purchase_id, b.customer_id, b.cycle_index,
           b.period_start AS old_start, b.period_end AS old_end,
           ((b.billing_date AT TIME ZONE 'UTC') + make_interval(months => b.cycle_index + 2)) AT TIME ZONE 'UTC' AS new_end,
           b.snapshot->>'currencyCode' AS currency,
           x.lines_total, x.wallet_grant,
           coalesce(a.arrear_total, 0) AS arrear_total
    FROM bench.purchases b
    CROSS JOIN LATERAL (
      SELECT coalesce(sum((c->>'charge')::numeric) FILTER (WHERE c->>'billingMode' = 'ADVANCE'), 0)
               + coalesce((b.snapshot->>'priceAdjustment')::numeric, 0) AS lines_total,
             coalesce(sum((c->>'amount')::numeric) FILTER (WHERE c->>'type' = 'WALLET' AND c->>'billingMode' = 'ADVANCE'), 0) AS wallet_grant
      FROM jsonb_array_elements(b.snapshot->'components') c) x
    LEFT JOIN (SELECT organization_id, purchase_id, sum(arrear_amount) AS arrear_total
               FROM bench.balances WHERE billing_mode = 'ARREAR' GROUP BY 1, 2) a
      ON a.organization_id = b.organization_id AND a.purchase_id = b.id
    WHERE b.status = 'ACTIVE'`)
}

const newInvoices = `new_invoices AS (
  SELECT i.* FROM invoices i
  WHERE NOT EXISTS (SELECT 1 FROM bench.invoice_ids o WHERE o.organization_id = i.organization_id AND o.id = i.id))`

/** The expected tax of a subtotal: one cent-rounded amount per active tax. */
const taxOf = (subtotal: string, alias: string) => `CROSS JOIN LATERAL (
  SELECT coalesce(sum(round(${subtotal} * t.rate_percent / 100, 2)), 0) AS tax, count(*) AS n
  FROM taxes t WHERE t.organization_id = e.organization_id AND t.is_active) ${alias}`

const linesOf = (alias: string) => `LEFT JOIN LATERAL (
  SELECT coalesce(sum(amount) FILTER (WHERE kind = 'LINE'), 0) AS line_sum,
         coalesce(sum(amount) FILTER (WHERE kind = 'TAX'), 0) AS tax_sum,
         count(*) FILTER (WHERE kind = 'TAX') AS tax_lines
  FROM invoice_lines il WHERE il.organization_id = i.organization_id AND il.invoice_id = i.id) ${alias} ON true`

const CHECKS: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "purchase renewed once (cycle_index + 1, next period, spent 0)",
    sql: `SELECT count(*) AS checked, count(*) FILTER (WHERE (
        p.status = 'ACTIVE' AND p.cycle_index = e.cycle_index + 1 AND p.period_start = e.old_end
        AND p.period_end = e.new_end AND p.spent_this_cycle = 0) IS NOT TRUE) AS violations
      FROM bench.expected e LEFT JOIN purchases p ON p.organization_id = e.organization_id AND p.id = e.purchase_id`
  },
  {
    name: "one new PLAN invoice, exact subtotal, tax and total, lines adding up",
    sql: `WITH ${newInvoices},
      plan AS (SELECT organization_id, purchase_id, count(*) AS n, min(id) AS id FROM new_invoices WHERE kind = 'PLAN' GROUP BY 1, 2)
      SELECT count(*) AS checked, count(*) FILTER (WHERE coalesce(pl.n, 0) <> 1 OR (
          i.customer_id = e.customer_id AND i.currency_code = e.currency
          AND i.period_start = e.old_end AND i.period_end = e.new_end AND i.issued_at = e.old_end
          AND i.subtotal = round(e.lines_total, 2) AND i.tax_total = tx.tax AND i.total = round(e.lines_total, 2) + tx.tax
          AND i.status = CASE WHEN round(e.lines_total, 2) + tx.tax > 0 THEN 'OPEN' ELSE 'PAID' END
          AND l.line_sum = e.lines_total AND l.tax_sum = tx.tax AND l.tax_lines = tx.n) IS NOT TRUE) AS violations
      FROM bench.expected e
      LEFT JOIN plan pl ON pl.organization_id = e.organization_id AND pl.purchase_id = e.purchase_id
      LEFT JOIN invoices i ON i.organization_id = pl.organization_id AND i.id = pl.id
      ${taxOf("round(e.lines_total, 2)", "tx")}
      ${linesOf("l")}`
  },
  {
    name: "one new USAGE invoice where ARREAR was charged (exact), none elsewhere",
    sql: `WITH ${newInvoices},
      usage AS (SELECT organization_id, purchase_id, count(*) AS n, min(id) AS id FROM new_invoices WHERE kind = 'USAGE' GROUP BY 1, 2)
      SELECT count(*) FILTER (WHERE e.arrear_total <> 0) AS checked, count(*) FILTER (WHERE
          (e.arrear_total = 0 AND coalesce(u.n, 0) <> 0)
          OR (e.arrear_total <> 0 AND (coalesce(u.n, 0) <> 1 OR (
            i.customer_id = e.customer_id AND i.period_start = e.old_start AND i.period_end = e.old_end AND i.issued_at = e.old_end
            AND i.subtotal = round(e.arrear_total, 2) AND i.tax_total = tx.tax AND i.total = round(e.arrear_total, 2) + tx.tax
            AND l.line_sum = e.arrear_total AND l.tax_sum = tx.tax AND l.tax_lines = tx.n) IS NOT TRUE))) AS violations
      FROM bench.expected e
      LEFT JOIN usage u ON u.organization_id = e.organization_id AND u.purchase_id = e.purchase_id
      LEFT JOIN invoices i ON i.organization_id = u.organization_id AND i.id = u.id
      ${taxOf("round(e.arrear_total, 2)", "tx")}
      ${linesOf("l")}`
  },
  {
    name: "no other new invoice",
    sql: `WITH ${newInvoices}
      SELECT (SELECT count(*) FROM new_invoices) AS checked,
             abs((SELECT count(*) FROM new_invoices) - (SELECT count(*) + count(*) FILTER (WHERE arrear_total <> 0) FROM bench.expected))
               AS violations`
  },
  {
    name: "invoice numbers gap-free per organisation (1..n, none twice, the counter at n)",
    sql: `SELECT count(*) AS checked,
             (SELECT count(*) FROM (
                SELECT i.organization_id FROM invoices i
                LEFT JOIN invoice_counters c ON c.organization_id = i.organization_id
                WHERE i.sequence_number IS NOT NULL
                GROUP BY i.organization_id, c.last_number
                HAVING count(*) <> max(i.sequence_number) OR count(DISTINCT i.sequence_number) <> count(*)
                    OR min(i.sequence_number) <> 1 OR c.last_number IS DISTINCT FROM max(i.sequence_number)) bad) AS violations
      FROM invoices WHERE sequence_number IS NOT NULL`
  },
  {
    name: "balances re-granted (ADVANCE: plan quantity, used 0; ARREAR: zeroed)",
    sql: `SELECT count(*) AS checked, count(*) FILTER (WHERE (CASE WHEN o.billing_mode = 'ADVANCE' THEN
          n.granted = g.expected AND n.used = 0 AND n.remaining = g.expected AND n.cycle_quantity = 0
          AND n.arrear_amount = 0 AND n.original_granted = g.quantity
        ELSE n.granted = 0 AND n.used = 0 AND n.remaining = 0 AND n.cycle_quantity = 0 AND n.arrear_amount = 0 END) IS NOT TRUE)
        + (SELECT count(*) FROM purchase_balances) - count(*) AS violations
      FROM bench.balances o
      JOIN bench.purchases b ON b.organization_id = o.organization_id AND b.id = o.purchase_id AND b.status = 'ACTIVE'
      LEFT JOIN purchase_balances n
        ON n.organization_id = o.organization_id AND n.purchase_id = o.purchase_id AND n.component_id = o.component_id
      CROSS JOIN LATERAL (
        SELECT coalesce((c->>'quantity')::numeric, 0) AS quantity, coalesce((c->>'rollover')::boolean, false) AS rollover
        FROM jsonb_array_elements(b.snapshot->'components') c WHERE c->>'id' = o.component_id) comp
      CROSS JOIN LATERAL (
        SELECT comp.quantity + CASE WHEN comp.rollover THEN greatest(o.remaining, 0) ELSE 0 END + least(o.remaining, 0) AS expected,
               comp.quantity) g`
  },
  {
    name: "one CYCLE_GRANT of the plan's wallet amount per customer, balance moved by it",
    sql: `WITH new_ledger AS (
        SELECT l.* FROM wallet_ledger l
        WHERE NOT EXISTS (SELECT 1 FROM bench.ledger_ids o WHERE o.organization_id = l.organization_id AND o.id = l.id)),
      per AS (
        SELECT organization_id, customer_id, count(*) AS n, count(*) FILTER (WHERE type = 'CYCLE_GRANT') AS grants,
               sum(delta) AS delta, max(balance_after) AS balance_after, max(purchase_id) AS purchase_id
        FROM new_ledger GROUP BY 1, 2)
      SELECT count(*) FILTER (WHERE e.wallet_grant <> 0) AS checked, count(*) FILTER (WHERE
          (e.wallet_grant = 0 AND coalesce(per.n, 0) <> 0)
          OR (e.wallet_grant <> 0 AND (per.n = 1 AND per.grants = 1 AND per.delta = e.wallet_grant
              AND per.purchase_id = e.purchase_id AND per.balance_after = coalesce(ow.balance, 0) + e.wallet_grant
              AND w.balance = coalesce(ow.balance, 0) + e.wallet_grant) IS NOT TRUE))
        + (SELECT count(*) FROM new_ledger) - coalesce(sum(per.n), 0) AS violations
      FROM bench.expected e
      LEFT JOIN per ON per.organization_id = e.organization_id AND per.customer_id = e.customer_id
      LEFT JOIN bench.wallets ow ON ow.organization_id = e.organization_id AND ow.customer_id = e.customer_id
      LEFT JOIN wallets w ON w.organization_id = e.organization_id AND w.customer_id = e.customer_id`
  }
]

interface CheckResult {
  readonly name: string
  readonly checked: number
  readonly violations: number
}

const runChecks = async (): Promise<Array<CheckResult>> => {
  const results: Array<CheckResult> = []
  for (const check of CHECKS) {
    const [row] = await q(check.sql)
    results.push({ name: check.name, checked: num(row!.checked), violations: num(row!.violations) })
  }
  return results
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
  progress(`database ${databaseName}; ${purchaseCount} purchases, ${Math.round(usageShare * 100)}% with usage`)
  await queryOn(admin, `CREATE DATABASE "${databaseName}"`)
  bench = clientOn(databaseUrl, 2)
  try {
    const templates = await setup()
    progress("setup done: two template purchases, the usage priced")

    const withUsage = Math.min(purchaseCount - 1, Math.max(1, Math.round(purchaseCount * usageShare)))
    const tables = await tablesOf()
    const clonedUsed = await cloneCustomer(tables, templates.organizationId, templates.used, withUsage - 1, 1)
    const clonedPlain = await cloneCustomer(tables, templates.organizationId, templates.plain, purchaseCount - withUsage - 1, withUsage)
    progress(`cloned: ${JSON.stringify({ used: clonedUsed, plain: clonedPlain })}`)
    const [counts] = await q(`SELECT count(*) FILTER (WHERE status = 'ACTIVE') AS active, count(*) AS total FROM purchases`)
    if (num(counts!.active) !== purchaseCount || num(counts!.total) !== purchaseCount) {
      throw new Error(`expected ${purchaseCount} ACTIVE purchases, found ${JSON.stringify(counts)}`)
    }
    await snapshotBefore()
    await q(`VACUUM ANALYZE`)

    // The fixed cost of the process: start, migrations check, a pass that finds nothing due.
    const idleFile = path.join(tmpDir, "idle.jsonl")
    const idleStarted = performance.now()
    const idleRun = await cli(["cycle", "run", "--now", new Date().toISOString()], idleFile)
    const idleSeconds = (performance.now() - idleStarted) / 1000
    const [idleLine] = readStatements(idleFile)
    if (!idleLine || idleLine.statements <= 0) {
      throw new Error("bench/count-statements.mjs counted no statement: is `pg` patched in the CLI process?")
    }
    if (Number(idleRun.handled) !== 0) throw new Error(`the idle cycle run renewed ${idleRun.handled} purchase(s)`)
    progress(`idle cycle run: ${idleSeconds.toFixed(1)} s, ${idleLine.statements} statements`)

    const yardstick = yardstickCount > 0 ? await plainInsertYardstick(databaseUrl, yardstickCount) : undefined
    if (yardstick) progress(`yardstick: ${yardstick.rate} single-row INSERTs/s`)

    const [due] = await q(`SELECT max(period_end) AS last_end, min(period_end) AS first_end FROM purchases WHERE status = 'ACTIVE'`)
    const now = new Date(new Date(due!.last_end!).getTime() + 24 * 3600 * 1000).toISOString()
    progress(`billing day: cycle run --now ${now} over ${purchaseCount} due purchases`)
    const runFile = path.join(tmpDir, "run.jsonl")
    const started = performance.now()
    const ran = await cli(["cycle", "run", "--now", now], runFile)
    const seconds = (performance.now() - started) / 1000
    const [runLine] = readStatements(runFile)
    progress(`billing day: ${seconds.toFixed(1)} s, handled ${ran.handled}`)

    const checks = await runChecks()
    const ok = checks.every((c) => c.violations === 0) && checks[0]!.checked === purchaseCount
    progress(`checks ${ok ? "ok" : "FAILED"}`)
    const [totals] = await q(`WITH ${newInvoices}
      SELECT count(*) FILTER (WHERE kind = 'PLAN') AS plan_invoices, count(*) FILTER (WHERE kind = 'USAGE') AS usage_invoices,
             coalesce(sum(total), 0) AS invoiced FROM new_invoices`)

    const rate = purchaseCount / seconds
    const rateNet = purchaseCount / Math.max(seconds - idleSeconds, 0.001)
    const statements = runLine?.statements ?? NaN
    const perRenewal = statements / purchaseCount
    const perRenewalNet = Math.max(statements - idleLine.statements, 0) / purchaseCount
    const machineAfter = machine()

    const ofYardstick = (value: number) => (yardstick ? ` (${(value / yardstick.rate).toFixed(2)} ×)` : "")
    const header = ["Billing day", "purchases", "wall s", "renewals/s", "renewals/s net of start", "yardstick/s", "statements/renewal", "peak RSS MB", "check"]
    const rows = [[
      "1 x `billing cycle run`",
      fmt(purchaseCount),
      seconds.toFixed(1),
      `${fmt(Math.round(rate))}${ofYardstick(rate)}`,
      `${fmt(Math.round(rateNet))}${ofYardstick(rateNet)}`,
      yardstick ? fmt(yardstick.rate) : "-",
      `${perRenewal.toFixed(2)} (net ${perRenewalNet.toFixed(2)})`,
      runLine ? String(mb(runLine.maxRssKb)) : "?",
      ok ? "ok" : "FAILED"
    ]]
    const targets: Array<[string, string, string, boolean]> = [
      ["renewals per second", `${fmt(Math.round(rate))}/s (${fmt(Math.round(rateNet))}/s net of start)`, ">= 2,000/s", rate >= 2000],
      ["every renewal exact (checks below)", ok ? "ok" : "FAILED", "all ok", ok]
    ]
    const checkRows = checks.map((c) => [c.name, fmt(c.checked), fmt(c.violations)])

    const out: Array<string> = []
    out.push("")
    out.push(`bench/billing-day: ${fmt(purchaseCount)} purchases due, ${fmt(withUsage)} with ARREAR usage`)
    out.push(`plan: ${PLAN.creditQuantity} credits ADVANCE, pages ARREAR at ${PLAN.unitPrice}, wallet ${PLAN.walletAmount} ADVANCE, adjustment ${PLAN.priceAdjustment}; tax ${PLAN.taxPercent}%`)
    out.push(`idle \`cycle run\` (start + migrations check + nothing due): ${idleSeconds.toFixed(1)} s, ${idleLine.statements} statements`)
    out.push(`new invoices: ${fmt(num(totals!.plan_invoices))} PLAN, ${fmt(num(totals!.usage_invoices))} USAGE, ${totals!.invoiced} invoiced in all`)
    out.push("")
    out.push(table(header, rows))
    out.push("")
    out.push(table(["Target", "measured", "target", "met"], targets.map(([a, b, c, d]) => [a, b, c, d ? "yes" : "NO"])))
    out.push("")
    out.push(table(["Check", "checked", "violations"], checkRows))
    if (runLine) {
      out.push("")
      out.push(`Statements by kind: ${Object.entries(runLine.byKind).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${fmt(n)}`).join(", ")}`)
    }
    const m = machineAfter
    const snippet = [
      `#### Billing day (\`bench/billing-day.ts\`), ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC`,
      "",
      `\`--purchases ${purchaseCount} --usage-share ${usageShare}\`: ${fmt(purchaseCount)} ACTIVE purchases due, ${fmt(withUsage)} with ARREAR usage, ` +
      `renewed by one \`billing cycle run\`. Machine: ${m.nproc} CPUs (${m.cpu}), ${m.memoryGb} GB RAM, load average ` +
      `${machineBefore.load.join(" ")} at the start and ${m.load.join(" ")} at the end; PostgreSQL and the benchmark on the same host.`,
      `An idle \`cycle run\` takes ${idleSeconds.toFixed(1)} s and ${idleLine.statements} statements (process start, migrations check); ` +
      "the wall time includes it, the \"net of start\" rate subtracts it.",
      "",
      markdown(header, rows),
      "",
      markdown(["Target", "measured", "target", "met"], targets.map(([a, b, c, d]) => [a, b, c, d ? "yes" : "**no**"])),
      "",
      markdown(["Check", "checked", "violations"], checkRows),
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
        options: { purchaseCount, usageShare, plan: PLAN },
        cloned: { used: clonedUsed, plain: clonedPlain },
        idle: { seconds: idleSeconds, statements: idleLine.statements },
        yardstick: yardstick ? { rows: yardstickCount, rate: yardstick.rate } : null,
        run: { now, seconds, handled: ran.handled, rate, rateNet, statements, byKind: runLine?.byKind, peakRssMb: runLine ? mb(runLine.maxRssKb) : null },
        totals,
        checks,
        ok
      }, null, 2)}\n`)
    }
    if (!ok) process.exitCode = 1
  } finally {
    await cleanup()
  }
}

await main()
