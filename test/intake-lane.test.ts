/**
 * The intake lane (src/signals/IntakeLane.ts) answers the four queued signal
 * routes without the full HttpApi server, and hands what it cannot judge to
 * it. Each request here is sent twice over raw HTTP: once as the lane takes it
 * (with a Content-Length) and once chunked, which the lane leaves to the full
 * server. The two answers must be the same (status, envelope, headers), the
 * lane's counters say which door answered, and nothing is written twice.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Api } from "../src/app/Api.ts"
import { IntakeLane, laneRoutesOf } from "../src/signals/IntakeLane.ts"
import { ApiKeys } from "../src/organizations/ApiKeys.ts"
import { InboxWriter } from "../src/signals/InboxWriter.ts"
import { client, customerWithChatCredits, query } from "./signals-fixtures.ts"
import { eventually } from "./support/Eventually.ts"
import { type LaneAnswer, postVia, sameBothWays as sameBothWaysVia } from "./support/LanePost.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
/** The app's clock: the system's, except where a test sets it (the key cache's time). */
const clock = makeSettableClock()
let acme: Tenant
let customerId: string
let archivedId: string

type Answer = LaneAnswer

/** A POST as acme: with a Content-Length (the lane's), or chunked (the full server's). */
const post = (path: string, text: string, options: { readonly chunked: boolean; readonly headers?: Record<string, string> }) =>
  postVia(app.baseUrl, acme.apiKey, path, text, options)

const laneStats = () => app.run(Effect.flatMap(IntakeLane, (lane) => lane.stats))
const writerRows = () => app.run(Effect.map(Effect.flatMap(InboxWriter, (writer) => writer.stats), (stats) => stats.rows))
const inboxCount = async () =>
  Number((await query<{ n: string }>(app, "SELECT count(*) AS n FROM signals WHERE organization_id = $1", [acme.organizationId]))[0]!.n)

/** The envelope of an answer without the ids a new signal gets (a batch's results too). */
const withoutIds = (body: any): any => {
  const anonymous = (result: any) => result?.rawId === undefined ? result : { ...result, rawId: "sig", messageId: "msg" }
  if (Array.isArray(body?.result?.results)) return { ...body, result: { results: body.result.results.map(anonymous) } }
  return body?.result?.rawId === undefined ? body : { ...body, result: anonymous(body.result) }
}

/**
 * Sends `text` both ways; expects the same answer and that the lane answered
 * (`answered`) or handed the request over (`handedOver`), and returns it.
 */
const sameBothWays = (path: string, text: string, door: "answered" | "handedOver", headers?: Record<string, string>) =>
  sameBothWaysVia({ baseUrl: app.baseUrl, apiKey: acme.apiKey, stats: laneStats, comparable: withoutIds }, path, text, door, headers)

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

beforeAll(async () => {
  app = await startTestApp({ clock })
  acme = await app.tenant("Lane")
  const api = client(app, acme)
  customerId = await customerWithChatCredits(app, acme)
  archivedId = await api.created("/customers", { name: "Gone", email: "gone@example.com" }, "customer")
  expect((await api.del(`/customers/${archivedId}`)).status).toBe(200)
})
afterAll(() => app.close())

describe("the intake lane", () => {
  it("takes its routes from the API definition: the four queued endpoints and the batch, prefix included", () => {
    expect(Object.fromEntries(laneRoutesOf(Api))).toEqual({
      "/api/v1/signal/credit": "CREDIT",
      "/api/v1/signal/outcome": "OUTCOME",
      "/api/v1/signal/unit": "UNIT",
      "/api/v1/signal/wallet": "WALLET",
      "/api/v1/signal/batch": "BATCH"
    })
  })

  it("accepts a signal with the full server's 202 envelope and writes it once", async () => {
    const inboxBefore = await inboxCount()
    const text = JSON.stringify({ customerId, agentKey: "chat", usage })
    const answer = await sameBothWays("/signal/credit", text, "answered", { "x-request-id": "req-lane-1" })
    expect(answer.status).toBe(202)
    expect(answer.body.statusDetail).toEqual({ status: "SUCCESS", message: "Signal accepted for processing" })
    expect(answer.body.result).toEqual({ queued: true, messageId: expect.stringMatching(/^msg_/), rawId: expect.stringMatching(/^sig_/) })
    expect(answer.headers["x-request-id"]).toBe("req-lane-1")
    expect(await inboxCount()).toBe(inboxBefore + 2)
    const rows = await query<{ route: string; owner: string }>(app, "SELECT route, customer_id AS owner FROM signals WHERE id = $1", [answer.body.result.rawId])
    expect(rows).toEqual([{ route: "CREDIT", owner: customerId }])
  })

  it("answers a repeated idempotency key with the first signal, whichever door took each", async () => {
    const text = JSON.stringify({ customerId, agentKey: "chat", usage, idempotencyKey: "lane-key-1" })
    const first = await post("/signal/credit", text, { chunked: false })
    const again = await post("/signal/credit", text, { chunked: true })
    const third = await post("/signal/credit", text, { chunked: false })
    expect([first.status, again.status, third.status]).toEqual([202, 202, 202])
    expect(again.body.result.rawId).toBe(first.body.result.rawId)
    expect(third.body.result.rawId).toBe(first.body.result.rawId)
    expect(await query(app, "SELECT id FROM signals WHERE idempotency_key = 'lane-key-1'")).toHaveLength(1)
  })

  it("answers what a service refuses itself, with the full server's envelope, and writes nothing", async () => {
    const inboxBefore = await inboxCount()
    const rowsBefore = await writerRows()
    const refused: Array<readonly [string, unknown, number, string]> = [
      ["/signal/credit", { customerId: "cus_missing", agentKey: "chat", usage }, 404, "customer_not_found"],
      ["/signal/unit", { customerId: archivedId, agentKey: "pages" }, 409, "customer_archived"],
      ["/signal/wallet", { usage }, 400, "customer_ref_missing"],
      ["/signal/outcome", { customerId, agentKey: "draft", runId: "nul\u0000run" }, 400, "validation_failed"]
    ]
    for (const [path, body, status, code] of refused) {
      // The same code both ways (sameBothWays compares the bodies whole).
      const answer = await sameBothWays(path, JSON.stringify(body), "answered")
      expect(answer.status).toBe(status)
      expect(answer.body.statusDetail.code, JSON.stringify(answer.body)).toBe(code)
    }
    expect(await inboxCount()).toBe(inboxBefore)
    // The unknown and the archived customer are refused by the inbox writer's statement, once per door:
    // the lane never retries a refused request through the full server.
    expect((await writerRows()) - rowsBefore).toBe(2 * 2)
  })

  it("answers a batch with the full server's envelope, each item as its route would, and writes each accepted item once", async () => {
    const inboxBefore = await inboxCount()
    const text = JSON.stringify({
      signals: [
        { type: "credit", customerId, agentKey: "chat", usage },
        { type: "credit", customerId: "cus_missing", agentKey: "chat", usage },
        { type: "unit", customerId: archivedId, agentKey: "pages" },
        { type: "wallet", usage },
        { type: "outcome_complete", customerId, runId: "r" },
        { type: "credit", customerId, agentKey: "chat", usage, surprise: 1 },
        "not an object"
      ]
    })
    const answer = await sameBothWays("/signal/batch", text, "answered", { "x-request-id": "req-lane-batch" })
    expect(answer.status).toBe(202)
    expect(answer.body.statusDetail).toEqual({ status: "SUCCESS", message: "1 of 7 signals accepted for processing" })
    expect(answer.body.result.results.map((result: any) => result.queued ? 202 : result.error.statusCode))
      .toEqual([202, 404, 409, 400, 400, 400, 400])
    expect(answer.headers["x-request-id"]).toBe("req-lane-batch")
    expect(await inboxCount()).toBe(inboxBefore + 2)
  })

  it("leaves a batch body that is not a list of 1 to 1,000 signals to the full server", async () => {
    const inboxBefore = await inboxCount()
    const item = { type: "credit", customerId, agentKey: "chat", usage }
    const bodies = [
      JSON.stringify({ signals: [] }),
      JSON.stringify({ signals: Array.from({ length: 1001 }, () => item) }),
      JSON.stringify({ signals: [item], extra: true }),
      JSON.stringify({ signals: { 0: item } }),
      JSON.stringify([item]),
      "{not json"
    ]
    for (const text of bodies) {
      const answer = await sameBothWays("/signal/batch", text, "handedOver")
      expect(answer.status, text.slice(0, 60)).toBe(400)
    }
    expect(await inboxCount()).toBe(inboxBefore)
  })

  it("answers an unknown or revoked key 401 itself", async () => {
    const before = await laneStats()
    const text = JSON.stringify({ customerId, agentKey: "chat", usage })
    const viaLane = await post("/signal/credit", text, { chunked: false, headers: { authorization: "Bearer bk_nope" } })
    const viaFull = await post("/signal/credit", text, { chunked: true, headers: { authorization: "Bearer bk_nope" } })
    expect(viaLane.status).toBe(401)
    expect(viaLane.body).toEqual(viaFull.body)
    expect((await laneStats()).answered - before.answered).toBe(1)
  })

  it("refuses a key the cache holds once it has expired, answering from the cache without a look-up", async () => {
    const text = JSON.stringify({ customerId, agentKey: "chat", usage })
    const keyStats = () => app.run(Effect.flatMap(ApiKeys, (keys) => keys.cacheStats))
    // The service's time, set: the key is valid at the first request, which puts it in the cache, and
    // expired at the second, 300 ms later by the clock, within the cache's 500 ms TTL however long the
    // requests took. A whole-cache clear between the two (the change listener reconnecting) makes the
    // second a look-up (also 401): the scenario then runs again.
    let fromCache = 0
    try {
      for (let attempt = 0; attempt < 5 && fromCache === 0; attempt++) {
        const at = Date.now()
        clock.set(at)
        const { secret } = await app.run(Effect.flatMap(ApiKeys, (keys) => keys.create(acme.organizationId, { expiresAt: new Date(at + 250) })))
        const headers = { authorization: `Bearer ${secret}` }
        const first = await post("/signal/credit", text, { chunked: false, headers })
        expect(first.status).toBe(202)
        clock.set(at + 300)
        const [before, lane] = [await keyStats(), await laneStats()]
        const refused = await post("/signal/credit", text, { chunked: false, headers })
        expect(refused.status).toBe(401)
        expect(refused.body.statusDetail.status).toBe("ERROR")
        expect(refused.body.statusDetail.code).toBe("api_key_refused")
        expect((await laneStats()).answered - lane.answered).toBe(1)
        const after = await keyStats()
        if (after.lookups === before.lookups) {
          expect(after.hits - before.hits).toBe(1)
          fromCache++
        }
      }
    } finally {
      clock.unset()
    }
    expect(fromCache).toBe(1)
  })

  it("hands a body it cannot judge to the full server, which answers it as documented", async () => {
    const inboxBefore = await inboxCount()
    const deep = `{"customerId":"${customerId}","agentKey":"chat","usage":${"[".repeat(70)}${"]".repeat(70)}}`
    const handedOver: Array<readonly [string, string]> = [
      ["/signal/credit", "{not json"],
      ["/signal/credit", JSON.stringify({ customerId, agentKey: "chat", usage, surprise: 1 })],
      ["/signal/credit", JSON.stringify({ customerId, agentKey: "chat", usage: { ...usage, inputTokens: -1 } })],
      ["/signal/credit", deep],
      ["/signal/unit", `{"customerId":"${customerId}","agentKey":"pages","runId":"\\ud800"}`]
    ]
    for (const [path, text] of handedOver) {
      const answer = await sameBothWays(path, text, "handedOver")
      expect(answer.status, text.slice(0, 60)).toBe(400)
      expect(answer.body.statusDetail.status).toBe("ERROR")
    }
    expect(await inboxCount()).toBe(inboxBefore)
  })

  it("leaves to the full server what is not a plain intake request", async () => {
    const before = await laneStats()
    const text = JSON.stringify({ customerId, agentKey: "chat", usage })
    const answers = [
      await post("/signal/credit", text, { chunked: false, headers: { "content-type": "text/plain" } }),
      await post("/signal/credit", text, { chunked: false, headers: { authorization: "Basic abc" } }),
      // A query string: the full server's strict queries refuse it (docs/api.md "Strict queries").
      await post("/signal/credit?source=test", text, { chunked: false }),
      await post("/signal/outcome/complete", JSON.stringify({ customerId, runId: "none" }), { chunked: false }),
      // An Idempotency-Key is claimed and replayed by the full server (docs/api.md "Idempotency-Key on every POST").
      await post("/signal/credit", text, { chunked: false, headers: { "idempotency-key": `lane-${Date.now()}` } })
    ]
    expect(answers.map((answer) => answer.status)).toEqual([415, 401, 400, 404, 202])
    expect(answers[2]!.body.statusDetail.message).toContain(`unknown query parameter "source"`)
    expect(await laneStats()).toEqual(before)
  })

  it.skipIf(!usesRealPostgres)(
    "(real PostgreSQL only) answers a signal still in flight when the server stops, once it is committed",
    async () => {
      const own = await startTestApp({ ownDatabase: true })
      const tenant = await own.tenant("Stopping")
      const ownCustomer = await customerWithChatCredits(own, tenant)
      let unlock!: () => void
      const unlocked = new Promise<void>((resolve) => (unlock = resolve))
      let locked!: () => void
      const lockTaken = new Promise<void>((resolve) => (locked = resolve))
      // The insert waits for this lock, so the signal is in flight when the server is asked to stop.
      const holder = own.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE signals IN EXCLUSIVE MODE`
          locked()
          yield* Effect.promise(() => unlocked)
        }))))
      await lockTaken
      const url = new URL(`${own.baseUrl}/signal/credit`)
      const text = JSON.stringify({ customerId: ownCustomer, agentKey: "chat", usage })
      const answer = new Promise<Answer>((resolve, reject) => {
        const request = http.request({
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: "POST",
          agent: false,
          headers: { authorization: `Bearer ${tenant.apiKey}`, "content-type": "application/json", "content-length": Buffer.byteLength(text) }
        }, (response) => {
          const chunks: Array<Buffer> = []
          response.on("data", (chunk) => chunks.push(chunk))
          response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8")), headers: response.headers }))
        })
        request.on("error", reject)
        request.end(text)
      })
      await eventually(async () =>
        expect((await own.run(Effect.flatMap(InboxWriter, (writer) => writer.stats))).waiting).toBe(1))
      expect((await own.run(Effect.flatMap(IntakeLane, (lane) => lane.stats))).answered).toBe(0)
      const stopped = own.close()
      // The server is stopping (it takes no new connection) while the signal waits for its commit.
      await eventually(() =>
        new Promise<void>((resolve, reject) => {
          const probe = http.get({ host: url.hostname, port: url.port, path: "/api/v1/customers", agent: false }, (response) => {
            response.resume()
            reject(new Error(`still answering: ${response.statusCode}`))
          })
          probe.on("error", () => resolve())
        }))
      unlock()
      await holder
      const answered = await answer
      await stopped
      expect(answered.status).toBe(202)
      expect(answered.body.result.rawId).toMatch(/^sig_/)
    }
  )
})
