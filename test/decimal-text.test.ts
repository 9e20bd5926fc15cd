/**
 * Amounts typed as text (CLI flags, YAML/JSON fixtures) may be decimal strings
 * and reach the database digit for digit; the API keeps taking JSON numbers only.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Either, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { acceptDecimalText, MoneyInput } from "../src/schema.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

const CLI_TEST_TIMEOUT = 600_000

/** More significant digits than a float holds: any trip through a number changes it. */
const PRECISE = "1234567.123456789012"

const Body = Schema.Struct({ amount: MoneyInput })

describe("MoneyInput", () => {
  it("refuses a decimal string by default (the API's contract: JSON numbers)", () => {
    expect(Either.isLeft(Schema.decodeUnknownEither(Body)({ amount: "0.05" }))).toBe(true)
    expect(Effect.runSync(Effect.either(Schema.decodeUnknown(Body)({ amount: "0.05" })))._tag).toBe("Left")
  })

  it("takes a decimal string exactly where text is accepted", () => {
    const decoded = Effect.runSync(acceptDecimalText(Schema.decodeUnknown(Body)({ amount: PRECISE })))
    expect(BigDecimal.equals(decoded.amount, BigDecimal.unsafeFromString(PRECISE))).toBe(true)
    expect(BigDecimal.equals(decoded.amount, BigDecimal.unsafeFromNumber(Number(PRECISE)))).toBe(false)
    const negative = Effect.runSync(acceptDecimalText(Schema.decodeUnknown(Body)({ amount: "-0.05" })))
    expect(BigDecimal.format(negative.amount)).toBe("-0.05")
  })

  it.each(["", " ", "1e3", "0x10", "1,000", "+5", "5 ", "NaN", "Infinity", "1.2.3", "-"])(
    "refuses %j even where text is accepted",
    (text) => {
      expect(Effect.runSync(Effect.either(acceptDecimalText(Schema.decodeUnknown(Body)({ amount: text }))))._tag).toBe("Left")
    }
  )
})

let app: TestApp
let tenant: Tenant
let dir: string

beforeAll(async () => {
  app = await startTestApp()
  tenant = await app.tenant("Decimals")
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "decimals-"))
})
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  await app.close()
})

const cli = (args: ReadonlyArray<string>, on: Tenant = tenant) => app.cli([...args, "--json"], { BILLING_ORG: on.organizationId })

/** A NUMERIC column's text as PostgreSQL holds it. */
const numericText = (query: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, unknown>) =>
  app.run(Effect.flatMap(SqlClient.SqlClient, query)).then((rows) => String(Object.values(rows[0]!)[0]))

describe("decimal strings in fixtures and CLI flags", () => {
  it("loads YAML amounts written as strings, exactly", async () => {
    const file = path.join(dir, "strings.yaml")
    fs.writeFileSync(
      file,
      `
units:
  - { name: Token, agentKey: token, pricingType: FLAT, flatPrice: "0.000000000123" }
composites:
  - { name: Report, refId: report, price: "0.05", entitlements: { units: [token] } }
credits:
  - name: Writer
    agentKey: writer
    marginPercent: "12.5"
    modelBundle:
      - { modelId: gpt-4o-mini, averageTokensPerLLMCall: "1000", input: "50", output: 50, cache: 0, cacheWrite: 0 }
plans:
  - name: Basic
    entitlements:
      - { type: WALLET, billingMode: ADVANCE, amount: "${PRECISE}" }
customers:
  - { name: Ann, email: ann@example.com, externalId: ann }
purchases:
  - { externalId: ann, plan: Basic }
`
    )
    const loaded = await cli(["fixtures", "load", file])
    expect(loaded.stderr).toBe("")
    expect(loaded.json).toMatchObject({ created: 6 })
    const org = tenant.organizationId
    expect(await numericText((sql) => sql`SELECT flat_price::text FROM units WHERE organization_id = ${org}`)).toBe("0.000000000123")
    expect(await numericText((sql) => sql`SELECT price::text FROM composites WHERE organization_id = ${org}`)).toBe("0.05")
    expect(await numericText((sql) => sql`SELECT margin_percent::text FROM credits WHERE organization_id = ${org}`)).toBe("12.5")
    expect(await numericText((sql) => sql`SELECT w.balance::text FROM wallets w WHERE w.organization_id = ${org}`)).toBe(PRECISE)
  }, CLI_TEST_TIMEOUT)

  it("takes amount flags as typed, exactly, and refuses what is not a decimal", async () => {
    // A workspace of its own: a customer whose wallet holds PRECISE.
    const own = await app.tenant("Decimal flags")
    const file = path.join(dir, "wallet.yaml")
    fs.writeFileSync(
      file,
      `
plans:
  - { name: Basic, entitlements: [{ type: WALLET, billingMode: ADVANCE, amount: "${PRECISE}" }] }
customers:
  - { name: Ann, email: ann@example.com, externalId: ann }
purchases:
  - { externalId: ann, plan: Basic }
`
    )
    const loaded = await cli(["fixtures", "load", file], own)
    expect(loaded.stderr).toBe("")

    const adjusted = await cli(["adjust", "wallet", "--external-id", "ann", "--delta", "-0.000000000001"], own)
    expect(adjusted.stderr).toBe("")
    expect(adjusted.json).toMatchObject({ adjusted: true, floored: false })
    const org = own.organizationId
    expect(await numericText((sql) => sql`SELECT balance::text FROM wallets WHERE organization_id = ${org}`))
      .toBe("1234567.123456789011")

    const tax = await cli(["tax", "create", "--name", "VAT", "--rate", "7.125"], own)
    expect(tax.code, tax.stderr).toBe(0)
    expect(await numericText((sql) => sql`SELECT rate_percent::text FROM taxes WHERE organization_id = ${org}`)).toBe("7.125")

    const refused = await cli(["adjust", "wallet", "--external-id", "ann", "--delta", "1e3"], own)
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("not a decimal number")
  }, CLI_TEST_TIMEOUT)

  it("still answers a string amount over the API with 400", async () => {
    const response = await app.request("POST", "/customers/ext/ann/wallet/adjust", { key: tenant.apiKey, body: { delta: "5" } })
    expect(response.status).toBe(400)
  })
})
