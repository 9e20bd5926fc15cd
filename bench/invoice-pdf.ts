/**
 * bench/invoice-pdf: invoice PDFs as an integrator's back office fetches them
 * (`GET /invoices/{id}/pdf`, issue 38; docs/billing.md "PDFs"). Run by hand
 * against real PostgreSQL, never by `npm test`:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/invoice-pdf.ts \
 *     [--pdfs 400] [--connections 8] [--lines 40] [--yardstick 20000] [--root OTHER_CHECKOUT] [--report results.json]
 *
 * On a database of its own (dropped at the end), every process started through
 * the checkout's bin:
 *  1. the yardstick (bench/support.ts `plainInsertYardstick`);
 *  2. `billing serve --no-worker`; two OPEN plan invoices made over the API: a
 *     small one (two FLAT units and a price adjustment: 3 lines) and a long one
 *     (`--lines` lines: that many FLAT units less one, and the adjustment);
 *  3. for each, one PDF fetched and dropped (the first render of a process
 *     loads PDFKit and the fonts), then `--pdfs` fetched over `--connections`
 *     keep-alive connections: PDFs a second, the answer's p50/p99/max, its
 *     size, and the CPU a PDF of `serve` and of PostgreSQL (from /proc). Every
 *     answer must be a 200 whose body begins `%PDF-`, or the bench fails.
 */
import * as http from "node:http"
import { fileURLToPath } from "node:url"
import {
  benchDatabase,
  billingProcesses,
  cpuMeter,
  createBenchDatabase,
  flag,
  load,
  percentile,
  printReport,
  reportHead,
  runBench,
  startServedBench,
  stopProcesses,
  textFlag
} from "./support.ts"

const pdfCount = flag("pdfs", 400)
const connections = flag("connections", 8)
const longLines = flag("lines", 40)
const yardstickCount = flag("yardstick", 20_000)
const reportFile = textFlag("report")
const root = textFlag("root") ?? fileURLToPath(new URL("..", import.meta.url))

if (!(longLines >= 3)) {
  process.stderr.write("--lines must be at least 3\n")
  process.exit(2)
}

const { adminUrl, databaseName, databaseUrl } = benchDatabase("invoice-pdf", "billing_bench_pdf_")
const env = { ...process.env, DATABASE_URL: databaseUrl }
const progress = (text: string) => process.stderr.write(`${new Date().toISOString()} ${text}\n`)
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits
const { running, spawnCli, cli } = billingProcesses(root, env)

/** One GET of a PDF: its status, content type and body. */
const fetchPdf = (agent: http.Agent, port: number, apiKey: string, invoiceId: string) =>
  new Promise<{ status: number; type: string; body: Buffer }>((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port,
      path: `/api/v1/invoices/${invoiceId}/pdf`,
      agent,
      headers: { authorization: `Bearer ${apiKey}` }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk) => chunks.push(chunk))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"] ?? ""), body: Buffer.concat(chunks) }))
    })
    req.on("error", reject)
    req.end()
  })

const main = async () => {
  const { admin, observer } = await createBenchDatabase(adminUrl, databaseName, databaseUrl)
  const report = reportHead(root, { pdfs: pdfCount, connections })
  try {
    const { api, serve, yardstick, port, apiKey } = await startServedBench({
      cli, spawnCli, observer, databaseUrl, yardstickCount, connections, progress
    })
    report.yardstick = { rows: yardstickCount, rate: yardstick.rate }

    const created = async (path: string, body: unknown, field: string) => {
      const answer = await api.request("POST", path, body)
      if (answer.status !== 201) throw new Error(`${path}: ${answer.status} ${JSON.stringify(answer.json)}`)
      return answer.json.result[field]
    }
    /** An OPEN plan invoice of `units` FLAT units and a price adjustment: units + 1 lines. */
    const invoiceOf = async (units: number, name: string) => {
      const entitlements = []
      for (let index = 0; index < units; index++) {
        const unit = await created("/units", { name: `${name} unit ${index}`, agentKey: `${name}-${index}`, pricingType: "FLAT", flatPrice: 0.125 + index }, "unit")
        entitlements.push({ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 3 + index })
      }
      const plan = await created("/plans", { name, billingCycle: "MONTHLY", entitlements, priceAdjustment: 1.5 }, "plan")
      const customer = await created("/customers", { name: `${name} customer`, email: `${name}@example.com` }, "customer")
      await created("/purchases", { customerId: customer.id, planId: plan.id }, "purchase")
      const invoices = (await api.request("GET", `/invoices?customerId=${customer.id}`)).json.result.invoices
      const invoice = invoices.find((candidate: any) => candidate.kind === "PLAN")
      if (invoice?.status !== "OPEN" || invoice.lines.length !== units + 1) {
        throw new Error(`expected an OPEN plan invoice of ${units + 1} lines, got ${JSON.stringify(invoice)}`)
      }
      return invoice.id as string
    }

    const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
    const shapes = [
      { name: "small", lines: 3, invoiceId: await invoiceOf(2, "small") },
      { name: "long", lines: longLines, invoiceId: await invoiceOf(longLines - 1, "long") }
    ]
    const results: Record<string, unknown> = {}
    for (const shape of shapes) {
      const first = await fetchPdf(agent, port, apiKey, shape.invoiceId)
      if (first.status !== 200) throw new Error(`PDF of the ${shape.name} invoice: ${first.status} ${first.body.toString("utf8").slice(0, 300)}`)
      const latencies: Array<number> = []
      let bytes = 0
      const cpu = cpuMeter(() => ({ serve: serve.pid }))
      const run = await load(pdfCount, connections, async () => {
        const started = performance.now()
        const answer = await fetchPdf(agent, port, apiKey, shape.invoiceId)
        latencies.push(performance.now() - started)
        if (answer.status !== 200 || !answer.type.startsWith("application/pdf") || answer.body.subarray(0, 5).toString("latin1") !== "%PDF-") {
          throw new Error(`PDF: ${answer.status} ${answer.type}`)
        }
        bytes = answer.body.length
      })
      latencies.sort((a, b) => a - b)
      results[shape.name] = {
        lines: shape.lines,
        bytes,
        rate: round(run.rate, 1),
        ofYardstick: round(run.rate / yardstick.rate, 4),
        p50Ms: round(percentile(latencies, 0.5), 1),
        p99Ms: round(percentile(latencies, 0.99), 1),
        maxMs: round(latencies[latencies.length - 1]!, 1),
        cpuMsPerPdf: cpu.msPer(pdfCount)
      }
      progress(`${shape.name}: ${JSON.stringify(results[shape.name])}`)
    }
    report.pdfs = results
    agent.destroy()
    api.close()
  } finally {
    await stopProcesses(running)
    await observer.end().catch(() => undefined)
    await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)
    await admin.end()
  }
  report.loadAverageAfter = reportHead(root).loadAverage
  printReport(report, reportFile)
}

runBench(main, running)
