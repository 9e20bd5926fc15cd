/**
 * Every answer matches the OpenAPI document, checked by Stoplight Prism's
 * validation proxy (`prism proxy`) between this test and the real server.
 *
 * Every operation of the served document gets at least one valid request (its
 * answer, success or documented error, must match the document) and one invalid
 * one (Prism must see the request violation, and the service's answer to it must
 * still match the document). Prism reports what it found in the `sl-violations`
 * header of each answer it forwards; a response violation fails the test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type PrismProxy, startPrism, type Violation, violationsOf } from "./support/Prism.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let prism: PrismProxy | undefined
let prismUrl: string
let key: string
let document: any

beforeAll(async () => {
  app = await startTestApp()
  key = (await app.tenant()).apiKey
  document = (await app.request("GET", "/openapi.json", { key: null })).body
  prism = await startPrism(app.baseUrl.replace(/\/api\/v1$/, ""), document)
  prismUrl = prism.url
})

afterAll(async () => {
  prism?.stop()
  await app?.close()
})

interface Exchange {
  readonly operation: string
  readonly valid: boolean
  readonly status: number
  readonly body: any
  readonly violations: ReadonlyArray<Violation>
  /** The answer's `Idempotent-Replayed` header, or null. */
  readonly replayed: string | null
}

const exchanges: Array<Exchange> = []

interface Call {
  readonly key?: string | null
  readonly body?: unknown
  readonly query?: string
  readonly headers?: Record<string, string>
}

/**
 * One request through Prism. `operation` is the document's `METHOD /path/{param}`;
 * `params` fill the path. `valid` says whether the request itself follows the document.
 */
const send = async (valid: boolean, operation: string, params: Record<string, string>, call: Call = {}) => {
  const [method, template] = operation.split(" ") as [string, string]
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? `${name}-missing`))
  const headers: Record<string, string> = { ...call.headers }
  const sentKey = call.key === undefined ? key : call.key
  if (sentKey !== null) headers.authorization = `Bearer ${sentKey}`
  const body = call.body === undefined ? undefined : JSON.stringify(call.body)
  if (body !== undefined && headers["content-type"] === undefined) headers["content-type"] = "application/json"
  const response = await fetch(`${prismUrl}/api/v1${path}${call.query ? `?${call.query}` : ""}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {})
  })
  const text = await response.text()
  let parsed: any = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // kept as text: the check below reports it
  }
  const violations = violationsOf(response)
  const exchange = { operation, valid, status: response.status, body: parsed, violations, replayed: response.headers.get("idempotent-replayed") }
  exchanges.push(exchange)
  return exchange
}

const valid = (operation: string, params: Record<string, string> = {}, call?: Call) => send(true, operation, params, call)
const invalid = (operation: string, params: Record<string, string> = {}, call?: Call) => send(false, operation, params, call)

const resultOf = async (exchange: Promise<Exchange>, status: number) => {
  const done = await exchange
  expect(done.status, `${done.operation}: ${JSON.stringify(done.body)}`).toBe(status)
  return done.body.result
}

const usage = { model: "gpt-4o", inputTokens: 500, outputTokens: 500 }
const bundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]

const catalogue = ["credits", "outcomes", "units", "composites", "plans"] as const

describe("the HTTP traffic through Prism's validation proxy", () => {
  it("every operation, with a valid and an invalid request, matches the document", async () => {
    // --- valid requests, in an order that builds what the later ones need ---
    const customer = (await resultOf(
      valid("POST /customers", {}, { body: { name: "Ada", email: "ada@example.com", externalId: "ada-1" } }),
      201
    )).customer
    const id = customer.id as string
    const externalId = "ada-1"
    await valid("GET /customers", {}, { query: "limit=10&q=ada&includeArchived=false" })
    await valid("GET /customers/{id}", { id })
    await valid("PATCH /customers/{id}", { id }, { body: { city: "Paris", phone: null } })
    await valid("GET /customers/ext/{externalId}", { externalId })
    await valid("PATCH /customers/ext/{externalId}", { externalId }, { body: { country: "FR" } })

    // An endpoint before the purchase, so that its wallet grant makes a delivery to read and retry.
    const endpoint = (await resultOf(
      valid("POST /webhook-endpoints", {}, { body: { url: "https://example.com/hooks", events: ["wallet.balance.update"], threshold: 5 } }),
      201
    )).endpoint

    const credit = (await resultOf(
      valid("POST /credits", {}, { body: { name: "Chat", agentKey: "chat", marginPercent: 100, modelBundle: bundle } }),
      201
    )).credit
    const outcome = (await resultOf(
      valid("POST /outcomes", {}, {
        body: {
          name: "Report",
          agentKey: "report",
          marginPercent: 50,
          steps: [{ name: "draft", agentKey: "report-draft", modelBundle: bundle }]
        }
      }),
      201
    )).outcome
    const unit = (await resultOf(
      valid("POST /units", {}, { body: { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 } }),
      201
    )).unit
    const composite = (await resultOf(
      valid("POST /composites", {}, {
        body: { name: "Bundle", refId: "bundle", price: 3, entitlements: { creditIds: [credit.id], unitIds: [unit.id] } }
      }),
      201
    )).composite
    const plan = (await resultOf(
      valid("POST /plans", {}, {
        body: {
          name: "Pro",
          billingCycle: "MONTHLY",
          entitlements: [
            { type: "WALLET", billingMode: "ADVANCE", amount: 10 },
            { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 1000 },
            { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 10 },
            { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
            { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 5 }
          ]
        }
      }),
      201
    )).plan
    const records: Record<(typeof catalogue)[number], string> = {
      credits: credit.id,
      outcomes: outcome.id,
      units: unit.id,
      composites: composite.id,
      plans: plan.id
    }
    const updates: Record<(typeof catalogue)[number], unknown> = {
      credits: { description: "Chat turns" },
      outcomes: { description: "A report" },
      units: { description: "Printed pages" },
      composites: { description: "Chat and pages" },
      plans: { description: "For teams" }
    }
    for (const group of catalogue) {
      const recordId = records[group]
      await valid(`GET /${group}`, {}, { query: "active=true&limit=5" })
      await valid(`GET /${group}/{id}`, { id: recordId })
      await valid(`PATCH /${group}/{id}`, { id: recordId }, { body: updates[group] })
      await valid(`GET /${group}/{id}`, { id: `${group}-unknown` })
    }

    const purchase = (await resultOf(valid("POST /purchases", {}, { body: { customerId: id, planId: plan.id } }), 201))
      .purchase
    await valid("GET /purchases", {}, { query: `customerId=${id}` })
    await valid("GET /purchases/{id}", { id: purchase.id })
    await valid("PATCH /purchases/{id}", { id: purchase.id }, { body: { autoPayment: false } })

    await valid("GET /customers/{id}/balances", { id })
    await valid("GET /customers/ext/{externalId}/balances", { externalId })
    await valid("GET /customers/{id}/plan", { id })
    await valid("GET /customers/ext/{externalId}/plan", { externalId })
    await valid("PUT /customers/{id}/wallet/alert", { id }, { body: { threshold: 2.5 } })
    await valid("PUT /customers/ext/{externalId}/wallet/alert", { externalId }, { body: { threshold: null } })
    await valid("PUT /customers/{id}/recurring-grant", { id }, { body: { kind: "wallet", quantity: 5 } })
    await valid("PUT /customers/ext/{externalId}/recurring-grant", { externalId }, { body: { kind: "wallet", quantity: 0 } })
    const adjust = (agentKey: string) => ({ agentKey, delta: 5, notes: "goodwill", idempotencyKey: `adj-${agentKey}` })
    for (const [path, body] of [
      ["credits", adjust("chat")],
      ["outcomes", adjust("report-draft")],
      ["units", { agentKey: "pages", delta: 1.5 }],
      ["composites", adjust("bundle")],
      ["wallet", { delta: 2.25 }]
    ] as const) {
      await valid(`POST /customers/{id}/${path}/adjust`, { id }, { body })
      await valid(`POST /customers/ext/{externalId}/${path}/adjust`, { externalId }, { body })
    }
    await valid("GET /customers/{id}/wallet/ledger", { id }, { query: "limit=20" })

    const member = (await resultOf(
      valid("POST /customers/{id}/members", { id }, { body: { email: "ann@example.com", name: "Ann" } }),
      201
    )).member
    await valid("GET /customers/{id}/members", { id })
    await valid("PATCH /customers/{id}/members/{memberId}", { id, memberId: member.id }, { body: { name: "Ann B" } })

    const sent = await resultOf(
      valid("POST /signal/credit", {}, { body: { customerId: id, agentKey: "chat", usage, member: "ann@example.com" } }),
      202
    )
    await valid("GET /signals/{rawId}", { rawId: sent.rawId })
    await valid("GET /signals/{rawId}", { rawId: "sig_unknown" })
    await valid("GET /signals", {}, { query: `customerId=${id}&status=QUEUED&limit=5` })
    await valid("POST /signal/outcome", {}, { body: { externalId, agentKey: "report-draft", runId: "run-1", usage } })
    await valid("POST /signal/unit", {}, { body: { customerId: id, agentKey: "pages", quantity: 2, composite: { bundle: "job-1" } } })
    await valid("POST /signal/wallet", {}, { body: { customerId: id, usage, idempotencyKey: "wallet-1" } })
    await valid("POST /signal/batch", {}, {
      body: {
        signals: [
          { type: "credit", customerId: id, agentKey: "chat", usage, composite: { bundle: "job-1" } },
          { type: "unit", customerId: "cus_unknown", agentKey: "pages" }
        ]
      }
    })
    await valid("POST /signal/outcome/complete", {}, { body: { customerId: id, runId: "run-unknown" } })
    await valid("POST /signal/composite/complete", {}, { body: { customerId: id, composite: { bundle: "job-unknown" } } })
    await valid("GET /signal/usage-log", {}, { query: `customerId=${id}&meter=CREDIT&limit=5` })
    await valid("POST /signal/usage-log/lookup", {}, { body: { ids: ["ulg_unknown"] } })
    await valid("POST /signal/usage-log/{id}/reverse", { id: "usg_unknown" }, { body: { reason: "sent twice" } })
    const lastDay = `from=${encodeURIComponent(new Date(Date.now() - 86_400_000).toISOString())}` +
      `&to=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`
    await valid("GET /usage/summary", {}, { query: `customerId=${id}&${lastDay}&window=HOUR&groupBy=agentKey,model,custom.team` })
    await valid("GET /usage/summary", {}, { query: `${lastDay}&window=DAY&groupBy=customerId,meter` })
    await valid("GET /usage/summary", {}, { query: `externalId=nobody-1&${lastDay}&window=MONTH` })
    const held = await resultOf(valid("POST /entitlements/check", {}, {
      body: { customerId: id, meter: "CREDIT", agentKey: "chat", usage, reserve: { ttlSeconds: 60 } }
    }), 200)
    await valid("POST /entitlements/check", {}, { body: { externalId, meter: "WALLET", usage } })
    await valid("GET /customers/{id}/entitlements", { id })
    await valid("GET /reservations/{id}", { id: held.reservationId ?? "rsv_unknown" })
    await valid("POST /reservations/{id}/release", { id: held.reservationId ?? "rsv_unknown" })
    await valid("POST /reservations/{id}/release", { id: "rsv_unknown" })

    await valid("GET /invoices", {}, { query: `customerId=${id}` })
    const invoices = (await resultOf(valid("GET /invoices", {}, { query: "limit=1" }), 200)).invoices as Array<any>
    const invoiceId = invoices[0]?.id ?? "inv_unknown"
    await valid("GET /invoices/{id}", { id: invoiceId })
    // A PDF, not an envelope (application/pdf in the document); an unknown id is the envelope's 404.
    const pdf = await valid("GET /invoices/{id}/pdf", { id: invoiceId })
    expect([pdf.status, String(pdf.body).slice(0, 5)]).toEqual([200, "%PDF-"])
    await valid("GET /invoices/{id}/pdf", { id: "inv_unknown" })
    await valid("POST /invoices/{id}/pay-link", { id: invoiceId })
    await valid("GET /payments", {})
    await valid("GET /payments/{id}", { id: "pay_unknown" })
    const tax = (await resultOf(valid("POST /taxes", {}, { body: { name: "VAT", ratePercent: 20 } }), 201)).tax
    await valid("GET /taxes", {}, { query: "active=true" })
    await valid("GET /taxes/{id}", { id: tax.id })
    await valid("PATCH /taxes/{id}", { id: tax.id }, { body: { name: "VAT (FR)" } })
    await valid("POST /portal/token", {}, { body: { customerId: id } })
    await valid("GET /invoices/upcoming", {}, { query: `customerId=${id}` })
    await valid("GET /invoices/upcoming", {}, { query: `externalId=${externalId}` })
    await valid("POST /purchases/{id}/change", { id: purchase.id }, { body: { planId: plan.id, when: "CYCLE_END" } })
    await valid("DELETE /purchases/{id}/scheduled-change", { id: purchase.id })
    await valid("DELETE /purchases/{id}/scheduled-change", { id: purchase.id })
    await valid("POST /purchases/{id}/change", { id: purchase.id }, { body: { planId: plan.id, when: "NOW", idempotencyKey: "change-1" } })
    await valid("POST /purchases/{id}/change", { id: purchase.id }, { body: { planId: "plan_unknown", when: "NOW" } })

    await valid("POST /invoices/{id}/credit-notes", { id: invoiceId }, { body: { amount: 0.01, reason: "Goodwill", idempotencyKey: "credit-1" } })
    await valid("POST /invoices/{id}/credit-notes", { id: invoiceId }, { body: { amount: 0.01, reason: "Goodwill", idempotencyKey: "credit-1" } })
    await valid("POST /invoices/{id}/credit-notes", { id: invoiceId }, { body: { lines: [{ line: 1, amount: 0.01 }], reason: "A line" } })
    await valid("POST /invoices/{id}/credit-notes", { id: "inv_unknown" }, { body: { amount: 1, reason: "Unknown" } })
    await valid("GET /invoices/{id}/credit-notes", { id: invoiceId })
    await valid("GET /invoices/{id}/credit-notes", { id: "inv_unknown" })
    await valid("POST /invoices/{id}/payments", { id: invoiceId }, { body: { reference: "bank-1", idempotencyKey: "pay-1" } })
    await valid("POST /invoices/{id}/payments", { id: invoiceId }, { body: { reference: "bank-1", idempotencyKey: "pay-1" } })
    await valid("POST /invoices/{id}/payments", { id: invoiceId }, { body: {} })
    await valid("POST /invoices/{id}/payments", { id: "inv_unknown" }, { body: { reference: "bank-2" } })

    await valid("GET /webhook-endpoints", {}, { query: "limit=5&includeRemoved=true" })
    await valid("GET /webhook-endpoints/{id}", { id: endpoint.id })
    await valid("PATCH /webhook-endpoints/{id}", { id: endpoint.id }, { body: { threshold: null, enabled: true } })
    await valid("POST /webhook-endpoints/{id}/rotate-secret", { id: endpoint.id })
    const deliveries = (await resultOf(
      valid("GET /webhook-endpoints/{id}/deliveries", { id: endpoint.id }, { query: "limit=5&status=PENDING" }),
      200
    )).deliveries as Array<any>
    expect(deliveries.length).toBeGreaterThan(0)
    await valid("GET /webhook-deliveries/{id}", { id: deliveries[0].id })
    await valid("POST /webhook-deliveries/{id}/retry", { id: deliveries[0].id })
    await valid("POST /webhook-deliveries/{id}/retry", { id: "whd_unknown" })
    // Events and operations (issue 37, point 4): events, signal replay, invoice void, API keys.
    const events = (await resultOf(
      valid("GET /events", {}, { query: `limit=5&type=wallet.balance.update&customerId=${id}` }),
      200
    )).events as Array<any>
    expect(events.length).toBeGreaterThan(0)
    const inAYear = new Date(Date.now() + 365 * 86_400_000).toISOString()
    await valid("GET /events", {}, { query: `from=2020-01-01T00:00:00Z&to=${inAYear}` })
    await valid("GET /events", {}, { query: "customerId=cus_unknown" })
    await valid("GET /events/{id}", { id: events[0].id })
    await valid("GET /events/{id}", { id: "evt_unknown" })
    await resultOf(valid("POST /events/{id}/replay", { id: events[0].id }), 200)
    await valid("POST /events/{id}/replay", { id: "evt_unknown" })
    await resultOf(valid("POST /signals/{rawId}/replay", { rawId: sent.rawId }), 200)
    await valid("POST /signals/{rawId}/replay", { rawId: "sig_unknown" })
    const voidable = (await resultOf(
      valid("POST /customers", {}, { body: { name: "Cy", email: "cy@example.com" } }),
      201
    )).customer
    await valid("POST /purchases", {}, { body: { customerId: voidable.id, planId: plan.id } })
    const [toVoid] = (await resultOf(valid("GET /invoices", {}, { query: `customerId=${voidable.id}` }), 200)).invoices as Array<any>
    await resultOf(valid("POST /invoices/{id}/void", { id: toVoid.id }), 200)
    expect((await valid("POST /invoices/{id}/void", { id: toVoid.id })).status).toBe(409)
    await valid("POST /invoices/{id}/void", { id: "inv_unknown" })
    const keys = (await resultOf(valid("GET /api-keys", {}, { query: "limit=5" }), 200)).apiKeys as Array<any>
    const minted = await resultOf(valid("POST /api-keys", {}, { body: { name: "prism", expiresAt: inAYear } }), 201)
    await valid("POST /api-keys", {}, { body: { expiresAt: "2020-01-01T00:00:00Z" } })
    await valid("GET /api-keys/{id}", { id: minted.apiKey.id })
    await valid("GET /api-keys/{id}", { id: "key_unknown" })
    await resultOf(valid("POST /api-keys/{id}/revoke", { id: minted.apiKey.id }), 200)
    expect((await valid("POST /api-keys/{id}/revoke", { id: keys.find((k) => k.prefix === key.slice(0, 10))!.id })).status).toBe(409)
    await valid("POST /api-keys/{id}/revoke", { id: "key_unknown" })
    await valid("GET /organization/settings")
    await valid("PATCH /organization/settings", {}, { body: { rateLimits: { reads: { perSecond: 5000, burst: 10000 }, writes: null } } })
    await valid("PATCH /organization/settings", {}, { body: { lateUsageDays: 400 } })
    await valid("PATCH /organization/settings", {}, { body: { invoiceNumberPrefix: "INV-", paymentInstructions: null } })

    // Closing moves last: archive, unarchive, cancel, remove, delete.
    for (const group of catalogue) {
      await valid(`POST /${group}/{id}/archive`, { id: records[group] })
      await valid(`POST /${group}/{id}/unarchive`, { id: records[group] })
    }
    await valid("POST /purchases/{id}/cancel", { id: purchase.id })
    await valid("DELETE /webhook-endpoints/{id}", { id: endpoint.id })
    await valid("GET /webhook-endpoints/{id}", { id: endpoint.id })
    await valid("DELETE /customers/{id}/members/{memberId}", { id, memberId: member.id })
    const other = (await resultOf(
      valid("POST /customers", {}, { body: { name: "Bob", email: "bob@example.com", externalId: "bob-1" } }),
      201
    )).customer
    await valid("DELETE /customers/ext/{externalId}", { externalId: "bob-1" })
    await valid("DELETE /customers/{id}", { id: other.id })
    await valid("DELETE /customers/{id}", { id })

    // The Idempotency-Key header of every POST (issue 37, point 1): the first answer, its replay (same status and
    // body, `Idempotent-Replayed: true`), the key with another body (422), a key of the wrong form (Prism sees it).
    const keyed = { "idempotency-key": "prism-customer-1" }
    const first = await valid("POST /customers", {}, { body: { name: "Kay", email: "kay@example.com" }, headers: keyed })
    const replayed = await valid("POST /customers", {}, { body: { name: "Kay", email: "kay@example.com" }, headers: keyed })
    expect([first.status, replayed.status]).toEqual([201, 201])
    expect(replayed.replayed).toBe("true")
    expect(replayed.body).toEqual(first.body)
    const reused = await valid("POST /customers", {}, { body: { name: "May", email: "may@example.com" }, headers: keyed })
    expect([reused.status, reused.body.statusDetail.code]).toEqual([422, "idempotency_key_reused"])
    const badKey = await invalid("POST /customers", {}, { body: { name: "Kay", email: "kay@example.com" }, headers: { "idempotency-key": "x".repeat(256) } })
    expect([badKey.status, badKey.body.statusDetail.code]).toEqual([400, "validation_failed"])

    // Documented errors answered to valid requests.
    await valid("GET /customers/{id}", { id: "cus_unknown" })
    await valid("GET /customers/{id}", { id }, { key: "sk_not_a_key" })
    await valid("POST /portal/token", {}, { body: { customerId: id, organizationId: "org_other" } })
    await valid("PATCH /customers/{id}", { id }, { body: { city: "Lyon" } })

    // --- invalid requests: each breaks the document in one way ---
    for (const [path, item] of Object.entries<any>(document.paths)) {
      for (const method of Object.keys(item)) {
        const operation = `${method.toUpperCase()} ${path.replace("/api/v1", "")}`
        const params = { id: "x_1", memberId: "mem_1", externalId: "ext-1", rawId: "sig_1" }
        const takesBody = item[method].requestBody !== undefined
        const limited = (item[method].parameters ?? []).some((parameter: any) => parameter.name === "limit")
        if (takesBody) await invalid(operation, params, { body: { bogusField: true } })
        else if (limited) await invalid(operation, params, { query: "limit=0" })
        else await invalid(operation, params, { key: null })
      }
    }
    await invalid("GET /customers/ext/{externalId}", { externalId: "not valid!" })
    // (A body that is not JSON is answered by Prism itself, never forwarded: test/envelope.test.ts covers ours.)
    await invalid("POST /customers", {}, { body: { name: "Eve", email: "not-an-email" } })
    await invalid("GET /customers", {}, { query: "limit=ten" })

    // --- what Prism saw ---
    const operations = Object.entries<any>(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path.replace("/api/v1", "")}`)
    )
    const validCovered = new Set(exchanges.filter((e) => e.valid).map((e) => e.operation))
    const invalidCovered = new Set(exchanges.filter((e) => !e.valid).map((e) => e.operation))
    expect(operations.filter((operation) => !validCovered.has(operation))).toEqual([])
    expect(operations.filter((operation) => !invalidCovered.has(operation))).toEqual([])

    const describe = (e: Exchange, v: Violation) => `${e.operation} → ${e.status}: ${v.location.join(".")}: ${v.message}`
    const responseViolations = exchanges.flatMap((e) =>
      e.violations.filter((v) => v.location[0] === "response").map((v) => describe(e, v))
    )
    expect(responseViolations).toEqual([])
    const validRequestViolations = exchanges.filter((e) => e.valid).flatMap((e) =>
      e.violations.map((v) => describe(e, v))
    )
    expect(validRequestViolations).toEqual([])
    const unnoticed = exchanges
      .filter((e) => !e.valid && !e.violations.some((v) => v.location[0] === "request"))
      .map((e) => `${e.operation} → ${e.status}`)
    expect(unnoticed).toEqual([])
    // Every answer, valid request or not, is an envelope with statusCode equal to the HTTP status (but an invoice's PDF).
    const isPdf = (e: Exchange) => e.operation === "GET /invoices/{id}/pdf" && e.status === 200
    expect(exchanges.filter((e) => !isPdf(e) && e.body?.statusCode !== e.status).map((e) => `${e.operation} → ${e.status}`)).toEqual([])
  })
})
