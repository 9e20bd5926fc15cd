/**
 * API rate limits (issue 27 item 4, src/http/RateLimit.ts): a token bucket per
 * API key and route family, set per organisation (API and CLI). A burst over
 * the limit is refused 429 in the envelope with `Retry-After` and the
 * `RateLimit-Policy` / `RateLimit` fields, before anything is written: through
 * the intake lane, the check lane and the full server, counted in rows.
 * Refilling is driven by the clock (an injected one, and `TestClock` for the
 * service), never waited for.
 */
import { SqlClient } from "@effect/sql"
import { it as effectIt } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_RATE_LIMITS } from "../src/organizations/RateLimits.ts"
import { OrganizationId } from "../src/ids.ts"
import { familyOf, RateLimiter, rateLimitHeaders, TokenBuckets } from "../src/http/RateLimit.ts"
import { clientOf, expectError, ok } from "./support/Http.ts"
import { postVia } from "./support/LanePost.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const limit = { perSecond: 1, burst: 3 }
/** Over HTTP: one token every 1,000 seconds, so no bucket refills while a test runs, however slow the machine. */
const slow = (burst: number) => ({ perSecond: 0.001, burst })

describe("a token bucket (injected clock)", () => {
  it("lets a burst through, refuses past it with the seconds to wait, and refills with time", () => {
    let now = 1_000_000
    const buckets = new TokenBuckets(() => now)
    const verdicts = Array.from({ length: 4 }, () => buckets.take("key_a", "signals", limit))
    expect(verdicts.map((v) => [v.allowed, v.remaining])).toEqual([[true, 2], [true, 1], [true, 0], [false, 0]])
    expect(verdicts[3]).toMatchObject({ retryAfter: 1, resetSeconds: 1 })
    // Another key, another family: buckets of their own.
    expect(buckets.take("key_b", "signals", limit).allowed).toBe(true)
    expect(buckets.take("key_a", "reads", limit).allowed).toBe(true)

    now += 999
    expect(buckets.take("key_a", "signals", limit).allowed).toBe(false)
    now += 1
    expect(buckets.take("key_a", "signals", limit)).toMatchObject({ allowed: true, remaining: 0 })
    // Ten idle seconds fill it to its size, not beyond.
    now += 10_000
    expect(buckets.take("key_a", "signals", limit)).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 1 })
  })

  it("refills nothing while the clock is set back, and counts on from the instant it was set to", () => {
    let now = 5_000_000
    const buckets = new TokenBuckets(() => now)
    for (let n = 0; n < 3; n++) expect(buckets.take("k", "writes", limit).allowed).toBe(true)
    // A month back (a clock corrected, a test's instant): no debt of a month's refill, the bucket as it was.
    now -= 30 * 86_400_000
    expect(buckets.take("k", "writes", limit)).toMatchObject({ allowed: false, retryAfter: 1 })
    now += 1_000
    expect(buckets.take("k", "writes", limit)).toMatchObject({ allowed: true, remaining: 0 })
  })

  it("takes a batch's cost at once, and a cost above the size from a full bucket only, leaving a debt", () => {
    let now = 0
    const buckets = new TokenBuckets(() => now)
    expect(buckets.take("k", "signals", limit, 2)).toMatchObject({ allowed: true, remaining: 1 })
    expect(buckets.take("k", "signals", limit, 2)).toMatchObject({ allowed: false, retryAfter: 1 })
    now += 2_000
    // 3 tokens (full): a batch of 5 goes through and leaves 2 owed; the next needs 3 seconds.
    expect(buckets.take("k", "signals", limit, 5)).toMatchObject({ allowed: true, remaining: 0 })
    expect(buckets.take("k", "signals", limit, 1)).toMatchObject({ allowed: false, retryAfter: 3 })
  })

  it("writes the draft's fields: the policy, what is left, and Retry-After when refused", () => {
    const buckets = new TokenBuckets(() => 0)
    const allowed = buckets.take("k", "signals", { perSecond: 2, burst: 10 })
    expect(rateLimitHeaders(allowed)).toEqual({ "ratelimit-policy": "\"signals\";q=10;w=5", ratelimit: "\"signals\";r=9;t=1" })
    for (let i = 0; i < 9; i++) buckets.take("k", "signals", { perSecond: 2, burst: 10 })
    const refused = buckets.take("k", "signals", { perSecond: 2, burst: 10 })
    expect(rateLimitHeaders(refused)).toEqual({
      "ratelimit-policy": "\"signals\";q=10;w=5",
      ratelimit: "\"signals\";r=0;t=1",
      "retry-after": "1"
    })
  })

  it("sorts requests into their family", () => {
    expect(familyOf("POST", "/api/v1/signal/credit")).toBe("signals")
    expect(familyOf("POST", "/api/v1/signal/batch")).toBe("signals")
    expect(familyOf("POST", "/api/v1/signal/composite/complete")).toBe("signals")
    expect(familyOf("POST", "/api/v1/entitlements/check")).toBe("signals")
    expect(familyOf("GET", "/api/v1/signal/usage-log?customerId=x")).toBe("reads")
    expect(familyOf("POST", "/api/v1/signal/usage-log/lookup")).toBe("reads")
    expect(familyOf("POST", "/api/v1/signal/usage-log/ul_1/reverse")).toBe("writes")
    expect(familyOf("POST", "/api/v1/customers")).toBe("writes")
    expect(familyOf("DELETE", "/api/v1/webhook-endpoints/whe_1")).toBe("writes")
  })
})

describe("the limiter service (TestClock)", () => {
  effectIt.effect("refills as the test clock moves", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const caller = {
        organizationId: OrganizationId.make("org_clock"),
        apiKeyId: "key_clock",
        rateLimits: { ...DEFAULT_RATE_LIMITS, writes: limit }
      }
      const taken = Array.from({ length: 4 }, () => limiter.take(caller, "writes").allowed)
      expect(taken).toEqual([true, true, true, false])
      yield* TestClock.adjust("1 second")
      expect(limiter.take(caller, "writes").allowed).toBe(true)
      expect(limiter.take(caller, "writes").allowed).toBe(false)
      yield* TestClock.adjust("3 seconds")
      expect(limiter.take(caller, "writes").remaining).toBe(2)
    }).pipe(Effect.provide(RateLimiter.Default)))
})

const signalsOf = (tenant: Tenant) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ count: string }>`SELECT count(*) FROM signals WHERE organization_id = ${tenant.organizationId}`)).then((rows) =>
    Number(rows[0]!.count)
  )

/** A tenant with one customer, then the given limits, set through the API (in force at once in this process). */
const limitedTenant = async (rateLimits: Record<string, unknown>) => {
  const tenant = await app.tenant("Limited")
  const api = clientOf(app, tenant)
  const customer = ok(await api.post("/customers", { name: "Jo", email: "jo@example.com" }), 201).customer
  const set = ok(await api.patch("/organization/settings", { rateLimits }))
  return { tenant, api, set, customerId: customer.id as string }
}

const credit = (customerId: string, i: number) =>
  JSON.stringify({ customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 100 + i, outputTokens: 10 } })

const expectLimited = (answer: { status: number; body: any; headers: any }, family: string, policy: string) => {
  expectError(answer, 429, "rate_limited")
  expect(answer.body.statusDetail.message).toMatch(new RegExp(`^Rate limit exceeded for ${family}`))
  const header = (name: string) => typeof answer.headers.get === "function" ? answer.headers.get(name) : answer.headers[name]
  expect(header("retry-after")).toMatch(/^[1-9]\d*$/)
  expect(header("ratelimit-policy")).toBe(policy)
  expect(header("ratelimit")).toBe(`"${family}";r=0;t=${header("retry-after")}`)
}

describe("rate limits over HTTP", () => {
  it("reads and changes an organisation's limits through the API and the CLI", async () => {
    const tenant = await app.tenant("Settings")
    const api = clientOf(app, tenant)
    const read = ok(await api.get("/organization/settings")).organization
    expect(read).toMatchObject({
      id: tenant.organizationId,
      rateLimits: {
        signals: { perSecond: 50_000, burst: 100_000, source: "DEFAULT" },
        reads: { perSecond: 10_000, burst: 20_000, source: "DEFAULT" },
        writes: { perSecond: 5_000, burst: 10_000, source: "DEFAULT" }
      }
    })
    const changed = ok(await api.patch("/organization/settings", { rateLimits: { reads: { perSecond: 100, burst: 300 } } }))
    expect(changed.organization.rateLimits.reads).toEqual({ perSecond: 100, burst: 300, source: "ORGANIZATION" })
    expect(changed.organization.rateLimits.signals.source).toBe("DEFAULT")
    for (
      const rateLimits of [
        { reads: { perSecond: 0, burst: 1 } },
        { reads: { perSecond: 0.0001, burst: 3 } },
        { reads: { perSecond: 1, burst: 2.5 } },
        { reads: { perSecond: 1 } },
        { uploads: { perSecond: 1, burst: 1 } }
      ]
    ) {
      expectError(await api.patch("/organization/settings", { rateLimits }), 400, "validation_failed")
    }
    const cli = await app.cli([
      "org", "settings", "--rate-limit-writes", "20/40", "--rate-limit-reads", "default", "--json", "--org", tenant.organizationId
    ])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json.organization.rateLimits).toEqual({
      signals: { perSecond: 50_000, burst: 100_000, source: "DEFAULT" },
      reads: { perSecond: 10_000, burst: 20_000, source: "DEFAULT" },
      writes: { perSecond: 20, burst: 40, source: "ORGANIZATION" }
    })
    const bad = await app.cli(["org", "settings", "--rate-limit-writes", "fast", "--json", "--org", tenant.organizationId])
    expect(bad.code).toBe(2)
    const outOfRange = await app.cli(["org", "settings", "--rate-limit-writes", "0/1", "--json", "--org", tenant.organizationId])
    expect(outOfRange.code).toBe(2)
    expect(ok(await api.get("/organization/settings")).organization.rateLimits.writes).toMatchObject({ perSecond: 20, burst: 40 })
  })

  it("refuses a burst of signals over the limit with 429 and its headers, through the lane, writing none of it", async () => {
    const { tenant, customerId } = await limitedTenant({ signals: slow(3) })
    const answers = []
    for (let i = 0; i < 5; i++) {
      answers.push(await postVia(app.baseUrl, tenant.apiKey, "/signal/credit", credit(customerId, i), { chunked: false }))
    }
    expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 429, 429])
    expect(answers[0]!.headers["ratelimit-policy"]).toBe("\"signals\";q=3;w=3000")
    expect(answers[0]!.headers["ratelimit"]).toBe("\"signals\";r=2;t=1000")
    for (const refused of answers.slice(3)) expectLimited(refused, "signals", "\"signals\";q=3;w=3000")
    // The full server (a chunked body) is held to the same bucket.
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/signal/credit", credit(customerId, 9), { chunked: true }), "signals", "\"signals\";q=3;w=3000")
    // So is a batch, in the lane and in the full server, and the check before spending.
    const batch = JSON.stringify({ signals: [{ type: "credit", ...JSON.parse(credit(customerId, 7)) }] })
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batch, { chunked: false }), "signals", "\"signals\";q=3;w=3000")
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batch, { chunked: true }), "signals", "\"signals\";q=3;w=3000")
    const check = JSON.stringify({ customerId, meter: "CREDIT", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1, outputTokens: 1 } })
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/entitlements/check", check, { chunked: false }), "signals", "\"signals\";q=3;w=3000")
    expect(await signalsOf(tenant)).toBe(3)

    // Reads and writes have buckets of their own: the key still reads.
    ok(await clientOf(app, tenant).get("/customers"))
  })

  it("counts a batch as its number of signals", async () => {
    const { tenant, customerId } = await limitedTenant({ signals: slow(4) })
    const batchOf = (n: number) =>
      JSON.stringify({ signals: Array.from({ length: n }, (_, i) => ({ type: "credit", ...JSON.parse(credit(customerId, i)) })) })
    const first = await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batchOf(3), { chunked: false })
    expect(first.status).toBe(202)
    expect(first.headers["ratelimit"]).toBe("\"signals\";r=1;t=3000")
    // 1 token left: a batch of 2 is refused whole, in the lane and in the full server.
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batchOf(2), { chunked: false }), "signals", "\"signals\";q=4;w=4000")
    expectLimited(await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batchOf(2), { chunked: true }), "signals", "\"signals\";q=4;w=4000")
    expect(await signalsOf(tenant)).toBe(3)
    // The refused batches took nothing: the last token takes a batch of one, through the full server.
    const last = await postVia(app.baseUrl, tenant.apiKey, "/signal/batch", batchOf(1), { chunked: true })
    expect(last.status).toBe(202)
    expect(last.headers["ratelimit"]).toMatch(/^"signals";r=0;t=\d+$/)
    expect(await signalsOf(tenant)).toBe(4)
  })

  it("limits reads and writes per key, after authentication: a bad key is 401 whatever the count", async () => {
    const { tenant, api } = await limitedTenant({ reads: slow(2), writes: slow(1) })
    // The customer and the PATCH took the writes bucket's tokens under the default; it is cut to its new size now.
    const reads = [await api.get("/customers"), await api.get("/customers"), await api.get("/customers")]
    expect(reads.map((r) => r.status)).toEqual([200, 200, 429])
    expect(reads[0]!.headers.get("ratelimit-policy")).toBe("\"reads\";q=2;w=2000")
    expectLimited(reads[2]!, "reads", "\"reads\";q=2;w=2000")

    const created = await api.post("/customers", { name: "Al", email: "al@example.com" })
    const refused = await api.post("/customers", { name: "Bo", email: "bo@example.com" })
    expect([created.status, refused.status]).toEqual([201, 429])
    expectLimited(refused, "writes", "\"writes\";q=1;w=1000")
    const names = await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ name: string }>`SELECT name FROM customers WHERE organization_id = ${tenant.organizationId} ORDER BY id`))
    expect(names.map((row) => row.name)).toEqual(["Jo", "Al"])

    expectError(await app.request("GET", "/customers", { key: "sk_not_a_key" }), 401, "api_key_refused")
    // Another key of the same organisation has buckets of its own.
    const second = await app.cli(["key", "create", "--json", "--org", tenant.organizationId])
    ok(await app.request("GET", "/customers", { key: second.json.apiKey }))
  })
})

describe("Retry-After over HTTP (the app's clock set by the test)", () => {
  it("is the whole seconds until the tokens are there, rounded up: waiting it lets the request through, a second less does not", async () => {
    const clock = makeSettableClock()
    const timed = await startTestApp({ clock })
    try {
      clock.set(Date.now())
      const tenant = await timed.tenant("Retry-After")
      const api = clientOf(timed, tenant)
      // One token every 2.5 seconds, one at a time.
      ok(await api.patch("/organization/settings", { rateLimits: { reads: { perSecond: 0.4, burst: 1 } } }))
      ok(await api.get("/customers"))
      const refused = await api.get("/customers")
      expectLimited(refused, "reads", "\"reads\";q=1;w=3")
      // The token is there in 2.5 seconds: told 3, not 2.
      expect(refused.headers.get("retry-after")).toBe("3")
      clock.advance(2_000)
      // 0.8 of a token: half a second to go, told 1.
      const early = await api.get("/customers")
      expectLimited(early, "reads", "\"reads\";q=1;w=3")
      expect(early.headers.get("retry-after")).toBe("1")
      clock.advance(1_000)
      ok(await api.get("/customers"))
    } finally {
      await timed.close()
    }
  })
})
