/**
 * `billing seed` and `billing fixtures load`, run through the real bin; what
 * they made is checked over the HTTP API with the workspace's own key.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { verifyWebhookSignature } from "../src/index.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { type Receiver, startReceiver } from "./webhooks-helpers.ts"

const CLI_TEST_TIMEOUT = 600_000

let app: TestApp
let hook: Receiver
let dir: string

beforeAll(async () => {
  app = await startTestApp()
  hook = await startReceiver()
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "fixtures-"))
})
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  await hook.close()
  await app.close()
})

const get = (key: string, url: string) => app.request("GET", url, { key })

describe("billing seed", () => {
  it("builds a demo workspace that the API serves, with a webhook endpoint that gets its wallet events", async () => {
    const seeded = await app.cli(["seed", "--name", "Demo", "--webhook-url", hook.url, "--json"])
    expect(seeded.stderr).toBe("")
    expect(seeded.code).toBe(0)
    const { organization, apiKey, records, created, existing } = seeded.json
    expect(organization).toEqual({ id: expect.stringMatching(/^org_/), name: "Demo" })
    expect(apiKey).toMatch(/^sk_/)
    expect(existing).toBe(0)
    expect(created).toBe(records.length)
    const kinds = records.map((r: any) => r.kind)
    for (const kind of ["model", "credit", "outcome", "unit", "composite", "plan", "customer", "purchase", "webhook"]) {
      expect(kinds).toContain(kind)
    }

    const credits = (await get(apiKey, "/credits")).body.result.credits
    expect(credits.map((c: any) => c.agentKey).sort()).toEqual(["research-agent", "support-agent"])
    const outcomes = (await get(apiKey, "/outcomes")).body.result.outcomes
    expect(outcomes).toHaveLength(1)
    const outcome = (await get(apiKey, `/outcomes/${outcomes[0].id}`)).body.result.outcome
    expect(outcome.steps.map((s: any) => s.agentKey)).toEqual(["ticket-triage", "ticket-draft", "ticket-review"])
    const units = (await get(apiKey, "/units")).body.result.units
    expect(units.map((u: any) => u.pricingType).sort()).toEqual(["FLAT", "SLAB", "VOLUME"])
    const composites = (await get(apiKey, "/composites")).body.result.composites
    expect(composites.map((c: any) => c.refId)).toEqual(["onboarding"])
    expect(composites[0].entitlements.credits).toHaveLength(2)
    const plans = (await get(apiKey, "/plans")).body.result.plans
    expect(plans.map((p: any) => p.name)).toEqual(["Starter", "Growth"])
    const customers = (await get(apiKey, "/customers")).body.result.customers
    expect(customers.map((c: any) => c.externalId).sort()).toEqual(["contoso", "fabrikam", "northwind"])
    const plan = (await get(apiKey, "/customers/ext/contoso/plan")).body.result.plan
    expect(plan).toMatchObject({ planName: "Growth", status: "ACTIVE" })
    const balances = (await get(apiKey, "/customers/ext/contoso/balances")).body.result
    expect(balances.wallet.balance).toBe(200)

    const webhook = records.find((r: any) => r.kind === "webhook")
    expect(webhook).toMatchObject({ key: hook.url, status: "created", secret: expect.stringMatching(/^whsec_/) })

    const worker = await app.cli(["worker", "--once", "--json"], { BILLING_WEBHOOK_RETRY_SCHEDULE: "0" })
    expect(worker.code).toBe(0)
    const events = hook.received.map((r) => JSON.parse(r.body))
    const updates = events.filter((e) => e.event_type === "wallet.balance.update")
    expect(updates.map((e) => e.data.current_balance).sort((a, b) => a - b)).toEqual([50, 50, 200])
    for (const update of updates) expect(update.data.source).toBe("PURCHASE")
    for (const request of hook.received) {
      expect(verifyWebhookSignature(webhook.secret, request.headers["x-service-signature"] as string, request.body)).toBe(true)
    }
  }, CLI_TEST_TIMEOUT)

  it("refuses a bad webhook url and makes nothing", async () => {
    const organizations = () => app.run(Effect.flatMap(Organizations, (o) => o.list))
    const before = (await organizations()).length
    const result = await app.cli(["seed", "--webhook-url", "nope", "--json"])
    expect(result.code).not.toBe(0)
    expect(result.stderr).toMatch(/webhook url/)
    expect(await organizations()).toHaveLength(before)
  }, CLI_TEST_TIMEOUT)
})

describe("billing fixtures load", () => {
  let tenant: Tenant
  const load = (file: string) => app.cli(["fixtures", "load", file, "--json"], { BILLING_ORG: tenant.organizationId })

  const yamlFile = () => {
    const file = path.join(dir, "workspace.yaml")
    fs.writeFileSync(
      file,
      `
credits:
  - name: Writer
    agentKey: writer
    marginPercent: 20
    modelBundle:
      - { modelId: gpt-4o-mini, averageTokensPerLLMCall: 1000, input: 50, output: 50, cache: 0, cacheWrite: 0 }
units:
  - { name: Page, agentKey: page, pricingType: FLAT, flatPrice: 0.1 }
plans:
  - name: Basic
    entitlements:
      - { type: WALLET, billingMode: ADVANCE, amount: 30 }
      - { type: CREDIT, billingMode: ADVANCE, credit: writer, quantity: 100 }
      - { type: UNIT, billingMode: ARREAR, unit: page }
customers:
  - { name: Ann, email: ann@example.com, externalId: ann }
  - { name: Ben, email: ben@example.com, externalId: ben }
purchases:
  - { externalId: ann, plan: Basic }
`
    )
    return file
  }

  // A workspace per test: each one loads what it refers to.
  beforeEach(async () => {
    tenant = await app.tenant("Fixtures")
  })

  it("loads a YAML file, and loading it again changes nothing", async () => {
    const file = yamlFile()
    const first = await load(file)
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    expect(first.json).toMatchObject({ created: 6, existing: 0 })
    expect(first.json.records.map((r: any) => `${r.kind}:${r.key}`)).toEqual([
      "credit:writer",
      "unit:page",
      "plan:Basic",
      "customer:ann",
      "customer:ben",
      "purchase:ann/Basic"
    ])

    const second = await load(file)
    expect(second.code).toBe(0)
    expect(second.json).toMatchObject({ created: 0, existing: 6 })
    expect(second.json.records.map((r: any) => r.id)).toEqual(first.json.records.map((r: any) => r.id))

    expect((await get(tenant.apiKey, "/credits")).body.result.credits).toHaveLength(1)
    expect((await get(tenant.apiKey, "/plans")).body.result.plans).toHaveLength(1)
    expect((await get(tenant.apiKey, "/customers")).body.result.customers).toHaveLength(2)
    expect((await get(tenant.apiKey, "/customers/ext/ann/plan")).body.result.plan).toMatchObject({ planName: "Basic" })
    expect((await get(tenant.apiKey, "/customers/ext/ann/balances")).body.result.wallet.balance).toBe(30)
    expect((await get(tenant.apiKey, "/customers/ext/ben/plan")).body.result.plan).toBeNull()
  }, CLI_TEST_TIMEOUT)

  it("loads JSON that refers to records already in the workspace", async () => {
    expect((await load(yamlFile())).code).toBe(0)
    const file = path.join(dir, "more.json")
    fs.writeFileSync(
      file,
      JSON.stringify({
        composites: [{ name: "Article", refId: "article", price: 3, entitlements: { credits: ["writer"], units: ["page"] } }],
        purchases: [{ externalId: "ben", plan: "Basic" }]
      })
    )
    const result = await load(file)
    expect(result.stderr).toBe("")
    expect(result.json).toMatchObject({ created: 2, existing: 0 })
    const composites = (await get(tenant.apiKey, "/composites")).body.result.composites
    expect(composites.map((c: any) => c.refId)).toEqual(["article"])
    expect((await get(tenant.apiKey, "/customers/ext/ben/plan")).body.result.plan).toMatchObject({ planName: "Basic" })
  }, CLI_TEST_TIMEOUT)

  it("refuses a bad document before writing anything", async () => {
    const file = path.join(dir, "bad.json")
    fs.writeFileSync(
      file,
      JSON.stringify({
        customers: [{ name: "Cy", email: "cy@example.com", externalId: "cy" }],
        units: [{ name: "Bad", agentKey: "Not Valid", pricingType: "FLAT", flatPrice: 1 }]
      })
    )
    const bad = await load(file)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/agentKey/)
    expect((await get(tenant.apiKey, "/customers/ext/cy")).status).toBe(404)

    fs.writeFileSync(file, JSON.stringify({ plans: [{ name: "X", entitlements: [] }], extra: 1 }))
    const unknownField = await load(file)
    expect(unknownField.code).not.toBe(0)
    expect(unknownField.stderr).toMatch(/extra/)

    fs.writeFileSync(file, JSON.stringify({ composites: [{ name: "Y", refId: "y", price: 1, entitlements: { credits: ["ghost"] } }] }))
    const missing = await load(file)
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toMatch(/no active credit with key ghost/)

    const noFile = await load(path.join(dir, "absent.yaml"))
    expect(noFile.code).not.toBe(0)
    expect(noFile.stderr).toMatch(/cannot read/)
  }, CLI_TEST_TIMEOUT)
})
