/**
 * A 202 is only ever sent for a committed signal, and a retried key never
 * duplicates one: `billing serve --no-worker` (a child process, on this test's
 * database) takes concurrent keyed signals through the grouped inbox writes and
 * is SIGKILLed mid-stream; a new server is started and every request that got
 * no answer is sent again with its key. Every answered signal is in the inbox
 * exactly once, under its answered rawId, and every key has exactly one row.
 * Runs on both databases (the embedded one is served by this test process).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, query } from "./signals-fixtures.ts"
import { HANG_GUARD_MS } from "./support/Eventually.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

let app: TestApp
let acme: Tenant
let customerId: string
const servers: Array<ChildProcess> = []

/** `billing serve --no-worker` on the test's database; resolves with its base URL once it listens. */
const startServer = () =>
  new Promise<{ child: ChildProcess; baseUrl: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--no-worker"], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl }
    })
    servers.push(child)
    let output = ""
    let listening = false
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), HANG_GUARD_MS)
    // Keep reading (one log line a request) so the child never blocks on a full pipe.
    child.stdout!.on("data", (chunk: Buffer) => {
      if (listening) return
      output += chunk.toString()
      const match = /Listening on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (match) {
        listening = true
        clearTimeout(timer)
        resolve({ child, baseUrl: `${match[1]}/api/v1` })
      }
    })
    child.stderr!.on("data", (chunk: Buffer) => {
      if (!listening) output += chunk.toString()
    })
    child.once("exit", (code, signal) => {
      if (!listening) reject(new Error(`server exited with ${code ?? signal}:\n${output}`))
    })
  })

const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
const requestOf = (i: number) => {
  const key = `crash-${i}`
  switch (i % 4) {
    case 0:
      return { path: "/signal/credit", body: { customerId, agentKey: "chat", usage, idempotencyKey: key } }
    case 1:
      return { path: "/signal/unit", body: { customerId, agentKey: "pages", quantity: 2, idempotencyKey: key } }
    case 2:
      return { path: "/signal/wallet", body: { externalId: "jo-1", usage, idempotencyKey: key } }
    default:
      return { path: "/signal/outcome", body: { customerId, agentKey: "draft", runId: `run-${i}`, idempotencyKey: key } }
  }
}

/** One signal: its rawId once answered 202, undefined when no answer came (connection cut). */
const send = async (baseUrl: string, i: number): Promise<{ status: number; rawId?: string; messageId?: string } | undefined> => {
  const { path, body } = requestOf(i)
  try {
    const response = await fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${acme.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    const answer = await response.json() as any
    return { status: response.status, rawId: answer.result?.rawId, messageId: answer.result?.messageId }
  } catch {
    return undefined
  }
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Crash intake")
  customerId = await client(app, acme).created(
    "/customers",
    { name: "Jo", email: "jo@example.com", externalId: "jo-1" },
    "customer"
  )
})
afterAll(async () => {
  for (const server of servers) server.kill("SIGKILL")
  await app.close()
})

describe("intake killed mid-stream", () => {
  it("loses no answered signal and duplicates none when the unanswered requests are sent again", async () => {
    const total = 600
    const killAfter = 150
    const first = await startServer()
    const answers = new Array<Awaited<ReturnType<typeof send>>>(total)
    let answered = 0
    let next = 0
    let killed = false
    const exited = new Promise((resolve) => first.child.once("exit", resolve))
    // 32 concurrent senders; the server is killed once 150 answers are in, with requests in flight.
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < total) {
        const i = next++
        answers[i] = await send(first.baseUrl, i)
        if (answers[i]?.status === 202) answered++
        if (answered >= killAfter && !killed) {
          killed = true
          first.child.kill("SIGKILL")
        }
      }
    }))
    await exited
    const beforeKill = answers.flatMap((answer, i) => (answer?.status === 202 ? [{ i, ...answer }] : []))
    const unanswered = answers.flatMap((answer, i) => (answer === undefined ? [i] : []))
    expect(answers.filter((answer) => answer !== undefined && answer.status !== 202)).toEqual([])
    expect(beforeKill.length).toBeGreaterThanOrEqual(killAfter)
    expect(unanswered.length).toBe(total - beforeKill.length)
    expect(unanswered.length).toBeGreaterThan(0)

    // Every answered signal is committed, with the rawId its answer gave.
    const committed = await query<{ id: string; idempotencyKey: string }>(
      app,
      "SELECT id, idempotency_key FROM signals WHERE organization_id = $1",
      [acme.organizationId]
    )
    const byKey = new Map(committed.map((row) => [row.idempotencyKey, row.id]))
    for (const { i, rawId } of beforeKill) expect(byKey.get(`crash-${i}`)).toBe(rawId)

    // A new server; the unanswered requests again, with their keys (and a few answered ones: same rawId).
    const second = await startServer()
    const resent = await Promise.all(unanswered.map((i) => send(second.baseUrl, i)))
    expect(resent.map((answer) => answer?.status)).toEqual(unanswered.map(() => 202))
    for (const { i, rawId, messageId } of beforeKill.slice(0, 20)) {
      expect(await send(second.baseUrl, i)).toEqual({ status: 202, rawId, messageId })
    }

    const rows = await query<{ idempotencyKey: string; copies: string; id: string }>(
      app,
      `SELECT idempotency_key, count(*) AS copies, min(id) AS id FROM signals
       WHERE organization_id = $1 GROUP BY idempotency_key`,
      [acme.organizationId]
    )
    expect(rows.length).toBe(total)
    expect(rows.filter((row) => row.copies !== "1")).toEqual([])
    const final = new Map(rows.map((row) => [row.idempotencyKey, row.id]))
    for (const { i, rawId } of beforeKill) expect(final.get(`crash-${i}`)).toBe(rawId)
    unanswered.forEach((i, n) => expect(final.get(`crash-${i}`)).toBe(resent[n]!.rawId))
    second.child.kill("SIGTERM")
  }, 600_000)
})
