/**
 * Shared by the billing test files: an HTTP client per tenant, catalogue and
 * plan builders that go through the real routes, and the cycle job at a
 * chosen instant (the same job `billing worker --once --now` runs).
 */
import { Duration, Effect } from "effect"
import { billingCycleJob } from "../src/billing/CycleJob.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { type Client, clientOf, ok } from "./support/Http.ts"
import { expect, onTestFinished } from "vitest"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

export { type Client, clientOf, expectError, ok } from "./support/Http.ts"

let counter = 0
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${counter++}`

/**
 * A credit on gpt-4o (2.5 / 10 USD per million tokens): 1000 tokens half input,
 * half output is basePrice 0.00625; with margin 100 pricePerCredit is 0.0125.
 */
export const makeCredit = async (client: Client, agentKey = unique("credit")) =>
  ok(
    await client.post("/credits", {
      name: `Credit ${agentKey}`,
      agentKey,
      marginPercent: 100,
      modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
    }),
    201
  ).credit

/** A FLAT unit at `flatPrice`, or tiered when `tiers` are given. */
export const makeUnit = async (
  client: Client,
  options: { readonly flatPrice?: number; readonly pricingType?: string; readonly tiers?: Array<unknown> } = {}
) => {
  const agentKey = unique("unit")
  return ok(
    await client.post("/units", {
      name: `Unit ${agentKey}`,
      agentKey,
      pricingType: options.pricingType ?? "FLAT",
      ...(options.tiers ? { tiers: options.tiers } : { flatPrice: options.flatPrice ?? 2 })
    }),
    201
  ).unit
}

/** An outcome of one step on gpt-4o; pricePerOutcome 0.0125 (margin 100). */
export const makeOutcome = async (client: Client) => {
  const agentKey = unique("outcome")
  return ok(
    await client.post("/outcomes", {
      name: `Outcome ${agentKey}`,
      agentKey,
      marginPercent: 100,
      steps: [{
        name: "draft",
        agentKey: `${agentKey}-step`,
        modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
      }]
    }),
    201
  ).outcome
}

export const makeComposite = async (client: Client, price: number, creditIds: Array<string>) => {
  const refId = unique("composite")
  return ok(
    await client.post("/composites", { name: `Composite ${refId}`, refId, price, entitlements: { creditIds } }),
    201
  ).composite
}

export interface PlanComponentInput {
  readonly type: "WALLET" | "CREDIT" | "OUTCOME" | "UNIT" | "PRICING_METRIC"
  readonly billingMode: "ADVANCE" | "ARREAR"
  readonly creditId?: string
  readonly outcomeId?: string
  readonly unitId?: string
  readonly compositeId?: string
  readonly quantity?: number
  readonly amount?: number
  readonly rollover?: boolean
}

/** A plan created through `POST /plans` of `tenant`. */
export const makePlan = async (
  app: TestApp,
  tenant: Tenant,
  entitlements: ReadonlyArray<PlanComponentInput>,
  extra: { readonly priceAdjustment?: number; readonly walletFundedArrear?: boolean } = {}
): Promise<{ readonly id: string; readonly name: string; readonly cost: number }> =>
  ok(
    await clientOf(app, tenant).post("/plans", { name: unique("Plan"), billingCycle: "MONTHLY", entitlements, ...extra }),
    201
  ).plan

export const makeCustomer = async (client: Client, extra: Record<string, unknown> = {}) => {
  const name = unique("Customer")
  return ok(await client.post("/customers", { name, email: `${name}@example.com`, ...extra }), 201).customer
}

export const buy = async (client: Client, customerId: string, planId: string, extra: Record<string, unknown> = {}) =>
  ok(await client.post("/purchases", { customerId, planId, ...extra }), 201).purchase

/** Drains the billing cycle job at `now`; the number of purchase steps it took. */
export const runCycles = (app: TestApp, now: Date) =>
  app.run(Effect.flatMap(billingCycleJob, (job) => runWorker([job], { once: true, now, idle: Duration.millis(10) })).pipe(Effect.orDie))

/**
 * A database of the test's own, closed when the test ends, for a test that counts
 * the purchases the cycle job handled: the job renews every organisation's due
 * purchases, so on a database shared with other tests their purchases would be
 * counted too, and the count would depend on which tests ran first.
 */
export const ownTestApp = async (tenantName = "Acme") => {
  const app = await startTestApp({ ownDatabase: true })
  onTestFinished(() => app.close())
  const tenant = await app.tenant(tenantName)
  return { app, tenant, api: clientOf(app, tenant) }
}

/**
 * Runs the cycle job for every purchase due up to one millisecond before `end`
 * and checks that `purchaseId`'s own purchase was left alone. The job renews
 * every organisation's due purchases, so other tests' purchases would otherwise
 * be counted by a run at `end`; after this, a run at `end` handles only the
 * purchases whose cycle ends at that very millisecond: in a test file, the
 * test's own. (A test that runs the job at several far instants needs a
 * database of its own instead: `ownTestApp`.)
 */
export const settleOthersBefore = async (app: TestApp, client: Client, purchaseId: string, end: Date) => {
  const before = ok(await client.get(`/purchases/${purchaseId}`)).purchase
  await runCycles(app, new Date(end.getTime() - 1))
  expect(ok(await client.get(`/purchases/${purchaseId}`)).purchase, "renewed before its cycle ended").toEqual(before)
}
