/**
 * The check lane (src/entitlements/CheckLane.ts) answers `POST
 * /entitlements/check` without the full HttpApi server, and hands what it
 * cannot judge to it. Each request here is sent twice over raw HTTP: once as
 * the lane takes it (with a Content-Length) and once chunked, which the lane
 * leaves to the full server. The two answers must be the same (status,
 * envelope, headers), and the lane's counters say which door answered.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Api } from "../src/app/Api.ts"
import { CheckLane, checkRoutesOf } from "../src/entitlements/CheckLane.ts"
import { IntakeLane } from "../src/signals/IntakeLane.ts"
import { client, customerWithChatCredits, query } from "./signals-fixtures.ts"
import { postVia, sameBothWays as sameBothWaysVia } from "./support/LanePost.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let customerId: string
let archivedId: string

/** A POST as acme: with a Content-Length (the lane's), or chunked (the full server's). */
const post = (path: string, text: string, options: { readonly chunked: boolean; readonly headers?: Record<string, string> }) =>
  postVia(app.baseUrl, acme.apiKey, path, text, options)

const laneStats = () => app.run(Effect.flatMap(CheckLane, (lane) => lane.stats))
const holdsOf = async (customer: string) =>
  Number((await query<{ n: string }>(app, "SELECT count(*) AS n FROM reservations WHERE customer_id = $1", [customer]))[0]!.n)

/**
 * The envelope of an answer without the ids and instants a new hold gets, nor
 * what is held (the second of two holds sees the first).
 */
const withoutHoldIds = (body: any): any =>
  body?.result?.reservationId == null
    ? body
    : { ...body, result: { ...body.result, reservationId: "rsv", expiresAt: "at", held: "held" } }

/**
 * Sends `text` both ways; expects the same answer and that the lane answered
 * (`answered`) or handed the request over (`handedOver`), and returns it.
 */
const sameBothWays = (text: string, door: "answered" | "handedOver", headers?: Record<string, string>) =>
  sameBothWaysVia(
    { baseUrl: app.baseUrl, apiKey: acme.apiKey, stats: laneStats, comparable: withoutHoldIds },
    "/entitlements/check",
    text,
    door,
    headers
  )

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("CheckLane")
  const api = client(app, acme)
  customerId = await customerWithChatCredits(app, acme, { externalId: "lane-ext" }, 10)
  archivedId = await api.created("/customers", { name: "Gone", email: "gone@example.com" }, "customer")
  expect((await api.del(`/customers/${archivedId}`)).status).toBe(200)
})
afterAll(() => app.close())

describe("the check lane", () => {
  it("takes its route from the API definition: the check endpoint, prefix included", () => {
    expect([...checkRoutesOf(Api)]).toEqual(["/api/v1/entitlements/check"])
  })

  it("answers a check with the full server's envelope, headers and request id, and writes nothing", async () => {
    const text = JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage })
    const answer = await sameBothWays(text, "answered", { "x-request-id": "req-check-1" })
    expect(answer.status).toBe(200)
    expect(answer.body.statusDetail).toEqual({ status: "SUCCESS", message: "Entitlement checked" })
    expect(answer.body.result).toMatchObject({ customerId, meter: "CREDIT", allowed: true, reason: null, reservationId: null })
    expect(answer.headers["x-request-id"]).toBe("req-check-1")
    expect(await holdsOf(customerId)).toBe(0)
    // By externalId, and a refusal the service answers in a 200 (more than the allowance).
    expect((await sameBothWays(JSON.stringify({ externalId: "lane-ext", meter: "CREDIT", agentKey: "chat", usage }), "answered")).body.result.customerId)
      .toBe(customerId)
    const tooMuch = await sameBothWays(
      JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage: { ...usage, inputTokens: 10_000_000 } }),
      "answered"
    )
    expect(tooMuch.body.result).toMatchObject({ allowed: false, reason: "OUT_OF_ALLOWANCE" })
  })

  it("holds with `reserve` through either door, once per request", async () => {
    const text = JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60 } })
    const answer = await sameBothWays(text, "answered")
    expect(answer.body.result).toMatchObject({ allowed: true, reservationId: expect.stringMatching(/^rsv_/) })
    expect(await holdsOf(customerId)).toBe(2)
    const again = await sameBothWays(JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage }), "answered")
    expect(Number(again.body.result.held)).toBeGreaterThan(0)
  })

  it("answers what the service refuses itself, with the full server's envelope", async () => {
    const refused: Array<readonly [unknown, number, string]> = [
      [{ customerId: "cus_missing", meter: "CREDIT", agentKey: "chat", usage }, 404, "customer_not_found"],
      [{ externalId: "nobody", meter: "CREDIT", agentKey: "chat", usage }, 404, "customer_not_found"],
      [{ meter: "CREDIT", agentKey: "chat", usage }, 400, "customer_ref_missing"],
      [{ customerId, meter: "CREDIT", agentKey: "nothing", usage }, 422, "unknown_target"]
    ]
    for (const [body, status, code] of refused) {
      const answer = await sameBothWays(JSON.stringify(body), "answered")
      expect(answer.status, JSON.stringify(answer.body)).toBe(status)
      expect(answer.body.statusDetail.status).toBe("ERROR")
      // The lane's answer carries the code, the same as the full server's (sameBothWays compares them whole).
      expect(answer.body.statusDetail.code).toBe(code)
    }
    const archived = await sameBothWays(JSON.stringify({ customerId: archivedId, meter: "CREDIT", agentKey: "chat", usage }), "answered")
    expect(archived.body.result).toMatchObject({ allowed: false, reason: "CUSTOMER_ARCHIVED" })
  })

  it("answers an unknown key 401 itself", async () => {
    const text = JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage })
    const answer = await sameBothWays(text, "answered", { authorization: "Bearer bk_nope" })
    expect(answer.status).toBe(401)
    expect(answer.body.statusDetail.code).toBe("api_key_refused")
  })

  it("hands a body it cannot judge to the full server, which answers it as documented", async () => {
    const deep = `{"customerId":"${customerId}","meter":"CREDIT","agentKey":"chat","usage":${"[".repeat(70)}${"]".repeat(70)}}`
    const bodies = [
      "{not json",
      JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat" }),
      JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 0 } }),
      JSON.stringify({ customerId, meter: "NOPE", agentKey: "chat", usage }),
      deep,
      `{"customerId":"${customerId}","meter":"CREDIT","agentKey":"\\ud800","usage":${JSON.stringify(usage)}}`
    ]
    for (const text of bodies) {
      const answer = await sameBothWays(text, "handedOver")
      expect(answer.status, text.slice(0, 60)).toBe(400)
      expect(answer.body.statusDetail.status).toBe("ERROR")
      expect(answer.body.statusDetail.code).toBe(text === "{not json" ? "invalid_json" : "validation_failed")
    }
    expect(await holdsOf(customerId)).toBe(2)
  })

  it("leaves to the full server what is not a plain check, and leaves the signal routes to the intake lane", async () => {
    const before = await laneStats()
    const intakeBefore = await app.run(Effect.flatMap(IntakeLane, (lane) => lane.stats))
    const text = JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage })
    const answers = [
      await post("/entitlements/check", text, { chunked: false, headers: { "content-type": "text/plain" } }),
      await post("/entitlements/check", text, { chunked: false, headers: { authorization: "Basic abc" } }),
      // A query string: the full server's strict queries refuse it (docs/api.md "Strict queries").
      await post("/entitlements/check?source=test", text, { chunked: false }),
      // An Idempotency-Key is claimed and replayed by the full server (docs/api.md "Idempotency-Key on every POST").
      await post("/entitlements/check", text, { chunked: false, headers: { "idempotency-key": `check-${Date.now()}` } }),
      await post("/signal/credit", JSON.stringify({ customerId, agentKey: "chat", usage }), { chunked: false })
    ]
    expect(answers.map((answer) => answer.status)).toEqual([415, 401, 400, 200, 202])
    expect(answers[2]!.body.statusDetail.message).toContain(`unknown query parameter "source"`)
    expect(await laneStats()).toEqual(before)
    expect((await app.run(Effect.flatMap(IntakeLane, (lane) => lane.stats))).answered - intakeBefore.answered).toBe(1)
  })
})
