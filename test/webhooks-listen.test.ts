/**
 * `billing listen --forward-to URL` forwards this organisation's events to a
 * local receiver, signed with the session's own secret; `billing trigger`
 * makes a test event that reaches real endpoints and listeners alike; real
 * deliveries are left to the worker, untouched.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { createHmac, timingSafeEqual } from "node:crypto"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientOf, makeCustomer } from "./billing-support.ts"
import { query } from "./signals-fixtures.ts"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { type Receiver, startReceiver } from "./webhooks-helpers.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const TIMEOUT = 180_000

let app: TestApp
let tenant: Tenant
let local: Receiver
let production: Receiver
let customerId: string
let listener: ChildProcessWithoutNullStreams | undefined

beforeAll(async () => {
  app = await startTestApp()
  tenant = await app.tenant("Listen")
  local = await startReceiver()
  production = await startReceiver()
  customerId = (await makeCustomer(clientOf(app, tenant), { externalId: "lis-1" })).id
})
afterAll(async () => {
  listener?.kill("SIGKILL")
  await local.close()
  await production.close()
  await app.close()
})

const cli = (args: ReadonlyArray<string>) => app.cli([...args, "--org", tenant.organizationId])

/** The spec's scheme, checked independently of src/: HMAC-SHA256(secret, t + "." + raw body). */
const signedBy = (secret: string, header: string, body: string) => {
  const parts = Object.fromEntries(header.split(",").map((part) => part.split("=") as [string, string]))
  const expected = createHmac("sha256", secret).update(`${parts.t}.${body}`).digest()
  const given = Buffer.from(parts.v1 ?? "", "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const jsonLines = (text: string) => text.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))

describe("billing listen and billing trigger", () => {
  it("forwards a triggered test event, signed with the session's secret, and leaves real deliveries to the worker", async () => {
    const added = await cli(["webhook", "add", "--url", production.url, "--json"])
    expect(added.code, added.stderr).toBe(0)
    const productionSecret: string = added.json.endpoint.secret

    const child = spawn(process.execPath, [bin, "listen", "--forward-to", local.url, "--org", tenant.organizationId], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_LISTEN_POLL_MS: "50" }
    })
    listener = child
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    const ready = await eventually(() => {
      const line = jsonLines(stdout).find((entry) => entry.listening)
      expect(line, stdout + stderr).toBeDefined()
      return line
    })
    expect(ready).toMatchObject({
      organizationId: tenant.organizationId,
      forwardTo: local.url,
      events: ["wallet.balance.update", "wallet.balance.drop"],
      secret: expect.stringMatching(/^whsec_/)
    })
    expect(ready.secret).not.toBe(productionSecret)
    // The session is not one of the organisation's endpoints.
    expect((await cli(["webhook", "list", "--json"])).json.endpoints.map((e: any) => e.url)).toEqual([production.url])

    const triggered = await cli(["trigger", "wallet.balance.update", "--json"])
    expect(triggered.code, triggered.stderr).toBe(0)
    expect(triggered.json).toEqual({
      event: { id: expect.stringMatching(/^evt_/), eventType: "wallet.balance.update", test: true, customerId },
      recipients: 2
    })

    const received = await eventually(() => {
      expect(local.received).toHaveLength(1)
      return local.received[0]!
    })
    const body = JSON.parse(received.body)
    expect(body).toMatchObject({
      id: triggered.json.event.id,
      event_type: "wallet.balance.update",
      test: true,
      data: { customer_id: customerId, external_id: "lis-1", delta: 0, source: "ADJUSTMENT" }
    })
    expect(received.headers["x-service-event-id"]).toBe(triggered.json.event.id)
    expect(signedBy(ready.secret, String(received.headers["x-service-signature"]), received.body)).toBe(true)
    expect(signedBy(productionSecret, String(received.headers["x-service-signature"]), received.body)).toBe(false)
    const forwarded = await eventually(() => {
      const line = jsonLines(stdout).find((entry) => entry.forwarded)
      expect(line).toBeDefined()
      return line
    })
    expect(forwarded).toMatchObject({ eventId: triggered.json.event.id, eventType: "wallet.balance.update", statusCode: 200 })

    // The real endpoint's delivery waits for the worker, which delivers it and never the session's.
    expect(production.received).toHaveLength(0)
    const worker = await app.cli(["worker", "--once", "--json"])
    expect(worker.code, worker.stderr).toBe(0)
    expect(production.received).toHaveLength(1)
    expect(production.received[0]!.body).toBe(received.body)
    expect(signedBy(productionSecret, String(production.received[0]!.headers["x-service-signature"]), production.received[0]!.body))
      .toBe(true)
    expect(local.received).toHaveLength(1)

    // A real wallet change reaches the session as it happens, without the test mark.
    const adjusted = await cli(["adjust", "wallet", customerId, "--delta", "2.5", "--json"])
    expect(adjusted.code, adjusted.stderr).toBe(0)
    const real = await eventually(() => {
      expect(local.received).toHaveLength(2)
      return JSON.parse(local.received[1]!.body)
    })
    expect(real).toMatchObject({ event_type: "wallet.balance.update", data: { delta: 2.5, source: "ADJUSTMENT" } })
    expect(real.test).toBeUndefined()

    child.kill("SIGTERM")
    expect(await exited).toBe(0)
    // Ended: unsubscribed, nothing left pending for it.
    const afterwards = await cli(["trigger", "wallet.balance.update", "--json"])
    expect(afterwards.json.recipients).toBe(1)
    const pending = await query<{ n: string }>(
      app,
      `SELECT count(*)::text AS n FROM webhook_deliveries d JOIN webhook_endpoints e
         ON e.organization_id = d.organization_id AND e.id = d.endpoint_id
       WHERE d.organization_id = $1 AND e.listen_until IS NOT NULL AND d.status = 'PENDING'`,
      [tenant.organizationId]
    )
    expect(pending[0]!.n).toBe("0")
  }, TIMEOUT)

  it("refuses an unknown event type and says when nobody takes the event", async () => {
    const other = await app.tenant("Quiet")
    await makeCustomer(clientOf(app, other))
    const unknown = await app.cli(["trigger", "invoice.exploded", "--org", other.organizationId])
    expect(unknown.code).not.toBe(0)
    expect(unknown.stderr).toContain("wallet.balance.update")
    const nobody = await app.cli(["trigger", "wallet.balance.drop", "--org", other.organizationId, "--json"])
    expect(nobody.code, nobody.stderr).toBe(0)
    expect(nobody.json.recipients).toBe(0)
    // A threshold alert is about a prepaid balance of a purchase: no test event of it, and the refusal says which there are.
    const threshold = await app.cli(["trigger", "balance.threshold.crossed", "--org", other.organizationId])
    expect(threshold.code).not.toBe(0)
    expect(threshold.stderr).toContain("wallet.balance.recovered")
  }, TIMEOUT)

  it("makes a test wallet.balance.recovered for an endpoint subscribed to it, its threshold the wallet's balance", async () => {
    const tenant = await app.tenant("Recovering")
    await makeCustomer(clientOf(app, tenant))
    const added = await app.cli([
      "webhook", "add", "--url", "http://127.0.0.1:9/hooks", "--events", "wallet.balance.recovered", "--org", tenant.organizationId, "--json"
    ])
    expect(added.code, added.stderr).toBe(0)
    const triggered = await app.cli(["trigger", "wallet.balance.recovered", "--org", tenant.organizationId, "--json"])
    expect(triggered.code, triggered.stderr).toBe(0)
    expect(triggered.json).toMatchObject({ event: { eventType: "wallet.balance.recovered", test: true }, recipients: 1 })
    const [event] = await query<{ body: string }>(
      app,
      "SELECT body FROM webhook_events WHERE organization_id = $1 AND id = $2",
      [tenant.organizationId, triggered.json.event.id]
    )
    expect(JSON.parse(event!.body)).toMatchObject({
      event_type: "wallet.balance.recovered",
      test: true,
      data: { delta: 0, threshold: 0, threshold_source: "CUSTOMER" }
    })
  }, TIMEOUT)
})
