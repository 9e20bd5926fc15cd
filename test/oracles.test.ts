/**
 * Independent oracles: every expected value here is worked out by hand or
 * recomputed with node:crypto, never with the code under test.
 *  - webhook signatures: HMAC-SHA256 over `<t>.<raw body>` as docs/webhooks.md
 *    states it, on a header made in memory and on a real delivery; the
 *    verifier's tolerance at its edge;
 *  - rounding (src/money.ts): a non-terminating 12-place quotient, negative
 *    half-way cases (half away from zero);
 *  - taxes on the cent-rounded subtotal (Invoices.invoiceTotals), where the
 *    raw subtotal would give another tax;
 *  - ARREAR credit and outcome usage invoiced at the cycle end with a tax, to
 *    the cent, through HTTP signals, the worker's drain and the cycle job;
 *  - two organisations with the same agentKey, priced in one batch, each with
 *    its own credit, model rates and balances; and with the same unit and
 *    outcome-step keys, composite refId and tag, member e-mail, runId and
 *    idempotency keys, each priced on its own catalogue and members;
 *  - stored API keys: only the SHA-256 hash and a short prefix, nowhere the key;
 *  - `limit=5000` clamped to 200, and the cursor carrying on from there.
 */
import { BigDecimal, Effect } from "effect"
import { createHash, createHmac } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { invoiceTotals, type LineInput, type TaxRate } from "../src/billing/InvoiceTotals.ts"
import { decimal, divideTo, roundTo } from "../src/money.ts"
import { Models } from "../src/models/Models.ts"
import { chargeCredit } from "../src/pricing/Pricing.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { signatureHeader, verifyWebhookSignature } from "../src/webhooks/Signature.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { buy, type Client, clientOf, makeCustomer, makePlan, ok, runCycles, settleOthersBefore } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { changeWallet, drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

const text = (value: BigDecimal.BigDecimal) => BigDecimal.format(BigDecimal.normalize(value))

/** The documented signature, computed here: HMAC-SHA256(secret, `<t>.` + raw body bytes), lowercase hex. */
const hmac = (secret: string, t: number, rawBody: string | Buffer) =>
  createHmac("sha256", secret)
    .update(Buffer.concat([Buffer.from(`${t}.`, "utf8"), typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : rawBody]))
    .digest("hex")

/** `t=<unix seconds>,v1=<64 lowercase hex>`, exactly (docs/webhooks.md, Delivery). */
const HEADER = /^t=(\d+),v1=([0-9a-f]{64})$/

const parseHeader = (header: string) => {
  const match = HEADER.exec(header)
  if (match === null) throw new Error(`not a signature header of the documented form: ${header}`)
  return { t: Number(match[1]), v1: match[2]! }
}

// ---------------------------------------------------------------------------
// Pure: no database

describe("webhook signature, recomputed with node:crypto", () => {
  const secret = "whsec_0123456789abcdef0123456789abcdef"
  // Multi-byte characters: the HMAC is over the UTF-8 bytes of the body as sent.
  const body = `{"id":"evt_1","event_type":"wallet.balance.update","data":{"note":"café ✓","current_balance":7.25}}`
  // 2024-03-01T12:00:00Z is 1709294400 s after the epoch (19783 days * 86400 + 12 h).
  const T = 1709294400

  it("signs `<t>.<raw body>` with the whole secret, t in whole seconds (rounded down)", () => {
    const header = signatureHeader(secret, body, new Date(T * 1000 + 999))
    const { t, v1 } = parseHeader(header)
    expect(t).toBe(T)
    expect(v1).toBe(hmac(secret, T, body))
    // Not over the body alone, nor without the separator, nor keyed without the `whsec_` part.
    expect(v1).not.toBe(createHmac("sha256", secret).update(body).digest("hex"))
    expect(v1).not.toBe(createHmac("sha256", secret).update(`${T}${body}`).digest("hex"))
    expect(v1).not.toBe(hmac(secret.slice("whsec_".length), T, body))
  })

  it("verifyWebhookSignature accepts the independent signature, and refuses a changed body or secret", () => {
    const header = `t=${T},v1=${hmac(secret, T, body)}`
    const now = new Date(T * 1000)
    expect(verifyWebhookSignature(secret, header, body, { now })).toBe(true)
    expect(verifyWebhookSignature(secret, header, Buffer.from(body, "utf8"), { now })).toBe(true)
    expect(verifyWebhookSignature(secret, header, body.replace("7.25", "7.26"), { now })).toBe(false)
    expect(verifyWebhookSignature(`${secret}x`, header, body, { now })).toBe(false)
  })

  it("rejects a timestamp older than the 300 s default tolerance and accepts one just inside it", () => {
    const header = `t=${T},v1=${hmac(secret, T, body)}`
    const at = (seconds: number) => ({ now: new Date(T * 1000 + seconds * 1000) })
    expect(verifyWebhookSignature(secret, header, body, at(300)), "exactly 300 s old").toBe(true)
    expect(verifyWebhookSignature(secret, header, body, at(300.999)), "300.999 s old: still 300 whole seconds").toBe(true)
    expect(verifyWebhookSignature(secret, header, body, at(301)), "301 s old: stale").toBe(false)
    expect(verifyWebhookSignature(secret, header, body, at(3600)), "an hour old").toBe(false)
    expect(verifyWebhookSignature(secret, header, body, at(-301)), "301 s in the future").toBe(false)
    // A tolerance of the caller's own.
    expect(verifyWebhookSignature(secret, header, body, { ...at(60), toleranceSeconds: 60 }), "60 s old, tolerance 60").toBe(true)
    expect(verifyWebhookSignature(secret, header, body, { ...at(61), toleranceSeconds: 60 }), "61 s old, tolerance 60").toBe(false)
  })
})

describe("rounding, worked by hand", () => {
  it("keeps a non-terminating quotient to 12 places, the 13th digit rounding it", () => {
    // 1/3 = 0.333333333333|333...: the 13th digit 3 rounds down.
    expect(text(divideTo(decimal("1"), decimal("3")))).toBe("0.333333333333")
    // 2/3 = 0.666666666666|666...: the 13th digit 6 rounds up.
    expect(text(divideTo(decimal("2"), decimal("3")))).toBe("0.666666666667")
    expect(text(divideTo(decimal("-2"), decimal("3")))).toBe("-0.666666666667")
    // Credits used = provider cost / basePrice: 1000 input tokens of gpt-4o cost 1000 * 2.5 / 1e6 = 0.0025;
    // a basePrice of 0.0075 makes that 1/3 credit, and the 20% margin 0.0025 * 1.2 = 0.003.
    const charge = chargeCredit(
      { inputTokens: decimal("1000"), outputTokens: decimal("0"), cacheTokens: decimal("0"), cacheWriteTokens: decimal("0") },
      { input: decimal("2.5"), output: decimal("10"), cacheRead: decimal("1.25"), cacheWrite: null },
      { basePrice: decimal("0.0075"), tokensPerCredit: decimal("1000"), marginPercent: decimal("20") }
    )
    expect([text(charge.providerCost), text(charge.creditsUsed), text(charge.customerCost)]).toEqual(["0.0025", "0.333333333333", "0.003"])
  })

  it("rounds a negative half-way value away from zero", () => {
    // Half-even would give -0.12 and -2; half-up towards +infinity -0.12 and -2; truncation -0.12 and -2.
    expect(text(roundTo(decimal("-0.125"), 2))).toBe("-0.13")
    expect(text(roundTo(decimal("-2.5"), 0))).toBe("-3")
    expect(text(roundTo(decimal("-0.0000000000005"), 12))).toBe("-0.000000000001")
    // The positive twins, and values just short of half-way.
    expect(text(roundTo(decimal("0.125"), 2))).toBe("0.13")
    expect(text(roundTo(decimal("-0.1249"), 2))).toBe("-0.12")
    expect(text(roundTo(decimal("-0.135"), 2))).toBe("-0.14")
  })
})

describe("taxes on the cent-rounded subtotal", () => {
  const tax = (id: string, ratePercent: string): TaxRate => ({ id, name: id, ratePercent: decimal(ratePercent) })
  const line = (amount: string): LineInput => ({ description: amount, componentId: null, quantity: null, unitPrice: null, amount: decimal(amount) })

  it("taxes 1.01, not the raw 1.005, and rounds each tax line on its own", () => {
    // Lines 0.333 + 0.333 + 0.339 = 1.005, which rounds (half away from zero) to 1.01.
    // 50% of 1.01 = 0.505 -> 0.51; of the raw 1.005 it would be 0.5025 -> 0.50 (total 1.51, not 1.52).
    // 7% of 1.01 = 0.0707 -> 0.07.
    const totals = invoiceTotals([line("0.333"), line("0.333"), line("0.339")], [tax("half", "50"), tax("seven", "7")])
    expect(text(totals.subtotal)).toBe("1.01")
    expect(totals.taxes.map((t) => [t.tax.id, text(t.amount)])).toEqual([["half", "0.51"], ["seven", "0.07"]])
    expect(text(totals.taxTotal)).toBe("0.58")
    expect(text(totals.total)).toBe("1.59")
    expect(totals.free).toBe(false)
  })

  it("taxes a subtotal that rounds down on the rounded value too", () => {
    // 12.3449 -> 12.34; 10% = 1.234 -> 1.23 (the raw 1.23449 also gives 1.23); a 2.5% tax: 0.3085 -> 0.31.
    const totals = invoiceTotals([line("12.3449")], [tax("vat", "10"), tax("city", "2.5")])
    expect([text(totals.subtotal), ...totals.taxes.map((t) => text(t.amount)), text(totals.total)]).toEqual([
      "12.34",
      "1.23",
      "0.31",
      "13.88"
    ])
  })
})

// ---------------------------------------------------------------------------
// On the service

describe("on the service", () => {
  let app: TestApp

  beforeAll(async () => {
    app = await startTestApp()
  })
  afterAll(() => app?.close())

  it("signs a real delivery as documented: the receiver's raw body and header check out with node:crypto", async () => {
    const acme = await app.tenant("Signed")
    const api = clientOf(app, acme)
    const customer = await makeCustomer(api)
    const receiver: Receiver = await startReceiver()
    try {
      const endpoint = await app.run(Effect.flatMap(WebhookEndpoints, (e) => e.add(acme.organizationId, { url: receiver.url })))
      await changeWallet(app, { organizationId: acme.organizationId, customerId: customer.id, from: "10", to: "7.125" })
      const before = Math.floor(Date.now() / 1000)
      await drainSender(app)
      const after = Math.floor(Date.now() / 1000)
      expect(receiver.received).toHaveLength(1)
      const [request] = receiver.received
      const { t, v1 } = parseHeader(request!.headers["x-service-signature"] as string)
      expect(t).toBeGreaterThanOrEqual(before)
      expect(t).toBeLessThanOrEqual(after)
      expect(endpoint.secret).toMatch(/^whsec_/)
      expect(v1).toBe(hmac(endpoint.secret, t, request!.body))
      const body = JSON.parse(request!.body)
      expect(request!.headers["x-service-event-id"]).toBe(body.id)
      expect(body.data).toMatchObject({ previous_balance: 10, current_balance: 7.125, delta: -2.875 })
    } finally {
      await receiver.close()
    }
  })

  it("invoices ARREAR credit and outcome usage at the cycle end with a 10% tax, to the cent", async () => {
    const acme = await app.tenant("Arrear")
    const api = clientOf(app, acme)
    // Credit on gpt-4o (2.5 / 10 per million): basePrice = 1000 * (50*2.5 + 50*10) / 100 / 1e6 = 0.00625,
    // pricePerCredit with 25% = 0.0078125.
    const credit = ok(await api.post("/credits", {
      name: "Writer",
      agentKey: "writer",
      marginPercent: 25,
      modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    }), 201).credit
    // Outcome of one step: basePrice = 1000 * (100*2.5) / 100 / 1e6 = 0.0025; pricePerOutcome with 100% = 0.005.
    const outcome = ok(await api.post("/outcomes", {
      name: "Report",
      agentKey: "report",
      marginPercent: 100,
      steps: [{
        name: "draft",
        agentKey: "report-draft",
        modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 100, output: 0, cache: 0, cacheWrite: 0 }]
      }]
    }), 201).outcome
    expect(credit.pricePerCredit).toBe(0.0078125)
    expect(outcome.pricePerOutcome).toBe(0.005)
    ok(await api.post("/taxes", { name: "VAT", ratePercent: 10 }), 201)
    const plan = await makePlan(app, acme, [
      { type: "CREDIT", billingMode: "ARREAR", creditId: credit.id },
      { type: "OUTCOME", billingMode: "ARREAR", outcomeId: outcome.id }
    ])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)

    // Output tokens at 10 per million: 500,000 cost 5 and 487,200 cost 4.872; with 25%: 6.25 and 6.09.
    // Credits used: 5 / 0.00625 = 800 and 4.872 / 0.00625 = 779.52.
    for (const outputTokens of [500_000, 487_200]) {
      const sent = await api.post("/signal/credit", { customerId: customer.id, agentKey: "writer", usage: { model: "gpt-4o", outputTokens } })
      expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    }
    const step = await api.post("/signal/outcome", {
      customerId: customer.id,
      agentKey: "report-draft",
      runId: "run-1",
      usage: { model: "gpt-4o", inputTokens: 1000 }
    })
    expect(step.status, JSON.stringify(step.body)).toBe(202)
    await drain(app)
    expect((await api.post("/signal/outcome/complete", { customerId: customer.id, runId: "run-1" })).status).toBe(200)
    await drain(app)
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(12.345)

    const end = new Date(purchase.currentPeriodEnd)
    // Not renewed a millisecond early; and other tests' purchases out of the count at `end`.
    await settleOthersBefore(app, api, purchase.id, end)
    expect(await runCycles(app, end)).toBe(1)

    const invoices = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices.map((i: any) => [i.kind, i.total])).toEqual([["PLAN", 0], ["USAGE", 13.59], ["PLAN", 0]])
    const usage = invoices[1]
    expect(usage.lines).toEqual([
      { description: "Writer (usage)", componentId: expect.any(String), quantity: 1579.52, unitPrice: 0.0078125, amount: 12.34, periodStart: purchase.currentPeriodStart, periodEnd: end.toISOString() },
      { description: "Report (usage)", componentId: expect.any(String), quantity: 1, unitPrice: 0.005, amount: 0.005, periodStart: purchase.currentPeriodStart, periodEnd: end.toISOString() }
    ])
    // 12.34 + 0.005 = 12.345 -> 12.35 (half away from zero; half-even would say 12.34).
    // VAT 10% of 12.35 = 1.235 -> 1.24 (of the raw 12.345 it would be 1.2345 -> 1.23). Total 13.59.
    expect(usage).toMatchObject({
      status: "OPEN",
      periodStart: purchase.currentPeriodStart,
      periodEnd: end.toISOString(),
      subtotal: 12.35,
      taxTotal: 1.24,
      total: 13.59,
      totalCents: 1359
    })
    expect(usage.taxLines).toEqual([{ taxId: expect.any(String), name: "VAT", ratePercent: 10, amount: 1.24 }])
    // The next cycle starts with nothing charged, and a second run at the same instant invoices nothing.
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.spentThisCycle).toBe(0)
    expect(await runCycles(app, end)).toBe(0)
  })

  it("prices one batch of two organisations' signals under the same agentKey with each one's own credit and rates", async () => {
    const orgs = [await app.tenant("Org A"), await app.tenant("Org B")] as const
    const [a, b] = orgs
    // Org B prices gpt-4o at 5 / 20 per million (A keeps the built-in 2.5 / 10), before its credit is made.
    await app.run(Effect.flatMap(Models, (models) => models.set(b.organizationId, { id: "gpt-4o", input: decimal("5"), output: decimal("20") })))
    const bundle = (averageTokensPerLLMCall: number) => [{ modelId: "gpt-4o", averageTokensPerLLMCall, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    // A: basePrice = 1000 * (50*2.5 + 50*10) / 100 / 1e6 = 0.00625, margin 20%.
    // B: basePrice = 2000 * (50*5 + 50*20) / 100 / 1e6 = 0.025, margin 50%.
    const setUp = async (tenant: Tenant, marginPercent: number, tokens: number) => {
      const api = clientOf(app, tenant)
      const credit = ok(await api.post("/credits", { name: "Assistant", agentKey: "assistant", marginPercent, modelBundle: bundle(tokens) }), 201).credit
      const plan = await makePlan(app, tenant, [{ type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 100 }])
      const customer = await makeCustomer(api)
      await buy(api, customer.id, plan.id)
      return { api, credit, customer }
    }
    const sideA = await setUp(a, 20, 1000)
    const sideB = await setUp(b, 50, 2000)
    expect(sideA.credit.basePrice).toBe(0.00625)
    expect(sideB.credit.basePrice).toBe(0.025)

    // The same body for both, interleaved, all queued before the worker prices them.
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    for (let i = 0; i < 2; i++) {
      for (const side of [sideA, sideB]) {
        const sent = await side.api.post("/signal/credit", { customerId: side.customer.id, agentKey: "assistant", usage })
        expect(sent.status, JSON.stringify(sent.body)).toBe(202)
      }
    }
    // One batch prices all four (the claim takes whole customers, of any organisation).
    expect(await app.run(Effect.flatMap(SignalProcessor, (processor) => processor.runOnce))).toBe(4)
    for (const tenant of orgs) {
      const signals = await query(app, `SELECT status, error_status, error_message FROM signals WHERE organization_id = $1`, [
        tenant.organizationId
      ])
      expect(signals).toEqual([0, 1].map(() => ({ status: "PROCESSED", errorStatus: null, errorMessage: null })))
    }

    const rows = async (side: typeof sideA) => ok(await side.api.get(`/signal/usage-log?customerId=${side.customer.id}`)).usageLogs
    // A: provider cost 1000*2.5/1e6 + 500*10/1e6 = 0.0075; credits 0.0075 / 0.00625 = 1.2; customer 0.0075 * 1.2 = 0.009.
    // B: provider cost 1000*5/1e6 + 500*20/1e6 = 0.015; credits 0.015 / 0.025 = 0.6; customer 0.015 * 1.5 = 0.0225.
    for (const [side, expected] of [
      [sideA, { providerCost: 0.0075, quantity: 1.2, customerCost: 0.009 }],
      [sideB, { providerCost: 0.015, quantity: 0.6, customerCost: 0.0225 }]
    ] as const) {
      const logged = await rows(side)
      expect(logged).toHaveLength(2)
      for (const row of logged) {
        expect(row).toMatchObject({ meter: "CREDIT", agentKey: "assistant", billingMode: "ADVANCE", ...expected })
        expect(row.entitlement.id).toBe(side.credit.id)
      }
    }
    const creditBalance = async (side: typeof sideA) => ok(await side.api.get(`/customers/${side.customer.id}/balances`)).credits
    expect(await creditBalance(sideA)).toEqual([expect.objectContaining({ granted: 100, used: 2.4, remaining: 97.6 })])
    expect(await creditBalance(sideB)).toEqual([expect.objectContaining({ granted: 100, used: 1.2, remaining: 98.8 })])
    // Neither organisation sees the other's usage.
    expect((await sideA.api.get(`/signal/usage-log?customerId=${sideB.customer.id}`)).status).toBe(404)
  })

  it("prices two organisations' units, outcome steps and runs, composites and members under the same keys, each on its own", async () => {
    const orgs = [await app.tenant("Keys A"), await app.tenant("Keys B")] as const
    const [a, b] = orgs
    // B prices gpt-4o at 5 / 20 per million (A keeps the built-in 2.5 / 10), before its catalogue is made.
    await app.run(Effect.flatMap(Models, (models) => models.set(b.organizationId, { id: "gpt-4o", input: decimal("5"), output: decimal("20") })))
    const shared = "ops@shared.example"
    const onlyA = "only-a@example.com"
    // Both organisations: unit "pages", outcome "report" with one step "draft", composite "ticket" covering
    // "pages"; a plan of pages in arrears, 5 outcomes and 2 occurrences in advance; one customer with the
    // member `shared` (and in A also `onlyA`).
    const setUp = async (tenant: Tenant, side: { flatPrice: number; marginPercent: number; tokens: number; compositePrice: number; members: Array<string> }) => {
      const api = clientOf(app, tenant)
      const unit = ok(await api.post("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: side.flatPrice }), 201).unit
      const outcome = ok(
        await api.post("/outcomes", {
          name: "Report",
          agentKey: "report",
          marginPercent: side.marginPercent,
          steps: [{
            name: "Draft",
            agentKey: "draft",
            modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: side.tokens, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
          }]
        }),
        201
      ).outcome
      const composite = ok(
        await api.post("/composites", { name: "Ticket", refId: "ticket", price: side.compositePrice, entitlements: { unitIds: [unit.id] } }),
        201
      ).composite
      const plan = await makePlan(app, tenant, [
        { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
        { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 5 },
        { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: composite.id, quantity: 2 }
      ])
      const customer = await makeCustomer(api)
      for (const email of side.members) ok(await api.post(`/customers/${customer.id}/members`, { email }), 201)
      await buy(api, customer.id, plan.id)
      return { tenant, api, unit, outcome, composite, customer }
    }
    const sideA = await setUp(a, { flatPrice: 0.4, marginPercent: 20, tokens: 1000, compositePrice: 2, members: [shared, onlyA] })
    const sideB = await setUp(b, { flatPrice: 1.5, marginPercent: 50, tokens: 2000, compositePrice: 3, members: [shared] })
    // A: step basePrice = 1000 * (50*2.5 + 50*10) / 100 / 1e6 = 0.00625, pricePerOutcome 0.00625 * 1.2 = 0.0075.
    // B: step basePrice = 2000 * (50*5 + 50*20) / 100 / 1e6 = 0.025, pricePerOutcome 0.025 * 1.5 = 0.0375.
    expect(sideA.outcome).toMatchObject({ basePrice: 0.00625, pricePerOutcome: 0.0075 })
    expect(sideB.outcome).toMatchObject({ basePrice: 0.025, pricePerOutcome: 0.0375 })

    // The same bodies and keys for both, interleaved, all queued before the worker prices them.
    const bodies = (side: typeof sideA) => [
      ["unit", { agentKey: "pages", quantity: 3, member: shared, idempotencyKey: "k-unit" }],
      ["outcome", { agentKey: "draft", runId: "run-1", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }, idempotencyKey: "k-step" }],
      ["unit", { agentKey: "pages", quantity: 1, composite: { ticket: "t-1" } }],
      ["unit", { agentKey: "pages", quantity: 2, member: onlyA }]
    ].map(([route, body]) => [route, { customerId: side.customer.id, ...(body as object) }] as const)
    const rawIds = new Map<typeof sideA, Array<string>>([[sideA, []], [sideB, []]])
    for (let i = 0; i < 4; i++) {
      for (const side of [sideA, sideB]) {
        const [route, body] = bodies(side)[i]!
        const sent = await side.api.post(`/signal/${route}`, body)
        expect(sent.status, JSON.stringify(sent.body)).toBe(202)
        rawIds.get(side)!.push(sent.body.result.rawId)
      }
    }
    // A key is per organisation: B's "k-unit" is a signal of its own, and a repeat in B answers B's.
    expect(rawIds.get(sideA)![0]).not.toBe(rawIds.get(sideB)![0])
    const repeat = await sideB.api.post("/signal/unit", bodies(sideB)[0]![1])
    expect(repeat.body.result.rawId).toBe(rawIds.get(sideB)![0])

    // One batch prices all eight (the claim takes whole customers, of any organisation).
    expect(await app.run(Effect.flatMap(SignalProcessor, (processor) => processor.runOnce))).toBe(8)
    const statuses = async (side: typeof sideA) =>
      (await query<{ id: string; status: string; errorStatus: number | null }>(
        app,
        `SELECT id, status, error_status FROM signals WHERE organization_id = $1 ORDER BY id`,
        [side.tenant.organizationId]
      )).map((row) => [rawIds.get(side)!.indexOf(row.id), row.status, row.errorStatus])
    expect(await statuses(sideA)).toEqual([[0, "PROCESSED", null], [1, "PROCESSED", null], [2, "PROCESSED", null], [3, "PROCESSED", null]])
    // `onlyA` is a member of A's customer only: B's signal naming it is refused (422), nothing else of B's.
    expect(await statuses(sideB)).toEqual([[0, "PROCESSED", null], [1, "PROCESSED", null], [2, "PROCESSED", null], [3, "FAILED", 422]])

    // The run "run-1" and the occurrence "t-1" exist in both organisations: each completes its own.
    for (const side of [sideA, sideB]) {
      const run = await side.api.post("/signal/outcome/complete", { customerId: side.customer.id, runId: "run-1" })
      expect(run.status, JSON.stringify(run.body)).toBe(200)
      const occurrence = await side.api.post("/signal/composite/complete", { customerId: side.customer.id, composite: { ticket: "t-1" } })
      expect(occurrence.status, JSON.stringify(occurrence.body)).toBe(200)
      expect(occurrence.body.result.composite).toEqual({ id: side.composite.id, name: "Ticket", refId: "ticket" })
    }
    await drain(app)

    const rowsOf = async (side: typeof sideA) =>
      ok(await side.api.get(`/signal/usage-log?customerId=${side.customer.id}`)).usageLogs.map((r: any) => ({
        meter: r.meter,
        entitlement: r.entitlement.id,
        quantity: r.quantity,
        providerCost: r.providerCost,
        customerCost: r.customerCost,
        billingMode: r.billingMode,
        member: r.member,
        runId: r.runId,
        composite: r.composite === null ? null : [r.composite.id, r.composite.value]
      }))
    const expected = (side: typeof sideA, n: { units: Array<number>; stepCost: number; pricePerOutcome: number; compositePrice: number }) => {
      const unitRow = (quantity: number, customerCost: number, member: string | null) => ({
        meter: "UNIT", entitlement: side.unit.id, quantity, providerCost: 0, customerCost,
        billingMode: "ARREAR", member, runId: null, composite: null
      })
      return [
        unitRow(3, n.units[0]!, shared),
        { meter: "OUTCOME_STEP", entitlement: side.outcome.id, quantity: 1, providerCost: n.stepCost, customerCost: 0, billingMode: null, member: null, runId: "run-1", composite: null },
        // Tagged with a sold composite that covers it: recorded, billed by the occurrence.
        { meter: "UNIT", entitlement: side.unit.id, quantity: 1, providerCost: 0, customerCost: 0, billingMode: "COMPOSITE", member: null, runId: null, composite: [side.composite.id, "t-1"] },
        ...(side === sideA ? [unitRow(2, n.units[1]!, onlyA)] : []),
        { meter: "OUTCOME", entitlement: side.outcome.id, quantity: 1, providerCost: n.stepCost, customerCost: n.pricePerOutcome, billingMode: "ADVANCE", member: null, runId: "run-1", composite: null },
        { meter: "COMPOSITE", entitlement: side.composite.id, quantity: 1, providerCost: 0, customerCost: n.compositePrice, billingMode: "ADVANCE", member: null, runId: null, composite: [side.composite.id, "t-1"] }
      ]
    }
    // A: units 3 * 0.4 = 1.2 and 2 * 0.4 = 0.8; B: 3 * 1.5 = 4.5.
    // A: step 1000*2.5/1e6 + 500*10/1e6 = 0.0075; B: 1000*5/1e6 + 500*20/1e6 = 0.015.
    expect(await rowsOf(sideA)).toEqual(expected(sideA, { units: [1.2, 0.8], stepCost: 0.0075, pricePerOutcome: 0.0075, compositePrice: 2 }))
    expect(await rowsOf(sideB)).toEqual(expected(sideB, { units: [4.5], stepCost: 0.015, pricePerOutcome: 0.0375, compositePrice: 3 }))

    for (const [side, spent] of [[sideA, 2], [sideB, 4.5]] as const) {
      const balances = ok(await side.api.get(`/customers/${side.customer.id}/balances`))
      expect(balances.outcomes).toEqual([expect.objectContaining({ outcomeId: side.outcome.id, granted: 5, remaining: 4 })])
      expect(balances.composites).toEqual([expect.objectContaining({ granted: 2, used: 1, remaining: 1 })])
      // ARREAR: A 3 * 0.4 + 2 * 0.4 = 2; B 3 * 1.5 = 4.5 (its third unit signal was refused).
      expect(ok(await side.api.get(`/customers/${side.customer.id}/plan`)).plan.spentThisCycle).toBe(spent)
    }
    // Neither organisation sees the other's customer or run.
    expect((await sideA.api.get(`/signal/usage-log?customerId=${sideB.customer.id}`)).status).toBe(404)
  })

  it("stores an API key only as its SHA-256 hash and a short prefix: no column anywhere holds the key", async () => {
    const acme = await app.tenant("Keys")
    const key = acme.apiKey
    expect(key).toMatch(/^sk_[A-Za-z0-9_-]{20,}$/)
    // The key works, so it is the real one.
    expect((await app.request("GET", "/customers", { key })).status).toBe(200)

    const stored = await query<Record<string, unknown>>(app, `SELECT * FROM api_keys WHERE organization_id = $1`, [acme.organizationId])
    expect(stored).toHaveLength(1)
    const row = stored[0]!
    // (Column names arrive camelCased: key_hash is keyHash.)
    expect(row.keyHash).toBe(createHash("sha256").update(key, "utf8").digest("hex"))
    expect(typeof row.keyPrefix).toBe("string")
    const prefix = row.keyPrefix as string
    expect(key.startsWith(prefix)).toBe(true)
    expect(prefix.length).toBeLessThanOrEqual(12)
    // What the prefix leaves out is most of the key: at least 128 bits of it are never stored.
    expect(key.length - prefix.length).toBeGreaterThanOrEqual(22)
    const secretPart = key.slice(prefix.length)
    for (const [column, value] of Object.entries(row)) {
      const shown = value instanceof Date ? value.toISOString() : String(value)
      expect(shown, `api_keys.${column}`).not.toContain(secretPart.slice(0, 16))
    }

    // Every text-like column of every table and view in the schema, searched for the key's secret part.
    const columns = await query<{ tableName: string; columnName: string }>(
      app,
      `SELECT table_name, column_name FROM information_schema.columns
       WHERE table_schema = current_schema() AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea')
       ORDER BY table_name, column_name`
    )
    expect(columns.map((c) => `${c.tableName}.${c.columnName}`)).toEqual(
      expect.arrayContaining(["api_keys.key_hash", "api_keys.key_prefix", "api_keys.name"])
    )
    const holding: Array<string> = []
    for (const { columnName, tableName } of columns) {
      const [found] = await query<{ n: string }>(
        app,
        `SELECT count(*) AS n FROM "${tableName}" WHERE strpos("${columnName}"::text, $1) > 0`,
        [secretPart.slice(0, 16)]
      )
      if (found!.n !== "0") holding.push(`${tableName}.${columnName}`)
    }
    expect(holding).toEqual([])
  })

  it("clamps limit=5000 to 200 rows and continues from the cursor", async () => {
    const acme = await app.tenant("Many")
    const api: Client = clientOf(app, acme)
    // 205 customers in one statement; ids sort in creation order like real ones.
    await query(
      app,
      `INSERT INTO customers (organization_id, id, slug, name, email, currency_code)
       SELECT $1, 'cus_bulk' || lpad(g::text, 4, '0'), 'bulk-' || g, 'Bulk ' || g, 'bulk' || g || '@example.com', 'USD'
       FROM generate_series(1, 205) AS g`,
      [acme.organizationId]
    )
    const expected = Array.from({ length: 205 }, (_, i) => `cus_bulk${String(i + 1).padStart(4, "0")}`)

    const first = ok(await api.get("/customers?limit=5000")).customers
    expect(first).toHaveLength(200)
    expect(first.map((c: any) => c.id)).toEqual(expected.slice(0, 200))
    const second = ok(await api.get(`/customers?limit=5000&cursor=${first[199].id}`)).customers
    expect(second.map((c: any) => c.id)).toEqual(expected.slice(200))
    // Without a limit: the default of 50.
    expect(ok(await api.get("/customers")).customers).toHaveLength(50)
  })
})
