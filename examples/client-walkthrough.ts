/**
 * The operator's day of the README, done by a product through the typed client
 * (`@billing/client`, client/): the catalogue, a customer, a webhook endpoint,
 * a purchase, signals, balances, invoices and a payment. Every call is typed
 * from the OpenAPI document; a refusal is a `BillingApiError` with its status
 * and code. test/typed-client.test.ts runs it against a real server.
 *
 *   BILLING_URL=http://127.0.0.1:8787 BILLING_API_KEY=sk_... npx tsx examples/client-walkthrough.ts
 *
 * (From another project: `npm install /path/to/billing/client` after `npm ci`
 * here, then `import { createBillingClient } from "@billing/client"`.)
 */
import { pathToFileURL } from "node:url"
import { BillingApiError, createBillingClient } from "../client/src/index.ts"

export interface WalkthroughOptions {
  readonly baseUrl: string
  readonly apiKey: string
  /** Runs the month end (`billing cycle run --now ...` for an operator); the walkthrough waits for its invoices. */
  readonly monthEnd?: () => Promise<void>
  /** Prices the queued signals (`billing worker --once`), when no worker loop runs. */
  readonly priceSignals?: () => Promise<void>
}

export const walkthrough = async ({ baseUrl, apiKey, monthEnd, priceSignals }: WalkthroughOptions) => {
  const billing = createBillingClient({ baseUrl, apiKey })

  // Morning: the catalogue (a unit priced per page, a plan), a customer and a webhook endpoint.
  const { unit } = await billing.units.create({ name: "Page", agentKey: "page", pricingType: "FLAT", flatPrice: 0.05, tiers: [] })
  const { plan } = await billing.plans.create({
    name: "Basic",
    entitlements: [
      { type: "WALLET", billingMode: "ADVANCE", amount: 30 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
    ]
  })
  const { customer } = await billing.customers.create({ name: "Ann", email: "ann@example.com", externalId: "ann" })
  const { endpoint } = await billing.webhooks.create({ url: "http://127.0.0.1:4000/hooks", threshold: 10 })

  // Sell the plan: the cycle starts, the wallet is granted 30 and the PLAN invoice is issued.
  const { purchase } = await billing.purchases.create({ externalId: "ann", planId: plan.id })

  // The product sends signals (each gets an idempotency key from the client, so a retry never counts twice).
  const first = await billing.signals.unit({ externalId: "ann", agentKey: "page", quantity: 3 })
  const batch = await billing.signals.batch({
    signals: [{ type: "unit", externalId: "ann", agentKey: "page", quantity: 5 }]
  })
  await priceSignals?.()
  const balances = await billing.balances.balancesByExternalId({ externalId: "ann" })

  // A refusal is typed: status and code (statusDetail.code), never a string to parse.
  let refusal: { readonly status: number; readonly code: string | undefined } | undefined
  try {
    await billing.customers.create({ name: "Ann again", email: "ann@example.com", externalId: "ann" })
  } catch (error) {
    if (!(error instanceof BillingApiError)) throw error
    refusal = { status: error.status, code: error.code }
  }

  // Month end: the cycle closes (the operator's job), and the invoices are read and paid.
  await monthEnd?.()
  const { invoices } = await billing.invoices.list({ customerId: customer.id })
  const planInvoice = invoices.find((invoice) => invoice.kind === "PLAN")
  if (planInvoice === undefined) throw new Error("the purchase issued no PLAN invoice")
  const paid = await billing.invoices.recordPayment({ id: planInvoice.id }, { reference: "bank-2026-001", idempotencyKey: `pay-${planInvoice.id}` })
  const { payments } = await billing.invoices.listPayments({ customerId: customer.id })

  return { unit, plan, customer, endpoint, purchase, first, batch, balances, refusal, invoices, paid, payments }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await walkthrough({
    baseUrl: process.env.BILLING_URL ?? "http://127.0.0.1:8787",
    apiKey: process.env.BILLING_API_KEY ?? ""
  })
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
}
