import { Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Outcomes } from "../src/outcomes/Outcomes.ts"
import { clientOf, expectError } from "./support/Http.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import type { ErrorCode } from "../src/http/ApiErrors.ts"

let app: TestApp
let acme: Tenant
let other: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
})
afterAll(() => app.close())

const as = (tenant: Tenant) => clientOf(app, tenant)

// gpt-4o (2.5 / 10 / 1.25): 1000 * (60*2.5 + 30*10 + 10*1.25) / 1e8 = 0.004625
const gpt4oBundle = [{ modelId: "gpt-4o", averageTokensPerLLMCall: 1000, input: 60, output: 30, cache: 10, cacheWrite: 0 }]
// claude-sonnet-4 (3 / 15 / 0.3 / 3.75): 2000 * (50*3 + 20*15 + 20*0.3 + 10*3.75) / 1e8 = 0.00987
const sonnetBundle = [
  { modelId: "claude-sonnet-4", averageTokensPerLLMCall: 2000, input: 50, output: 20, cache: 20, cacheWrite: 10 }
]
// claude-3-5-haiku (0.8 / 4): 4000 * (80*0.8 + 20*4) / 1e8 = 4000 * 144 / 1e8 = 0.00576
const haikuBundle = [{ modelId: "claude-3-5-haiku", averageTokensPerLLMCall: 4000, input: 80, output: 20 }]

let keySeq = 0
const nextKey = (prefix = "flow") => `${prefix}.${++keySeq}`

const outcomeBody = (overrides: Record<string, unknown> = {}) => ({
  name: "Report",
  agentKey: nextKey("report"),
  marginPercent: 10,
  steps: [
    { name: "Plan", agentKey: nextKey("plan"), modelBundle: gpt4oBundle },
    { name: "Write", agentKey: nextKey("write"), modelBundle: sonnetBundle }
  ],
  ...overrides
})

const createOutcome = async (tenant: Tenant, overrides: Record<string, unknown> = {}) => {
  const response = await as(tenant).post("/outcomes", outcomeBody(overrides))
  expect(response.status).toBe(201)
  return response.body.result.outcome
}

const countOutcomes = async (tenant: Tenant) => (await as(tenant).get("/outcomes?limit=200")).body.result.outcomes.length

const stepOwner = (tenant: Tenant, agentKey: string) =>
  app.run(
    Effect.flatMap(Outcomes, (outcomes) => outcomes.findStepByAgentKey(tenant.organizationId, agentKey)).pipe(
      Effect.map(Option.map(({ outcome, step }) => ({ outcomeId: outcome.id, stepId: step.id })))
    )
  )

describe("POST /outcomes", { timeout: 180_000 }, () => {
  it("creates an outcome with ordered, individually priced steps", async () => {
    const response = await as(acme).post("/outcomes", {
      name: "Market report",
      agentKey: "market.report",
      description: "Two-step report",
      marginPercent: 10,
      steps: [
        { name: "Plan", agentKey: "market.plan", modelBundle: gpt4oBundle },
        { name: "Write", agentKey: "market.write", modelBundle: sonnetBundle }
      ]
    })
    expect(response.status).toBe(201)
    expect(response.body.statusCode).toBe(201)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcome created" })
    expect(response.body.result.created).toBe(true)
    const outcome = response.body.result.outcome
    expect(outcome).toEqual({
      id: expect.stringMatching(/^out_/),
      name: "Market report",
      agentKey: "market.report",
      description: "Two-step report",
      isActive: true,
      // 0.004625 + 0.00987, then * 1.1
      basePrice: 0.014495,
      marginPercent: 10,
      pricePerOutcome: 0.0159445,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      steps: [
        {
          id: expect.stringMatching(/^step_/),
          name: "Plan",
          agentKey: "market.plan",
          order: 1,
          basePrice: 0.004625,
          modelBundle: [{ ...gpt4oBundle[0], modelName: "GPT-4o" }]
        },
        {
          id: expect.stringMatching(/^step_/),
          name: "Write",
          agentKey: "market.write",
          order: 2,
          basePrice: 0.00987,
          modelBundle: [{ ...sonnetBundle[0], modelName: "Claude Sonnet 4" }]
        }
      ]
    })
    const fetched = await as(acme).get(`/outcomes/${outcome.id}`)
    expect(fetched.status).toBe(200)
    expect(fetched.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcome" })
    expect(fetched.body.result.outcome).toEqual(outcome)
  })

  it("prices margins of -100 and 0 exactly", async () => {
    expect((await createOutcome(acme, { marginPercent: -100 })).pricePerOutcome).toBe(0)
    expect((await createOutcome(acme, { marginPercent: 0 })).pricePerOutcome).toBe(0.014495)
  })

  it.each([
    ["name missing", { name: undefined }, "name", "validation_failed"],
    ["name over 80", { name: "n".repeat(81) }, "name", "validation_failed"],
    ["agentKey with capitals", { agentKey: "Report" }, "agentKey", "validation_failed"],
    ["agentKey over 80", { agentKey: "k".repeat(81) }, "agentKey", "validation_failed"],
    ["description over 400", { description: "d".repeat(401) }, "description", "validation_failed"],
    ["marginPercent below -100", { marginPercent: -101 }, "marginPercent", "validation_failed"],
    ["steps missing", { steps: undefined }, "steps", "validation_failed"],
    ["no steps", { steps: [] }, "steps", "validation_failed"],
    ["51 steps", {
      steps: Array.from({ length: 51 }, (_, i) => ({ name: `S${i}`, agentKey: `many.${i}`, modelBundle: gpt4oBundle }))
    }, "steps", "validation_failed"],
    ["a step without a name", { steps: [{ agentKey: "nameless", modelBundle: gpt4oBundle }] }, "name", "validation_failed"],
    ["a step name over 80", { steps: [{ name: "s".repeat(81), agentKey: "long.name", modelBundle: gpt4oBundle }] }, "name", "validation_failed"],
    ["a step agentKey with a slash", { steps: [{ name: "S", agentKey: "a/b", modelBundle: gpt4oBundle }] }, "agentKey", "validation_failed"],
    ["a step with an empty bundle", { steps: [{ name: "S", agentKey: "empty.bundle", modelBundle: [] }] }, "modelBundle", "validation_failed"],
    ["a step with bad weights", {
      steps: [
        { name: "S", agentKey: "ok.weights", modelBundle: gpt4oBundle },
        { name: "T", agentKey: "bad.weights", modelBundle: [{ ...gpt4oBundle[0], output: 31 }] }
      ]
    }, "steps.1.modelBundle.0", "invalid_model_bundle"],
    ["a price sent", { pricePerOutcome: 3 }, "pricePerOutcome", "validation_failed"],
    ["a step price sent", { steps: [{ name: "S", agentKey: "priced", modelBundle: gpt4oBundle, basePrice: 1 }] }, "basePrice", "validation_failed"]
  ])("rejects %s with 400 naming the problem and writes nothing", async (_, overrides, named, code) => {
    const before = await countOutcomes(acme)
    const body = Object.fromEntries(Object.entries(outcomeBody(overrides)).filter(([, v]) => v !== undefined))
    const response = await as(acme).post("/outcomes", body)
    expectError(response, 400, code as ErrorCode)
    expect(response.body.statusDetail.message).toContain(named)
    expect(await countOutcomes(acme)).toBe(before)
  })

  it("refuses a step whose model is not enabled with 422 and writes nothing", async () => {
    const before = await countOutcomes(acme)
    const response = await as(acme).post(
      "/outcomes",
      outcomeBody({ steps: [{ name: "S", agentKey: "unknown.model", modelBundle: [{ ...gpt4oBundle[0], modelId: "gpt-99" }] }] })
    )
    expectError(response, 422, "model_not_enabled")
    expect(response.body.statusDetail.message).toBe("model gpt-99 is not enabled in this workspace")
    expect(await countOutcomes(acme)).toBe(before)
  })

  it("refuses a model disabled in the workspace with 422", async () => {
    const tenant = await app.tenant("Disabler")
    expect((await app.cli(["model", "disable", "claude-sonnet-4", "--org", tenant.organizationId, "--json"])).code).toBe(0)
    expectError(await as(tenant).post("/outcomes", outcomeBody()), 422, "model_not_enabled")
    expect(await countOutcomes(tenant)).toBe(0)
  })

  it("answers 409 for a taken outcome agentKey, a repeated step key, or a step key of another active outcome", async () => {
    const first = await createOutcome(acme)
    const before = await countOutcomes(acme)
    expectError(await as(acme).post("/outcomes", outcomeBody({ agentKey: first.agentKey })), 409, "agent_key_taken")
    expectError(
      await as(acme).post(
        "/outcomes",
        outcomeBody({
          steps: [
            { name: "A", agentKey: "twice", modelBundle: gpt4oBundle },
            { name: "B", agentKey: "twice", modelBundle: gpt4oBundle }
          ]
        })
      ),
      409, "step_agent_key_repeated"
    )
    const clash = await as(acme).post(
      "/outcomes",
      outcomeBody({ steps: [{ name: "Plan", agentKey: first.steps[0].agentKey, modelBundle: gpt4oBundle }] })
    )
    expectError(clash, 409, "step_agent_key_taken")
    expect(clash.body.statusDetail.message).toContain(first.steps[0].agentKey)
    expect(await countOutcomes(acme)).toBe(before)
    // Another organisation has its own keys.
    expect((await as(other).post("/outcomes", outcomeBody({ agentKey: first.agentKey, steps: [
      { name: "Plan", agentKey: first.steps[0].agentKey, modelBundle: gpt4oBundle }
    ] }))).status).toBe(201)
  })

  it("answers a missing or unknown key with 401 on every route", async () => {
    const outcome = await createOutcome(acme)
    const routes: Array<[string, string, unknown]> = [
      ["GET", "/outcomes", undefined],
      ["POST", "/outcomes", outcomeBody()],
      ["GET", `/outcomes/${outcome.id}`, undefined],
      ["PATCH", `/outcomes/${outcome.id}`, { name: "x" }],
      ["POST", `/outcomes/${outcome.id}/archive`, undefined],
      ["POST", `/outcomes/${outcome.id}/unarchive`, undefined]
    ]
    for (const [method, path, body] of routes) {
      expectError(await app.request(method, path, { key: null, body }), 401, "api_key_refused")
      expectError(await app.request(method, path, { key: "sk_unknown", body }), 401, "api_key_refused")
    }
    expect((await as(acme).get(`/outcomes/${outcome.id}`)).body.result.outcome).toEqual(outcome)
  })

  it("documents the credit and outcome routes in the OpenAPI document", async () => {
    const document = await app.request("GET", "/openapi.json")
    expect(document.status).toBe(200)
    expect(Object.keys(document.body.paths)).toEqual(expect.arrayContaining([
      "/api/v1/credits",
      "/api/v1/credits/{id}",
      "/api/v1/credits/{id}/archive",
      "/api/v1/outcomes",
      "/api/v1/outcomes/{id}",
      "/api/v1/outcomes/{id}/unarchive"
    ]))
  })
})

describe("GET /outcomes", () => {
  it("lists outcomes without steps, filters by active and pages by cursor", async () => {
    const tenant = await app.tenant("Lister")
    const created = []
    for (let i = 0; i < 4; i++) created.push(await createOutcome(tenant, { name: `Outcome ${i}` }))
    await app.request("POST", `/outcomes/${created[2].id}/archive`, { key: tenant.apiKey })

    const all = await as(tenant).get("/outcomes")
    expect(all.status).toBe(200)
    expect(all.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcomes" })
    const { steps: _steps, ...withoutSteps } = created[0]
    expect(all.body.result.outcomes[0]).toEqual(withoutSteps)
    expect(all.body.result.outcomes.every((o: any) => !("steps" in o))).toBe(true)
    expect(all.body.result.outcomes.map((o: any) => o.name)).toEqual(["Outcome 0", "Outcome 1", "Outcome 2", "Outcome 3"])
    expect((await as(tenant).get("/outcomes?active=true")).body.result.outcomes.map((o: any) => o.name))
      .toEqual(["Outcome 0", "Outcome 1", "Outcome 3"])
    expect((await as(tenant).get("/outcomes?active=false")).body.result.outcomes.map((o: any) => o.name))
      .toEqual(["Outcome 2"])
    const first = await as(tenant).get("/outcomes?limit=3")
    expect(first.body.result.outcomes.map((o: any) => o.name)).toEqual(["Outcome 0", "Outcome 1", "Outcome 2"])
    const rest = await as(tenant).get(`/outcomes?limit=3&cursor=${first.body.result.outcomes[2].id}`)
    expect(rest.body.result.outcomes.map((o: any) => o.name)).toEqual(["Outcome 3"])
    expectError(await as(tenant).get("/outcomes?active=1"), 400, "validation_failed")
  })
})

describe("PATCH /outcomes/{id}", () => {
  it("keeps steps sent with their id, adds steps without, removes the rest, and re-prices", async () => {
    const outcome = await createOutcome(acme)
    const [plan, write] = outcome.steps
    const reviewKey = nextKey("review")
    const response = await as(acme).patch(`/outcomes/${outcome.id}`, {
      steps: [
        { name: "Review", agentKey: reviewKey, modelBundle: haikuBundle },
        { id: plan.id, name: "Plan v2" }
      ]
    })
    expect(response.status).toBe(200)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcome updated" })
    expect(response.body.result.updated).toBe(true)
    const updated = response.body.result.outcome
    expect(updated).toMatchObject({
      id: outcome.id,
      name: outcome.name,
      // 0.00576 + 0.004625, then * 1.1
      basePrice: 0.010385,
      marginPercent: 10,
      pricePerOutcome: 0.0114235
    })
    expect(updated.steps).toEqual([
      {
        id: expect.stringMatching(/^step_/),
        name: "Review",
        agentKey: reviewKey,
        order: 1,
        basePrice: 0.00576,
        modelBundle: [{ ...haikuBundle[0], cache: 0, cacheWrite: 0, modelName: "Claude 3.5 Haiku" }]
      },
      { ...plan, name: "Plan v2", order: 2 }
    ])
    expect(updated.steps[0].id).not.toBe(write.id)
    expect((await as(acme).get(`/outcomes/${outcome.id}`)).body.result.outcome).toEqual(updated)

    // The removed step no longer answers to its key, which another outcome may now take.
    expect(await stepOwner(acme, write.agentKey)).toEqual(Option.none())
    expect(await stepOwner(acme, plan.agentKey)).toEqual(Option.some({ outcomeId: outcome.id, stepId: plan.id }))
    const taker = await createOutcome(acme, { steps: [{ name: "Write", agentKey: write.agentKey, modelBundle: sonnetBundle }] })
    expect(await stepOwner(acme, write.agentKey)).toEqual(Option.some({ outcomeId: taker.id, stepId: taker.steps[0].id }))
  })

  it("re-prices a kept step when its modelBundle is sent and lets kept steps swap keys", async () => {
    const outcome = await createOutcome(acme)
    const [plan, write] = outcome.steps
    const response = await as(acme).patch(`/outcomes/${outcome.id}`, {
      steps: [
        { id: write.id, agentKey: plan.agentKey },
        { id: plan.id, agentKey: write.agentKey, modelBundle: haikuBundle }
      ]
    })
    expect(response.status).toBe(200)
    const steps = response.body.result.outcome.steps
    expect(steps.map((s: any) => [s.id, s.agentKey, s.order, s.basePrice])).toEqual([
      [write.id, plan.agentKey, 1, 0.00987],
      [plan.id, write.agentKey, 2, 0.00576]
    ])
    // 0.00987 + 0.00576 = 0.01563, * 1.1
    expect(response.body.result.outcome).toMatchObject({ basePrice: 0.01563, pricePerOutcome: 0.017193 })
  })

  it("changes only the fields sent; marginPercent alone re-prices pricePerOutcome", async () => {
    const outcome = await createOutcome(acme, { description: "before" })
    const renamed = await as(acme).patch(`/outcomes/${outcome.id}`, { name: "Renamed", description: null })
    expect(renamed.body.result.outcome).toEqual({ ...outcome, name: "Renamed", description: null, updatedAt: expect.any(String) })
    const margin = await as(acme).patch(`/outcomes/${outcome.id}`, { marginPercent: 50 })
    // 0.014495 * 1.5
    expect(margin.body.result.outcome).toMatchObject({ basePrice: 0.014495, marginPercent: 50, pricePerOutcome: 0.0217425 })
    expect(margin.body.result.outcome.steps).toEqual(outcome.steps)
  })

  it("answers 400, 404, 409 and 422 without changing anything", async () => {
    const outcome = await createOutcome(acme)
    const another = await createOutcome(acme)
    const patch = (body: unknown) => as(acme).patch(`/outcomes/${outcome.id}`, body)
    expectError(await patch({ steps: [] }), 400, "validation_failed")
    expectError(await patch({ name: "" }), 400, "validation_failed")
    expectError(await patch({ marginPercent: -100.01 }), 400, "validation_failed")
    const incomplete = await patch({ steps: [{ name: "New without key" }] })
    expectError(incomplete, 400, "invalid_outcome_steps")
    expect(incomplete.body.statusDetail.message).toContain("steps.0")
    expectError(await patch({ steps: [{ id: another.steps[0].id }] }), 400, "invalid_outcome_steps")
    expectError(await patch({ steps: [{ id: "step_missing" }] }), 400, "invalid_outcome_steps")
    expectError(await patch({ steps: [{ id: outcome.steps[0].id }, { id: outcome.steps[0].id }] }), 400, "invalid_outcome_steps")
    expectError(await patch({ agentKey: another.agentKey }), 409, "agent_key_taken")
    expectError(await patch({ steps: [{ id: outcome.steps[0].id, agentKey: another.steps[1].agentKey }] }), 409, "step_agent_key_taken")
    expectError(
      await patch({ steps: [{ id: outcome.steps[0].id }, { name: "Dup", agentKey: outcome.steps[0].agentKey, modelBundle: gpt4oBundle }] }),
      409, "step_agent_key_repeated"
    )
    expectError(
      await patch({ name: "Nope", steps: [{ name: "X", agentKey: "x.new", modelBundle: [{ ...gpt4oBundle[0], modelId: "nope" }] }] }),
      422, "model_not_enabled"
    )
    expectError(await as(acme).patch("/outcomes/out_missing", { name: "x" }), 404, "outcome_not_found")
    expect((await as(acme).get(`/outcomes/${outcome.id}`)).body.result.outcome).toEqual(outcome)
  })
})

describe("archive and unarchive", () => {
  it("archives without deleting and frees the outcome's and its steps' keys", async () => {
    const outcome = await createOutcome(acme)
    const archived = await as(acme).post(`/outcomes/${outcome.id}/archive`)
    expect(archived.status).toBe(200)
    expect(archived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcome archived" })
    expect(archived.body.result).toEqual({
      archived: true,
      outcome: { ...outcome, isActive: false, updatedAt: expect.any(String) }
    })
    expect((await as(acme).get(`/outcomes/${outcome.id}`)).body.result.outcome.steps).toEqual(outcome.steps)
    expect(await stepOwner(acme, outcome.steps[0].agentKey)).toEqual(Option.none())

    const unarchived = await as(acme).post(`/outcomes/${outcome.id}/unarchive`)
    expect(unarchived.status).toBe(200)
    expect(unarchived.body.statusDetail).toEqual({ status: "SUCCESS", message: "Outcome unarchived" })
    expect(unarchived.body.result).toMatchObject({ unarchived: true, outcome: { id: outcome.id, isActive: true } })
    expect(await stepOwner(acme, outcome.steps[0].agentKey)).toEqual(
      Option.some({ outcomeId: outcome.id, stepId: outcome.steps[0].id })
    )
  })

  it("unarchive answers 409 when the outcome's key or a step's key was taken meanwhile", async () => {
    const byOutcomeKey = await createOutcome(acme)
    await as(acme).post(`/outcomes/${byOutcomeKey.id}/archive`)
    await createOutcome(acme, { agentKey: byOutcomeKey.agentKey })
    expectError(await as(acme).post(`/outcomes/${byOutcomeKey.id}/unarchive`), 409, "agent_key_taken")
    expect((await as(acme).get(`/outcomes/${byOutcomeKey.id}`)).body.result.outcome.isActive).toBe(false)

    const byStepKey = await createOutcome(acme)
    await as(acme).post(`/outcomes/${byStepKey.id}/archive`)
    const taker = await createOutcome(acme, {
      steps: [{ name: "Taker", agentKey: byStepKey.steps[1].agentKey, modelBundle: gpt4oBundle }]
    })
    expectError(await as(acme).post(`/outcomes/${byStepKey.id}/unarchive`), 409, "step_agent_key_taken")
    expect((await as(acme).get(`/outcomes/${byStepKey.id}`)).body.result.outcome.isActive).toBe(false)
    expect(await stepOwner(acme, byStepKey.steps[1].agentKey)).toEqual(
      Option.some({ outcomeId: taker.id, stepId: taker.steps[0].id })
    )
  })

  it("answers 404 for a missing outcome", async () => {
    expectError(await as(acme).get("/outcomes/out_missing"), 404, "outcome_not_found")
    expectError(await as(acme).post("/outcomes/out_missing/archive"), 404, "outcome_not_found")
    expectError(await as(acme).post("/outcomes/out_missing/unarchive"), 404, "outcome_not_found")
  })
})

describe("isolation between organisations", () => {
  it("answers 404 on every route for another organisation's outcome and never lists or finds it", async () => {
    const outcome = await createOutcome(acme)
    expectError(await as(other).get(`/outcomes/${outcome.id}`), 404, "outcome_not_found")
    expectError(await as(other).patch(`/outcomes/${outcome.id}`, { name: "Mine now" }), 404, "outcome_not_found")
    expectError(await as(other).post(`/outcomes/${outcome.id}/archive`), 404, "outcome_not_found")
    expectError(await as(other).post(`/outcomes/${outcome.id}/unarchive`), 404, "outcome_not_found")
    expect((await as(other).get("/outcomes?limit=200")).body.result.outcomes.map((o: any) => o.id)).not.toContain(outcome.id)
    expect(await stepOwner(other, outcome.steps[0].agentKey)).toEqual(Option.none())
    // A PATCH cannot adopt another organisation's step by id either.
    const mine = await createOutcome(other)
    expectError(await as(other).patch(`/outcomes/${mine.id}`, { steps: [{ id: outcome.steps[0].id }] }), 400, "invalid_outcome_steps")
    expect((await as(acme).get(`/outcomes/${outcome.id}`)).body.result.outcome).toEqual(outcome)
  })
})

// Each CLI call starts a process of its own: slow on a busy machine.
describe("billing outcome (CLI)", { timeout: 240_000 }, () => {
  it("creates from --file, then lists, gets, updates, archives and unarchives with --json", async () => {
    const tenant = await app.tenant("Cli")
    const org = ["--org", tenant.organizationId, "--json"]
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "outcome-")), "outcome.yaml")
    fs.writeFileSync(
      file,
      [
        "name: Cli outcome",
        "agentKey: cli.outcome",
        "marginPercent: 10",
        "steps:",
        "  - name: Plan",
        "    agentKey: cli.plan",
        "    modelBundle:",
        "      - { modelId: gpt-4o, averageTokensPerLLMCall: 1000, input: 60, output: 30, cache: 10, cacheWrite: 0 }",
        ""
      ].join("\n")
    )
    const created = await app.cli(["outcome", "create", "--file", file, ...org])
    expect(created.stderr).toBe("")
    expect(created.json).toMatchObject({
      created: true,
      // 0.004625 * 1.1
      outcome: { agentKey: "cli.outcome", basePrice: 0.004625, pricePerOutcome: 0.0050875, steps: [{ agentKey: "cli.plan", order: 1 }] }
    })
    const id = created.json.outcome.id
    expect((await as(tenant).get(`/outcomes/${id}`)).body.result.outcome).toEqual(created.json.outcome)

    const listed = await app.cli(["outcome", "list", ...org])
    expect(listed.json.outcomes.map((o: any) => o.id)).toEqual([id])
    expect(listed.json.outcomes[0].steps).toBeUndefined()
    expect((await app.cli(["outcome", "get", id, ...org])).json.outcome.steps).toHaveLength(1)

    const steps = JSON.stringify([
      { id: created.json.outcome.steps[0].id },
      { name: "Review", agentKey: "cli.review", modelBundle: haikuBundle }
    ])
    const updated = await app.cli(["outcome", "update", id, "--steps", steps, ...org])
    expect(updated.stderr).toBe("")
    // (0.004625 + 0.00576) * 1.1
    expect(updated.json).toMatchObject({ updated: true, outcome: { basePrice: 0.010385, pricePerOutcome: 0.0114235 } })
    expect(updated.json.outcome.steps.map((s: any) => s.agentKey)).toEqual(["cli.plan", "cli.review"])

    expect((await app.cli(["outcome", "archive", id, ...org])).json).toMatchObject({ archived: true, outcome: { isActive: false } })
    expect((await app.cli(["outcome", "unarchive", id, ...org])).json).toMatchObject({
      unarchived: true,
      outcome: { isActive: true }
    })
    const foreign = await app.cli(["outcome", "get", id, "--org", acme.organizationId, "--json"])
    expect(foreign.code).not.toBe(0)
    expect(foreign.stderr).toContain("not found")
  })
})

describe.skipIf(!usesRealPostgres)("concurrent writes (needs real PostgreSQL)", () => {
  it("lets exactly one of two simultaneous outcomes claim the same step key", async () => {
    const tenant = await app.tenant("Racer")
    const body = () => outcomeBody({ steps: [{ name: "Shared", agentKey: "raced.step", modelBundle: gpt4oBundle }] })
    const results = await Promise.all(Array.from({ length: 6 }, () => as(tenant).post("/outcomes", body())))
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409])
    expect(await countOutcomes(tenant)).toBe(1)
  })
})
