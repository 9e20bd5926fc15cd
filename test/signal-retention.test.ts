/**
 * History does not slow the present (docs/operations.md, "History: retention
 * of the inbox and partitions of the usage log"; docs/signals.md "Retention"):
 * the worker's history job, run in-process through the worker kit at instants
 * the test chooses (as `billing worker --once --now` does), moves signals that
 * ended longer ago than the window out of the inbox, and detaches the usage
 * log's old months. What users see is read back over HTTP and the CLI: a moved
 * rawId still answers, a repeat of its idempotency key gets its first answer
 * and records nothing, a FAILED one can be replayed, a QUEUED or PENDING one
 * never moves, an open outcome run keeps its steps. Runs on both databases
 * (PostgreSQL with DATABASE_URL, else the embedded one).
 */
import { Duration, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { historyJob } from "../src/history/HistoryJob.ts"
import { SETTLE_MS } from "../src/signals/Retention.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { buy, type Client, clientOf, expectError, makeComposite, makeCredit, makeCustomer, makeOutcome, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

const TIMEOUT = 300_000
const DAY = 86_400_000

let app: TestApp
let acme: Tenant
let api: Client

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  api = clientOf(app, acme)
}, TIMEOUT)
afterAll(() => app.close())

let counter = 0
const keyOf = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}`

/** One pass of the history job at `now`, as `billing worker --once --now` runs it; what it handled. */
const runHistory = (now: Date) =>
  app.run(Effect.flatMap(historyJob, (job) => runWorker([job], { once: true, now, idle: Duration.millis(10) })))

/**
 * Two passes, the second once the first's copies have settled: every signal
 * that ended `days` days before `from` (default: past the 35-day window) has left the inbox.
 */
const moveOut = async (from = new Date(Date.now() + 36 * DAY)) => {
  await runHistory(from)
  await runHistory(new Date(from.getTime() + SETTLE_MS + 1_000))
}

const signalOf = async (rawId: string) => ok(await api.get(`/signals/${rawId}`)).signal
const inboxIdsOf = async (customerId: string) =>
  (ok(await api.get(`/signals?customerId=${customerId}&limit=200`)).signals as Array<{ rawId: string }>).map((s) => s.rawId)
const usageOf = async (customerId: string) => ok(await api.get(`/signal/usage-log?customerId=${customerId}&limit=200`)).usageLogs
const inArchive = async (rawId: string) =>
  (await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM signals_archive WHERE id = $1", [rawId]))[0]!.n
const inInbox = async (rawId: string) =>
  (await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM signals WHERE id = $1", [rawId]))[0]!.n

/** A customer holding a FLAT unit at 2 a unit, 100 a cycle in advance; the unit's key. */
const unitCustomer = async () => {
  const unit = await makeUnit(api, { flatPrice: 2 })
  const plan = await makePlan(app, acme, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 100 }])
  const customer = await makeCustomer(api)
  await buy(api, customer.id, plan.id)
  return { customerId: customer.id as string, agentKey: unit.agentKey as string }
}

const sendUnit = async (body: Record<string, unknown>) => {
  const sent = await api.post("/signal/unit", body)
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.result as { rawId: string; messageId: string }
}

describe("signals that ended longer ago than the retention window", () => {
  it("leave the inbox for the archive; a rawId still answers, a repeated key gets its first answer, a waiting one stays", async () => {
    const { customerId, agentKey } = await unitCustomer()
    const pricedKey = keyOf("priced")
    const priced = await sendUnit({ customerId, agentKey, quantity: 3, idempotencyKey: pricedKey })
    const refused = await sendUnit({ customerId, agentKey: "no-such-unit", idempotencyKey: keyOf("refused") })
    const externalId = keyOf("nobody").slice(0, 32)
    const pending = await sendUnit({ externalId, agentKey })
    await drain(app)
    const queued = await sendUnit({ customerId, agentKey, quantity: 1, idempotencyKey: keyOf("queued") })
    expect(await signalOf(priced.rawId)).toMatchObject({ status: "PROCESSED" })
    expect(await signalOf(refused.rawId)).toMatchObject({ status: "FAILED" })
    expect(await signalOf(pending.rawId)).toMatchObject({ status: "PENDING" })
    const pricedBefore = await signalOf(priced.rawId)
    const refusedBefore = await signalOf(refused.rawId)
    const usageBefore = await usageOf(customerId)
    expect(usageBefore).toHaveLength(1)

    // Inside the window nothing moves.
    await moveOut(new Date(Date.now() + 34 * DAY))
    expect(await inArchive(priced.rawId)).toBe(0)
    expect(await inboxIdsOf(customerId)).toEqual([priced.rawId, refused.rawId, queued.rawId])

    // Past it: the first pass copies, the inbox keeps the row until the copy has settled.
    const later = new Date(Date.now() + 36 * DAY)
    await runHistory(later)
    expect([await inArchive(priced.rawId), await inInbox(priced.rawId)]).toEqual([1, 1])
    expect(await inboxIdsOf(customerId)).toEqual([priced.rawId, refused.rawId, queued.rawId])
    // Not a second before it has settled.
    await runHistory(new Date(later.getTime() + SETTLE_MS - 1_000))
    expect(await inInbox(priced.rawId)).toBe(1)
    await runHistory(new Date(later.getTime() + SETTLE_MS))
    expect([await inArchive(priced.rawId), await inInbox(priced.rawId)]).toEqual([1, 0])
    expect([await inArchive(refused.rawId), await inInbox(refused.rawId)]).toEqual([1, 0])

    // The inbox's list holds what is left: the queued signal; the pending one waits by its externalId.
    expect(await inboxIdsOf(customerId)).toEqual([queued.rawId])
    expect((ok(await api.get("/signals?status=PENDING&limit=200")).signals as Array<{ rawId: string }>).map((s) => s.rawId))
      .toContain(pending.rawId)
    expect(await signalOf(queued.rawId)).toMatchObject({ status: "QUEUED" })
    expect(await signalOf(pending.rawId)).toMatchObject({ status: "PENDING" })
    expect([await inArchive(queued.rawId), await inArchive(pending.rawId)]).toEqual([0, 0])

    // A moved rawId answers as before, over HTTP and through the CLI.
    expect(await signalOf(priced.rawId)).toEqual(pricedBefore)
    expect(await signalOf(refused.rawId)).toEqual(refusedBefore)
    const shown = await app.cli(["signal", "show", priced.rawId, "--org", acme.organizationId, "--json"])
    expect(shown.code, shown.stderr).toBe(0)
    expect(JSON.stringify(shown.json)).toContain(pricedBefore.usageLogId)

    // A repeat of its key, on the single route and in a batch, answers the first signal and records nothing.
    const again = await api.post("/signal/unit", { customerId, agentKey, quantity: 7, idempotencyKey: pricedKey })
    expect(again.status, JSON.stringify(again.body)).toBe(202)
    expect(again.body.result).toMatchObject({ rawId: priced.rawId, messageId: priced.messageId })
    const batch = ok(await api.post("/signal/batch", {
      signals: [{ type: "unit", customerId, agentKey, quantity: 5, idempotencyKey: pricedKey }]
    }), 202)
    expect(batch.results).toEqual([{ index: 0, queued: true, rawId: priced.rawId, messageId: priced.messageId }])
    await drain(app)
    expect(await inboxIdsOf(customerId)).toEqual([queued.rawId])
    expect((await usageOf(customerId)).map((row: { rawId: string }) => row.rawId)).toEqual([priced.rawId, queued.rawId])
    expect(await inInbox(priced.rawId)).toBe(0)

    // A refused signal replayed comes back to the inbox, queued, and leaves the archive.
    const replayed = await app.cli(["signal", "replay", refused.rawId, "--org", acme.organizationId, "--json"])
    expect(replayed.code, replayed.stderr).toBe(0)
    expect([await inArchive(refused.rawId), await inInbox(refused.rawId)]).toEqual([0, 1])
    expect(await signalOf(refused.rawId)).toMatchObject({ status: "QUEUED", error: null })
    await drain(app)
    expect(await signalOf(refused.rawId)).toMatchObject({ status: "FAILED", error: refusedBefore.error })

    // A priced one cannot be replayed from the archive either: it was billed.
    const twice = await app.cli(["signal", "replay", priced.rawId, "--org", acme.organizationId, "--json"])
    expect(twice.code).not.toBe(0)
    expect(`${twice.stdout}${twice.stderr}`).toContain("was processed already")
    expect(await inArchive(priced.rawId)).toBe(1)
  }, TIMEOUT)

  it("a signal replayed between the copy and its removal stays in the inbox, and its stale copy goes", async () => {
    const { customerId } = await unitCustomer()
    const refused = await sendUnit({ customerId, agentKey: "no-such-unit" })
    await drain(app)
    const later = new Date(Date.now() + 36 * DAY)
    await runHistory(later)
    expect([await inArchive(refused.rawId), await inInbox(refused.rawId)]).toEqual([1, 1])
    const replayed = await app.cli(["signal", "replay", refused.rawId, "--org", acme.organizationId, "--json"])
    expect(replayed.code, replayed.stderr).toBe(0)
    expect([await inArchive(refused.rawId), await inInbox(refused.rawId)]).toEqual([0, 1])
    await runHistory(new Date(later.getTime() + SETTLE_MS + 1_000))
    expect(await signalOf(refused.rawId)).toMatchObject({ status: "QUEUED" })
    expect(await inInbox(refused.rawId)).toBe(1)
    await drain(app)
  }, TIMEOUT)

  it("an outcome run's steps stay while the run is open, and move once it is completed and billed", async () => {
    const outcome = await makeOutcome(api)
    const plan = await makePlan(app, acme, [{ type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const runId = keyOf("run")
    const step = await sendUnitlessStep(customer.id, outcome.steps[0].agentKey, runId)
    await drain(app)
    expect(await signalOf(step)).toMatchObject({ status: "PROCESSED" })

    await moveOut()
    expect(await inInbox(step)).toBe(1)

    const completed = ok(await api.post("/signal/outcome/complete", { customerId: customer.id, runId }))
    expect(completed).toMatchObject({ status: "COMPLETED" })
    // The completion is not priced yet: the steps stay.
    await moveOut()
    expect(await inInbox(step)).toBe(1)
    await drain(app)
    await moveOut(new Date(Date.now() + 37 * DAY))
    expect([await inInbox(step), await inInbox(completed.rawId)]).toEqual([0, 0])
    expect(await signalOf(completed.rawId)).toMatchObject({ status: "PROCESSED" })
    // The run is still known as completed: 409, not 404.
    expectError(await api.post("/signal/outcome/complete", { customerId: customer.id, runId }), 409, "outcome_run_completed")
  }, TIMEOUT)

  it("a tagged signal stays until its composite occurrence has completed, then moves with the completion", async () => {
    const credit = await makeCredit(api)
    const composite = await makeComposite(api, 2, [credit.id])
    const plan = await makePlan(app, acme, [{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const tag = { [composite.refId]: keyOf("occurrence") }
    const sent = await api.post("/signal/credit", {
      customerId: customer.id,
      agentKey: credit.agentKey,
      usage: { model: "gpt-4o", inputTokens: 0, outputTokens: 625 },
      composite: tag
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    const tagged = sent.body.result.rawId as string
    await drain(app)
    expect(await signalOf(tagged)).toMatchObject({ status: "PROCESSED" })

    await moveOut()
    expect(await inInbox(tagged)).toBe(1)

    // Its readiness still counts it: the occurrence completes at once.
    const completed = ok(await api.post("/signal/composite/complete", { customerId: customer.id, composite: tag }))
    await drain(app)
    await moveOut(new Date(Date.now() + 37 * DAY))
    expect([await inInbox(tagged), await inInbox(completed.rawId)]).toEqual([0, 0])
    // Completing it again answers the first completion, as before.
    expect(ok(await api.post("/signal/composite/complete", { customerId: customer.id, composite: tag }))).toEqual(completed)
  }, TIMEOUT)

  it("the archive has the inbox's columns, so a row moves whole", async () => {
    const columnsOf = async (table: string) =>
      (await query<{ name: string; type: string }>(
        app,
        `SELECT column_name AS name, data_type AS type FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY column_name`,
        [table]
      )).map((column) => `${column.name} ${column.type}`)
    const archive = await columnsOf("signals_archive")
    expect(archive.filter((column) => column !== "archived_at timestamp with time zone")).toEqual(await columnsOf("signals"))
  }, TIMEOUT)
})

const sendUnitlessStep = async (customerId: string, agentKey: string, runId: string) => {
  const sent = await api.post("/signal/outcome", { customerId, agentKey, runId })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  return sent.body.result.rawId as string
}

describe("the usage log's months", () => {
  it("are created ahead, and a month older than the months kept is detached, its rows still in the database", async () => {
    const { customerId, agentKey } = await unitCustomer()
    await sendUnit({ customerId, agentKey, quantity: 1 })
    await drain(app)
    // A row of 30 months ago, as an old installation would hold it (the API writes rows at now()).
    const [old] = await query<{ name: string }>(app, `SELECT 'usage_log_' || to_char(now() - interval '30 months', 'YYYY_MM') AS name`)
    await query(app, "SELECT ensure_usage_log_month(now() - interval '30 months')")
    await query(
      app,
      `INSERT INTO usage_log (organization_id, id, customer_id, meter, quantity, provider_cost, customer_cost,
                              signal_id, message_id, created_at, occurred_at)
       VALUES ($1, $2, $3, 'UNIT', 1, 0, 2, 'sig_old', 'msg_old', now() - interval '30 months', now() - interval '30 months')`,
      [acme.organizationId, "usg_0000000000old0000000000000", customerId]
    )
    expect(await usageOf(customerId)).toHaveLength(2)

    await runHistory(new Date())
    const rows = await usageOf(customerId)
    expect(rows).toHaveLength(1)
    expect(rows[0].id).not.toBe("usg_0000000000old0000000000000")
    // Kept as a table of its own, no longer a partition: an operator reads it, archives it or drops it.
    const [detached] = await query<{ partition: boolean; n: number }>(
      app,
      `SELECT c.relispartition AS partition, (SELECT count(*)::int FROM ${old!.name}) AS n FROM pg_class c WHERE c.relname = $1`,
      [old!.name]
    )
    expect(detached).toEqual({ partition: false, n: 1 })
    // Three months are ready ahead, the current one included.
    const ahead = await query<{ name: string; attached: boolean }>(
      app,
      `SELECT m.name, EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                              WHERE i.inhparent = 'usage_log'::regclass AND c.relname = m.name) AS attached
       FROM (SELECT 'usage_log_' || to_char(now() + make_interval(months => k), 'YYYY_MM') AS name
             FROM generate_series(0, 2) k) m`
    )
    expect(ahead.map((month) => month.attached)).toEqual([true, true, true])
  }, TIMEOUT)
})
