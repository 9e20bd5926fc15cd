/**
 * Every price comes from the purchase: for each meter, the catalogue is edited
 * after the sale, a signal is sent, and the usage row is priced as sold. Token
 * rates of models are the exception, live by design (docs/billing.md).
 */
import { BigDecimal, Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import { Models } from "../src/models/Models.ts"
import { client, drain as drainIn, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant

const api = () => client(app, acme)
const drain = () => drainIn(app)

const patched = async (path: string, body: unknown) => {
  const response = await api().patch(path, body)
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(response.body)}`)
}

let counter = 0
/** A new customer on a new plan of `entitlements`; its id. */
const customerOn = async (entitlements: Array<unknown>) => {
  const n = counter++
  const planId = await api().created("/plans", { name: `Plan ${n}`, billingCycle: "MONTHLY", entitlements }, "plan")
  const customerId = await api().created("/customers", { name: `Buyer ${n}`, email: `buyer${n}@example.com` }, "customer")
  const purchase = await api().post("/purchases", { customerId, planId })
  if (purchase.status !== 201) throw new Error(`purchase: ${purchase.status} ${JSON.stringify(purchase.body)}`)
  return customerId
}

const signal = async (path: string, body: Record<string, unknown>) => {
  const response = await api().post(path, body)
  expect(response.status, JSON.stringify(response.body)).toBe(202)
  return response.body.result.rawId as string
}

const rowOf = async (customerId: string, rawId: string) => {
  const response = await api().get(`/signal/usage-log?customerId=${customerId}&limit=200`)
  expect(response.status).toBe(200)
  return (response.body.result.usageLogs as Array<any>).find((row) => row.rawId === rawId)
}

/** gpt-4o's rates in USD per million tokens. */
const setGpt4o = (input: string, output: string) =>
  app.run(Effect.flatMap(Models, (models) =>
    models.set(acme.organizationId, { id: "gpt-4o", input: BigDecimal.unsafeFromString(input), output: BigDecimal.unsafeFromString(output) })))

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
})
afterAll(() => app.close())

describe("a catalogue edit after the sale changes nothing the purchase pays", () => {
  // Every test starts from gpt-4o's list rates: one of them changes the rates.
  beforeEach(() => setGpt4o("2.5", "10"))

  it("credit: the margin sold, not the credit's new one", async () => {
    // basePrice 0.00625; margin 25 -> pricePerCredit 0.0078125
    const creditId = await api().created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 25, modelBundle: gpt4oBundle }, "credit")
    const customerId = await customerOn([{ type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 10 }])
    await patched(`/credits/${creditId}`, { marginPercent: 100 })
    // providerCost = (1000 * 2.5 + 500 * 10) / 1e6 = 0.0075; 1.2 credits; at 25%: 0.009375
    const rawId = await signal("/signal/credit", { customerId, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } })
    await drain()
    expect(await rowOf(customerId, rawId)).toMatchObject({ providerCost: 0.0075, quantity: 1.2, customerCost: 0.009375 })
  })

  it("credit: the bundle sold (basePrice, credits used), not the edited bundle", async () => {
    const creditId = await api().created("/credits", { name: "Draft", agentKey: "draft", marginPercent: 0, modelBundle: gpt4oBundle }, "credit")
    const customerId = await customerOn([{ type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 10 }])
    // Doubles basePrice to 0.0125: the purchase still counts 0.0075 / 0.00625 = 1.2 credits.
    await patched(`/credits/${creditId}`, {
      modelBundle: [{ ...gpt4oBundle[0], averageTokensPerLLMCall: 2000 }]
    })
    const rawId = await signal("/signal/credit", { customerId, agentKey: "draft", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } })
    await drain()
    expect(await rowOf(customerId, rawId)).toMatchObject({ quantity: 1.2, customerCost: 0.0075, balance: { remaining: 8.8 } })
  })

  it("outcome: the pricePerOutcome sold", async () => {
    // basePrice 0.00625; margin 100 -> pricePerOutcome 0.0125
    const outcomeId = await api().created("/outcomes", {
      name: "Report",
      agentKey: "report",
      marginPercent: 100,
      steps: [{ name: "Write", agentKey: "write", modelBundle: gpt4oBundle }]
    }, "outcome")
    const customerId = await customerOn([{ type: "OUTCOME", billingMode: "ADVANCE", outcomeId, quantity: 3 }])
    await patched(`/outcomes/${outcomeId}`, { marginPercent: 300 })
    await signal("/signal/outcome", { customerId, agentKey: "write", runId: "run-1" })
    await drain()
    const complete = await api().post("/signal/outcome/complete", { customerId, runId: "run-1" })
    expect(complete.status).toBe(200)
    await drain()
    expect(await rowOf(customerId, complete.body.result.rawId)).toMatchObject({ meter: "OUTCOME", customerCost: 0.0125 })
  })

  it("unit: the flat price and the tiers sold", async () => {
    const flatId = await api().created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
    const tieredId = await api().created("/units", {
      name: "Calls",
      agentKey: "calls",
      pricingType: "SLAB",
      tiers: [{ upTo: 10, price: 1 }, { upTo: null, price: 0.5 }]
    }, "unit")
    const customerId = await customerOn([
      { type: "UNIT", billingMode: "ARREAR", unitId: flatId },
      { type: "UNIT", billingMode: "ARREAR", unitId: tieredId }
    ])
    await patched(`/units/${flatId}`, { flatPrice: 3 })
    await patched(`/units/${tieredId}`, { pricingType: "FLAT", flatPrice: 9 })
    const flat = await signal("/signal/unit", { customerId, agentKey: "pages", quantity: 3 })
    const tiered = await signal("/signal/unit", { customerId, agentKey: "calls", quantity: 12 })
    await drain()
    expect(await rowOf(customerId, flat)).toMatchObject({ customerCost: 1.5 })
    // 10 at 1, then 2 at 0.5
    expect(await rowOf(customerId, tiered)).toMatchObject({ customerCost: 11 })
  })

  it("composite: the price per occurrence sold", async () => {
    const unitId = await api().created("/units", { name: "Exports", agentKey: "exports", pricingType: "FLAT", flatPrice: 1 }, "unit")
    const compositeId = await api().created("/composites", {
      name: "Bundle",
      refId: "bundle",
      price: 2,
      entitlements: { unitIds: [unitId] }
    }, "composite")
    const customerId = await customerOn([{ type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId, quantity: 2 }])
    await patched(`/composites/${compositeId}`, { price: 7 })
    await signal("/signal/unit", { customerId, agentKey: "exports", composite: { bundle: "job-1" } })
    await drain()
    const complete = await api().post("/signal/composite/complete", { customerId, composite: { bundle: "job-1" } })
    expect(complete.status, JSON.stringify(complete.body)).toBe(200)
    await drain()
    expect(await rowOf(customerId, complete.body.result.rawId)).toMatchObject({ meter: "COMPOSITE", customerCost: 2 })
  })

  it("wallet and the credit's provider cost: model token rates are live, what the provider charges today", async () => {
    const creditId = await api().created("/credits", { name: "Live", agentKey: "live", marginPercent: 0, modelBundle: gpt4oBundle }, "credit")
    const customerId = await customerOn([
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 },
      { type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 10 }
    ])
    await setGpt4o("5", "20")
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    const wallet = await signal("/signal/wallet", { customerId, usage })
    const credit = await signal("/signal/credit", { customerId, agentKey: "live", usage })
    await drain()
    // (1000 * 5 + 500 * 20) / 1e6 = 0.015, against the sold basePrice 0.00625: 2.4 credits
    expect(await rowOf(customerId, wallet)).toMatchObject({ providerCost: 0.015, customerCost: 0.015 })
    expect(await rowOf(customerId, credit)).toMatchObject({ providerCost: 0.015, quantity: 2.4, customerCost: 0.015 })
  })

  it("a purchase sold before the terms were frozen takes the credit's terms of the upgrade (migration 0010)", async () => {
    const creditId = await api().created("/credits", { name: "Old", agentKey: "old", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
    const customerId = await customerOn([{ type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 10 }])
    const strip = `UPDATE purchases SET snapshot = jsonb_set(snapshot, '{components}',
      (SELECT jsonb_agg(c - 'creditTerms') FROM jsonb_array_elements(snapshot->'components') c))
      WHERE organization_id = $1 AND customer_id = $2`
    await query(app, strip, [acme.organizationId, customerId])
    await query(app, fs.readFileSync(new URL("../migrations/0010_sold_terms_and_numbers.sql", import.meta.url), "utf8"))
    await patched(`/credits/${creditId}`, { marginPercent: 100 })
    const rawId = await signal("/signal/credit", { customerId, agentKey: "old", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } })
    await drain()
    // providerCost 0.0075, 1.2 credits, at the 20% of the upgrade: 0.009
    expect(await rowOf(customerId, rawId)).toMatchObject({ quantity: 1.2, customerCost: 0.009 })
  })
})
