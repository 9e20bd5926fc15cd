/**
 * Every signal carries the moment it happened (issue 22, docs/signals.md
 * "Usage in its own time"): the optional `timestamp` of every `/signal/*` route
 * and batch item, its refusals (no zone offset or too far ahead: 400; older
 * than the workspace's late-usage window: 422, nothing written) on both doors
 * (the intake lane and the full server), the window set by
 * `billing org settings --late-usage-days`, `billing signal send --file`, and
 * the usage log's `timestamp` (when the usage happened) and its from/to filter.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as OpenApi from "@effect/platform/OpenApi"
import { Api } from "../src/app/Api.ts"
import { IntakeLane } from "../src/signals/IntakeLane.ts"
import { instantOf } from "../src/signals/Signal.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { client, customerWithChatCredits, drain, expectError, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let customerId: string

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
const minute = 60_000
const day = 86_400_000
const ago = (ms: number) => new Date(Date.now() - ms).toISOString()

interface Answer {
  readonly status: number
  readonly body: any
}

/** A POST over node:http: with a Content-Length (the intake lane takes it), or chunked (the full server's). */
const post = (route: string, body: unknown, door: "lane" | "full", key = acme.apiKey) =>
  new Promise<Answer>((resolve, reject) => {
    const text = JSON.stringify(body)
    const url = new URL(`${app.baseUrl}${route}`)
    const request = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(door === "lane" ? { "content-length": Buffer.byteLength(text) } : {})
      }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk) => chunks.push(chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) }))
    })
    request.on("error", reject)
    if (door === "full") {
      request.write(text.slice(0, 1))
      request.end(text.slice(1))
    } else {
      request.end(text)
    }
  })

const laneStats = () => app.run(Effect.flatMap(IntakeLane, (lane) => lane.stats))
const signalCount = async (organizationId = acme.organizationId) =>
  Number((await query<{ n: string }>(app, "SELECT count(*) AS n FROM signals WHERE organization_id = $1", [organizationId]))[0]!.n)
const stored = async (id: string) =>
  (await query<{ occurredAt: Date | string | null; late: boolean }>(app, "SELECT occurred_at, late FROM signals WHERE id = $1", [id]))[0]!
const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString())

/** Sends through one door and says which door answered (the lane, or the full server after a hand-over or by chunking). */
const sendVia = async (route: string, body: unknown, door: "lane" | "full") => {
  const before = await laneStats()
  const answer = await post(route, body, door)
  const after = await laneStats()
  return { ...answer, laneAnswered: after.answered - before.answered, handedOver: after.handedOver - before.handedOver }
}

const lateUsageDays = async (organizationId: string) =>
  (await app.run(Effect.flatMap(Organizations, (organizations) => organizations.get(organizationId)))).lateUsageDays

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Timestamps")
  customerId = await customerWithChatCredits(app, acme)
})
afterAll(() => app.close())

describe("the usage log's timestamp", () => {
  it("carries when the usage happened beside when it was recorded, and from/to filter on it", async () => {
    const tenant = await app.tenant("Usage times")
    const api = client(app, tenant)
    const customer = await customerWithChatCredits(app, tenant)
    const purchase = (await api.get(`/purchases?customerId=${customer}`)).body.result.purchases[0]
    const periodStart = new Date(purchase.currentPeriodStart).getTime()
    // A moment inside the current cycle, before intake; and one signal without a timestamp.
    await new Promise((resolve) => setTimeout(resolve, 50))
    const moment = new Date(periodStart + 20).toISOString()
    const early = await api.post("/signal/credit", { customerId: customer, agentKey: "chat", usage, timestamp: moment })
    expect(early.status, JSON.stringify(early.body)).toBe(202)
    const onTime = await api.post("/signal/credit", { customerId: customer, agentKey: "chat", usage })
    expect(onTime.status).toBe(202)
    await drain(app)

    const rows = (await api.get(`/signal/usage-log?customerId=${customer}`)).body.result.usageLogs
    expect(rows).toHaveLength(2)
    const [lateRow, onTimeRow] = [rows.find((r: any) => r.rawId === early.body.result.rawId), rows.find((r: any) => r.rawId === onTime.body.result.rawId)]
    expect(lateRow.timestamp).toBe(moment)
    expect(new Date(lateRow.createdAt).getTime()).toBeGreaterThan(new Date(moment).getTime())
    expect(lateRow.reverses).toBeNull()
    // Without a timestamp, the moment is the intake: never after the row was written.
    expect(new Date(onTimeRow.timestamp).getTime()).toBeLessThanOrEqual(new Date(onTimeRow.createdAt).getTime())

    // from/to on `timestamp`: the early signal is before `from` although it was recorded after it.
    const after = new Date(new Date(moment).getTime() + 1).toISOString()
    const fromAfter = (await api.get(`/signal/usage-log?customerId=${customer}&from=${encodeURIComponent(after)}`)).body.result.usageLogs
    expect(fromAfter.map((r: any) => r.rawId)).toEqual([onTime.body.result.rawId])
    const toAfter = (await api.get(`/signal/usage-log?customerId=${customer}&to=${encodeURIComponent(after)}`)).body.result.usageLogs
    expect(toAfter.map((r: any) => r.rawId)).toEqual([early.body.result.rawId])

    const lookup = (await api.post("/signal/usage-log/lookup", { ids: [lateRow.id] })).body.result.usageLogs
    expect(lookup).toEqual([expect.objectContaining({ id: lateRow.id, timestamp: moment, reverses: null, createdAt: lateRow.createdAt })])
  })

  it("falls back to createdAt for a row without occurred_at (rows written before it existed)", async () => {
    const tenant = await app.tenant("Old rows")
    const api = client(app, tenant)
    const customer = await customerWithChatCredits(app, tenant)
    expect((await api.post("/signal/credit", { customerId: customer, agentKey: "chat", usage })).status).toBe(202)
    await drain(app)
    await query(app, "UPDATE usage_log SET occurred_at = NULL WHERE organization_id = $1", [tenant.organizationId])
    const [row] = (await api.get(`/signal/usage-log?customerId=${customer}`)).body.result.usageLogs
    expect(row.timestamp).toBe(row.createdAt)
    const at = encodeURIComponent(row.createdAt)
    expect((await api.get(`/signal/usage-log?customerId=${customer}&from=${at}`)).body.result.usageLogs).toHaveLength(1)
    expect((await api.get(`/signal/usage-log?customerId=${customer}&to=${at}`)).body.result.usageLogs).toHaveLength(0)
    // A row whose usage happened a week ago is found in that week, not on the day it was written.
    const weekAgo = ago(7 * day)
    await query(app, "UPDATE usage_log SET occurred_at = $2 WHERE organization_id = $1", [tenant.organizationId, weekAgo])
    const [moved] = (await api.get(`/signal/usage-log?customerId=${customer}&to=${encodeURIComponent(ago(6 * day))}`)).body.result.usageLogs
    expect(moved.timestamp).toBe(weekAgo)
    expect(moved.createdAt).toBe(row.createdAt)
  })
})

describe("a signal's timestamp", () => {
  it("is stored exactly in signals.occurred_at, whatever its offset; without one, NULL", async () => {
    for (const door of ["lane", "full"] as const) {
      const utc = new Date(Date.now() - 90 * minute)
      // The same instant written with a +02:00 offset and milliseconds.
      const shifted = new Date(utc.getTime() + 2 * 60 * minute).toISOString().replace("Z", "+02:00")
      const late = await sendVia("/signal/credit", { customerId, agentKey: "chat", usage, timestamp: shifted }, door)
      expect(late.status, JSON.stringify(late.body)).toBe(202)
      expect(late.laneAnswered).toBe(door === "lane" ? 1 : 0)
      expect(await stored(late.body.result.rawId)).toEqual({ occurredAt: expect.anything(), late: true })
      expect(iso((await stored(late.body.result.rawId)).occurredAt)).toBe(utc.toISOString())

      const recent = ago(10_000)
      const onTime = await sendVia("/signal/unit", { customerId, agentKey: "pages", timestamp: recent }, door)
      expect(onTime.status).toBe(202)
      const row = await stored(onTime.body.result.rawId)
      expect([iso(row.occurredAt), row.late]).toEqual([recent, false])

      const none = await sendVia("/signal/wallet", { customerId, usage }, door)
      expect(none.status).toBe(202)
      expect(await stored(none.body.result.rawId)).toEqual({ occurredAt: null, late: false })
    }
  })

  it("without a zone offset, or finer than milliseconds, or not on the calendar, is a 400 naming the field", async () => {
    const before = await signalCount()
    for (const timestamp of ["2026-01-31T23:59:00", "2026-01-31 23:59:00Z", "2026-01-31T23:59:00.1234Z", "2026-02-30T10:00:00Z", "yesterday", 1700000000000]) {
      for (const door of ["lane", "full"] as const) {
        const answer = await sendVia("/signal/credit", { customerId, agentKey: "chat", usage, timestamp }, door)
        expectError(answer, 400, "validation_failed", "timestamp")
        if (typeof timestamp === "string") expect(answer.body.statusDetail.message).toContain("zone offset")
        // The lane hands a body its schema refuses to the full server, which answers it.
        if (door === "lane") expect(answer.handedOver).toBe(1)
      }
    }
    expect(await signalCount()).toBe(before)
  })

  it("more than 5 minutes ahead of the service's clock is a 400 naming the field; 4 minutes ahead is accepted", async () => {
    const before = await signalCount()
    for (const door of ["lane", "full"] as const) {
      const ahead = new Date(Date.now() + 6 * minute).toISOString()
      const answer = await sendVia("/signal/unit", { customerId, agentKey: "pages", timestamp: ahead }, door)
      expectError(answer, 400, "validation_failed", "timestamp")
      expect(answer.body.statusDetail.errors).toEqual([{ field: "timestamp", message: expect.stringContaining("5 minutes ahead") }])
      expect(answer.body.statusDetail.message).toContain("5 minutes ahead")
      expect(answer.laneAnswered).toBe(door === "lane" ? 1 : 0)
    }
    expect(await signalCount()).toBe(before)
    const soon = new Date(Date.now() + 4 * minute).toISOString()
    const accepted = await post("/signal/unit", { customerId, agentKey: "pages", timestamp: soon }, "lane")
    expect(accepted.status).toBe(202)
    expect(iso((await stored(accepted.body.result.rawId)).occurredAt)).toBe(soon)
  })

  it("older than the workspace's late-usage window is a 422 stating the window, on both doors, and writes nothing", async () => {
    expect(await lateUsageDays(acme.organizationId)).toBe(35)
    const before = await signalCount()
    for (const door of ["lane", "full"] as const) {
      for (const route of ["/signal/credit", "/signal/outcome", "/signal/unit", "/signal/wallet"]) {
        const body = { customerId, agentKey: "chat", usage, runId: "old-run", timestamp: ago(36 * day) }
        const { agentKey: _a, usage: _u, runId: _r, ...common } = body
        const bodyOf: Record<string, unknown> = {
          "/signal/credit": { ...common, agentKey: "chat", usage },
          "/signal/outcome": { ...common, agentKey: "draft", runId: "old-run" },
          "/signal/unit": { ...common, agentKey: "pages" },
          "/signal/wallet": { ...common, usage }
        }
        const answer = await sendVia(route, bodyOf[route], door)
        expectError(answer, 422, "timestamp_too_old", "older than this workspace's late-usage window of 35 days")
        expect(answer.laneAnswered, route).toBe(door === "lane" ? 1 : 0)
      }
    }
    // Just inside the window: accepted.
    const inside = await post("/signal/unit", { customerId, agentKey: "pages", timestamp: ago(34 * day) }, "lane")
    expect(inside.status).toBe(202)
    expect(await signalCount()).toBe(before + 1)
  })

  it("follows the window set with billing org settings --late-usage-days", async () => {
    const tenant = await app.tenant("Window")
    const customer = await customerWithChatCredits(app, tenant)
    const send = (timestamp: string, door: "lane" | "full" = "lane") =>
      post("/signal/unit", { customerId: customer, agentKey: "pages", timestamp }, door, tenant.apiKey)
    const fortyDaysAgo = ago(40 * day)
    expectError(await send(fortyDaysAgo), 422, "timestamp_too_old", "window of 35 days")

    const widened = await app.cli(["org", "settings", "--org", tenant.organizationId, "--late-usage-days", "45", "--json"])
    expect(widened.code, widened.stderr).toBe(0)
    expect(widened.json.organization).toMatchObject({ lateUsageDays: 45, invoiceGraceHours: 0 })
    // The window is read by the insert itself: the next request follows it, on either door.
    expect((await send(fortyDaysAgo)).status).toBe(202)
    expect((await send(fortyDaysAgo, "full")).status).toBe(202)

    const closed = await app.cli(["org", "settings", "--org", tenant.organizationId, "--late-usage-days", "0", "--json"])
    expect(closed.json.organization.lateUsageDays).toBe(0)
    const before = await signalCount(tenant.organizationId)
    expectError(await send(ago(minute)), 422, "timestamp_too_old", "window of 0 days")
    expectError(await send(ago(minute), "full"), 422, "timestamp_too_old", "window of 0 days")
    expect(await signalCount(tenant.organizationId)).toBe(before)
    // A timestamp at or after intake (within the 5 minutes' lead) is never late.
    expect((await send(new Date(Date.now() + minute).toISOString())).status).toBe(202)

    const one = await app.cli(["org", "settings", "--org", tenant.organizationId, "--late-usage-days", "1", "--json"])
    expect(one.code).toBe(0)
    expectError(await send(ago(2 * day)), 422, "timestamp_too_old", "window of 1 day")
  })

  it("is refused item by item in a batch", async () => {
    const before = await signalCount()
    const fine = ago(30 * minute)
    const answer = await client(app, acme).post("/signal/batch", {
      signals: [
        { type: "unit", customerId, agentKey: "pages", timestamp: fine },
        { type: "unit", customerId, agentKey: "pages", timestamp: ago(40 * day) },
        { type: "credit", customerId, agentKey: "chat", usage, timestamp: new Date(Date.now() + 10 * minute).toISOString() },
        { type: "wallet", customerId, usage, timestamp: "2026-01-01T00:00:00" },
        { type: "outcome", customerId, agentKey: "draft", runId: "batch-run" }
      ]
    })
    expect(answer.status).toBe(202)
    const results = answer.body.result.results
    expect(results.map((r: any) => (r.queued ? "queued" : r.error.statusCode))).toEqual(["queued", 422, 400, 400, "queued"])
    expect(results[1].error.message).toBe("timestamp is older than this workspace's late-usage window of 35 days")
    expect(results[2].error.message).toContain("timestamp")
    expect(results[3].error.message).toContain("timestamp")
    expect(await signalCount()).toBe(before + 2)
    expect(iso((await stored(results[0].rawId)).occurredAt)).toBe(fine)
    expect((await stored(results[4].rawId)).occurredAt).toBeNull()
  })

  it("is accepted, checked and stored by the completion routes", async () => {
    const api = client(app, acme)
    expect((await api.post("/signal/outcome", { customerId, agentKey: "draft", runId: "ts-run" })).status).toBe(202)
    const runsOf = async () => (await query(app, "SELECT 1 FROM outcome_runs WHERE organization_id = $1 AND run_id = 'ts-run'", [acme.organizationId])).length
    const before = await signalCount()
    expectError(await api.post("/signal/outcome/complete", { customerId, runId: "ts-run", timestamp: ago(36 * day) }), 422, "timestamp_too_old", "window of 35 days")
    expectError(await api.post("/signal/outcome/complete", { customerId, runId: "ts-run", timestamp: new Date(Date.now() + 6 * minute).toISOString() }), 400, "validation_failed", "timestamp")
    expectError(await api.post("/signal/outcome/complete", { customerId, runId: "ts-run", timestamp: "2026-01-01T00:00:00" }), 400, "validation_failed", "timestamp")
    expect(await runsOf()).toBe(0)
    expect(await signalCount()).toBe(before)

    const moment = ago(2 * 60 * minute)
    const completed = await api.post("/signal/outcome/complete", { customerId, runId: "ts-run", timestamp: moment })
    expect(completed.status, JSON.stringify(completed.body)).toBe(200)
    expect(await stored(completed.body.result.rawId)).toEqual({ occurredAt: expect.anything(), late: true })
    expect(iso((await stored(completed.body.result.rawId)).occurredAt)).toBe(moment)

    const composite = { customerId, composite: { job: "ts-1" } }
    expectError(await api.post("/signal/composite/complete", { ...composite, timestamp: ago(36 * day) }), 422, "timestamp_too_old", "window of 35 days")
    expectError(await api.post("/signal/composite/complete", { ...composite, timestamp: "2026-01-01T00:00Z" }), 400, "validation_failed", "timestamp")
    expect(await signalCount()).toBe(before + 1)
  })
})

/** A tenant whose customer holds a plan of five "bundle" composites (one unit each). */
const bundleCustomer = async (tenantName: string) => {
  const tenant = await app.tenant(tenantName)
  const api = client(app, tenant)
  const unit = await api.created("/units", { name: "Exports", agentKey: "exports", pricingType: "FLAT", flatPrice: 1 }, "unit")
  const composite = await api.created("/composites", { name: "Bundle", refId: "bundle", price: 2, entitlements: { unitIds: [unit] } }, "composite")
  const plan = await api.created("/plans", {
    name: "Bundles",
    billingCycle: "MONTHLY",
    entitlements: [{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite, quantity: 5 }]
  }, "plan")
  const customer = await api.created("/customers", { name: "Kim", email: "kim@example.com" }, "customer")
  expect((await api.post("/purchases", { customerId: customer, planId: plan })).status).toBe(201)
  return { tenant, api, customer }
}

describe("the completion routes' late-usage window", () => {
  it("is the workspace's setting, narrower or wider than the default 35 days", async () => {
    const { api, customer } = await bundleCustomer("Completion window")
    for (const job of ["narrow", "wide"]) {
      expect((await api.post("/signal/unit", { customerId: customer, agentKey: "exports", composite: { bundle: job } })).status).toBe(202)
      expect((await api.post("/signal/outcome", { customerId: customer, agentKey: "draft", runId: job })).status).toBe(202)
    }
    const outcomeComplete = (runId: string, timestamp: string) =>
      api.post("/signal/outcome/complete", { customerId: customer, runId, timestamp })
    const compositeComplete = (job: string, timestamp: string) =>
      api.post("/signal/composite/complete", { customerId: customer, composite: { bundle: job }, timestamp })
    const settings = (days: number) => api.patch("/organization/settings", { lateUsageDays: days })

    // 10 days: 20 days ago is inside the default window but outside the workspace's.
    expect((await settings(10)).body.result.organization.lateUsageDays).toBe(10)
    expectError(await outcomeComplete("narrow", ago(20 * day)), 422, "timestamp_too_old", "window of 10 days")
    expectError(await compositeComplete("narrow", ago(20 * day)), 422, "timestamp_too_old", "window of 10 days")
    // 45 days: 40 days ago is outside the default window but inside the workspace's.
    expect((await settings(45)).body.result.organization.lateUsageDays).toBe(45)
    const outcome = await outcomeComplete("wide", ago(40 * day))
    expect(outcome.status, JSON.stringify(outcome.body)).toBe(200)
    const bundle = await compositeComplete("wide", ago(40 * day))
    expect(bundle.status, JSON.stringify(bundle.body)).toBe(200)
    expectError(await outcomeComplete("narrow", ago(46 * day)), 422, "timestamp_too_old", "window of 45 days")
  })
})

describe("a composite completion's timestamp", () => {
  it("is stored on the completion signal it queues", async () => {
    const { tenant, api, customer } = await bundleCustomer("Composite times")
    expect((await api.post("/signal/unit", { customerId: customer, agentKey: "exports", composite: { bundle: "job-ts" } })).status).toBe(202)

    const tooOld = await api.post("/signal/composite/complete", { customerId: customer, composite: { bundle: "job-ts" }, timestamp: ago(36 * day) })
    expectError(tooOld, 422, "timestamp_too_old", "window of 35 days")
    const occurrence = async () =>
      (await query<{ status: string }>(app, "SELECT status FROM composite_occurrences WHERE organization_id = $1 AND value = 'job-ts'", [tenant.organizationId]))[0]?.status
    expect(await occurrence()).not.toBe("COMPLETED")

    const moment = ago(10 * minute)
    const completed = await api.post("/signal/composite/complete", { customerId: customer, composite: { bundle: "job-ts" }, timestamp: moment })
    expect(completed.status, JSON.stringify(completed.body)).toBe(200)
    expect(await occurrence()).toBe("COMPLETED")
    const row = await stored(completed.body.result.rawId)
    expect([iso(row.occurredAt), row.late]).toEqual([moment, false])
  })
})

describe("billing org settings", () => {
  it("sets --late-usage-days (0..365) and --invoice-grace-hours (0..720), shows them, and refuses anything else", async () => {
    const tenant = await app.tenant("Settings")
    const org = tenant.organizationId
    const shown = await app.cli(["org", "settings", "--org", org])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/late-usage window\s+35 day/)
    expect(shown.stdout).toMatch(/invoice grace period\s+none/)

    const set = await app.cli(["org", "settings", "--org", org, "--late-usage-days", "365", "--invoice-grace-hours", "720", "--json"])
    expect(set.code, set.stderr).toBe(0)
    expect(set.json.organization).toMatchObject({ lateUsageDays: 365, invoiceGraceHours: 720 })
    const view = await app.cli(["org", "settings", "--org", org, "--invoice-grace-hours", "48"])
    expect(view.stdout).toMatch(/late-usage window\s+365 day/)
    expect(view.stdout).toMatch(/invoice grace period\s+48 hour/)

    const refused: Array<[string, string]> = [
      ["--late-usage-days", "366"],
      ["--late-usage-days=-1", ""],
      ["--late-usage-days", "2.5"],
      ["--late-usage-days", "ten"],
      ["--invoice-grace-hours", "721"],
      ["--invoice-grace-hours", "1e2"]
    ]
    for (const [flag, value] of refused) {
      const args = value === "" ? [flag] : [flag, value]
      // A valid change beside the invalid one is not written either.
      const answer = await app.cli(["org", "settings", "--org", org, "--name", "Renamed", ...args, "--json"])
      expect(answer.code, `${flag} ${value}`).toBe(2)
      expect(answer.stdout + answer.stderr).toMatch(/must be a whole number from 0 to (365|720)/)
    }
    const after = await app.run(Effect.flatMap(Organizations, (organizations) => organizations.get(org)))
    expect([after.name, after.lateUsageDays, after.invoiceGraceHours]).toEqual(["Settings", 365, 48])
  })
})

describe("billing signal send --file", () => {
  it("honours each line's timestamp and refuses a too-old or future line on its own", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-send-ts-"))
    const file = path.join(dir, "backfill.jsonl")
    const moments = [ago(3 * day), ago(2 * day + 5 * minute), ago(90 * minute)]
    const lines = [
      ...moments.map((timestamp, i) => JSON.stringify({ type: "unit", customerId, agentKey: "pages", idempotencyKey: `backfill-${i}`, timestamp })),
      JSON.stringify({ type: "unit", customerId, agentKey: "pages", timestamp: ago(50 * day) }),
      JSON.stringify({ type: "credit", customerId, agentKey: "chat", usage, timestamp: new Date(Date.now() + day).toISOString() }),
      JSON.stringify({ type: "wallet", customerId, usage })
    ]
    fs.writeFileSync(file, `${lines.join("\n")}\n`)
    try {
      const before = await signalCount()
      const sent = await app.cli(["signal", "send", "--file", file, "--org", acme.organizationId, "--json"])
      expect(sent.code, sent.stderr).toBe(0)
      expect(sent.json).toEqual({
        signals: 6,
        queued: 4,
        refused: 2,
        refusedByStatus: { "400": 1, "422": 1 },
        refusedItems: [
          {
            line: 4,
            statusCode: 422,
            code: "timestamp_too_old",
            message: "timestamp is older than this workspace's late-usage window of 35 days"
          },
          {
            line: 5,
            statusCode: 400,
            code: "validation_failed",
            message: expect.stringContaining("timestamp"),
            errors: [{ field: "timestamp", message: expect.stringContaining("5 minutes ahead") }]
          }
        ]
      })
      expect(await signalCount()).toBe(before + 4)
      const rows = await query<{ idempotencyKey: string; occurredAt: Date | string; late: boolean }>(
        app,
        "SELECT idempotency_key, occurred_at, late FROM signals WHERE organization_id = $1 AND idempotency_key LIKE 'backfill-%' ORDER BY idempotency_key",
        [acme.organizationId]
      )
      expect(rows.map((row) => [iso(row.occurredAt), row.late])).toEqual(moments.map((moment) => [moment, true]))
      // billing signal show says when the usage happened, and that the signal is in the backfill lane.
      const [first] = await query<{ id: string }>(app, "SELECT id FROM signals WHERE organization_id = $1 AND idempotency_key = 'backfill-0'", [acme.organizationId])
      const shown = await app.cli(["signal", "show", first!.id, "--org", acme.organizationId, "--json"])
      expect(shown.json.signal).toMatchObject({ occurredAt: moments[0], late: true })
      const view = await app.cli(["signal", "show", first!.id, "--org", acme.organizationId])
      expect(view.stdout).toContain(`${moments[0]} (late: backfill lane)`)

      // The table view says the same, one line per refusal.
      const table = await app.cli(["signal", "send", "--file", file, "--org", acme.organizationId])
      expect(table.code, table.stderr).toBe(0)
      expect(table.stdout).toMatch(/4 queued, 2 refused \(400: 1, 422: 1\) of 6 signal/)
      expect(table.stdout).toContain("late-usage window of 35 days")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("the timestamp's form", () => {
  it("names one instant: the offset is required, milliseconds at most, every part on the calendar", () => {
    expect(instantOf("2026-01-31T23:59:00Z")).toBe(Date.UTC(2026, 0, 31, 23, 59, 0))
    expect(instantOf("2026-02-01T01:59:00.5+02:00")).toBe(Date.UTC(2026, 0, 31, 23, 59, 0, 500))
    expect(instantOf("2026-01-31T20:59:00.123-03:00")).toBe(Date.UTC(2026, 0, 31, 23, 59, 0, 123))
    expect(instantOf("2024-02-29T00:00:00Z")).toBe(Date.UTC(2024, 1, 29))
    // A two-digit year is not taken for 19xx.
    expect(instantOf("0099-06-01T00:00:00Z")).toBe(new Date("0099-06-01T00:00:00Z").getTime())
    for (const text of [
      "2026-01-31T23:59:00", "2026-01-31T23:59Z", "2026-01-31 23:59:00Z", "2026-01-31T23:59:00.1234Z",
      "2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-31T24:00:00Z",
      "2026-01-31T23:60:00Z", "2026-01-31T23:59:60Z", "2026-01-31T23:59:00+0200", "2026-01-31T23:59:00+02",
      "2026-01-31t23:59:00z", "2026-01-31T23:59:00+24:00", ""
    ]) {
      expect(instantOf(text), text).toBeUndefined()
    }
  })

  it("is in the OpenAPI document on every signal route and batch item, with the window's 422", () => {
    const document = JSON.parse(JSON.stringify(OpenApi.fromApi(Api))) as any
    const resolve = (schema: any): any =>
      schema?.$ref ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")]) : schema
    const bodyOf = (route: string) => resolve(document.paths[`/api/v1${route}`].post.requestBody.content["application/json"].schema)
    for (const route of ["/signal/credit", "/signal/outcome", "/signal/outcome/complete", "/signal/unit", "/signal/wallet", "/signal/composite/complete"]) {
      const timestamp = bodyOf(route).properties.timestamp
      expect(timestamp, route).toMatchObject({ type: "string", format: "date-time", pattern: expect.any(String) })
      expect(timestamp.description).toContain("zone offset")
      expect(timestamp.description).toContain("late-usage window")
      expect(bodyOf(route).required ?? []).not.toContain("timestamp")
      expect(document.paths[`/api/v1${route}`].post.responses["422"].description, route).toContain("late-usage window")
      expect(document.paths[`/api/v1${route}`].post.responses["400"].description, route).toContain("timestamp")
    }
    for (const item of ["SignalBatchCreditItem", "SignalBatchOutcomeItem", "SignalBatchUnitItem", "SignalBatchWalletItem"]) {
      expect(document.components.schemas[item].properties.timestamp, item).toMatchObject({ format: "date-time" })
    }
    expect(document.paths["/api/v1/signal/batch"].post.description).toContain("`timestamp`")
    const pattern = new RegExp(bodyOf("/signal/credit").properties.timestamp.pattern)
    expect(pattern.test("2026-01-31T23:59:00.250+02:00")).toBe(true)
    expect(pattern.test("2026-01-31T23:59:00")).toBe(false)

    const list = document.paths["/api/v1/signal/usage-log"].get
    const entry = resolve(list.responses["200"].content["application/json"].schema).properties.result.properties.usageLogs.items
    expect(Object.keys(resolve(entry).properties)).toEqual(expect.arrayContaining(["timestamp", "reverses", "createdAt"]))
    expect(JSON.stringify(resolve(entry).properties.timestamp)).toContain("When the usage happened")
    const from = list.parameters.find((parameter: any) => parameter.name === "from")
    expect(from.description ?? from.schema.description).toContain("`timestamp`")
  })
})
