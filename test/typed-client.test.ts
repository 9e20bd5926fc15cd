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
const scripted = (answers: ReadonlyArray<{ status: number; headers?: Record<string, string>; body?: unknown } | "network">) => {
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
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...answer.headers } })
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

  it("waits what Retry-After says on a 429, and retries a write without a key only then", async () => {
    const script = scripted([{ status: 429, headers: { "retry-after": "2" } }, { status: 201 }, { status: 500 }])
    const sleeps: Array<number> = []
    const client = scriptedClient(script, sleeps)
    expect(await client.customers.create({ name: "Jo", email: "jo@example.com" })).toEqual({ ok: true })
    expect(sleeps).toEqual([2000])
    expect(script.calls[0]!.body).not.toHaveProperty("idempotencyKey")
    // A 500 on a create may have created it: not repeated, thrown with its status and code.
    const failed = await client.customers.create({ name: "Al", email: "al@example.com" }).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(BillingApiError)
    expect(failed).toMatchObject({ status: 500, code: "internal", message: "failed 500", operation: "customers.create" })
    expect(script.calls).toHaveLength(3)
  })

  it("gives up after its retries, and never repeats a write without a key that got no answer", async () => {
    const sleeps: Array<number> = []
    const reads = scripted([{ status: 502 }, { status: 502 }, { status: 502 }, { status: 502 }])
    const failed = await scriptedClient(reads, sleeps).customers.list().catch((error: unknown) => error)
    expect(failed).toMatchObject({ status: 502 })
    expect(reads.calls).toHaveLength(4)
    const writes = scripted(["network"])
    const lost = await scriptedClient(writes, sleeps).customers.create({ name: "Jo", email: "jo@example.com" })
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
