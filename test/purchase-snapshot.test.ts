/**
 * The snapshot a purchase freezes is read in one statement (src/billing/Snapshot.ts);
 * it must be what the plan reads price and what metering needs, exactly as the
 * separate reads built it: `oracle` below is that construction (Plans.getPriced,
 * then the targets' keys, the outcomes' live steps and the composites' entitlements).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Plans, targetIdOf, type TargetPrice } from "../src/plans/Plans.ts"
import { PlanSnapshot, type SnapshotComponent } from "../src/pricing/PlanSnapshot.ts"
import type { OrganizationId } from "../src/ids.ts"
import { client, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
const api = () => client(app, acme)

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
})
afterAll(() => app.close())

const pricesOf = (price: TargetPrice) => ({
  unitPrice: price.type === "CREDIT" ? price.pricePerCredit : price.type === "OUTCOME" ? price.pricePerOutcome
    : price.type === "PRICING_METRIC" ? price.price : null,
  pricingType: price.type === "UNIT" ? price.pricing.pricingType : null,
  flatPrice: price.type === "UNIT" ? price.pricing.flatPrice : null,
  tiers: price.type === "UNIT" ? price.pricing.tiers : [],
  ...(price.type === "CREDIT" ? { creditTerms: price.terms } : {})
})

/** The snapshot as the separate reads built it. */
const oracle = (organizationId: OrganizationId, planId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const plans = yield* Plans
    const { components: priced, plan } = yield* plans.getPriced(organizationId, planId)
    const keys = yield* sql<{ id: string; key: string }>`
      SELECT id, agent_key AS key FROM credits WHERE organization_id = ${organizationId}
      UNION ALL SELECT id, agent_key FROM outcomes WHERE organization_id = ${organizationId}
      UNION ALL SELECT id, agent_key FROM units WHERE organization_id = ${organizationId}
      UNION ALL SELECT id, ref_id FROM composites WHERE organization_id = ${organizationId}`
    const steps = yield* sql<{ outcomeId: string; id: string; name: string; agentKey: string }>`
      SELECT outcome_id, id, name, agent_key FROM outcome_steps
      WHERE organization_id = ${organizationId} AND removed_at IS NULL ORDER BY position`
    const covers = yield* sql<{ compositeId: string; kind: string; targetId: string }>`
      SELECT composite_id, kind, target_id FROM composite_entitlements WHERE organization_id = ${organizationId} ORDER BY position`
    const components = priced.map(({ charge, component, price }): SnapshotComponent => {
      const targetId = targetIdOf(component) || null
      const coverOf = (kind: string) =>
        covers.filter((cover) => cover.compositeId === targetId && cover.kind === kind).map((cover) => cover.targetId)
      return {
        id: component.id,
        type: component.type,
        billingMode: component.billingMode,
        targetId,
        targetName: component.targetName,
        agentKey: keys.find((row) => row.id === targetId)?.key ?? null,
        quantity: component.type === "WALLET" || component.billingMode === "ARREAR" ? null : component.quantity,
        amount: component.type === "WALLET" && component.billingMode === "ADVANCE" ? component.amount : null,
        rollover: component.rollover,
        ...pricesOf(price),
        charge,
        steps: steps.filter((step) => step.outcomeId === targetId).map(({ agentKey, id, name }) => ({ id, name, agentKey })),
        covers: component.type === "PRICING_METRIC"
          ? { credits: coverOf("CREDIT"), outcomes: coverOf("OUTCOME"), units: coverOf("UNIT") }
          : { credits: [], outcomes: [], units: [] }
      }
    })
    return {
      planId: plan.id,
      name: plan.name,
      description: plan.description,
      billingCycle: plan.billingCycle,
      currencyCode: plan.currencyCode,
      priceAdjustment: plan.priceAdjustment,
      walletFundedArrear: plan.walletFundedArrear,
      cost: plan.cost,
      components
    } satisfies PlanSnapshot
  })

const encoded = (snapshot: PlanSnapshot) => Schema.encodeSync(PlanSnapshot)(snapshot)

let counter = 0
const sold = async (entitlements: Array<unknown>, extra: Record<string, unknown> = {}) => {
  const n = counter++
  const planId = await api().created("/plans", { name: `Plan ${n}`, description: "All kinds", billingCycle: "MONTHLY", entitlements, ...extra }, "plan")
  const customerId = await api().created("/customers", { name: `Buyer ${n}`, email: `buyer${n}@example.com` }, "customer")
  const purchase = await api().post("/purchases", { customerId, planId })
  expect(purchase.status, JSON.stringify(purchase.body)).toBe(201)
  const [row] = await query<{ snapshot: unknown }>(app, "SELECT snapshot FROM purchases WHERE organization_id = $1 AND id = $2", [
    acme.organizationId,
    purchase.body.result.purchase.id
  ])
  const expected = encoded(await app.run(oracle(acme.organizationId as OrganizationId, planId)))
  return { stored: row!.snapshot, expected, purchase: purchase.body.result.purchase }
}

describe("the snapshot a purchase freezes", () => {
  it("is the plan as priced, with every target's key, an outcome's live steps and a composite's entitlements", async () => {
    const creditId = await api().created("/credits", { name: "Chat", agentKey: "snap-chat", marginPercent: 25, modelBundle: gpt4oBundle }, "credit")
    const outcomeId = await api().created("/outcomes", {
      name: "Report",
      agentKey: "snap-report",
      marginPercent: 100,
      steps: [
        { name: "Draft", agentKey: "snap-draft", modelBundle: gpt4oBundle },
        { name: "Write", agentKey: "snap-write", modelBundle: gpt4oBundle },
        { name: "Check", agentKey: "snap-check", modelBundle: gpt4oBundle }
      ]
    }, "outcome")
    const outcome = await api().get(`/outcomes/${outcomeId}`)
    const steps = outcome.body.result.outcome.steps as Array<{ id: string; name: string; agentKey: string }>
    // One step removed: the snapshot keeps the live ones, in order.
    const patched = await api().patch(`/outcomes/${outcomeId}`, {
      steps: steps.filter((step) => step.name !== "Write").map(({ agentKey, id, name }) => ({ id, name, agentKey, modelBundle: gpt4oBundle }))
    })
    expect(patched.status, JSON.stringify(patched.body)).toBe(200)
    const unitId = await api().created("/units", {
      name: "Calls",
      agentKey: "snap-calls",
      pricingType: "SLAB",
      tiers: [{ upTo: 10, price: 1.5 }, { upTo: null, price: 0.5 }]
    }, "unit")
    const compositeId = await api().created("/composites", {
      name: "Bundle",
      refId: "snap-bundle",
      price: 2,
      entitlements: { unitIds: [unitId], creditIds: [creditId] }
    }, "composite")
    const all = [
      { type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 10, rollover: true },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId, quantity: 3 },
      { type: "UNIT", billingMode: "ARREAR", unitId },
      { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId, quantity: 2 }
    ]
    // Without a wallet the purchase is written in one statement; with one, in the transaction of before.
    for (const entitlements of [all, [...all, { type: "WALLET", billingMode: "ADVANCE", amount: 5.25 }]]) {
      const { expected, purchase, stored } = await sold(entitlements, { priceAdjustment: 0.1 })
      expect(stored).toEqual(expected)
      expect((stored as any).components.find((c: any) => c.type === "OUTCOME").steps.map((s: any) => s.name)).toEqual(["Draft", "Check"])
      expect((stored as any).components.find((c: any) => c.type === "PRICING_METRIC").covers).toEqual({
        credits: [creditId],
        outcomes: [],
        units: [unitId]
      })
      expect(purchase).toMatchObject({ status: "ACTIVE", components: expect.any(Array) })
    }
  })
})
