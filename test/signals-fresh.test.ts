/**
 * Fresh balances (issue 26): a looping worker is woken by the inbox write
 * (LISTEN/NOTIFY) instead of waiting for its poll, and `Prefer: wait=N` on
 * the queued routes answers with the priced result.
 *
 * The wake is checked from outside on real PostgreSQL: `billing worker`
 * started through the bin with a fallback poll of 60 s still prices signals
 * sent one after another (the notify woke it); the embedded database has no
 * working LISTEN (it keeps polling), so that test skips there. The `Prefer`
 * tests run on both databases, with the worker loop `billing serve` runs in
 * its own process.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Duration, Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { waitPreference } from "../src/http/Prefer.ts"
import { workerJobs } from "../src/app/Jobs.ts"
import { runWorker } from "../src/worker/Worker.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { client, customerWithChatCredits, expectError, query } from "./signals-fixtures.ts"
import { eventually } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const cliPath = path.join(root, "bin", "billing.mjs")

let app: TestApp
let acme: Tenant
let planId: string
const children: Array<ChildProcess> = []

beforeAll(async () => {
  app = await startTestApp({ ownDatabase: true })
  acme = await app.tenant("Acme")
  // The chat credit and its plan (1,000 ADVANCE credits a month), made once with a first customer.
  const first = await customerWithChatCredits(app, acme, { email: "first@example.com" })
  planId = (await query<{ planId: string }>(app, "SELECT plan_id FROM purchases WHERE customer_id = $1", [first]))[0]!.planId
})

/** A new customer on the chat plan. */
const customerOnPlan = async (email: string) => {
  const api = client(app, acme)
  const customerId = await api.created("/customers", { name: email, email }, "customer")
  expect((await api.post("/purchases", { customerId, planId })).status).toBe(201)
  return customerId
}

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  await app.close()
})

/** One gpt-4o call of 1,000 input and 500 output tokens: 1.2 credits, 0.009 USD at 20 % margin. */
const call = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }

const send = (body: unknown, prefer?: string) =>
  app.request("POST", "/signal/credit", { key: acme.apiKey, body, ...(prefer === undefined ? {} : { headers: { prefer } }) })

const statusOf = async (rawId: string) =>
  (await query<{ status: string }>(app, "SELECT status FROM signals WHERE id = $1", [rawId]))[0]?.status

const remainingOf = async (customerId: string) =>
  (await client(app, acme).get(`/customers/${customerId}/balances`)).body.result.credits[0].remaining as number

describe("waitPreference (RFC 7240)", () => {
  it("reads wait=N, clamps it to 10 and ignores what it cannot apply", () => {
    expect(waitPreference(undefined)).toBeUndefined()
    expect(waitPreference("wait=5")).toBe(5)
    expect(waitPreference("respond-async, wait=3")).toBe(3)
    expect(waitPreference("WAIT = 4 ; foo=bar")).toBe(4)
    expect(waitPreference("wait=\"7\"")).toBe(7)
    expect(waitPreference("wait=60")).toBe(10)
    expect(waitPreference("wait=2, wait=9")).toBe(2)
    for (const ignored of ["wait", "wait=", "wait=abc", "wait=1.5", "wait=-1", "wait=0", "return=minimal", ";;", ""]) {
      expect(waitPreference(ignored), ignored).toBeUndefined()
    }
  })
})

describe("without a worker", () => {
  it("no Prefer header: 202 as before", async () => {
    const customerId = await customerOnPlan("nobody@example.com")
    const answer = await send({ customerId, agentKey: "chat", usage: call })
    expect(answer.status).toBe(202)
    expect(answer.body.result).toEqual({ queued: true, messageId: expect.any(String), rawId: expect.any(String) })
    expect(answer.headers.get("preference-applied")).toBeNull()
  })

  it("Prefer: wait=1 and nothing prices the signal in that second: the usual 202, no Preference-Applied", async () => {
    const customerId = await customerOnPlan("unwaited@example.com")
    const answer = await send({ customerId, agentKey: "chat", usage: call }, "wait=1")
    expect(answer.status).toBe(202)
    expect(answer.body.statusDetail.message).toBe("Signal accepted for processing")
    expect(answer.body.result).toEqual({ queued: true, messageId: expect.any(String), rawId: expect.any(String) })
    expect(answer.headers.get("preference-applied")).toBeNull()
    expect(await statusOf(answer.body.result.rawId)).toBe("QUEUED")
  })

  it("a malformed Prefer is ignored: 202", async () => {
    const customerId = await customerOnPlan("malformed@example.com")
    const answer = await send({ customerId, agentKey: "chat", usage: call }, "wait=soon")
    expect(answer.status).toBe(202)
    expect(answer.headers.get("preference-applied")).toBeNull()
  })
})

describe("Prefer: wait=N with the worker running (as `billing serve` runs it)", () => {
  let worker: Fiber.RuntimeFiber<number, never> | undefined

  beforeAll(async () => {
    worker = await app.run(Effect.forkDaemon(Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: false, idle: Duration.millis(100) }))))
  })

  afterAll(async () => {
    if (worker !== undefined) await Effect.runPromise(Fiber.interrupt(worker))
  })

  it("200 with the usage-log row, its customer cost and the balance remaining, exact, and Preference-Applied", async () => {
    const customerId = await customerOnPlan("fresh@example.com")
    // Whatever the earlier tests left queued is priced first, so the remaining below is this customer's alone.
    const first = await send({ customerId, agentKey: "chat", usage: call }, "wait=10")
    expect(first.status, JSON.stringify(first.body)).toBe(200)
    expect(first.headers.get("preference-applied")).toBe("wait=10")
    expect(first.body.statusDetail).toEqual({ status: "SUCCESS", message: "Signal priced" })
    const result = first.body.result
    expect(result).toMatchObject({ messageId: expect.stringMatching(/^msg_/), rawId: expect.stringMatching(/^sig_/) })
    expect(result.usageLog).toMatchObject({
      customerId,
      meter: "CREDIT",
      agentKey: "chat",
      quantity: 1.2,
      customerCost: 0.009,
      billingMode: "ADVANCE",
      balance: { remaining: 998.8 },
      rawId: result.rawId,
      messageId: result.messageId
    })
    // The answer is what the balances and the usage log say.
    expect(await remainingOf(customerId)).toBe(998.8)
    const log = (await client(app, acme).get(`/signal/usage-log?customerId=${customerId}`)).body.result.usageLogs
    expect(log).toEqual([result.usageLog])

    const second = await send({ customerId, agentKey: "chat", usage: call }, "respond-async, wait=5")
    expect(second.status).toBe(200)
    expect(second.headers.get("preference-applied")).toBe("wait=5")
    expect(second.body.result.usageLog.balance.remaining).toBe(997.6)
    expect(await remainingOf(customerId)).toBe(997.6)
  })

  it("wait above 10 is applied as 10", async () => {
    const customerId = await customerOnPlan("long@example.com")
    const answer = await send({ customerId, agentKey: "chat", usage: call }, "wait=3600")
    expect(answer.status).toBe(200)
    expect(answer.headers.get("preference-applied")).toBe("wait=10")
  })

  it("an idempotent repeat with Prefer answers the original's priced result", async () => {
    const customerId = await customerOnPlan("again@example.com")
    const body = { customerId, agentKey: "chat", usage: call, idempotencyKey: "fresh-once" }
    const first = await send(body, "wait=10")
    expect(first.status).toBe(200)
    const repeat = await send({ ...body, usage: { ...call, inputTokens: 999_999 } }, "wait=10")
    expect(repeat.status).toBe(200)
    expect(repeat.body.result).toEqual(first.body.result)
    expect(await remainingOf(customerId)).toBe(998.8)
  })

  it("a signal the worker refuses: its error envelope with the status and code it recorded", async () => {
    const api = client(app, acme)
    const customerId = await api.created("/customers", { name: "No plan", email: "noplan@example.com" }, "customer")
    const answer = await send({ customerId, agentKey: "chat", usage: call }, "wait=10")
    expectError(answer, 422, "no_active_plan")
    expect(answer.headers.get("preference-applied")).toBe("wait=10")
    const [row] = await query<{ status: string; errorStatus: number; errorMessage: string }>(
      app,
      "SELECT status, error_status, error_message FROM signals WHERE organization_id = $1 AND customer_id = $2",
      [acme.organizationId, customerId]
    )
    expect(row).toMatchObject({ status: "FAILED", errorStatus: 422 })
    expect(answer.body.statusDetail.message).toBe(row!.errorMessage)
    expect(answer.body.statusDetail.code).toBe("no_active_plan")
  })

  it("a signal held PENDING (unknown externalId): the usual 202, at once", async () => {
    const answer = await send({ externalId: "not-yet", agentKey: "chat", usage: call }, "wait=10")
    expect(answer.status).toBe(202)
    expect(answer.headers.get("preference-applied")).toBeNull()
    expect(await statusOf(answer.body.result.rawId)).toBe("PENDING")
  })

  it("the other queued routes wait too; the batch ignores Prefer", async () => {
    const api = client(app, acme)
    // The chat credits and a wallet: a wallet signal needs a plan with a WALLET component (docs/signals.md).
    const creditId = (await query<{ creditId: string }>(app, "SELECT id AS credit_id FROM credits WHERE organization_id = $1 AND agent_key = 'chat'", [acme.organizationId]))[0]!.creditId
    const walletPlan = await api.created("/plans", {
      name: "Chat and wallet",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "CREDIT", billingMode: "ADVANCE", creditId, quantity: 1000 },
        { type: "WALLET", billingMode: "ADVANCE", amount: 0 }
      ]
    }, "plan")
    const customerId = await api.created("/customers", { name: "routes", email: "routes@example.com" }, "customer")
    expect((await api.post("/purchases", { customerId, planId: walletPlan })).status).toBe(201)
    const wallet = await app.request("POST", "/signal/wallet", {
      key: acme.apiKey,
      body: { customerId, usage: call },
      headers: { prefer: "wait=10" }
    })
    expect(wallet.status, JSON.stringify(wallet.body)).toBe(200)
    expect(wallet.body.result.usageLog).toMatchObject({ meter: "WALLET", customerCost: 0.0075, balance: { remaining: -0.0075 } })
    const batch = await app.request("POST", "/signal/batch", {
      key: acme.apiKey,
      body: { signals: [{ type: "credit", customerId, agentKey: "chat", usage: call }] },
      headers: { prefer: "wait=10" }
    })
    expect(batch.status).toBe(202)
    expect(batch.headers.get("preference-applied")).toBeNull()
    await eventually(async () => expect(await statusOf(batch.body.result.results[0].rawId)).toBe("PROCESSED"))
    expect((await api.get(`/customers/${customerId}/balances`)).body.result.wallet.balance).toBe(-0.0075)
  })
})

describe.skipIf(!usesRealPostgres)("the wake (needs real PostgreSQL: LISTEN/NOTIFY)", () => {
  it("the insert's notification reaches the worker's listener: each signal queued wakes it", async () => {
    const customerId = await customerOnPlan("wakes@example.com")
    const processor = await app.run(SignalProcessor)
    const worker = await app.run(Effect.forkDaemon(runWorker([processor.job], { once: false, idle: Duration.minutes(10) })))
    try {
      await eventually(() => expect(processor.wake.state()).toBe("listening"))
      for (let n = 1; n <= 3; n++) {
        const before = processor.wake.wakes()
        const answer = await send({ customerId, agentKey: "chat", usage: call })
        expect(answer.status).toBe(202)
        await eventually(() => expect(processor.wake.wakes()).toBeGreaterThan(before))
        await eventually(async () => expect(await statusOf(answer.body.result.rawId)).toBe("PROCESSED"))
      }
    } finally {
      await Effect.runPromise(Fiber.interrupt(worker))
    }
  })

  it("`billing worker` with a 60 s fallback poll prices each signal sent after it went idle: the insert's notify woke it", async () => {
    const customerId = await customerOnPlan("wake@example.com")
    const worker = spawn(process.execPath, [cliPath, "worker"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: app.databaseUrl, BILLING_WORKER_POLL_MS: "60000" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(worker)
    let output = ""
    worker.stdout!.on("data", (chunk) => (output += chunk))
    worker.stderr!.on("data", (chunk) => (output += chunk))
    // The worker's listening connection has run its LISTEN (and its first drain is over: it listens when idle).
    await eventually(async () => {
      const rows = await query<{ n: string }>(
        app,
        `SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'idle' AND query ILIKE 'LISTEN%billing_signals_queued%'`
      )
      expect(Number(rows[0]!.n), output).toBe(1)
    })
    // One at a time: each must be priced before the next is sent, so each needed a wake of its own; the
    // listener's confirmation wakes the worker once at most, and its poll would come after 60 s.
    for (let n = 1; n <= 3; n++) {
      const answer = await send({ customerId, agentKey: "chat", usage: call })
      expect(answer.status).toBe(202)
      await eventually(async () => expect(await statusOf(answer.body.result.rawId)).toBe("PROCESSED"))
    }
    expect(await remainingOf(customerId)).toBe(996.4)
    worker.kill("SIGTERM")
  })
})
