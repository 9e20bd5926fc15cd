/**
 * A customer with something to see, shared by the customer-page tests: a plan
 * of prepaid credits, a prepaid unit allowance and a pay-as-you-go unit, a
 * tax, usage priced by the worker, an OPEN plan invoice with a due date,
 * payment instructions and a billing contact, and a second customer (and
 * organisation) whose data must stay out of reach. `holdAndCorrect` adds what
 * is held and a correction.
 */
import { Effect } from "effect"
import { expect } from "vitest"
import { Organizations } from "../src/organizations/Organizations.ts"
import { signToken, type TokenKind } from "../src/links/SignedToken.ts"
import { SigningKeys } from "../src/links/SigningKeys.ts"
import { buy, type Client, clientOf, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import type { Tenant, TestApp } from "./support/TestApp.ts"
import type { OrganizationId } from "../src/ids.ts"

export const PAYMENT_INSTRUCTIONS = "Bank transfer to IBAN GB33 BUKB 2020 1555 5555 55\nReference: your invoice number"
export const BILLING_CONTACT = { email: "accounts@acme.example", addressLines: ["Acme AI Ltd", "1 Long Lane", "London EC1A 7HW"] }

export interface PortalWorld {
  readonly origin: string
  readonly acme: Tenant
  readonly api: Client
  readonly plan: { readonly id: string; readonly name: string; readonly cost: number }
  readonly customer: { readonly id: string; readonly name: string }
  readonly invoice: { readonly id: string; readonly number: string; readonly total: number }
  /** Another customer of the same organisation, with an invoice of its own. */
  readonly neighbour: { readonly id: string; readonly invoiceId: string }
  /** A customer of another organisation, with an invoice. */
  readonly stranger: { readonly tenant: Tenant; readonly id: string; readonly invoiceId: string }
}

export const portalTokenOf = async (api: Client, customerId: string) =>
  ok(await api.post("/portal/token", { customerId })) as { token: string; url: string; expiresAt: string }

export const makePortalWorld = async (
  app: TestApp,
  customerName = "Jo's Robots",
  options: { readonly paymentTermsDays?: number } = {}
): Promise<PortalWorld> => {
  const origin = new URL(app.baseUrl).origin
  const acme = await app.tenant("Acme AI")
  const api = clientOf(app, acme)
  await app.run(Effect.flatMap(Organizations, (organizations) =>
    organizations.updateSettings(acme.organizationId, {
      paymentInstructions: PAYMENT_INSTRUCTIONS,
      billingContact: BILLING_CONTACT,
      paymentTermsDays: options.paymentTermsDays ?? 14
    })))
  ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
  const credit = ok(await api.post("/credits", {
    name: "Assistant credits",
    agentKey: "chat",
    marginPercent: 100,
    modelBundle: [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }]
  }), 201).credit
  const seats = ok(await api.post("/units", { name: "Seats", agentKey: "seats", pricingType: "FLAT", flatPrice: 12.5 }), 201).unit
  const pages = ok(await api.post("/units", { name: "Pages parsed", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.02 }), 201).unit
  const plan = ok(await api.post("/plans", { name: "Team", billingCycle: "MONTHLY", entitlements: [
    { type: "WALLET", billingMode: "ADVANCE", amount: 20 },
    { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 2000 },
    { type: "UNIT", billingMode: "ADVANCE", unitId: seats.id, quantity: 3 },
    { type: "UNIT", billingMode: "ARREAR", unitId: pages.id }
  ] }), 201).plan
  const customer = await makeCustomer(api, { name: customerName, email: "billing@josrobots.example" })
  await buy(api, customer.id, plan.id)
  for (let i = 0; i < 6; i++) {
    ok(await api.post("/signal/credit", {
      customerId: customer.id,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 40_000 + i * 9_000, outputTokens: 12_000 + i * 3_000 }
    }), 202)
    ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: pages.agentKey, quantity: 40 + i * 15 }), 202)
  }
  ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: seats.agentKey, quantity: 1 }), 202)
  await drain(app)
  const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
  expect(invoice.status).toBe("OPEN")

  const neighbour = await makeCustomer(api, { name: "Neighbour Ltd" })
  await buy(api, neighbour.id, plan.id)
  const [neighbourInvoice] = ok(await api.get(`/invoices?customerId=${neighbour.id}`)).invoices

  const other = await app.tenant("Other Org")
  const otherApi = clientOf(app, other)
  const otherUnit = await makeUnit(otherApi, { flatPrice: 7 })
  const otherPlan = await makePlan(app, other, [{ type: "UNIT", billingMode: "ADVANCE", unitId: otherUnit.id, quantity: 1 }])
  const stranger = await makeCustomer(otherApi)
  await buy(otherApi, stranger.id, otherPlan.id)
  const [strangerInvoice] = ok(await otherApi.get(`/invoices?customerId=${stranger.id}`)).invoices

  return {
    origin,
    acme,
    api,
    plan,
    customer: { id: customer.id, name: customer.name },
    invoice: { id: invoice.id, number: invoice.number, total: invoice.total },
    neighbour: { id: neighbour.id, invoiceId: neighbourInvoice.id },
    stranger: { tenant: other, id: stranger.id, invoiceId: strangerInvoice.id }
  }
}

/**
 * What the portal shows as held and corrected: a hold of 0.2 of the plan's
 * credits and one of $1.50 of the wallet (`POST /entitlements/check` with
 * `reserve`, for an hour), and the customer's latest "Pages parsed" row taken
 * back (`POST /signal/usage-log/{id}/reverse`). The reversing row is the
 * customer's newest, so it is among the portal's latest usage.
 */
export const holdAndCorrect = async (world: PortalWorld) => {
  const call = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
  const credit = ok(await world.api.post("/entitlements/check", {
    customerId: world.customer.id, meter: "CREDIT", agentKey: "chat", usage: call, reserve: { quantity: 0.2, ttlSeconds: 3600 }
  }))
  expect(credit).toMatchObject({ allowed: true, reservationId: expect.stringMatching(/^rsv_/) })
  const wallet = ok(await world.api.post("/entitlements/check", {
    customerId: world.customer.id, meter: "WALLET", usage: call, reserve: { amount: 1.5, ttlSeconds: 3600 }
  }))
  expect(wallet).toMatchObject({ allowed: true, reservationId: expect.stringMatching(/^rsv_/) })
  const rows = ok(await world.api.get(`/signal/usage-log?customerId=${world.customer.id}&limit=200`)).usageLogs as Array<{
    id: string
    meter: string
    agentKey: string | null
    customerCost: number
  }>
  const pages = rows.filter((row) => row.meter === "UNIT" && row.agentKey === "pages").at(-1)!
  const reversal = ok(await world.api.post(`/signal/usage-log/${pages.id}/reverse`, { reason: "counted twice" })) as {
    id: string
    customerCost: number
  }
  return { reversed: pages, reversal }
}

/** A token signed with `organizationId`'s real secret, with whatever claims a test needs (an expired one). */
export const signedWith = (app: TestApp, organizationId: OrganizationId, kind: TokenKind, claims: { org: string; exp: number; [key: string]: unknown }) =>
  app.run(Effect.map(Effect.flatMap(SigningKeys, (keys) => keys.secretOf(organizationId)), (secret) => signToken(secret, kind, claims)))

/** The last character of a token's signature changed. */
export const tampered = (token: string) => `${token.slice(0, -1)}${token.endsWith("0") ? "1" : "0"}`
