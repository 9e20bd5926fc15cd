/**
 * The `Idempotency-Key` header on every POST (docs/api.md, "Idempotency-Key on
 * every POST"; src/http/IdempotencyKeyHeader.ts), through HTTP on both
 * databases: the same key and request within 24 hours get the first answer
 * again (status, body, `Idempotent-Replayed: true`) and write nothing; another
 * request under the key is 422; keys are the organisation's; answers of
 * requests that never ran give the key back; expiry and the history job's
 * purge; the body's `idempotencyKey` beside the header; the OpenAPI document.
 * Concurrent repeats (one write, identical answers) on real PostgreSQL only.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { historyJob } from "../src/history/HistoryJob.ts"
import { requestFingerprint } from "../src/http/IdempotencyKeyHeader.ts"
import { CLAIM_LEASE_MS, KEY_LIFETIME_MS } from "../src/idempotency/KeyedRequests.ts"
import { expectError, query } from "./signals-fixtures.ts"
import { makeSettableClock } from "./support/SettableClock.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const clock = makeSettableClock()
let app: TestApp
let acme: Tenant
let globex: Tenant

beforeAll(async () => {
  app = await startTestApp({ clock })
  acme = await app.tenant("Acme")
  globex = await app.tenant("Globex")
})
afterAll(() => app?.close())

let counter = 0
const newKey = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}`

const post = (tenant: Tenant, path: string, body: unknown, key?: string, headers: Record<string, string> = {}) =>
  app.request("POST", path, { key: tenant.apiKey, body, headers: key === undefined ? headers : { ...headers, "idempotency-key": key } })

/** A customer to send signals for: intake queues them (202) whatever the plan; the worker, not run here, would price them. */
const signalCustomer = async (tenant: Tenant) =>
  (await post(tenant, "/customers", { name: "Signals", email: "signals@example.com" })).body.result.customer.id as string

const customersNamed = async (tenant: Tenant, name: string) =>
  (await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM customers WHERE organization_id = $1 AND name = $2", [
    tenant.organizationId,
    name
  ]))[0]!.n

const expectReplayOf = (repeat: { status: number; body: any; headers: Headers }, first: { status: number; body: any; headers: Headers }) => {
  expect(repeat.status).toBe(first.status)
  expect(repeat.body).toEqual(first.body)
  expect(repeat.headers.get("idempotent-replayed")).toBe("true")
  expect(repeat.headers.get("content-type")).toBe(first.headers.get("content-type"))
}

describe("a repeat with the same key and request", () => {
  it("POST /customers (201): the first answer again, replayed, and one customer", async () => {
    const key = newKey("create")
    const body = { name: "Replayed Jo", email: "jo@example.com" }
    const first = await post(acme, "/customers", body, key)
    expect(first.status).toBe(201)
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    const repeat = await post(acme, "/customers", body, key)
    expectReplayOf(repeat, first)
    // A replay is an answer of its own: its request id, and the key's rate-limit fields.
    expect(repeat.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"))
    expect(repeat.headers.get("ratelimit")).toMatch(/^"writes";r=\d+;t=\d+$/)
    expect(await customersNamed(acme, "Replayed Jo")).toBe(1)
    // The body's keys in another order are the same request.
    expectReplayOf(await post(acme, "/customers", { email: "jo@example.com", name: "Replayed Jo" }, key), first)
  })

  it("POST /purchases, which a plain retry answers 409 purchase_already_held: the 201 again", async () => {
    const customerId = (await post(acme, "/customers", { name: "Buyer", email: "buyer@example.com" })).body.result.customer.id
    const credit = (await post(acme, "/credits", {
      name: "Chat",
      agentKey: newKey("chat"),
      marginPercent: 20,
      modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    })).body.result.credit.id
    const plan = (await post(acme, "/plans", {
      name: "Plan",
      billingCycle: "MONTHLY",
      entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit, quantity: 100 }]
    })).body.result.plan.id
    const key = newKey("purchase")
    const first = await post(acme, "/purchases", { customerId, planId: plan }, key)
    expect(first.status).toBe(201)
    expectReplayOf(await post(acme, "/purchases", { customerId, planId: plan }, key), first)
    expectError(await post(acme, "/purchases", { customerId, planId: plan }), 409, "purchase_already_held")
    const purchases = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM purchases WHERE organization_id = $1 AND customer_id = $2", [
      acme.organizationId,
      customerId
    ])
    expect(purchases[0]!.n).toBe(1)
  })

  it("POST /signal/unit (202): the same rawId again, and one signal in the inbox", async () => {
    const customerId = await signalCustomer(acme)
    const key = newKey("signal")
    const body = { customerId, agentKey: "pages", quantity: 1 }
    const first = await post(acme, "/signal/unit", body, key)
    expect(first.status).toBe(202)
    const repeat = await post(acme, "/signal/unit", body, key)
    expectReplayOf(repeat, first)
    expect(repeat.body.result.rawId).toBe(first.body.result.rawId)
    const signals = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM signals WHERE organization_id = $1 AND customer_id = $2", [
      acme.organizationId,
      customerId
    ])
    expect(signals[0]!.n).toBe(1)
  })

  it("POST /portal/token (200): the same token again, not a new one", async () => {
    const customerId = (await post(acme, "/customers", { name: "Portal", email: "portal@example.com" })).body.result.customer.id
    const key = newKey("portal")
    const first = await post(acme, "/portal/token", { customerId }, key)
    expect(first.status).toBe(200)
    const repeat = await post(acme, "/portal/token", { customerId }, key)
    expectReplayOf(repeat, first)
    // Without the key, each call mints a token of its own.
    const unkeyed = await post(acme, "/portal/token", { customerId })
    expect(unkeyed.body.result.token).not.toBe(first.body.result.token)
  })
})

describe("the same key with another request", () => {
  it("is 422 idempotency_key_reused and writes nothing: another body, another route", async () => {
    const key = newKey("reused")
    expect((await post(acme, "/customers", { name: "Reuse A", email: "a@example.com" }, key)).status).toBe(201)
    const other = await post(acme, "/customers", { name: "Reuse B", email: "b@example.com" }, key)
    expectError(other, 422, "idempotency_key_reused")
    expect(other.body.statusDetail.message).toContain(`Idempotency-Key ${key} was already used with a different request (POST /api/v1/customers`)
    expect(other.headers.get("idempotent-replayed")).toBeNull()
    expect(await customersNamed(acme, "Reuse B")).toBe(0)
    expectError(await post(acme, "/taxes", { name: "VAT", ratePercent: 20 }, key), 422, "idempotency_key_reused")
    const taxes = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM taxes WHERE organization_id = $1", [acme.organizationId])
    expect(taxes[0]!.n).toBe(0)
  })
})

describe("keys are the organisation's", () => {
  it("the same key in another organisation is its own: each writes once and replays its own answer", async () => {
    const key = newKey("shared")
    const atAcme = await post(acme, "/customers", { name: "Org Jo", email: "jo@acme.example" }, key)
    const atGlobex = await post(globex, "/customers", { name: "Org Jo", email: "jo@globex.example" }, key)
    expect([atAcme.status, atGlobex.status]).toEqual([201, 201])
    expect(atGlobex.headers.get("idempotent-replayed")).toBeNull()
    expect(atGlobex.body.result.customer.id).not.toBe(atAcme.body.result.customer.id)
    // Even another body at Globex is no reuse of Acme's key.
    expectReplayOf(await post(acme, "/customers", { name: "Org Jo", email: "jo@acme.example" }, key), atAcme)
    expectReplayOf(await post(globex, "/customers", { name: "Org Jo", email: "jo@globex.example" }, key), atGlobex)
    expect([await customersNamed(acme, "Org Jo"), await customersNamed(globex, "Org Jo")]).toEqual([1, 1])
  })
})

describe("which answers are kept", () => {
  it("a 4xx of a request that ran is replayed: a 409 stays the key's answer after the clash is gone", async () => {
    const holder = (await post(acme, "/customers", { name: "Holder", email: "h@example.com", externalId: "held-ext-1" })).body.result.customer
    const key = newKey("clash")
    const body = { name: "Clash", email: "c@example.com", externalId: "held-ext-1" }
    const first = await post(acme, "/customers", body, key)
    expectError(first, 409, "external_id_taken")
    expect((await app.request("DELETE", `/customers/${holder.id}`, { key: acme.apiKey })).status).toBe(200)
    const repeat = await post(acme, "/customers", body, key)
    expectReplayOf(repeat, first)
    expect(await customersNamed(acme, "Clash")).toBe(0)
    // A new key is a new request: it runs, and now succeeds.
    expect((await post(acme, "/customers", body, newKey("clash"))).status).toBe(201)
  })

  it("a request that never ran gives the key back: a 400 validation_failed, then the corrected body runs", async () => {
    const key = newKey("invalid")
    expectError(await post(acme, "/customers", { name: "Fixed Later" }, key), 400, "validation_failed")
    expectError(await app.request("POST", "/customers", { key: acme.apiKey, rawBody: "{oops", headers: { "idempotency-key": key } }), 400, "invalid_json")
    const fixed = await post(acme, "/customers", { name: "Fixed Later", email: "f@example.com" }, key)
    expect(fixed.status).toBe(201)
    expect(fixed.headers.get("idempotent-replayed")).toBeNull()
    expectReplayOf(await post(acme, "/customers", { name: "Fixed Later", email: "f@example.com" }, key), fixed)
  })

  it("a refused API key: 401, and the key is not claimed", async () => {
    const key = newKey("unauthenticated")
    const refused = await app.request("POST", "/customers", {
      key: "sk_unknown",
      body: { name: "Nobody", email: "n@example.com" },
      headers: { "idempotency-key": key }
    })
    expectError(refused, 401, "api_key_refused")
    const rows = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM idempotent_requests WHERE idempotency_key = $1", [key])
    expect(rows[0]!.n).toBe(0)
  })
})

describe("the key's form", () => {
  it("1 to 255 printable ASCII characters; anything else is 400 validation_failed and runs nothing", async () => {
    const body = { name: "Bad Key", email: "bad@example.com" }
    for (const key of ["k".repeat(256), "clé-é", ""]) {
      const response = await post(acme, "/customers", body, key)
      expectError(response, 400, "validation_failed")
      expect(response.body.statusDetail.message).toContain("Idempotency-Key must be 1 to 255 printable ASCII characters")
    }
    expect(await customersNamed(acme, "Bad Key")).toBe(0)
    const longest = "k".repeat(255)
    const first = await post(acme, "/customers", body, longest)
    expect(first.status).toBe(201)
    expectReplayOf(await post(acme, "/customers", body, longest), first)
  })
})

describe("without the header", () => {
  it("nothing changes: each POST runs, nothing is stored or replayed", async () => {
    const body = { name: "Unkeyed", email: "u@example.com" }
    const answers = [await post(acme, "/customers", body), await post(acme, "/customers", body)]
    expect(answers.map((a) => a.status)).toEqual([201, 201])
    expect(answers.map((a) => a.headers.get("idempotent-replayed"))).toEqual([null, null])
    expect(await customersNamed(acme, "Unkeyed")).toBe(2)
  })
})

describe("the header beside the body's idempotencyKey", () => {
  it("each keeps its meaning: the header is judged first, the body's key within the route", async () => {
    const customerId = await signalCustomer(globex)
    const body = { customerId, agentKey: "pages", quantity: 2, idempotencyKey: newKey("body") }
    const headerKey = newKey("header")
    const first = await post(globex, "/signal/unit", body, headerKey)
    expect(first.status).toBe(202)
    // The header's repeat: a replay.
    expectReplayOf(await post(globex, "/signal/unit", body, headerKey), first)
    // Another header key, the same body key: the route's own rule answers the first signal (no replay header).
    const byBodyKey = await post(globex, "/signal/unit", body, newKey("header"))
    expect(byBodyKey.status).toBe(202)
    expect(byBodyKey.body.result.rawId).toBe(first.body.result.rawId)
    expect(byBodyKey.headers.get("idempotent-replayed")).toBeNull()
    // The first header key with another body: 422, before the body's key is looked at.
    expectError(await post(globex, "/signal/unit", { ...body, quantity: 3 }, headerKey), 422, "idempotency_key_reused")
    const signals = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM signals WHERE organization_id = $1 AND customer_id = $2", [
      globex.organizationId,
      customerId
    ])
    expect(signals[0]!.n).toBe(1)
  })
})

describe("a first request still in flight", () => {
  /** A claim as a process that died after claiming would leave it: in flight, claimed `ago` milliseconds before now. */
  const strandedClaim = (tenant: Tenant, key: string, body: unknown, ago: number) => {
    const now = Date.now()
    const fingerprint = requestFingerprint("POST", "/api/v1/customers", "", JSON.stringify(body))
    return query(app, `INSERT INTO idempotent_requests
      (organization_id, idempotency_key, fingerprint, method, path, claim_token, created_at, claimed_at)
      VALUES ($1, $2, $3, 'POST', '/api/v1/customers', 'stranded', $4, $4)`, [tenant.organizationId, key, fingerprint, new Date(now - ago)])
  }

  it("is waited for; one abandoned past its lease is taken over, and the repeat runs", async () => {
    const key = newKey("abandoned")
    const body = { name: "Taken Over", email: "t@example.com" }
    // The lease ends about a second from now: the repeat waits for it, then runs the request itself.
    await strandedClaim(acme, key, body, CLAIM_LEASE_MS - 1_000)
    const started = Date.now()
    const response = await post(acme, "/customers", body, key)
    expect(response.status).toBe(201)
    expect(Date.now() - started).toBeGreaterThanOrEqual(500)
    expect(await customersNamed(acme, "Taken Over")).toBe(1)
    expectReplayOf(await post(acme, "/customers", body, key), response)
  })

  it("409 idempotency_key_in_use when it is still running after the repeat waited (15 s)", async () => {
    const key = newKey("in-flight")
    const body = { name: "Still Running", email: "s@example.com" }
    await strandedClaim(acme, key, body, 0)
    const response = await post(acme, "/customers", body, key)
    expectError(response, 409, "idempotency_key_in_use")
    expect(response.headers.get("retry-after")).toBe("1")
    expect(await customersNamed(acme, "Still Running")).toBe(0)
  }, 30_000)
})

describe("24 hours", () => {
  it("a key is free again 24 hours after its first use, and the history job deletes its record", async () => {
    const start = Date.now()
    clock.set(start)
    try {
      const key = newKey("expiry")
      const body = { name: "Expiring", email: "e@example.com" }
      const first = await post(acme, "/customers", body, key)
      expect(first.status).toBe(201)
      clock.set(start + KEY_LIFETIME_MS - 1_000)
      expectReplayOf(await post(acme, "/customers", body, key), first)
      clock.set(start + KEY_LIFETIME_MS)
      // Expired on read: the key is new again, even for another request.
      const again = await post(acme, "/customers", { ...body, email: "e2@example.com" }, key)
      expect(again.status).toBe(201)
      expect(again.headers.get("idempotent-replayed")).toBeNull()
      expect(await customersNamed(acme, "Expiring")).toBe(2)

      const older = newKey("purged")
      clock.set(start)
      expect((await post(acme, "/customers", { name: "Purged", email: "p@example.com" }, older)).status).toBe(201)
      const count = async (k: string) =>
        (await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM idempotent_requests WHERE idempotency_key = $1", [k]))[0]!.n
      expect([await count(older), await count(key)]).toEqual([1, 1])
      // A pass of the history job a day after `older` was used: its record goes, the renewed key's stays.
      await app.run(Effect.flatMap(historyJob, (job) => job.runOnce(new Date(start + KEY_LIFETIME_MS + 1))))
      expect([await count(older), await count(key)]).toEqual([0, 1])
    } finally {
      clock.unset()
    }
  })
})

describe("the OpenAPI document", () => {
  it("documents the header on every POST, the replay header, and 409/422 for keys", async () => {
    const document = (await app.request("GET", "/openapi.json", { key: null })).body
    let posts = 0
    for (const [path, item] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const header = (operation.parameters ?? []).find((p: any) => p.in === "header" && p.name === "Idempotency-Key")
        if (method !== "post") {
          expect(header, `${method} ${path}`).toBeUndefined()
          continue
        }
        posts++
        expect(header, path).toMatchObject({ required: false, schema: { type: "string", minLength: 1, maxLength: 255 } })
        const success = Object.entries<any>(operation.responses).filter(([status]) => status.startsWith("2"))
        for (const [status, response] of success) {
          expect(response.headers?.["Idempotent-Replayed"], `${path} ${status}`).toMatchObject({ schema: { type: "string", enum: ["true"] } })
        }
        expect(operation["x-error-codes"], path).toEqual(expect.arrayContaining(["idempotency_key_reused", "idempotency_key_in_use"]))
      }
    }
    expect(posts).toBeGreaterThan(30)
  })
})

describe.skipIf(!usesRealPostgres)("(real PostgreSQL only) concurrent repeats", () => {
  it("10 parallel POST /customers with one key: one customer, ten identical answers, nine replays", async () => {
    const key = newKey("parallel")
    const body = { name: "Parallel Jo", email: "p@example.com" }
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(acme, "/customers", body, key)))
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201))
    for (const answer of answers) expect(answer.body).toEqual(answers[0]!.body)
    expect(answers.filter((a) => a.headers.get("idempotent-replayed") === "true")).toHaveLength(9)
    expect(await customersNamed(acme, "Parallel Jo")).toBe(1)
  })

  it("10 parallel signals with one key: one signal in the inbox, one rawId", async () => {
    const customerId = await signalCustomer(acme)
    const key = newKey("parallel-signal")
    const answers = await Promise.all(Array.from({ length: 10 }, () =>
      post(acme, "/signal/unit", { customerId, agentKey: "pages", quantity: 1 }, key)))
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(202))
    expect(new Set(answers.map((a) => a.body.result.rawId)).size).toBe(1)
    const signals = await query<{ n: number }>(app, "SELECT count(*)::int AS n FROM signals WHERE organization_id = $1 AND customer_id = $2", [
      acme.organizationId,
      customerId
    ])
    expect(signals[0]!.n).toBe(1)
  })

  it("10 parallel requests with one key and different bodies: one runs, the others are 422", async () => {
    const key = newKey("parallel-reuse")
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) =>
      post(acme, "/customers", { name: "Racing", email: `r${i}@example.com` }, key)))
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1)
    expect(answers.filter((a) => a.status === 422).map((a) => a.body.statusDetail.code)).toEqual(Array(9).fill("idempotency_key_reused"))
    expect(await customersNamed(acme, "Racing")).toBe(1)
  })
})
