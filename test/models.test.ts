import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Models } from "../src/models/Models.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

const cliAs = (tenant: Tenant) => (...args: Array<string>) =>
  app.cli([...args, "--org", tenant.organizationId, "--json"])

const createCredit = (tenant: Tenant, modelBundle: unknown) =>
  app.request("POST", "/credits", {
    key: tenant.apiKey,
    body: { name: "Credit", agentKey: `k.${Math.random().toString(36).slice(2, 10)}`, marginPercent: 0, modelBundle }
  })

/** What `ratesFor` answers: the models' ids, or the failure's status and message. */
const ratesFor = (tenant: Tenant, modelIds: Array<string>) =>
  app.run(
    Effect.flatMap(Models, (models) => models.ratesFor(tenant.organizationId, modelIds)).pipe(
      Effect.map((found) => ({ ids: [...found.keys()].sort() })),
      Effect.catchAll((error) => Effect.succeed({ error: error._tag, message: error.message }))
    )
  )

// Each CLI call starts a process of its own: slow on a busy machine.
describe("billing model", { timeout: 240_000 }, () => {
  it("lists the built-in models of a new workspace, enabled, with their rates", async () => {
    const tenant = await app.tenant("Builtins")
    const listed = await cliAs(tenant)("model", "list")
    expect(listed.stderr).toBe("")
    expect(listed.code).toBe(0)
    expect(listed.json.models).toHaveLength(13)
    expect(listed.json.models.find((m: any) => m.id === "claude-sonnet-4")).toEqual({
      id: "claude-sonnet-4",
      name: "Claude Sonnet 4",
      input: 3,
      output: 15,
      cacheRead: 0.3,
      cacheWrite: 3.75,
      enabled: true,
      builtIn: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String)
    })
    expect(listed.json.models.find((m: any) => m.id === "mistral-large")).toMatchObject({ cacheRead: null, cacheWrite: null })
    expect(listed.json.models.every((m: any) => m.enabled)).toBe(true)

    const table = await app.cli(["model", "list", "--org", tenant.organizationId])
    expect(table.code).toBe(0)
    expect(table.stdout).toContain("gpt-4o-mini")
    expect(table.stdout).toContain("13 model(s)")
  })

  it("adds a workspace model that credits are then priced with, exactly", async () => {
    const tenant = await app.tenant("Custom")
    const run = cliAs(tenant)
    const added = await run(
      "model", "set", "--id", "acme-llm", "--name", "Acme LLM", "--input", "0.7", "--output", "2.1", "--cache-read", "0.07"
    )
    expect(added.stderr).toBe("")
    expect(added.json.model).toMatchObject({
      id: "acme-llm",
      name: "Acme LLM",
      input: 0.7,
      output: 2.1,
      cacheRead: 0.07,
      cacheWrite: null,
      enabled: true,
      builtIn: false
    })
    // 3000 * (50*0.7 + 40*2.1 + 10*0.07) / 100 / 1e6 = 3000 * 119.7 / 1e8 = 0.003591
    const credit = await createCredit(tenant, [
      { modelId: "acme-llm", averageTokensPerLLMCall: 3000, input: 50, output: 40, cache: 10, cacheWrite: 0 }
    ])
    expect(credit.status).toBe(201)
    expect(credit.body.result.credit).toMatchObject({ basePrice: 0.003591, tokensPerCredit: 3000 })
    expect(credit.body.result.credit.modelBundle[0].modelName).toBe("Acme LLM")

    // Another workspace does not have it.
    const stranger = await app.tenant("Stranger")
    const refused = await createCredit(stranger, [
      { modelId: "acme-llm", averageTokensPerLLMCall: 3000, input: 50, output: 40, cache: 10, cacheWrite: 0 }
    ])
    expect(refused.status).toBe(422)
  })

  it("changes only the given fields of an existing model, and none removes a cache rate", async () => {
    const tenant = await app.tenant("Changer")
    const changed = await cliAs(tenant)("model", "set", "--id", "claude-3-5-haiku", "--output", "5", "--cache-write", "none")
    expect(changed.stderr).toBe("")
    expect(changed.json.model).toMatchObject({
      id: "claude-3-5-haiku",
      name: "Claude 3.5 Haiku",
      input: 0.8,
      output: 5,
      cacheRead: 0.08,
      cacheWrite: null,
      builtIn: true
    })
    // Without a cache-write rate, cacheWrite weights are refused.
    const refused = await createCredit(tenant, [
      { modelId: "claude-3-5-haiku", averageTokensPerLLMCall: 100, input: 50, output: 40, cache: 0, cacheWrite: 10 }
    ])
    expect(refused.status).toBe(400)
  })

  it("refuses bad input with a message and a non-zero exit, changing nothing", async () => {
    const tenant = await app.tenant("Refusals")
    const run = cliAs(tenant)
    const incomplete = await run("model", "set", "--id", "new-model", "--name", "New")
    expect(incomplete.code).not.toBe(0)
    expect(incomplete.stderr).toContain("input and output rates are required")
    expect(incomplete.stdout).toBe("")
    const negative = await run("model", "set", "--id", "gpt-4o", "--input", "-1")
    expect(negative.code).not.toBe(0)
    expect(negative.stderr).toContain("input")
    const missing = await run("model", "disable", "no-such-model")
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toContain("not found")
    const models = await run("model", "list")
    expect(models.json.models.map((m: any) => m.id)).not.toContain("new-model")
    expect(models.json.models.find((m: any) => m.id === "gpt-4o").input).toBe(2.5)
  })

  it("disables and enables a model for pricing in that workspace only", async () => {
    const tenant = await app.tenant("Toggler")
    const neighbour = await app.tenant("Neighbour")
    const disabled = await cliAs(tenant)("model", "disable", "o3")
    expect(disabled.json.model).toMatchObject({ id: "o3", enabled: false })
    expect(await ratesFor(tenant, ["gpt-4o", "o3"])).toEqual({
      error: "ModelNotEnabled",
      message: "model o3 is not enabled in this workspace"
    })
    expect(await ratesFor(neighbour, ["gpt-4o", "o3"])).toEqual({ ids: ["gpt-4o", "o3"] })
    expect(await ratesFor(tenant, ["gpt-4o", "unknown-model"])).toMatchObject({ error: "ModelNotEnabled" })

    const enabled = await cliAs(tenant)("model", "enable", "o3")
    expect(enabled.json.model).toMatchObject({ id: "o3", enabled: true })
    expect(await ratesFor(tenant, ["o3"])).toEqual({ ids: ["o3"] })
  })

  it("needs an organisation", async () => {
    const result = await app.cli(["model", "list", "--json"], { BILLING_ORG: "" })
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain("organisation")
    const unknown = await app.cli(["model", "list", "--org", "org_missing", "--json"])
    expect(unknown.code).not.toBe(0)
  })
})
