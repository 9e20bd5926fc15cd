/**
 * The operator's side of webhooks, through the real `billing` bin: managing
 * endpoints, watching deliveries, retrying and replaying them, with the worker
 * run as `billing worker --once` and a real receiver on loopback.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhookSignature } from "../src/index.ts"
import { eventually } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { changeWallet, drainSender, type Receiver, startReceiver } from "./webhooks-helpers.ts"

/** Each test spawns the bin several times; a loaded machine makes every spawn slow. */
const CLI_TEST_TIMEOUT = 600_000

const cliPath = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

let app: TestApp
let acme: Tenant
let other: Tenant
const receivers: Array<Receiver> = []

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = await app.tenant("Other")
})
afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.close()))
  await app.close()
})

const receiver = async (...args: Parameters<typeof startReceiver>) => {
  const started = await startReceiver(...args)
  receivers.push(started)
  return started
}

const billing = (args: ReadonlyArray<string>, tenant: Tenant = acme, env: Record<string, string> = {}) =>
  app.cli(args, { BILLING_ORG: tenant.organizationId, BILLING_WEBHOOK_RETRY_SCHEDULE: "0,0,0,0,0", ...env })

const ok = async (args: ReadonlyArray<string>, tenant?: Tenant, env?: Record<string, string>) => {
  const result = await billing(args, tenant, env)
  // A transient database error retried by the worker is a warning; an error is a failure.
  expect(result.stderr).not.toMatch(/level=ERROR/)
  expect(result.code).toBe(0)
  expect(result.json, `stdout is one JSON document: ${result.stdout}`).toBeDefined()
  return result.json
}

const fails = async (args: ReadonlyArray<string>, message: RegExp, tenant?: Tenant) => {
  const result = await billing(args, tenant)
  expect(result.code).not.toBe(0)
  expect(result.stdout).toBe("")
  expect(result.stderr).toMatch(message)
}

describe("billing webhook add / list / enable / disable / rotate-secret / remove", () => {
  it("adds an endpoint and prints exactly the endpoint with its whsec_ secret", async () => {
    const json = await ok(["webhook", "add", "--url", "http://127.0.0.1:9/a", "--json"])
    expect(Object.keys(json)).toEqual(["endpoint"])
    expect(Object.keys(json.endpoint).sort()).toEqual(["enabled", "events", "id", "secret", "threshold", "url"])
    expect(json.endpoint).toEqual({
      id: expect.stringMatching(/^whe_/),
      url: "http://127.0.0.1:9/a",
      events: ["wallet.balance.update", "wallet.balance.drop"],
      threshold: null,
      enabled: true,
      secret: expect.stringMatching(/^whsec_[0-9a-z]{40,}$/)
    })
  }, CLI_TEST_TIMEOUT)

  it("takes a list of events and a threshold", async () => {
    const json = await ok([
      "webhook", "add", "--url", "https://hooks.example.com/x", "--events", "wallet.balance.drop", "--threshold", "12.5",
      "--json"
    ])
    expect(json.endpoint).toMatchObject({ events: ["wallet.balance.drop"], threshold: 12.5, enabled: true })
  }, CLI_TEST_TIMEOUT)

  it("refuses a bad url, event, or threshold with a message naming it, and adds nothing", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["--url", "not a url"], /url/],
      [["--url", "ftp://example.com/x"], /http/],
      [["--url", "http://example.com", "--events", "wallet.balance.explode"], /events/],
      [["--url", "http://example.com", "--threshold", "-1"], /threshold/],
      [["--url", "http://example.com", "--threshold", "abc"], /number/]
    ]
    for (const [args, message] of cases) await fails(["webhook", "add", ...args, "--json"], message, other)
    expect((await ok(["webhook", "list", "--include-removed", "--json"], other)).endpoints).toEqual([])
  }, CLI_TEST_TIMEOUT)

  it("disables, enables, rotates and removes, keeping other organisations out", async () => {
    const { endpoint } = await ok(["webhook", "add", "--url", "http://127.0.0.1:9/b", "--json"])
    const listed = await ok(["webhook", "list", "--json"])
    expect(listed.endpoints.map((e: any) => e.id)).toContain(endpoint.id)
    expect(listed.endpoints.find((e: any) => e.id === endpoint.id).secret).toBeUndefined()

    expect((await ok(["webhook", "disable", endpoint.id, "--json"])).endpoint).toMatchObject({ enabled: false })
    expect((await ok(["webhook", "enable", endpoint.id, "--json"])).endpoint).toMatchObject({ enabled: true })
    const rotated = await ok(["webhook", "rotate-secret", endpoint.id, "--json"])
    expect(rotated.endpoint.secret).toMatch(/^whsec_/)
    expect(rotated.endpoint.secret).not.toBe(endpoint.secret)

    await fails(["webhook", "disable", endpoint.id, "--json"], /not found/, other)
    await fails(["webhook", "remove", endpoint.id, "--json"], /not found/, other)

    await ok(["webhook", "remove", endpoint.id, "--json"])
    const after = await ok(["webhook", "list", "--json"])
    expect(after.endpoints.map((e: any) => e.id)).not.toContain(endpoint.id)
    const withRemoved = await ok(["webhook", "list", "--include-removed", "--json"])
    expect(withRemoved.endpoints.find((e: any) => e.id === endpoint.id)).toMatchObject({
      enabled: false,
      removedAt: expect.any(String)
    })
    await fails(["webhook", "enable", endpoint.id, "--json"], /not found/)
  }, CLI_TEST_TIMEOUT)

  it("needs an organisation", async () => {
    const result = await app.cli(["webhook", "list", "--json"], { BILLING_ORG: "" })
    expect(result.code).not.toBe(0)
    expect(result.stderr).toMatch(/organisation/)
  }, CLI_TEST_TIMEOUT)
})

describe("billing webhook deliveries / retry / replay", () => {
  it("shows attempts with status codes and timings, retries by hand and replays byte for byte", async () => {
    const org = await app.tenant("Deliveries")
    const created = await app.request("POST", "/customers", { key: org.apiKey, body: { name: "Al", email: "al@example.com" } })
    const customer = created.body.result.customer.id
    let healthy = false
    const hook = await receiver(() => ({ status: healthy ? 200 : 502 }))
    const { endpoint } = await ok(["webhook", "add", "--url", hook.url, "--events", "wallet.balance.update", "--json"], org)

    await changeWallet(app, { organizationId: org.organizationId, customerId: customer, from: "0", to: "100" })
    expect(await ok(["worker", "--once", "--json"], org)).toMatchObject({ handled: expect.any(Number) })
    expect(hook.received).toHaveLength(6)

    const { deliveries } = await ok(["webhook", "deliveries", "--json"], org)
    expect(deliveries).toHaveLength(1)
    const [failed] = deliveries
    expect(failed).toMatchObject({
      endpointId: endpoint.id,
      url: hook.url,
      eventType: "wallet.balance.update",
      status: "FAILED",
      attempts: 6,
      nextAttemptAt: null,
      lastStatusCode: 502,
      lastError: "HTTP 502"
    })
    expect(failed.attemptLog).toHaveLength(6)
    for (const attempt of failed.attemptLog) {
      expect(attempt).toMatchObject({ statusCode: 502, error: "HTTP 502", durationMs: expect.any(Number) })
      expect(new Date(attempt.startedAt).toISOString()).toBe(attempt.startedAt)
    }

    const table = await billing(["webhook", "deliveries"], org)
    expect(table.code).toBe(0)
    for (const header of ["DELIVERY", "STATUS", "ATTEMPTS", "CODES", "LAST MS", "NEXT RETRY"]) expect(table.stdout).toContain(header)
    expect(table.stdout).toContain("502,502,502,502,502,502")
    expect(table.stdout).toContain(failed.id)
    expect(table.stdout).toMatch(/1 deliveries, 1 failed, 6 attempts/)

    healthy = true
    const retried = await ok(["webhook", "retry", failed.id, "--json"], org)
    expect(retried.delivery).toMatchObject({ id: failed.id, status: "PENDING" })
    await ok(["worker", "--once", "--json"], org)
    expect(hook.received).toHaveLength(7)
    const afterRetry = await ok(["webhook", "deliveries", "--event", failed.eventId, "--json"], org)
    expect(afterRetry.deliveries[0]).toMatchObject({ status: "DELIVERED", attempts: 7, lastStatusCode: 200 })

    const replay = await ok(["webhook", "replay", "--event", failed.eventId, "--json"], org)
    expect(replay).toMatchObject({ events: 1, deliveries: 1 })
    expect(replay.replayed[0].deliveries[0]).toMatchObject({ status: "PENDING", replayOf: failed.id, attempts: 0 })
    await ok(["worker", "--once", "--json"], org)
    expect(hook.received).toHaveLength(8)
    const [original, , , , , , , replayed] = hook.received
    expect(replayed!.body).toBe(original!.body)
    expect(replayed!.headers["x-service-event-id"]).toBe(failed.eventId)
    expect(verifyWebhookSignature(endpoint.secret, replayed!.headers["x-service-signature"] as string, replayed!.body))
      .toBe(true)

    await fails(["webhook", "retry", failed.id, "--json"], /not found/, other)
    await fails(["webhook", "replay", "--event", failed.eventId, "--json"], /not found/, other)
    await fails(["webhook", "retry", "whd_missing", "--json"], /not found/, org)
    await fails(["webhook", "replay", "--json"], /--event/, org)
    await fails(["webhook", "deliveries", "--status", "LOST", "--json"], /PENDING/, org)
  }, CLI_TEST_TIMEOUT)

  it("replays a time range, skipping endpoints that never had the events", async () => {
    const org = await app.tenant("Range")
    const created = await app.request("POST", "/customers", { key: org.apiKey, body: { name: "Bo", email: "bo@example.com" } })
    const customer = created.body.result.customer.id
    const hook = await receiver()
    await ok(["webhook", "add", "--url", hook.url, "--events", "wallet.balance.update", "--json"], org)
    // Every instant is taken from one reading of the clock: slow CLI calls must not move the window.
    const now = Date.now()
    const start = new Date(now - 60_000)
    const until = new Date(now - 30_000)
    for (const [from, to, secondsAgo] of [["0", "1", 50], ["1", "2", 40], ["2", "3", 5]] as const) {
      await changeWallet(app, {
        organizationId: org.organizationId,
        customerId: customer,
        from,
        to,
        at: new Date(now - secondsAgo * 1000)
      })
    }
    await ok(["worker", "--once", "--json"], org)
    expect(hook.received).toHaveLength(3)
    const late = await receiver()
    await ok(["webhook", "add", "--url", late.url, "--json"], org)

    const replay = await ok(
      ["webhook", "replay", "--since", start.toISOString(), "--until", until.toISOString(), "--json"],
      org
    )
    expect(replay).toMatchObject({ events: 2, deliveries: 2 })
    await ok(["worker", "--once", "--json"], org)
    expect(hook.received.slice(3).map((r) => JSON.parse(r.body).data.current_balance)).toEqual([1, 2])
    expect(late.received).toHaveLength(0)

    const human = await billing(["webhook", "replay", "--since", start.toISOString(), "--until", until.toISOString()], org)
    expect(human.code).toBe(0)
    expect(human.stdout).toContain("Replayed 2 event(s)")
    // Not a terminal: no progress bar frames, no cursor codes in the output.
    expect(human.stdout).not.toContain("events replayed")
    expect(human.stdout).not.toMatch(/\u001b/)

    await fails(["webhook", "replay", "--since", until.toISOString(), "--until", start.toISOString()], /before/, org)
    await fails(["webhook", "replay", "--since", "yesterday"], /ISO 8601/, org)
  }, CLI_TEST_TIMEOUT)
})

describe("billing webhook deliveries --watch", () => {
  it("keeps a live table on screen until interrupted", async () => {
    const org = await app.tenant("Watch")
    const created = await app.request("POST", "/customers", { key: org.apiKey, body: { name: "Di", email: "di@example.com" } })
    const hook = await receiver()
    await ok(["webhook", "add", "--url", hook.url, "--json"], org)
    await changeWallet(app, { organizationId: org.organizationId, customerId: created.body.result.customer.id, from: "1", to: "2" })
    await drainSender(app)
    const [delivery] = (await ok(["webhook", "deliveries", "--json"], org)).deliveries

    // A person's terminal: under CI=true Ink would hold every frame until exit.
    const child = spawn(process.execPath, [cliPath, "webhook", "deliveries", "--watch", "1"], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_ORG: org.organizationId, CI: "false" }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    // Two frames: the first one and at least one refresh. A spawn on a loaded machine is slow to start.
    await eventually(() => {
      expect(child.exitCode, `the watch exited early; stderr: ${stderr}`).toBeNull()
      expect((stdout.match(/refreshed every 1 s/g) ?? []).length).toBeGreaterThanOrEqual(2)
    }, { timeoutMs: 120_000, intervalMs: 100 }).catch((error) => {
      child.kill("SIGKILL")
      throw error
    })
    expect(stdout).toContain(delivery.id)
    expect(stdout).toContain("DELIVERED")
    child.kill("SIGINT")
    expect(await exited).toBe(0)
    expect(stdout).toContain("Stopped watching.")
  }, CLI_TEST_TIMEOUT)
})

describe.skipIf(!usesRealPostgres)("two workers at once (needs real PostgreSQL)", () => {
  it("sends each delivery exactly once when workers race for them", async () => {
    const org = await app.tenant("Race")
    const created = await app.request("POST", "/customers", { key: org.apiKey, body: { name: "Cy", email: "cy@example.com" } })
    const customer = created.body.result.customer.id
    const hook = await receiver(() => ({ status: 200, delayMs: 20 }))
    await ok(["webhook", "add", "--url", hook.url, "--events", "wallet.balance.update", "--json"], org)
    for (let i = 0; i < 30; i++) {
      await changeWallet(app, { organizationId: org.organizationId, customerId: customer, from: String(i), to: String(i + 1) })
    }
    const results = await Promise.all([billing(["worker", "--once", "--json"], org), billing(["worker", "--once", "--json"], org)])
    for (const result of results) expect(result.code).toBe(0)
    const ids = hook.received.map((r) => r.headers["x-service-event-id"])
    expect(ids).toHaveLength(30)
    expect(new Set(ids).size).toBe(30)
  }, CLI_TEST_TIMEOUT)
})
