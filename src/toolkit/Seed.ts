/**
 * `billing seed`: a new demo workspace with something of everything, so that a
 * person can try the API, the CLI and webhooks at once. It is a fixture
 * document like any other, loaded into a fresh organisation.
 */
import { Effect, ParseResult, Schema } from "effect"
import { InvalidWebhookUrl } from "../errors.ts"
import { describeIssues } from "../schema.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { WebhookUrl } from "../webhooks/Webhook.ts"
import { FixtureDocument, type FixtureDocumentInput, loadFixtures } from "./Fixtures.ts"

const bundle = (modelId: string, averageTokensPerLLMCall: number, input: number, output: number, cache = 0) => ({
  modelId,
  averageTokensPerLLMCall,
  input,
  output,
  cache,
  cacheWrite: 0
})

export const demoDocument = (webhookUrl: string): FixtureDocumentInput => ({
  models: [{ id: "acme-small", name: "Acme Small (self-hosted)", input: 0.1, output: 0.3, cacheRead: null, cacheWrite: null }],
  credits: [
    {
      name: "Support agent",
      agentKey: "support-agent",
      description: "Answers customer questions",
      marginPercent: 40,
      modelBundle: [bundle("gpt-4o-mini", 2000, 70, 20, 10), bundle("acme-small", 500, 80, 20)]
    },
    {
      name: "Research agent",
      agentKey: "research-agent",
      marginPercent: 25,
      modelBundle: [bundle("claude-sonnet-4", 8000, 60, 30, 10)]
    }
  ],
  outcomes: [
    {
      name: "Resolved ticket",
      agentKey: "ticket-resolved",
      description: "A support ticket taken from triage to a reviewed reply",
      marginPercent: 50,
      steps: [
        { name: "Triage", agentKey: "ticket-triage", modelBundle: [bundle("gpt-4o-mini", 1000, 80, 20)] },
        { name: "Draft reply", agentKey: "ticket-draft", modelBundle: [bundle("claude-sonnet-4", 4000, 60, 40)] },
        { name: "Review", agentKey: "ticket-review", modelBundle: [bundle("gpt-4o", 1500, 70, 30)] }
      ]
    }
  ],
  units: [
    { name: "Document page", agentKey: "document-page", pricingType: "FLAT", flatPrice: 0.05 },
    {
      name: "API call",
      agentKey: "api-call",
      pricingType: "SLAB",
      tiers: [{ upTo: 1000, price: 0.01 }, { upTo: 10000, price: 0.005 }, { upTo: null, price: 0.002 }]
    },
    { name: "Seat", agentKey: "seat", pricingType: "VOLUME", tiers: [{ upTo: 10, price: 20 }, { upTo: null, price: 15 }] }
  ],
  composites: [
    {
      name: "Onboarding",
      refId: "onboarding",
      description: "One customer onboarding: research, support and the pages it produces",
      price: 25,
      entitlements: { credits: ["research-agent", "support-agent"], units: ["document-page"] }
    }
  ],
  plans: [
    {
      name: "Starter",
      description: "Wallet-funded usage with support credits",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "WALLET", billingMode: "ADVANCE", amount: 50 },
        { type: "CREDIT", billingMode: "ADVANCE", credit: "support-agent", quantity: 1000 },
        { type: "UNIT", billingMode: "ARREAR", unit: "api-call" }
      ]
    },
    {
      name: "Growth",
      description: "Everything in Starter, plus outcomes and onboarding",
      billingCycle: "MONTHLY",
      priceAdjustment: -20,
      entitlements: [
        { type: "WALLET", billingMode: "ADVANCE", amount: 200 },
        { type: "CREDIT", billingMode: "ADVANCE", credit: "support-agent", quantity: 5000, rollover: true },
        { type: "CREDIT", billingMode: "ADVANCE", credit: "research-agent", quantity: 500 },
        { type: "OUTCOME", billingMode: "ADVANCE", outcome: "ticket-resolved", quantity: 100 },
        { type: "PRICING_METRIC", billingMode: "ADVANCE", composite: "onboarding", quantity: 10 },
        { type: "UNIT", billingMode: "ARREAR", unit: "seat" }
      ]
    }
  ],
  customers: [
    { name: "Northwind Traders", email: "billing@northwind.example", externalId: "northwind" },
    { name: "Contoso Ltd", email: "ap@contoso.example", externalId: "contoso", city: "Lisbon", country: "PT" },
    { name: "Fabrikam Inc", email: "finance@fabrikam.example", externalId: "fabrikam" }
  ],
  purchases: [
    { externalId: "northwind", plan: "Starter" },
    { externalId: "contoso", plan: "Growth" },
    { externalId: "fabrikam", plan: "Starter" }
  ],
  webhooks: [{ url: webhookUrl, threshold: 10 }]
})

export const DEFAULT_DEMO_WEBHOOK_URL = "http://127.0.0.1:4000/hooks"

export const seedWorkspace = (options: { readonly name: string; readonly webhookUrl: string }) =>
  Effect.gen(function*() {
    yield* Effect.mapError(
      Schema.decodeUnknown(WebhookUrl)(options.webhookUrl),
      (error) =>
        new InvalidWebhookUrl({
          message: `webhook url: ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))}`
        })
    )
    // The demo document is ours: a failure to decode it is a bug, not bad input.
    const document = yield* Effect.orDie(Schema.decodeUnknown(FixtureDocument)(demoDocument(options.webhookUrl)))
    const { organization, apiKey } = yield* Effect.flatMap(Organizations, (organizations) =>
      organizations.create({ name: options.name }))
    const records = yield* loadFixtures(organization.id, document)
    return { organization, apiKey, records }
  })
