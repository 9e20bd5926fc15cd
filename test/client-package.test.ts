/**
 * `@billing/client` as another project installs it (issue 37, point 5): packed
 * with `npm pack`, installed into a blank project, imported by plain `node`
 * (no tsx, no loader), where `verifyWebhookSignature` verifies a signature the
 * service's own signer made (src/webhooks/Signature.ts, what the worker sends);
 * and a TypeScript project type-checks against the package's declarations
 * alone. The package imports nothing of the service at run time: the blank
 * project has no other package.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signatureHeader } from "../src/webhooks/Signature.ts"
import { blankDirectory, clientDirectory, ensureClientBuilt, plainEnv, root, run } from "./support/ClientPackage.ts"

let project: string

beforeAll(async () => {
  await ensureClientBuilt()
  project = blankDirectory("billing-client-consumer-")
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", project], clientDirectory)) as Array<{
    readonly filename: string
    readonly files: ReadonlyArray<{ readonly path: string }>
  }>
  const files = packed[0]!.files.map((file) => file.path)
  expect(files).toEqual(expect.arrayContaining(["dist/index.js", "dist/index.d.ts", "dist/webhooks.js", "dist/webhooks.d.ts", "package.json"]))
  fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }, null, 2))
  run("npm", ["install", "--offline", path.join(project, packed[0]!.filename)], project)
}, 600_000)

afterAll(() => {
  if (project !== undefined) fs.rmSync(project, { recursive: true, force: true })
})

describe("the packed client in a blank project", () => {
  it("installs with nothing beside it: no dependency, and no file of the service", () => {
    const installed = path.join(project, "node_modules", "@billing", "client")
    expect(fs.readdirSync(path.join(project, "node_modules")).filter((name) => !name.startsWith("."))).toEqual(["@billing"])
    // Its JavaScript imports only its own files and the platform's modules.
    for (const file of fs.readdirSync(path.join(installed, "dist"), { recursive: true }) as Array<string>) {
      if (!file.endsWith(".js")) continue
      const text = fs.readFileSync(path.join(installed, "dist", file), "utf8")
      for (const [, specifier] of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/g)) {
        expect(specifier, `${file} imports ${specifier}`).toMatch(/^(\.\.?\/|node:)/)
      }
    }
  })

  it("plain node imports it and verifies the service's own signature", () => {
    const secret = "whsec_consumer_test_secret"
    // A body as the service writes it: an amount with more digits than a float holds.
    const body = `{"id":"evt_1","event_type":"wallet.balance.update","triggered_at":"2026-11-01T00:00:00.000Z",` +
      `"data":{"customer_id":"cus_1","external_id":null,"previous_balance":1234567.123456789012,` +
      `"current_balance":1234566.123456789012,"delta":-1,"source":"USAGE","usage_log_id":"ul_1"}}`
    const header = signatureHeader(secret, body, new Date())
    const stale = signatureHeader(secret, body, new Date(Date.now() - 10 * 60_000))
    fs.writeFileSync(
      path.join(project, "consumer.mjs"),
      `import { createBillingClient, verifiedWebhookEvent, verifyWebhookSignature, WebhookSignatureError } from "@billing/client"
const { SECRET: secret, HEADER: header, STALE: stale, BODY: body } = process.env
const event = verifiedWebhookEvent(secret, header, Buffer.from(body), { decimals: "string" })
let refused
try {
  verifiedWebhookEvent(secret, header, body.replace("-1,", "-2,"))
} catch (error) {
  refused = error instanceof WebhookSignatureError
}
console.log(JSON.stringify({
  execArgv: process.execArgv,
  verified: verifyWebhookSignature(secret, header, body),
  bytes: verifyWebhookSignature(secret, header, new TextEncoder().encode(body)),
  tampered: verifyWebhookSignature(secret, header, body.replace("-1,", "-2,")),
  otherSecret: verifyWebhookSignature(secret + "x", header, body),
  stale: verifyWebhookSignature(secret, stale, body),
  missing: verifyWebhookSignature(secret, undefined, body),
  balance: event.data.current_balance,
  numberBalance: verifiedWebhookEvent(secret, header, body).data.current_balance,
  refused,
  client: typeof createBillingClient({ baseUrl: "http://127.0.0.1:1", apiKey: "sk_x" }).paginate.customers.list
}))
`
    )
    const output = run(process.execPath, ["consumer.mjs"], project, plainEnv({ SECRET: secret, HEADER: header, STALE: stale, BODY: body }))
    expect(JSON.parse(output)).toEqual({
      execArgv: [],
      verified: true,
      bytes: true,
      tampered: false,
      otherSecret: false,
      stale: false,
      missing: false,
      balance: "1234566.123456789012",
      numberBalance: Number("1234566.123456789012"),
      refused: true,
      client: "function"
    })
  })

  it("a TypeScript project type-checks against its declarations: methods, withResponse, paginate, decimals, events", () => {
    fs.writeFileSync(
      path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2022"],
          strict: true,
          noEmit: true,
          // The package's declarations are checked too, as a consumer with the strictest setting meets them.
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [path.join(root, "node_modules", "@types")]
        },
        files: ["consumer.ts"]
      })
    )
    fs.writeFileSync(
      path.join(project, "consumer.ts"),
      `import { type BillingApiError, createBillingClient, type Item, verifiedWebhookEvent, type WebhookEvent } from "@billing/client"

const billing = createBillingClient({ baseUrl: "http://127.0.0.1:8787", apiKey: "sk_x" })
const exact = createBillingClient({ baseUrl: "http://127.0.0.1:8787", apiKey: "sk_x", decimals: "string" })

export const day = async () => {
  const created = await billing.withResponse.customers.create({ name: "Jo", email: "jo@example.com", externalId: "jo" })
  const status: 201 = created.status
  const id: string = created.result.customer.id
  const replayed: boolean = created.replayed
  const remaining: number | undefined = created.rateLimit?.remaining
  // @ts-expect-error: a customer needs an email
  await billing.customers.create({ name: "No mail" })

  const signal = await billing.withResponse.signals.unit({ externalId: "jo", agentKey: "page", quantity: 2 }, { headers: { prefer: "wait=5" } })
  if (signal.status === 200) {
    const quantity: number = signal.result.usageLog.quantity
    void quantity
  } else {
    const queued: true = signal.result.queued
    void queued
  }

  const balances = await exact.balances.balancesByExternalId({ externalId: "jo" })
  const wallet: string = balances.wallet.balance
  // @ts-expect-error: with decimals "string" an amount is a string
  const asNumber: number = balances.wallet.balance

  const totals: Array<string> = []
  for await (const invoice of exact.paginate.invoices.list({ customerId: id })) totals.push(invoice.total)
  const row: Item<"customers.list"> = (await billing.customers.list({ limit: 1 })).customers[0]!
  // @ts-expect-error: a member list pages one customer's members: its id is required
  billing.paginate.members.list()

  const event: WebhookEvent<"string"> = verifiedWebhookEvent("whsec_x", "t=1,v1=00", "{}", { decimals: "string" })
  if (event.event_type === "wallet.balance.update") {
    const balance: string = event.data.current_balance
    void balance
  }
  const failure: BillingApiError | undefined = undefined
  return { status, replayed, remaining, wallet, asNumber, totals, row, failure }
}
`
    )
    const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
    const result = (() => {
      try {
        return run(process.execPath, [tsc, "-p", "tsconfig.json"], project)
      } catch (error) {
        return String(error)
      }
    })()
    expect(result).toBe("")
  })
})
