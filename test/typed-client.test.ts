/**
 * The typed client (`@billing/client`, client/; issue 27 item 5): its generated
 * sources are what the served OpenAPI document generates (a change of the API
 * without `npx tsx scripts/generate-client.ts` fails here); the operator's day
 * runs through it against a real server (examples/client-walkthrough.ts); and
 * its retries, idempotency keys and typed errors, against a scripted `fetch`
 * and the real server's 429.
 */
import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BillingApiError, BillingNetworkError, createBillingClient } from "../client/src/index.ts"
import { walkthrough } from "../examples/client-walkthrough.ts"
import { generateClientSources } from "../scripts/client-codegen.ts"
import { drain } from "./signals-fixtures.ts"
import { clientOf, ok } from "./support/Http.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const origin = () => app.baseUrl.replace(/\/api\/v1$/, "")

describe("the client's generated sources", () => {
  it("are what the served OpenAPI document generates (run `npx tsx scripts/generate-client.ts` when this fails)", async () => {
    const document = (await app.request("GET", "/openapi.json", { key: null })).body
    const sources = await generateClientSources(document)
    for (const [name, text] of Object.entries(sources)) {
      const checkedIn = readFileSync(new URL(`../client/src/generated/${name}`, import.meta.url), "utf8")
      expect(checkedIn === text, `client/src/generated/${name} is out of date: run npx tsx scripts/generate-client.ts`).toBe(true)
    }
  })
})

describe("the operator's day through the client", () => {
  it("runs the README's walkthrough: catalogue, customer, endpoint, purchase, signals, balances, invoices, payment", async () => {
    const tenant = await app.tenant("Acme")
    const monthEnd = new Date(Date.now() + 32 * 864e5).toISOString()
    const result = await walkthrough({
      baseUrl: origin(),
      apiKey: tenant.apiKey,
      priceSignals: () => drain(app).then(() => undefined),
      monthEnd: async () => {
        const run = await app.cli(["cycle", "run", "--now", monthEnd, "--json"])
        expect(run.code, run.stderr).toBe(0)
      }
    })
    expect(result.first).toMatchObject({ queued: true, rawId: expect.any(String) })
    expect(result.batch.results).toEqual([expect.objectContaining({ queued: true })])
    expect(result.endpoint.secret).toMatch(/^whsec_/)
    // 30 granted; 8 pages ARREAR are invoiced at the month end, not taken from the wallet.
    expect(result.balances.wallet.balance).toBe(30)
    expect(result.balances.units).toEqual([expect.objectContaining({ unitId: result.unit.id })])
    expect(result.refusal?.status).toBe(409)
    // The code arrives with `statusDetail.code` once the server sends it (issue 27 item 2).
    expect([undefined, "external_id_taken"]).toContain(result.refusal?.code)
    // The first cycle's PLAN invoice, its USAGE invoice (8 pages at 0.05), and the second cycle's PLAN invoice.
    expect(result.invoices.map((invoice) => [invoice.kind, invoice.total])).toEqual([["PLAN", 30], ["USAGE", 0.4], ["PLAN", 30]])
    const planInvoice = result.invoices[0]!
    expect(result.paid).toMatchObject({ replayed: false, invoice: { id: planInvoice.id, status: "PAID" }, payment: { amount: 30 } })
    expect(result.payments.map((payment) => payment.id)).toEqual([result.paid.payment.id])

    // What the client did is what the API shows.
    const api = clientOf(app, tenant)
    expect(ok(await api.get(`/invoices/${planInvoice.id}`)).invoice.status).toBe("PAID")
    expect(ok(await api.get("/webhook-endpoints")).endpoints.map((e: any) => e.id)).toEqual([result.endpoint.id])
  })

  it("types every call from the document: parameters, bodies and results", async () => {
    const tenant = await app.tenant("Types")
    const billing = createBillingClient({ baseUrl: app.baseUrl, apiKey: tenant.apiKey })
    const { customer } = await billing.customers.create({ name: "Jo", email: "jo@example.com" })
    const id: string = customer.id
    const read = await billing.customers.get({ id })
    expect(read.customer.email).toBe("jo@example.com")
    const page = await billing.customers.list({ limit: 1 })
    expect(page.customers).toHaveLength(1)
    expect((await billing.customers.list()).customers).toHaveLength(1)
    // @ts-expect-error: `email` is required by the document
    await expect(billing.customers.create({ name: "No mail" })).rejects.toMatchObject({ status: 400 })
    // @ts-expect-error: a customer's path needs its id
    await expect(billing.customers.get({})).rejects.toThrow(TypeError)
    const missing = await billing.customers.get({ id: "cus_nope" }).catch((error: unknown) => error)
    expect(missing).toBeInstanceOf(BillingApiError)
    expect(missing).toMatchObject({ status: 404, operation: "customers.get", requestId: expect.any(String) })
    expect([undefined, "customer_not_found"]).toContain((missing as BillingApiError).code)
  })
})

/** A scripted `fetch`: each call answers the next of `answers` (a status and headers, or a thrown network error). */
const scripted = (
  answers: ReadonlyArray<{ status: number; headers?: Record<string, string>; body?: unknown; text?: string } | "network">
) => {
  const calls: Array<{ url: string; method: string; body: any; headers: Record<string, string> }> = []
  const fetch = (async (url: string, init: RequestInit) => {
    calls.push({
      url,
      method: String(init.method),
      body: init.body === undefined ? undefined : JSON.parse(String(init.body)),
      headers: init.headers as Record<string, string>
    })
    const answer = answers[calls.length - 1]
    if (answer === undefined) throw new Error("no more answers scripted")
    if (answer === "network") throw new TypeError("fetch failed")
    const status = answer.status
    const body = answer.body ??
      (status < 400
        ? { statusCode: status, statusDetail: { status: "SUCCESS", message: "ok" }, result: { ok: true } }
        : { statusCode: status, statusDetail: { status: "ERROR", message: `failed ${status}`, code: status === 429 ? "rate_limited" : "internal" }, result: {} })
    return new Response(answer.text ?? JSON.stringify(body), { status, headers: { "content-type": "application/json", ...answer.headers } })
  }) as unknown as typeof globalThis.fetch
  return { fetch, calls }
}

const scriptedClient = (script: ReturnType<typeof scripted>, sleeps: Array<number>) =>
  createBillingClient({
    baseUrl: "http://billing.test",
    apiKey: "sk_test",
    fetch: script.fetch,
    sleep: async (ms) => {
      sleeps.push(ms)
    },
    random: () => 1
  })

describe("retries, idempotency keys and errors", () => {
  it("retries a signal on 5xx and on a lost answer with back-off, with the same idempotency key each time", async () => {
    const script = scripted([{ status: 503 }, "network", { status: 500 }, { status: 202 }])
    const sleeps: Array<number> = []
    const result = await scriptedClient(script, sleeps).signals.credit({
      customerId: "cus_1",
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1 }
    })
    expect(result).toEqual({ ok: true })
    expect(script.calls).toHaveLength(4)
    const keys = script.calls.map((call) => call.body.idempotencyKey)
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
    expect(new Set(keys).size).toBe(1)
    expect(sleeps).toEqual([250, 500, 1000])
    expect(script.calls[0]).toMatchObject({ url: "http://billing.test/api/v1/signal/credit", method: "POST" })
    expect(script.calls[0]!.headers.authorization).toBe("Bearer sk_test")
  })

  it("keeps the caller's own key, and keys every signal of a batch", async () => {
    const script = scripted([{ status: 202 }, { status: 202 }])
    const client = scriptedClient(script, [])
    await client.signals.wallet({ customerId: "cus_1", idempotencyKey: "mine", usage: { model: "gpt-4o" } })
    await client.signals.batch({
      signals: [
        { type: "unit", customerId: "cus_1", agentKey: "page" },
        { type: "unit", customerId: "cus_1", agentKey: "page", idempotencyKey: "given" }
      ]
    })
    expect(script.calls[0]!.body.idempotencyKey).toBe("mine")
    const [generated, given] = script.calls[1]!.body.signals
    expect(generated.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/)
    expect(given.idempotencyKey).toBe("given")
  })

  it("waits what Retry-After says on a 429", async () => {
    const script = scripted([{ status: 429, headers: { "retry-after": "2" } }, { status: 201 }])
    const sleeps: Array<number> = []
    const client = scriptedClient(script, sleeps)
    expect(await client.customers.create({ name: "Jo", email: "jo@example.com" })).toEqual({ ok: true })
    expect(sleeps).toEqual([2000])
    expect(script.calls[0]!.body).not.toHaveProperty("idempotencyKey")
  })

  it("keys a POST without a body key by the Idempotency-Key header, the same on every attempt, so a 5xx or a lost answer is retried", async () => {
    const script = scripted([{ status: 500 }, "network", { status: 201 }])
    const sleeps: Array<number> = []
    expect(await scriptedClient(script, sleeps).customers.create({ name: "Jo", email: "jo@example.com" })).toEqual({ ok: true })
    expect(script.calls).toHaveLength(3)
    const keys = script.calls.map((call) => call.headers["Idempotency-Key"])
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
    expect(new Set(keys).size).toBe(1)
    expect(sleeps).toEqual([250, 500])
    // The body is the caller's: its own `idempotencyKey` field (where the spec has one) is another matter.
    expect(script.calls[0]!.body).toEqual({ name: "Jo", email: "jo@example.com" })
  })

  it("keeps the caller's own Idempotency-Key header, and adds none where the body carries the key", async () => {
    const script = scripted([{ status: 500 }, { status: 201 }, { status: 202 }])
    const client = scriptedClient(script, [])
    await client.purchases.create({ customerId: "cus_1", planId: "plan_1" }, { headers: { "idempotency-key": "order-7" } })
    expect(script.calls.map((call) => call.headers["idempotency-key"])).toEqual(["order-7", "order-7"])
    expect(script.calls[0]!.headers).not.toHaveProperty("Idempotency-Key")
    // A signal's key is in its body; the header would only send it off the server's fast lane.
    await client.signals.unit({ customerId: "cus_1", agentKey: "page" })
    expect(script.calls[2]!.body.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/)
    expect(Object.keys(script.calls[2]!.headers).map((name) => name.toLowerCase())).not.toContain("idempotency-key")
  })

  it("gives up after its retries, and never repeats a write without any key", async () => {
    const sleeps: Array<number> = []
    const reads = scripted([{ status: 502 }, { status: 502 }, { status: 502 }, { status: 502 }])
    const failed = await scriptedClient(reads, sleeps).customers.list().catch((error: unknown) => error)
    expect(failed).toMatchObject({ status: 502 })
    expect(reads.calls).toHaveLength(4)
    // A PATCH takes no key: after a 5xx or a lost answer it may have been done, so it is not sent again.
    const patched = scripted([{ status: 500 }])
    const refused = await scriptedClient(patched, sleeps).customers.update({ id: "cus_1" }, { name: "Al" })
      .catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(BillingApiError)
    expect(refused).toMatchObject({ status: 500, code: "internal", message: "failed 500", operation: "customers.update" })
    expect(patched.calls).toHaveLength(1)
    const writes = scripted(["network"])
    const lost = await scriptedClient(writes, sleeps).customers.update({ id: "cus_1" }, { name: "Al" })
      .catch((error: unknown) => error)
    expect(lost).toBeInstanceOf(BillingNetworkError)
    expect(writes.calls).toHaveLength(1)
  })

  it("throws the server's 429 with its Retry-After when that is longer than it will wait", async () => {
    const tenant = await app.tenant("Throttled")
    ok(await clientOf(app, tenant).patch("/organization/settings", { rateLimits: { reads: { perSecond: 0.001, burst: 1 } } }))
    const sleeps: Array<number> = []
    const billing = createBillingClient({
      baseUrl: origin(),
      apiKey: tenant.apiKey,
      sleep: async (ms) => {
        sleeps.push(ms)
      }
    })
    await billing.customers.list()
    const limited = await billing.customers.list().catch((error: unknown) => error)
    expect(limited).toBeInstanceOf(BillingApiError)
    expect(limited).toMatchObject({ status: 429, retryAfterSeconds: 1000, operation: "customers.list" })
    expect([undefined, "rate_limited"]).toContain((limited as BillingApiError).code)
    expect(sleeps).toEqual([])
  })
})

/** A success envelope around `result`. */
const envelope = (status: number, result: unknown) => ({ statusCode: status, statusDetail: { status: "SUCCESS", message: "ok" }, result })

describe("status and headers, pages, exact decimals (scripted answers)", () => {
  it("withResponse answers the result with its status, headers, request id, replay and rate-limit fields", async () => {
    const script = scripted([
      {
        status: 201,
        body: envelope(201, { created: true }),
        headers: {
          "x-request-id": "req-1",
          "idempotent-replayed": "true",
          ratelimit: "\"writes\";r=19;t=2",
          "ratelimit-policy": "\"writes\";q=20;w=4"
        }
      },
      { status: 200, body: envelope(200, { priced: true }), headers: { "preference-applied": "wait=5" } }
    ])
    const client = scriptedClient(script, [])
    const created = await client.withResponse.customers.create({ name: "Jo", email: "jo@example.com" })
    expect(created).toMatchObject({
      status: 201,
      result: { created: true },
      requestId: "req-1",
      replayed: true,
      rateLimit: { policy: "writes", remaining: 19, resetSeconds: 2, limit: 20, windowSeconds: 4 }
    })
    const priced = await client.withResponse.signals.unit({ customerId: "cus_1", agentKey: "page" }, { headers: { prefer: "wait=5" } })
    expect(priced.status).toBe(200)
    expect(priced.headers.get("preference-applied")).toBe("wait=5")
    expect(priced).toMatchObject({ replayed: false, rateLimit: undefined, requestId: undefined })
    expect(script.calls[1]!.headers.prefer).toBe("wait=5")
  })

  it("paginate pages by the last row's id until a page is shorter than the limit", async () => {
    const rows = (ids: Array<string>) => ({ customers: ids.map((id) => ({ id })) })
    const script = scripted([
      { status: 200, body: envelope(200, rows(["cus_1", "cus_2"])) },
      { status: 200, body: envelope(200, rows(["cus_3", "cus_4"])) },
      { status: 200, body: envelope(200, rows(["cus_5"])) }
    ])
    const seen: Array<string> = []
    for await (const customer of scriptedClient(script, []).paginate.customers.list({ limit: 2, q: "jo" })) seen.push(customer.id)
    expect(seen).toEqual(["cus_1", "cus_2", "cus_3", "cus_4", "cus_5"])
    expect(script.calls.map((call) => new URL(call.url).search)).toEqual([
      "?limit=2&q=jo",
      "?limit=2&cursor=cus_2&q=jo",
      "?limit=2&cursor=cus_4&q=jo"
    ])
  })

  it("paginate asks the largest page by default, clamps a larger limit to it, stops on an empty page, and reads a signal's rawId", async () => {
    const signals = (ids: Array<string>) => ({ signals: ids.map((rawId) => ({ rawId })) })
    const full = Array.from({ length: 200 }, (_, i) => `sig_${String(i).padStart(3, "0")}`)
    const script = scripted([
      { status: 200, body: envelope(200, signals(full)) },
      { status: 200, body: envelope(200, signals([])) },
      { status: 200, body: envelope(200, signals(["sig_a"])) }
    ])
    const client = scriptedClient(script, [])
    let count = 0
    for await (const signal of client.paginate.signals.list({ status: "FAILED" })) {
      expect(signal.rawId).toMatch(/^sig_/)
      count++
    }
    expect(count).toBe(200)
    expect(script.calls.map((call) => new URL(call.url).search)).toEqual([
      "?limit=200&status=FAILED",
      "?limit=200&cursor=sig_199&status=FAILED"
    ])
    // A limit above the API's largest page would make every page look short: the paginator asks 200.
    for await (const _ of client.paginate.signals.list({ limit: 500, cursor: "sig_199" })) count++
    expect(new URL(script.calls[2]!.url).search).toBe("?limit=200&cursor=sig_199")
    expect(count).toBe(201)
  })

  it("decimals: \"string\" reads the document's decimals from the answer's text, digit for digit; other numbers stay numbers", async () => {
    const text = `{"statusCode":200,"statusDetail":{"status":"SUCCESS","message":"Balances"},"result":{"customerId":"cus_1",` +
      `"currency":{"code":"USD","rateUsd":1},"hasPlan":true,"wallet":{"balance":1234567.123456789012,"reservedBalance":1e-7},` +
      `"credits":[{"creditId":"cr_1","agentKey":"chat","creditName":"Tokens","granted":2.5E+3,"used":-0.10,"remaining":-0}],` +
      `"outcomes":[],"units":[],"composites":[]}}`
    const answer = () => ({ status: 200, text })
    const script = scripted([answer(), answer(), answer()])
    const exact = createBillingClient({ baseUrl: "http://billing.test", apiKey: "sk_test", fetch: script.fetch, decimals: "string" })
    const balances = await exact.balances.balances({ id: "cus_1" })
    const wallet: { readonly balance: string; readonly reservedBalance?: string } = balances.wallet
    expect(wallet).toEqual({ balance: "1234567.123456789012", reservedBalance: "0.0000001" })
    expect(balances.currency).toEqual({ code: "USD", rateUsd: "1" })
    expect(balances.credits).toEqual([{ creditId: "cr_1", agentKey: "chat", creditName: "Tokens", granted: "2500", used: "-0.1", remaining: "0" }])
    const withResponse = await exact.withResponse.balances.balances({ id: "cus_1" })
    expect(withResponse.result.wallet.balance).toBe("1234567.123456789012")
    // The default: numbers, as JSON.parse makes them (the last digits of the balance are lost).
    const plain = createBillingClient({ baseUrl: "http://billing.test", apiKey: "sk_test", fetch: script.fetch })
    expect((await plain.balances.balances({ id: "cus_1" })).wallet.balance).toBe(1234567.123456789)
  })
})
