/**
 * When the database goes away and comes back, as every process meets it
 * (docs/operations.md, "While no primary answers"), on real PostgreSQL behind
 * TCP proxies the test can cut and restore (test/support/TcpProxy.ts):
 *
 * - a multi-host DATABASE_URL with libpq's meaning in the CLI: a host that
 *   refuses is passed over, one that is not what `target_session_attrs` asks
 *   for is named in the error, which never shows the password;
 * - `billing serve` answers 503 `database_unavailable` with `Retry-After`
 *   while no host answers (never a 500, never a 202 for a signal that did not
 *   commit), and answers again from the other host without a restart;
 * - a `billing worker` loop waits while its database is away and prices the
 *   queue once it is back, without a restart;
 * - a CLI command says what happened and exits non-zero.
 *
 * The failover of a real primary to a real standby is test/failover.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as net from "node:net"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomToken } from "../src/ids.ts"
import { gpt4oBundle } from "./signals-fixtures.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { apiCaller, spawnServe } from "./support/ServeProcess.ts"
import { startTcpProxy, type TcpProxy } from "./support/TcpProxy.ts"
import { runAlone, usesRealPostgres } from "./support/TestDatabase.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const usage = { model: "gpt-4o", inputTokens: 1000 }

const children: Array<ChildProcess> = []
const proxies: Array<TcpProxy> = []
let databaseName = ""
let admin = ""
let cleanup = async () => {}

/** A port nothing listens on: a host that refuses. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const urlThrough = (ports: ReadonlyArray<number>, attrs = "read-write") =>
  `postgres://postgres:not-a-secret@${ports.map((port) => `127.0.0.1:${port}`).join(",")}/${databaseName}?target_session_attrs=${attrs}`

const proxy = async () => {
  const upstream = new URL(admin)
  const started = await startTcpProxy({ host: upstream.hostname, port: Number(upstream.port || 5432) })
  proxies.push(started)
  return started
}

const startServe = async (env: NodeJS.ProcessEnv) => {
  const serve = await spawnServe(env, ["--no-worker"])
  children.push(serve.child)
  return serve.baseUrl
}

/** A customer who bought a plan of 1,000 ADVANCE "chat" credits (gpt-4o, 20 % margin), through the API. */
const customerOnChatPlan = async (call: ReturnType<typeof apiCaller>["call"], name: string): Promise<string> => {
  const chat = (await call("POST", "/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle })).body.result.credit.id
  const plan = (await call("POST", "/plans", {
    name,
    billingCycle: "MONTHLY",
    entitlements: [{ type: "CREDIT", billingMode: "ADVANCE", creditId: chat, quantity: 1000 }]
  })).body.result.plan.id
  const customer = (await call("POST", "/customers", { name, email: `${name.replace(/\W/g, "").toLowerCase()}@example.com` })).body.result.customer.id
  expect((await call("POST", "/purchases", { customerId: customer, planId: plan })).status).toBe(201)
  return customer
}

beforeAll(async () => {
  if (!usesRealPostgres) return
  admin = process.env.DATABASE_URL!
  databaseName = `billing_test_${randomToken(5)}`
  await Effect.runPromise(runAlone(admin, `CREATE DATABASE "${databaseName}"`))
  cleanup = () => Effect.runPromise(runAlone(admin, `DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`)).then(() => undefined)
  const direct = new URL(admin)
  direct.pathname = `/${databaseName}`
  const migrated = await spawnBilling(["migrate"], { ...process.env, DATABASE_URL: direct.toString() })
  expect(migrated.code, migrated.stderr).toBe(0)
}, HANG_GUARD_MS)

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  for (const started of proxies) await started.close()
  await cleanup()
})

describe.skipIf(!usesRealPostgres)("the database away and back (needs real PostgreSQL)", () => {
  it("a multi-host URL in the CLI: passes over a host that refuses, names the ones that do not match, never the password", async () => {
    const refusing = await closedPort()
    const up = await proxy()
    const env = (url: string) => ({ ...process.env, DATABASE_URL: url })

    const created = await spawnBilling(["org", "create", "--name", "Multi host", "--json"], env(urlThrough([refusing, up.port])))
    expect(created.code, created.stderr).toBe(0)
    expect(created.json.organization.name).toBe("Multi host")

    // Only a primary answers: a session that must be a standby has nowhere to go.
    const standbyOnly = await spawnBilling(["org", "list", "--json"], env(urlThrough([refusing, up.port], "standby")))
    expect(standbyOnly.code).not.toBe(0)
    expect(standbyOnly.stderr).toContain(`cannot connect to PostgreSQL at 127.0.0.1:${refusing},127.0.0.1:${up.port}/${databaseName}`)
    expect(standbyOnly.stderr).toContain("no host is standby")
    expect(standbyOnly.stderr).toContain(`127.0.0.1:${up.port} is a read-write primary`)
    expect(standbyOnly.stderr).toMatch(new RegExp(`127\\.0\\.0\\.1:${refusing}: .*ECONNREFUSED`))
    expect(standbyOnly.stderr).not.toContain("not-a-secret")

    const unreadable = await spawnBilling(["org", "list"], env(urlThrough([up.port], "master")))
    expect(unreadable.code).not.toBe(0)
    expect(unreadable.stderr).toContain('target_session_attrs "master"')
  }, 2 * HANG_GUARD_MS)

  it("serve answers 503 database_unavailable while no host answers, and again from the other host without a restart", async () => {
    const first = await proxy()
    const second = await proxy()
    const env = { ...process.env, DATABASE_URL: urlThrough([first.port, second.port]) }
    const org = await spawnBilling(["org", "create", "--name", "Away", "--json"], env)
    expect(org.code, org.stderr).toBe(0)
    const { call } = apiCaller(await startServe(env), org.json.apiKey)
    const customer = await customerOnChatPlan(call, "Away")
    const signal = (key: string) => ({ customerId: customer, agentKey: "chat", usage, idempotencyKey: key })
    expect((await call("POST", "/signal/credit", signal("before"))).status).toBe(202)

    // Both hosts gone: every connection of the pool is lost, and no new one can be made.
    await first.cut()
    await second.cut()
    for (const [method, path, body] of [
      ["POST", "/signal/credit", signal("while-away")],
      ["POST", "/signal/batch", { signals: [{ type: "credit", ...signal("while-away-batch") }] }],
      ["GET", `/customers/${customer}`, undefined],
      ["POST", "/customers", { name: "Nobody", email: "nobody@example.com" }]
    ] as const) {
      const answer = await call(method, path, body)
      expect({ path, status: answer.status, code: answer.body?.statusDetail?.code, retryAfter: answer.headers.get("retry-after") })
        .toEqual({ path, status: 503, code: "database_unavailable", retryAfter: "5" })
    }

    // The second host comes back (the first stays away): the same process answers from it.
    await second.restore()
    const retried = await eventually(async () => {
      const answer = await call("POST", "/signal/credit", signal("while-away"))
      expect(answer.status).toBe(202)
      return answer
    }, { intervalMs: 200 })
    // The key was never written while the database was away: its retry is its first signal, once.
    const again = await call("POST", "/signal/credit", signal("while-away"))
    expect(again.body.result.rawId).toBe(retried.body.result.rawId)
    const listed = await call("GET", `/signals?customerId=${customer}`)
    expect(listed.status).toBe(200)
    const keys = (listed.body.result.signals as Array<{ idempotencyKey: string }>).map((row) => row.idempotencyKey).sort()
    expect(keys).toEqual(["before", "while-away"])
    expect(second.accepted()).toBeGreaterThan(0)
  }, 2 * HANG_GUARD_MS)

  it("a worker waits while its database is away and prices the queue once it is back, without a restart", async () => {
    const api = await proxy()
    const workers = await proxy()
    const apiEnv = { ...process.env, DATABASE_URL: urlThrough([api.port]) }
    const org = await spawnBilling(["org", "create", "--name", "Worker away", "--json"], apiEnv)
    const { call } = apiCaller(await startServe(apiEnv), org.json.apiKey)
    const customer = await customerOnChatPlan(call, "Worker away")

    const worker = spawn(process.execPath, [bin, "worker"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: urlThrough([workers.port]), BILLING_WORKER_POLL_MS: "50" },
      stdio: "ignore"
    })
    children.push(worker)
    const priced = async (rawId: string) => (await call("GET", `/signals/${rawId}`)).body.result.signal.status
    const first = (await call("POST", "/signal/credit", { customerId: customer, agentKey: "chat", usage })).body.result.rawId
    await eventually(async () => expect(await priced(first)).toBe("PROCESSED"))

    await workers.cut()
    const queued: Array<string> = []
    for (let index = 0; index < 5; index++) {
      queued.push((await call("POST", "/signal/credit", { customerId: customer, agentKey: "chat", usage })).body.result.rawId as string)
    }
    // The worker cannot reach its database: the signals wait (more than a poll's worth of time).
    const since = Date.now()
    await eventually(() => expect(Date.now() - since).toBeGreaterThan(1500), { intervalMs: 100 })
    for (const rawId of queued) expect(await priced(rawId)).toBe("QUEUED")

    await workers.restore()
    await eventually(async () => {
      for (const rawId of queued) expect(await priced(rawId)).toBe("PROCESSED")
    }, { intervalMs: 200 })
    expect(worker.exitCode).toBe(null)
    const balances = (await call("GET", `/customers/${customer}/balances`)).body.result
    expect(balances.credits[0].used).toBeCloseTo(6 * 0.4, 9)

    // A one-off command against the database that is away: says so, exits non-zero.
    await workers.cut()
    const listed = await spawnBilling(["customer", "list", "--org", org.json.organization.id], { ...process.env, DATABASE_URL: urlThrough([workers.port]) })
    expect(listed.code).not.toBe(0)
    expect(listed.stderr).toContain(`cannot connect to PostgreSQL at 127.0.0.1:${workers.port}/${databaseName}`)
  }, 2 * HANG_GUARD_MS)
})
