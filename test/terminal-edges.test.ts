/**
 * The terminal's rough edges of issue 27, each through the door a new user
 * meets it at: the CLI (in this process, or the real binary where a process of
 * its own matters), `serve`, and the HTTP API.
 */
import { BigDecimal } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runCliInProcess } from "../cli/program.ts"
import { errorCodes } from "../src/http/ApiErrors.ts"
import { codeOf } from "../src/errors.ts"
import { decimal } from "../src/money.ts"
import { formatsFor, isNegativeInCents } from "../src/portal/Format.ts"
import { buy, clientOf, type Client, expectError, makeCredit, makeCustomer, makePlan, makeUnit, ok } from "./billing-support.ts"
import { drain } from "./signals-fixtures.ts"
import { spawnBilling } from "./support/Cli.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp
let tenant: Tenant
let api: Client
let org: Array<string>

beforeAll(async () => {
  app = await startTestApp()
  tenant = await app.tenant("Edges")
  api = clientOf(app, tenant)
  org = ["--org", tenant.organizationId]
})
afterAll(() => app.close())

const env = () => ({ ...process.env, DATABASE_URL: app.databaseUrl })

/** stderr as the one JSON document a `--json` failure writes. */
const errorDocumentOf = (stderr: string) => {
  expect(stderr.trim().split("\n"), stderr).toHaveLength(1)
  return JSON.parse(stderr)
}

describe("which database a command uses", () => {
  it("a command run from another folder says it created an empty embedded database, and where it looked for the organisation", async () => {
    const folder = mkdtempSync(join(tmpdir(), "billing-elsewhere-"))
    try {
      const { DATABASE_URL: _, ...withoutUrl } = process.env
      const run = (args: Array<string>) => spawnBilling(args, { ...withoutUrl, BILLING_DATA_DIR: join(folder, ".billing") }, { timeoutMs: 120_000 })
      const first = await run(["customer", "list", "--org", "org_elsewhere"])
      expect(first.code, first.stderr).toBe(4)
      expect(first.stderr).toContain(`note: no database was there: this command created a new, empty one (embedded PGlite in ${folder}/.billing)`)
      expect(first.stderr).toContain(
        `error: Organization org_elsewhere not found (database: embedded PGlite in ${folder}/.billing, created just now by this command, so it holds nothing yet)`
      )
      const second = await run(["customer", "list", "--org", "org_elsewhere", "--json"])
      expect(second.code).toBe(4)
      expect(errorDocumentOf(second.stderr)).toEqual({
        statusCode: 404,
        statusDetail: {
          status: "ERROR",
          message: `Organization org_elsewhere not found (database: embedded PGlite in ${folder}/.billing)`,
          code: "organization_not_found"
        },
        result: {}
      })
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
  })

  it("a DATABASE_URL that cannot be reached is named by host, port and database with its cause, never its password", async () => {
    const refused = await runCliInProcess(["customer", "list", ...org], {
      env: { ...env(), DATABASE_URL: "postgres://billing:s3cret-pw@127.0.0.1:1/billing_db" }
    })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^error: cannot connect to PostgreSQL at 127\.0\.0\.1:1\/billing_db: connect ECONNREFUSED/)
    expect(refused.stderr).not.toContain("s3cret")
    const asJson = await runCliInProcess(["customer", "list", "--json", ...org], {
      env: { ...env(), DATABASE_URL: "postgres://billing:s3cret-pw@127.0.0.1:1/billing_db" }
    })
    expect(asJson.code).toBe(1)
    expect(asJson.stdout).toBe("")
    const document = errorDocumentOf(asJson.stderr)
    expect(document).toMatchObject({ statusCode: 500, statusDetail: { status: "ERROR", code: "internal_error" }, result: {} })
    expect(document.statusDetail.message).toContain("127.0.0.1:1/billing_db")
    expect(asJson.stderr).not.toContain("s3cret")
  })
})

describe("serve", () => {
  it("on a port in use says so and suggests --port, without a stack trace", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const port = (taken.address() as { port: number }).port
    try {
      const served = await spawnBilling(["serve", "--port", String(port), "--no-worker"], env(), { timeoutMs: 120_000 })
      expect(served.code, served.stderr).toBe(1)
      expect(served.stderr).toContain(`error: port ${port} on 127.0.0.1 is in use`)
      expect(served.stderr).toContain("--port N")
      expect(served.stderr).not.toMatch(/\n\s+at /)
    } finally {
      taken.close()
    }
  })
})

describe("--json errors", () => {
  it("are one JSON document on stderr, in the API's envelope, the exit code unchanged", async () => {
    const missing = await app.cli(["customer", "get", "cus_nope", "--json", ...org])
    expect(missing.code).toBe(4)
    expect(missing.stdout).toBe("")
    expect(errorDocumentOf(missing.stderr)).toEqual({
      statusCode: 404,
      statusDetail: { status: "ERROR", message: "Customer cus_nope not found", code: "customer_not_found" },
      result: {}
    })
    const usage = await app.cli(["customer", "list", "--bogus", "--json", ...org])
    expect(usage.code).toBe(2)
    // A command line commander refuses fails its schema, as a request does: the API's code for it.
    expect(errorDocumentOf(usage.stderr)).toMatchObject({
      statusCode: 400,
      statusDetail: { code: codeOf("ValidationFailed"), message: expect.stringContaining("--bogus") }
    })
    const invalid = await app.cli(["customer", "create", "--name", "X", "--email", "not-an-email", "--json", ...org])
    expect(invalid.code).toBe(2)
    expect(errorDocumentOf(invalid.stderr)).toMatchObject({ statusCode: 400, statusDetail: { status: "ERROR", code: "validation_failed" } })
    // Every code the CLI writes is one of the API's list (docs/api.md "Error codes").
    for (const document of [missing, usage, invalid].map((run) => errorDocumentOf(run.stderr))) {
      expect(errorCodes.map((entry) => entry.code)).toContain(document.statusDetail.code)
    }
    // Without --json, the line people read.
    const plain = await app.cli(["customer", "get", "cus_nope", ...org])
    expect(plain.stderr).toBe("error: Customer cus_nope not found\n")
  })
})

describe("lists", () => {
  it("--limit 0 is refused by the CLI as by the API (one rule); a cursor naming no row is 400 / exit 2 on every list", async () => {
    const customer = await makeCustomer(api)
    await makeCustomer(api)
    const cli = await app.cli(["customer", "list", "--limit", "0", ...org])
    expect(cli.code).toBe(2)
    expect(cli.stderr).toMatch(/--limit <n>.*must be at least 1/)
    expect((await app.cli(["customer", "list", "--limit", "2.5", ...org])).code).toBe(2)
    expectError(await api.get("/customers?limit=0"), 400, "validation_failed")
    expect((await app.cli(["customer", "list", "--limit", "1", "--json", ...org])).json.customers).toHaveLength(1)

    const endpoint = ok(await api.post("/webhook-endpoints", { url: "https://example.com/hooks" }), 201).endpoint
    for (
      const path of [
        "/customers", "/invoices", "/payments", "/purchases", "/taxes", "/plans", "/credits", "/units",
        `/customers/${customer.id}/members`, "/signals", "/webhook-endpoints", `/webhook-endpoints/${endpoint.id}/deliveries`
      ]
    ) {
      const answer = await api.get(`${path}?cursor=zzz`)
      expectError(answer, 400, "unknown_cursor")
      expect(answer.body.statusDetail.message, path).toContain("names no row of this list")
    }
    // Another list's id is no cursor of this one; a real one pages.
    expectError(await api.get(`/invoices?cursor=${customer.id}`), 400, "unknown_cursor")
    const page = ok(await api.get(`/customers?cursor=${customer.id}`)).customers
    expect(page.every((c: any) => c.id > customer.id)).toBe(true)
    const cliCursor = await app.cli(["customer", "list", "--cursor", "zzz", ...org])
    expect(cliCursor.code).toBe(2)
    expect(cliCursor.stderr).toContain("names no row of this list")
  })
})

describe("tables on an 80-column terminal", () => {
  it("never cut ids, statuses or amounts; balance show has USED", async () => {
    const credit = await makeCredit(api)
    const unit = await makeUnit(api, { flatPrice: 0.3333 })
    const plan = await makePlan(app, tenant, [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: credit.id, quantity: 1000 },
      { type: "UNIT", billingMode: "ARREAR", unitId: unit.id },
      { type: "WALLET", billingMode: "ADVANCE", amount: 12.5 }
    ])
    const customer = await makeCustomer(api, { name: "A customer with a rather long name for a narrow terminal" })
    await buy(api, customer.id, plan.id)
    ok(await api.post("/signal/credit", {
      customerId: customer.id,
      agentKey: credit.agentKey,
      usage: { model: "gpt-4o", inputTokens: 1234, outputTokens: 567 }
    }), 202)
    ok(await api.post("/signal/unit", { customerId: customer.id, agentKey: unit.agentKey, quantity: 7 }), 202)
    await drain(app)
    const rows = ok(await api.get(`/signal/usage-log?customerId=${customer.id}`)).usageLogs
    const tty = (args: Array<string>) => runCliInProcess([...args, ...org], { env: env(), tty: { columns: 80 } })
    const visible = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, "")

    const usage = visible((await tty(["usage", "--customer", customer.id])).stdout)
    for (const line of usage.trimEnd().split("\n")) expect(line.length, line).toBeLessThan(80)
    for (const row of rows) {
      expect(usage).toContain(row.id)
      expect(usage).toContain(BigDecimal.format(BigDecimal.normalize(decimal(String(row.customerCost)))))
    }

    const signals = visible((await tty(["signal", "list", "--customer", customer.id])).stdout)
    for (const line of signals.trimEnd().split("\n")) expect(line.length, line).toBeLessThan(80)
    expect(signals.match(/\bPROCESSED\b/g)).toHaveLength(2)

    const invoices = visible((await tty(["invoice", "list", "--customer", customer.id])).stdout)
    const [invoice] = ok(await api.get(`/invoices?customerId=${customer.id}`)).invoices
    expect(invoices).toContain(invoice.id)
    expect(invoices).toContain(invoice.number)
    expect(invoices).toContain(BigDecimal.format(decimal(String(invoice.total))))
    expect(invoices).not.toContain("…")

    const balances = ok(await api.get(`/customers/${customer.id}/balances`))
    const shown = await app.cli(["balance", "show", customer.id, ...org])
    expect(shown.stdout).toMatch(/KIND\s+NAME\s+GRANTED\s+USED\s+REMAINING/)
    const creditRow = shown.stdout.split("\n").find((line) => line.startsWith("credit"))!
    expect(creditRow).toContain(BigDecimal.format(decimal(String(balances.credits[0].used))))
    // A unit's USED too (issue 37; it printed "-"): the 7 used in arrears.
    expect(shown.stdout.split("\n").find((line) => line.startsWith("unit"))!.trim().split(/\s{2,}/).slice(-3)).toEqual(["0", "7", "0"])
  })
})

describe("the wallet and negative zero", () => {
  it("a wallet signal for a plan without a wallet is refused (422), nothing debited", async () => {
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    expect(ok(await api.get(`/customers/${customer.id}/plan`)).plan.meters.wallet).toBe(false)
    ok(await api.post("/signal/wallet", { customerId: customer.id, usage: { model: "gpt-4o", inputTokens: 10, outputTokens: 1 } }), 202)
    await drain(app)
    const failed = await app.cli(["signal", "list", "--customer", customer.id, "--status", "FAILED", "--json", ...org])
    expect(failed.json.signals).toHaveLength(1)
    expect(failed.json.signals[0]).toMatchObject({ errorStatus: 422, errorMessage: expect.stringContaining("the wallet is not on the customer's plan") })
    expect(ok(await api.get(`/customers/${customer.id}/balances`)).wallet.balance).toBe(0)
    expect(ok(await api.get(`/signal/usage-log?customerId=${customer.id}`)).usageLogs).toEqual([])
  })

  it("an amount that rounds to zero never shows a minus sign, nor the negative style", () => {
    const formats = formatsFor("en-US")
    expect(formats.money(decimal("-0.001"), "USD")).toBe("$0.00")
    expect(formats.preciseMoney(decimal("-0.0000001"), "USD")).toBe("$0.00")
    expect(formats.money(decimal("-1.5"), "USD")).toBe("-$1.50")
    expect(isNegativeInCents(decimal("-0.004"))).toBe(false)
    expect(isNegativeInCents(decimal("-0.005"))).toBe(true)
  })
})

describe("the API's answers", () => {
  it("authenticate before judging a body: no key with a form body is 401; an unknown route is 404 and a wrong method 405 whatever the body", async () => {
    const form = { rawBody: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } }
    const noKey = await app.request("POST", "/customers", { key: null, ...form })
    expect(noKey.status).toBe(401)
    expect(noKey.body.statusCode).toBe(401)
    expect((await app.request("POST", "/customers", { key: "sk_not_a_key", ...form })).status).toBe(401)
    expect((await app.request("POST", "/no-such-route", { key: null, ...form })).status).toBe(404)
    expect((await app.request("POST", "/no-such-route", { key: tenant.apiKey, ...form })).status).toBe(404)
    expect((await app.request("PUT", "/customers", { key: tenant.apiKey, ...form })).status).toBe(405)
    // With a key that authenticates, the body is judged as before.
    expect((await app.request("POST", "/customers", { key: tenant.apiKey, ...form })).status).toBe(415)
  })

  it("a lookup counts ids after removing duplicates: 11 that are 10 is accepted, 11 distinct is 400", async () => {
    const ten = Array.from({ length: 10 }, (_, i) => `usg_missing${i}`)
    const accepted = ok(await api.post("/signal/usage-log/lookup", { ids: [...ten, ten[0]] }))
    expect(accepted).toEqual({ usageLogs: [], notFound: ten })
    const refused = await api.post("/signal/usage-log/lookup", { ids: [...ten, "usg_eleventh"] })
    expectError(refused, 400, "validation_failed")
    expect(refused.body.statusDetail.message).toContain("at most 10 distinct ids")
  })

  it("a malformed externalId beside a valid customerId is 400; a well-formed one is ignored (customerId used)", async () => {
    const unit = await makeUnit(api, { flatPrice: 1 })
    const plan = await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit.id }])
    const customer = await makeCustomer(api)
    await buy(api, customer.id, plan.id)
    const malformed = await api.post("/signal/unit", { customerId: customer.id, externalId: "not valid!", agentKey: unit.agentKey })
    expectError(malformed, 400, "validation_failed")
    expect(malformed.body.statusDetail.message).toContain("externalId")
    const ignored = ok(await api.post("/signal/unit", { customerId: customer.id, externalId: "nobody-has-this", agentKey: unit.agentKey }), 202)
    expect(ignored.queued).toBe(true)
    await drain(app)
    expect(ok(await api.get(`/signal/usage-log?customerId=${customer.id}`)).usageLogs).toHaveLength(1)
  })
})
