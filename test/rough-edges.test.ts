/**
 * The rough edges of issue 37 (point 6), each through the door an integrator
 * or an operator meets it at: HTTP, the CLI (in this process, or the real
 * binary where a process of its own matters) and the OpenAPI document. Both
 * databases.
 */
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, clientOf, type Client, expectError, makeCustomer, makeOutcome, makePlan, makeUnit, ok } from "./billing-support.ts"
import { runCliInProcess } from "../cli/program.ts"
import { drain } from "./signals-fixtures.ts"
import { spawnServe } from "./support/ServeProcess.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually } from "./support/Eventually.ts"
import { startInPty, stripAnsi } from "./support/Pty.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp
let tenant: Tenant
let api: Client
let org: Array<string>

beforeAll(async () => {
  app = await startTestApp()
  tenant = await app.tenant("Rough edges")
  api = clientOf(app, tenant)
  org = ["--org", tenant.organizationId]
})
afterAll(() => app?.close())

describe("an answer that fails validation", () => {
  it("names every problem with its field (statusDetail.errors), the envelope otherwise as before", async () => {
    const response = await api.post("/customers", { name: "", email: "not-an-email", externalId: "no way!", bogus: 1 })
    expectError(response, 400, "validation_failed")
    expect(response.body.statusDetail.errors).toHaveLength(4)
    expect(response.body.statusDetail.errors).toEqual(expect.arrayContaining([
      { field: "name", message: "must not be empty" },
      { field: "email", message: "must be a valid e-mail address" },
      { field: "externalId", message: "must be 1 to 32 characters from letters, numbers and -" },
      { field: "bogus", message: expect.stringContaining("is unexpected") }
    ]))
    // The message still names them for people, field first.
    for (const field of ["name", "email", "externalId", "bogus"]) expect(response.body.statusDetail.message).toContain(`${field}: `)
    expect(await app.request("GET", `/customers?q=${encodeURIComponent("not-an-email")}`, { key: tenant.apiKey }))
      .toMatchObject({ status: 200, body: { result: { customers: [] } } })
  })

  it("names nested fields by their path, and every item of a list", async () => {
    const unit = await makeUnit(api)
    const response = await api.post("/plans", {
      name: "Two bad components",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: "ten" },
        { type: "UNIT", billingMode: "SOMETIMES", unitId: unit.id, quantity: 1 }
      ]
    })
    expectError(response, 400, "validation_failed")
    const fields = response.body.statusDetail.errors.map((problem: { field: string }) => problem.field)
    expect(fields).toEqual(expect.arrayContaining(["entitlements.0.quantity", "entitlements.1.billingMode"]))
  })

  it("names each unknown query parameter, and a body that is not an object as the request's own problem (field null)", async () => {
    const query = await app.request("GET", "/customers?limit=5&bogus=1&other=2", { key: tenant.apiKey })
    expectError(query, 400, "validation_failed")
    expect(query.body.statusDetail.errors).toEqual([
      { field: "bogus", message: "is not a query parameter of this route" },
      { field: "other", message: "is not a query parameter of this route" }
    ])
    const values = await app.request("GET", "/customers?limit=0&includeArchived=maybe", { key: tenant.apiKey })
    expectError(values, 400, "validation_failed")
    expect(values.body.statusDetail.errors.map((problem: { field: string }) => problem.field)).toEqual(["limit", "includeArchived"])
    const notObject = await api.post("/customers", [1, 2])
    expectError(notObject, 400, "validation_failed")
    expect(notObject.body.statusDetail.errors).toEqual([{ field: null, message: "the body must be a JSON object" }])
  })

  it("is the same on the signal routes, their lane and a batch's items: one code, validation_failed, with the field", async () => {
    const ahead = new Date(Date.now() + 60 * 60_000).toISOString()
    const single = await api.post("/signal/unit", { customerId: "cus_x", agentKey: "pages", quantity: 1, timestamp: ahead })
    expectError(single, 400, "validation_failed")
    expect(single.body.statusDetail.errors).toEqual([{ field: "timestamp", message: expect.stringContaining("5 minutes ahead") }])
    const malformed = await api.post("/signal/unit", { customerId: "cus_x", agentKey: "pages", quantity: 1, timestamp: "yesterday" })
    expectError(malformed, 400, "validation_failed")
    expect(malformed.body.statusDetail.errors).toEqual([{ field: "timestamp", message: expect.stringContaining("ISO 8601") }])
    const batch = ok(await api.post("/signal/batch", {
      signals: [{ type: "unit", customerId: "cus_x", agentKey: "pages", quantity: 1, timestamp: ahead }]
    }), 202)
    expect(batch.results[0].error).toEqual({
      statusCode: 400,
      code: "validation_failed",
      message: expect.stringContaining("Invalid request: timestamp: must not be more than 5 minutes ahead"),
      errors: [{ field: "timestamp", message: expect.stringContaining("5 minutes ahead") }]
    })
  })

  it("a malformed externalId is validation_failed naming externalId, in a body, a path and the CLI (invalid_external_id is retired)", async () => {
    for (const response of [
      await api.post("/purchases", { externalId: "bad id!", planId: "pln_x" }),
      await api.get("/customers/ext/bad%20id!"),
      await api.post("/signal/unit", { externalId: "bad id!", agentKey: "pages", quantity: 1 })
    ]) {
      expectError(response, 400, "validation_failed")
      expect(response.body.statusDetail.errors).toEqual([{ field: "externalId", message: "must be 1 to 32 characters from letters, numbers and -" }])
    }
    const cli = await app.cli(["customer", "get", "--external-id", "bad id!", "--json", ...org])
    expect(cli.code).toBe(2)
    expect(JSON.parse(cli.stderr)).toEqual({
      statusCode: 400,
      statusDetail: {
        status: "ERROR",
        code: "validation_failed",
        message: "Invalid request: externalId: must be 1 to 32 characters from letters, numbers and -",
        errors: [{ field: "externalId", message: "must be 1 to 32 characters from letters, numbers and -" }]
      },
      result: {}
    })
  })

  it("other answers carry no errors: a 404, a service's own 400", async () => {
    const missing = await api.get("/customers/cus_missing")
    expectError(missing, 404, "customer_not_found")
    expect(missing.body.statusDetail).not.toHaveProperty("errors")
    const unknownPlan = await api.post("/purchases", { customerId: (await makeCustomer(api)).id, planId: "pln_missing" })
    expectError(unknownPlan, 400, "unknown_plan")
    expect(unknownPlan.body.statusDetail).not.toHaveProperty("errors")
  })
})

describe("a signal dated before its customer's purchase", () => {
  it("is refused with no_plan_at_signal_time, naming the moment and the plan's cycle", async () => {
    const unit = await makeUnit(api)
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 }])
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    const timestamp = new Date(Date.parse(purchase.currentPeriodStart) - 60 * 60_000).toISOString()
    const queued = ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 1, timestamp }), 202)
    await drain(app)
    const signal = ok(await api.get(`/signals/${queued.rawId}`)).signal
    expect(signal.error).toEqual({
      status: 422,
      code: "no_plan_at_signal_time",
      message: `No plan of the customer was active at the signal's moment, ${timestamp} (its timestamp): its plan's current ` +
        `cycle is ${purchase.currentPeriodStart} to ${purchase.currentPeriodEnd}; usage from before the plan is not billed by it`
    })
    // A customer without any plan still hears no_active_plan.
    const planless = await makeCustomer(api)
    const other = ok(await api.post("/signal/unit", { customerId: planless.id, agentKey: unit.agentKey, quantity: 1, timestamp }), 202)
    await drain(app)
    expect(ok(await api.get(`/signals/${other.rawId}`)).signal.error.code).toBe("no_active_plan")
  })
})

describe("a known path with another method", () => {
  it("is 405 with an Allow header naming the methods the path takes (RFC 9110)", async () => {
    const collection = await app.request("PUT", "/customers", { key: tenant.apiKey })
    expectError(collection, 405, "method_not_allowed")
    expect(collection.headers.get("allow")).toBe("GET, POST")
    const one = await app.request("POST", "/customers/cus_x", { key: tenant.apiKey })
    expectError(one, 405, "method_not_allowed")
    expect(one.headers.get("allow")).toBe("GET, PATCH, DELETE")
    expect(one.body.statusDetail.message).toContain("it takes GET, PATCH, DELETE")
    // Without a key too: the method is judged before the key.
    expect((await app.request("PUT", "/customers", { key: null })).headers.get("allow")).toBe("GET, POST")
  })
})

describe("the OpenAPI document and /docs", () => {
  const documentOf = async () => (await app.request("GET", "/openapi.json", { key: null })).body

  it("reads as English: no summary says 'a outcome'", async () => {
    const document = await documentOf()
    const summaries = Object.values<any>(document.paths).flatMap((item) => Object.values<any>(item).map((operation) => operation.summary))
    expect(summaries.filter((summary: string) => /\ba [aeio]/i.test(summary))).toEqual([])
    expect(summaries).toEqual(expect.arrayContaining(["Create an outcome", "Get an outcome", "Archive an outcome", "Create a unit"]))
  })

  it("describes the API as a whole, asks for the key on every operation, and has one group per name", async () => {
    const document = await documentOf()
    expect(document.info.description).toContain("Authorization: Bearer <API_KEY>")
    expect(document.info.description).toContain("statusDetail.errors")
    expect(document.security).toEqual([{ bearer: [] }])
    expect(document.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    // The endpoints' group is not named like the document's section of the events themselves.
    const tags = document.tags.map((tag: { name: string }) => tag.name.toLowerCase())
    expect(tags).not.toContain("webhooks")
    expect(tags).toContain("webhook endpoints")
    expect(Object.keys(document.webhooks)).toContain("signal.refused")
    // /docs preselects the key, where it said "No authentication selected".
    const page = await fetch(app.baseUrl.replace(/\/api\/v1$/, "/docs"))
    const html = await page.text()
    expect(html).toMatch(/preferredSecurityScheme[\\"]*:[\\"]*bearer/)
  })

  it("lists per operation only the codes it can answer (x-error-codes), and the Allow header of its 405", async () => {
    const document = await documentOf()
    const read = document.paths["/api/v1/customers/{id}"].get
    expect(read["x-error-codes"]).toContain("customer_not_found")
    for (const foreign of ["plan_not_found", "invalid_tax_rate", "external_id_taken", "unknown_cursor", "invalid_json"]) {
      expect(read["x-error-codes"]).not.toContain(foreign)
    }
    expect(document.paths["/api/v1/customers"].get["x-error-codes"]).toContain("unknown_cursor")
    expect(read.responses["405"].headers.Allow.schema).toEqual({ type: "string" })
    // Each code a request provokes is one its operation lists.
    const missing = await api.get("/customers/cus_missing")
    expect(read["x-error-codes"]).toContain(missing.body.statusDetail.code)
  })
})

describe("a customer's balances", () => {
  it("carry used for units and outcomes as for credits, as /entitlements does; balance show prints it", async () => {
    const unit = await makeUnit(api)
    const outcome = await makeOutcome(api)
    const plan = await makePlan(app, tenant, [
      { type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 10 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: outcome.id, quantity: 4 }
    ])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 3 }), 202)
    await drain(app)
    const balances = ok(await api.get(`/customers/${customer.id}/balances`))
    expect(balances.units).toEqual([{ unitId: unit.id, agentKey: unit.agentKey, unitName: unit.name, granted: 10, used: 3, remaining: 7 }])
    expect(balances.outcomes).toEqual([expect.objectContaining({ outcomeId: outcome.id, granted: 4, used: 0, remaining: 4 })])
    const entitlements = ok(await api.get(`/customers/${customer.id}/entitlements`)).entitlements
    expect(entitlements.find((entitlement: any) => entitlement.id === unit.id)).toMatchObject({ used: 3, remaining: 7 })

    const shown = await app.cli(["balance", "show", customer.id, ...org])
    expect(shown.code, shown.stderr).toBe(0)
    const unitLine = shown.stdout.split("\n").find((line) => line.startsWith("unit"))!
    expect(unitLine.trim().split(/\s{2,}/).slice(-3)).toEqual(["10", "3", "7"])
    const outcomeLine = shown.stdout.split("\n").find((line) => line.startsWith("outcome"))!
    expect(outcomeLine.trim().split(/\s{2,}/).slice(-3)).toEqual(["4", "0", "4"])
  })
})

describe("tables on a 160-column terminal", () => {
  it("never cut event ids or URLs (webhook deliveries, webhook list)", async () => {
    const own = await app.tenant("Wide tables")
    const ownOrg = ["--org", own.organizationId]
    const url = `https://hooks.example.com/${"billing-events/".repeat(6)}receiver?team=platform&env=production`
    const added = await app.cli(["webhook", "add", "--url", url, "--events", "wallet.balance.update", "--json", ...ownOrg])
    expect(added.code, added.stderr).toBe(0)
    const customer = ok(await app.request("POST", "/customers", { key: own.apiKey, body: { name: "Wide", email: "wide@example.com" } }), 201).customer
    for (let i = 0; i < 2; i++) {
      const triggered = await app.cli(["trigger", "wallet.balance.update", "--customer", customer.id, "--json", ...ownOrg])
      expect(triggered.code, triggered.stderr).toBe(0)
    }
    const deliveries = (await app.cli(["webhook", "deliveries", "--json", ...ownOrg])).json.deliveries
    expect(deliveries).toHaveLength(2)
    const tty = async (args: Array<string>) => {
      const run = await runCliInProcess([...args, ...ownOrg], { env: { ...process.env, DATABASE_URL: app.databaseUrl }, tty: { columns: 160 } })
      expect(run.code, run.stderr).toBe(0)
      return run.stdout.replace(/\u001b\[[0-9;]*m/g, "")
    }
    const shown = await tty(["webhook", "deliveries"])
    for (const delivery of deliveries) {
      expect(shown).toContain(delivery.eventId)
      expect(shown).toContain(delivery.id)
    }
    expect(shown).toContain(url)
    const listed = await tty(["webhook", "list"])
    expect(listed).toContain(url)
    expect(listed).toContain(added.json.endpoint.id)
  })
})

describe("billing purchase cancel --help", () => {
  it("says what cancelling does: it voids nothing", async () => {
    const help = await runCliInProcess(["purchase", "cancel", "--help"], { env: { ...process.env, DATABASE_URL: app.databaseUrl } })
    expect(help.code).toBe(0)
    const text = help.stdout.replace(/\s+/g, " ")
    expect(text).not.toContain("voids its open invoices")
    expect(text).toContain("its invoices stay as they are (void one with billing invoice void)")
    // As the purchase does: a cancelled purchase's OPEN invoice stays OPEN.
    const unit = await makeUnit(api)
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ADVANCE", unitId: unit.id, quantity: 1 }], { priceAdjustment: 5 })
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    const cancelled = await app.cli(["purchase", "cancel", purchase.id, "--json", ...org])
    expect(cancelled.code, cancelled.stderr).toBe(0)
    expect(ok(await api.get(`/invoices/${invoice.id}`)).invoice.status).toBe(invoice.status)
  })
})

describe("billing customer update", () => {
  it("finds the customer with --external-id as get does, and sets one with --set-external-id", async () => {
    const externalId = `edge-${Date.now()}`
    const customer = await makeCustomer(api, { externalId })
    const renamed = await app.cli(["customer", "update", "--external-id", externalId, "--name", "Found by externalId", "--json", ...org])
    expect(renamed.code, renamed.stderr).toBe(0)
    expect(renamed.json.customer).toMatchObject({ id: customer.id, name: "Found by externalId", externalId })
    expect(renamed.stderr).toBe("")

    const moved = await app.cli(["customer", "update", "--external-id", externalId, "--set-external-id", `${externalId}-b`, "--json", ...org])
    expect(moved.code, moved.stderr).toBe(0)
    expect(moved.json.customer).toMatchObject({ id: customer.id, externalId: `${externalId}-b` })
    const byId = await app.cli(["customer", "update", customer.id, "--set-external-id", `${externalId}-c`, "--json", ...org])
    expect(byId.json.customer.externalId).toBe(`${externalId}-c`)
    const cleared = await app.cli(["customer", "update", customer.id, "--clear-external-id", "--json", ...org])
    expect(cleared.json.customer.externalId).toBeNull()

    // The old form (an id and --external-id) still sets it, and says what to write instead.
    const old = await app.cli(["customer", "update", customer.id, "--external-id", `${externalId}-d`, "--json", ...org])
    expect(old.code, old.stderr).toBe(0)
    expect(old.json.customer.externalId).toBe(`${externalId}-d`)
    expect(old.stderr).toContain("write --set-external-id")

    // Usage errors: nothing names the customer; set and clear together; the old form beside --set-external-id.
    expect((await app.cli(["customer", "update", "--name", "X", ...org])).code).toBe(2)
    expect((await app.cli(["customer", "update", customer.id, "--set-external-id", "a", "--clear-external-id", ...org])).code).toBe(2)
    expect((await app.cli(["customer", "update", customer.id, "--external-id", "a", "--set-external-id", "b", ...org])).code).toBe(2)
    expect(ok(await api.get(`/customers/${customer.id}`)).customer.externalId).toBe(`${externalId}-d`)
    const help = await app.cli(["customer", "update", "--help"])
    expect(help.stdout).toContain("--set-external-id <id>")
  })
})

describe("billing portal token", () => {
  it("prints a link on the port billing serve listens on, or --base-url's, and says when it only guesses", async () => {
    const customer = await makeCustomer(api)
    const { BILLING_PUBLIC_URL: _, ...env } = process.env
    const serve = await spawnServe({ ...env, DATABASE_URL: app.databaseUrl }, ["--no-worker"])
    const origin = serve.baseUrl.replace(/\/api\/v1$/, "")
    try {
      expect(origin).not.toMatch(/:8787$/)
      const minted = await app.cli(["portal", "token", customer.id, "--json", ...org], { BILLING_PUBLIC_URL: "" })
      expect(minted.code, minted.stderr).toBe(0)
      expect(minted.json.url).toBe(`${origin}/portal?token=${encodeURIComponent(minted.json.token)}`)
      expect(minted.stderr).toBe("")
      expect((await fetch(minted.json.url)).status).toBe(200)
      const chosen = await app.cli(["portal", "token", customer.id, "--base-url", "https://billing.example.com/", "--json", ...org])
      expect(chosen.json.url).toMatch(/^https:\/\/billing\.example\.com\/portal\?token=/)
      expect((await app.cli(["portal", "token", customer.id, "--base-url", "not a url", "--json", ...org])).code).toBe(2)
    } finally {
      serve.child.kill("SIGTERM")
      await new Promise((resolve) => serve.child.once("exit", resolve))
    }
    // No serve any more: the link is a guess, and stderr says how to make it right.
    const guessed = await app.cli(["portal", "token", customer.id, "--json", ...org], { BILLING_PUBLIC_URL: "" })
    expect(guessed.code, guessed.stderr).toBe(0)
    expect(guessed.json.url).toMatch(/^http:\/\/127\.0\.0\.1:8787\/portal\?token=/)
    expect(guessed.stderr).toContain("no billing serve is running on this database")
    expect(guessed.stderr).toContain("BILLING_PUBLIC_URL")
  })
})

describe("billing serve's log", () => {
  const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

  it("is one short line a request under the banner on a terminal, JSON on a pipe, as --log-format says", async () => {
    const { BILLING_LOG_FORMAT: _, ...env } = process.env
    const terminal = startInPty([process.execPath, bin, "serve", "--port", "0", "--no-worker"], { ...env, DATABASE_URL: app.databaseUrl })
    try {
      const api = await eventually(() => {
        const match = /billing API\s+(http:\/\/[\d.]+:\d+\/api\/v1)/.exec(stripAnsi(terminal.output()))
        expect(match, terminal.output()).not.toBeNull()
        return match![1]!
      }, { timeoutMs: 60_000 })
      expect((await fetch(`${api}/customers`)).status).toBe(401)
      const lines = await eventually(() => {
        const shown = stripAnsi(terminal.output()).split("\n")
        expect(shown.some((line) => line.includes("GET /api/v1/customers 401"))).toBe(true)
        return shown
      })
      expect(lines.find((line) => line.includes("GET /api/v1/customers 401"))).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/api\/v1\/customers 401 [\d.]+ ms  req=/)
      expect(lines.filter((line) => line.trimStart().startsWith("{"))).toEqual([])
    } finally {
      terminal.kill()
    }

    // On a pipe, --log-format pretty asks for the same short lines; `auto` there is JSON (test/serve-banner.test.ts).
    const piped = await spawnServe({ ...env, DATABASE_URL: app.databaseUrl }, ["--no-worker", "--log-format", "pretty"])
    try {
      let output = ""
      piped.child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      expect((await fetch(`${piped.baseUrl}/customers`)).status).toBe(401)
      await eventually(() => expect(output).toMatch(/INFO  GET \/api\/v1\/customers 401 /))
      expect(output).not.toContain("{\"message\"")
    } finally {
      piped.child.kill("SIGTERM")
    }
    const refused = await spawnBilling(["serve", "--log-format", "xml"], { ...env, DATABASE_URL: app.databaseUrl })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("must be one of auto, json, pretty")
  })
})

describe("a DATABASE_URL that names no PostgreSQL", () => {
  it("is refused at the start with what to write instead, by a command, serve and the worker: one line, never the password", async () => {
    const command = async (url: string) => runCliInProcess(["customer", "list", ...org], { env: { ...process.env, DATABASE_URL: url } })
    const notUrl = await command("not a url")
    expect(notUrl.code).toBe(1)
    expect(notUrl.stderr).toBe(
      "error: DATABASE_URL is not a PostgreSQL URI: give postgres://user@host:5432/database (or postgresql://...), " +
        "or unset it for the embedded database\n"
    )
    const mysql = await command("mysql://billing:s3cret@db.internal:3306/billing")
    expect(mysql.code).toBe(1)
    expect(mysql.stderr).toBe(
      "error: DATABASE_URL is a mysql:// URL: billing runs on PostgreSQL only; give postgres://user@host:5432/database, " +
        "or unset it for the embedded database\n"
    )
    const badHost = await command("postgres://billing:s3cret@not a host/billing")
    expect(badHost.stderr).toMatch(/^error: host "not a host" in DATABASE_URL is not a host name/)
    for (const run of [notUrl, mysql, badHost]) expect(run.stderr).not.toContain("s3cret")

    const { DATABASE_URL: _, ...env } = process.env
    for (const args of [["serve", "--port", "0", "--no-worker"], ["worker"]]) {
      const refused = await spawnBilling(args, { ...env, DATABASE_URL: "mysql://billing:s3cret@db.internal/billing" }, { timeoutMs: 60_000 })
      expect(refused.code, `${args[0]}: ${refused.stderr}`).toBe(1)
      expect(refused.stderr.trim().split("\n"), args[0]).toEqual([expect.stringMatching(/^error: DATABASE_URL is a mysql:\/\/ URL: billing runs on PostgreSQL only/)])
    }
  })
})
