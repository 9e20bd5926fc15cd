/**
 * The typed client (`@billing/client`) against the real server, for what issue
 * 37 (point 5) asked of it: every method also in a form that answers status
 * and headers (`withResponse`), a page iterator for every list (`paginate`),
 * amounts as exact decimal strings on request (`decimals: "string"`), and
 * writes retried safely with the `Idempotency-Key` header it adds. And the
 * server's side of exact amounts: an amount whose digits a float cannot hold is
 * written with its digits (src/WireDecimals.ts), by the full server, the check
 * lane and a replayed answer alike.
 */
import { Duration, Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type BillingClient,
  createBillingClient,
  operationTable,
  type OperationId,
  type PagedOperationId
} from "../client/src/index.ts"
import { workerJobs } from "../src/app/Jobs.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const origin = () => app.baseUrl.replace(/\/api\/v1$/, "")
const clientOf = (tenant: Tenant) => createBillingClient({ baseUrl: origin(), apiKey: tenant.apiKey })
const exactClientOf = (tenant: Tenant) => createBillingClient({ baseUrl: origin(), apiKey: tenant.apiKey, decimals: "string" })

/** An answer's text as the server wrote it. */
const rawText = async (tenant: Tenant, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${app.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${tenant.apiKey}`, ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

/** Moves a customer's wallet by `delta` written as text, as an operator does (`billing adjust wallet`): exact. */
const adjustWallet = async (tenant: Tenant, customerId: string, delta: string) => {
  const run = await app.cli(["adjust", "wallet", customerId, "--delta", delta, "--json"], { BILLING_ORG: tenant.organizationId })
  expect(run.code, run.stderr).toBe(0)
}

/** More significant digits than a float holds: a trip through one changes them. */
const PRECISE = "1234567.123456789012"

describe("amounts with their exact digits", () => {
  it("the server writes a balance a float cannot hold with its digits, and the client reads them as a string", async () => {
    const tenant = await app.tenant("Exact")
    const billing = clientOf(tenant)
    const { customer } = await billing.customers.create({ name: "Ann", email: "ann@example.com" })
    await adjustWallet(tenant, customer.id, PRECISE)

    const raw = await rawText(tenant, "GET", `/customers/${customer.id}/balances`)
    expect(raw.text).toContain(`"balance":${PRECISE}`)
    const exact = exactClientOf(tenant)
    const balances = await exact.balances.balances({ id: customer.id })
    expect(balances.wallet.balance).toBe(PRECISE)
    expect(balances.customerId).toBe(customer.id)
    // The default client: the float JSON.parse makes of the same text.
    expect((await billing.balances.balances({ id: customer.id })).wallet.balance).toBe(Number(PRECISE))

    // A page iterator reads the same way: the wallet's ledger, its row and the balance after it.
    const entries = []
    for await (const entry of exact.paginate.balances.walletLedger({ id: customer.id })) entries.push(entry)
    expect(entries).toEqual([expect.objectContaining({ delta: PRECISE, balanceAfter: PRECISE })])

    // The check lane writes its answer itself: exact too.
    const check = await exact.entitlements.check({ customerId: customer.id, meter: "WALLET", usage: { model: "gpt-4o", inputTokens: 10 } })
    expect(check.remaining).toBe(PRECISE)
    const laneText = await rawText(tenant, "POST", "/entitlements/check", {
      customerId: customer.id,
      meter: "WALLET",
      usage: { model: "gpt-4o", inputTokens: 10 }
    })
    expect(laneText.text).toContain(`"remaining":${PRECISE}`)
  })

  it("a small amount is written without an exponent, and a replayed answer keeps the digits", async () => {
    const tenant = await app.tenant("Small")
    const billing = exactClientOf(tenant)
    const { customer } = await billing.customers.create({ name: "Bo", email: "bo@example.com" })
    await adjustWallet(tenant, customer.id, "0.0000001")
    expect((await rawText(tenant, "GET", `/customers/${customer.id}/balances`)).text).toContain(`"balance":0.0000001`)
    expect((await billing.balances.balances({ id: customer.id })).wallet.balance).toBe("0.0000001")

    // An adjustment whose answer holds a balance a float cannot hold, sent twice with one Idempotency-Key: the
    // replay is the first answer's text, digits included.
    await adjustWallet(tenant, customer.id, PRECISE)
    const body = { delta: 1, notes: "replayed" }
    const headers = { "idempotency-key": "exact-replay-1" }
    const first = await rawText(tenant, "POST", `/customers/${customer.id}/wallet/adjust`, body, headers)
    const again = await rawText(tenant, "POST", `/customers/${customer.id}/wallet/adjust`, body, headers)
    expect(first.status).toBe(200)
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(again.text).toBe(first.text)
    expect(first.text).toContain(`"remaining":1234568.123456889012`)
    expect(first.text).not.toContain("decimal:")
  })
})

describe("withResponse", () => {
  it("answers status, headers, request id and rate-limit fields; a repeated Idempotency-Key is a replay", async () => {
    const tenant = await app.tenant("Headers")
    const billing = clientOf(tenant)
    const headers = { "Idempotency-Key": "create-jo-1" }
    const created = await billing.withResponse.customers.create({ name: "Jo", email: "jo@example.com" }, { headers })
    expect(created.status).toBe(201)
    expect(created.result.created).toBe(true)
    expect(created.replayed).toBe(false)
    expect(created.requestId).toMatch(/\S/)
    expect(created.rateLimit).toMatchObject({ policy: "writes", remaining: expect.any(Number), limit: 10_000 })
    expect(created.headers.get("content-type")).toMatch(/application\/json/)

    const repeated = await billing.withResponse.customers.create({ name: "Jo", email: "jo@example.com" }, { headers })
    expect(repeated).toMatchObject({ status: 201, replayed: true })
    expect(repeated.result.customer.id).toBe(created.result.customer.id)
    expect(repeated.requestId).not.toBe(created.requestId)
    const read = await billing.withResponse.customers.get({ id: created.result.customer.id })
    expect(read).toMatchObject({ status: 200, replayed: false, rateLimit: { policy: "reads" } })
    expect((await billing.customers.list()).customers).toHaveLength(1)
  })

  it("a create whose answer was lost is sent again with the same key, and the server answers the first customer", async () => {
    const tenant = await app.tenant("Lost")
    let lost = 0
    // The first answer reaches the client's fetch and is dropped there: the request was done, the client never knew.
    const dropFirstAnswer = (async (input: string, init: RequestInit) => {
      const response = await fetch(input, init)
      if (lost++ === 0) throw new TypeError("fetch failed: socket hang up")
      return response
    }) as unknown as typeof fetch
    const billing = createBillingClient({ baseUrl: origin(), apiKey: tenant.apiKey, fetch: dropFirstAnswer, sleep: async () => {} })
    const created = await billing.withResponse.customers.create({ name: "Lu", email: "lu@example.com" })
    expect(lost).toBe(2)
    expect(created).toMatchObject({ status: 201, replayed: true })
    const customers = (await clientOf(tenant).customers.list()).customers
    expect(customers.map((customer) => customer.id)).toEqual([created.result.customer.id])
  })

  describe("a signal's 202 and, with the worker running, its priced 200", () => {
    let worker: Fiber.RuntimeFiber<number, never> | undefined
    beforeAll(async () => {
      worker = await app.run(Effect.forkDaemon(Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: false, idle: Duration.millis(100) }))))
    })
    afterAll(async () => {
      if (worker !== undefined) await Effect.runPromise(Fiber.interrupt(worker))
    })

    it("status narrows the result; Preference-Applied says the wait was applied", async () => {
      const tenant = await app.tenant("Signals")
      const billing = exactClientOf(tenant)
      const { unit } = await billing.units.create({ name: "Page", agentKey: "page", pricingType: "FLAT", flatPrice: 0.05, tiers: [] })
      const { plan } = await billing.plans.create({
        name: "Pages",
        entitlements: [{ type: "WALLET", billingMode: "ADVANCE", amount: 10 }, { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 100 }]
      })
      await billing.customers.create({ name: "Cy", email: "cy@example.com", externalId: "cy" })
      await billing.purchases.create({ externalId: "cy", planId: plan.id })

      const queued = await billing.withResponse.signals.unit({ externalId: "cy", agentKey: "page", quantity: 2 })
      expect(queued.status).toBe(202)
      expect(queued.headers.get("preference-applied")).toBeNull()
      const priced = await billing.withResponse.signals.unit({ externalId: "cy", agentKey: "page", quantity: 3 }, { headers: { prefer: "wait=10" } })
      expect(priced.status, JSON.stringify(priced.result)).toBe(200)
      expect(priced.headers.get("preference-applied")).toBe("wait=10")
      if (priced.status !== 200) throw new Error("not priced")
      // Narrowed by its status: the priced signal's usage-log row, its amounts exact decimal strings.
      expect(priced.result.usageLog).toMatchObject({ meter: "UNIT", quantity: "3", balance: { remaining: "95" } })
    })
  })
})

/** The lists that need an id in their path, with the fixture that gives it. */
type Fixture = { readonly customerId: string; readonly endpointId: string }
const pathParamsOf: Partial<Record<PagedOperationId, (fixture: Fixture) => Record<string, string>>> = {
  "balances.walletLedger": ({ customerId }) => ({ id: customerId }),
  "members.list": ({ customerId }) => ({ id: customerId }),
  "webhooks.deliveries": ({ endpointId }) => ({ id: endpointId })
}

const pagedOperations = (Object.keys(operationTable) as Array<OperationId>).filter(
  (id): id is PagedOperationId => "page" in operationTable[id]
)

describe("paginate", () => {
  it("every list of the document pages through the rows one large page holds, by cursor", async () => {
    const tenant = await app.tenant("Pages")
    const billing = clientOf(tenant)
    const customers = []
    for (const name of ["Ada", "Bea", "Cid"]) {
      customers.push((await billing.customers.create({ name, email: `${name.toLowerCase()}@example.com`, externalId: name.toLowerCase() })).customer)
    }
    const customerId = customers[0]!.id
    const { endpoint } = await billing.webhooks.create({ url: "http://127.0.0.1:9/hooks" })
    await billing.webhooks.create({ url: "http://127.0.0.1:9/other" })
    for (const name of ["One", "Two", "Three"]) {
      await billing.units.create({ name, agentKey: name.toLowerCase(), pricingType: "FLAT", flatPrice: 1, tiers: [] })
      await billing.members.create({ id: customerId }, { email: `${name.toLowerCase()}@acme.example`, name })
    }
    // Wallet moves: three ledger rows, and an event (and a delivery to each endpoint) for each.
    for (const delta of [5, 2, -1]) await billing.balances.adjustWallet({ id: customerId }, { delta })

    const fixture = { customerId, endpointId: endpoint.id }
    const methods = billing as unknown as Record<string, Record<string, (...args: Array<unknown>) => Promise<Record<string, unknown>>>>
    const paginators = billing.paginate as unknown as Record<string, Record<string, (...args: Array<unknown>) => AsyncIterable<unknown>>>
    const skipped: Array<string> = []
    let paged = 0
    for (const id of pagedOperations) {
      const entry = operationTable[id] as {
        readonly page: { readonly items: string; readonly cursor: string }
        readonly pathParams: ReadonlyArray<string>
        readonly queryParams: ReadonlyArray<string>
      }
      // A list of one customer's rows (the usage log requires it) is read for the first customer.
      const pathParams = {
        ...pathParamsOf[id]?.(fixture),
        ...(entry.queryParams.includes("customerId") ? { customerId } : {})
      } as Record<string, string>
      if (entry.pathParams.some((name) => pathParams[name] === undefined)) {
        skipped.push(id)
        continue
      }
      const [group, name] = id.split(".") as [string, string]
      const all = (await methods[group]![name]!({ ...pathParams, limit: 200 }))[entry.page.items] as Array<Record<string, unknown>>
      const rows: Array<Record<string, unknown>> = []
      for await (const row of paginators[group]![name]!({ ...pathParams, limit: 1 })) rows.push(row as Record<string, unknown>)
      expect(rows, id).toEqual(all)
      if (rows.length > 1) paged++
    }
    // Lists added to the API later page here too, unless they need an id of a kind this test does not make.
    if (skipped.length > 0) console.info(`paginate: no fixture for ${skipped.join(", ")} (add it to pathParamsOf)`)
    expect(paged).toBeGreaterThanOrEqual(6)
  })

  it("types each row: a customer, a ledger entry", async () => {
    const tenant = await app.tenant("Typed rows")
    const billing: BillingClient = clientOf(tenant)
    await billing.customers.create({ name: "Di", email: "di@example.com" })
    const emails: Array<string> = []
    for await (const customer of billing.paginate.customers.list({ q: "di" })) emails.push(customer.email)
    expect(emails).toEqual(["di@example.com"])
  })
})
