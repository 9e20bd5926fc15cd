/**
 * `billing serve --processes 2`: two API processes answer on one port, on
 * PostgreSQL (each with its own pool) or on the embedded database (the
 * primary holds the data folder and serves its socket, the API processes join
 * it); the request log shows both processes served; SIGTERM to the primary
 * stops everything with exit code 0 and leaves no process behind.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomToken } from "../src/ids.ts"
import { isProcessAlive } from "../src/db/Embedded.ts"
import { spawnBilling } from "./support/Cli.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { runAlone, usesRealPostgres } from "./support/TestDatabase.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

interface LogLine {
  readonly message: string
  readonly annotations: Record<string, any>
}

let env: NodeJS.ProcessEnv = {}
let cleanup: () => Promise<void> = async () => {}
const children: Array<ChildProcess> = []

beforeAll(async () => {
  if (usesRealPostgres) {
    const admin = process.env.DATABASE_URL!
    const name = `billing_test_${randomToken(5)}`
    await Effect.runPromise(runAlone(admin, `CREATE DATABASE "${name}"`))
    const url = new URL(admin)
    url.pathname = `/${name}`
    env = { ...process.env, DATABASE_URL: url.toString() }
    cleanup = () => Effect.runPromise(runAlone(admin, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined)
  } else {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-processes-"))
    env = { ...process.env, BILLING_DATA_DIR: dataDir }
    delete env.DATABASE_URL
    cleanup = async () => fs.rmSync(dataDir, { recursive: true, force: true })
  }
  env.BILLING_WORKER_POLL_MS = "100"
})

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  await cleanup()
})

const cli = (args: ReadonlyArray<string>) => spawnBilling(args, env)

/** Starts `billing serve ...args`; resolves on its "Listening on" line, with a live view of its log lines. */
const startServer = (args: ReadonlyArray<string>) =>
  new Promise<{ process: ChildProcess; baseUrl: string; listening: LogLine; lines: () => Array<LogLine> }>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "serve", ...args], { env })
    children.push(child)
    let output = ""
    let errors = ""
    const lines = () =>
      output.split("\n").flatMap((line) => {
        try {
          return [JSON.parse(line) as LogLine]
        } catch {
          return []
        }
      })
    // A parent and its API processes, each loading the service: twice the usual hang guard.
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}${errors}`)), 2 * HANG_GUARD_MS)
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const listening = lines().find((line) => line.message.startsWith("Listening on"))
      if (listening) {
        clearTimeout(timer)
        resolve({ process: child, baseUrl: `${/http:\/\/[\d.]+:\d+/.exec(listening.message)![0]}/api/v1`, listening, lines })
      }
    })
    child.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()))
    child.once("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}${errors}`)))
  })

describe(`billing serve --processes on ${usesRealPostgres ? "PostgreSQL" : "the embedded database"}`, () => {
  it("answers from two API processes on one port, and SIGTERM stops them all with exit code 0", async () => {
    const server = await startServer(["--processes", "2", "--port", "0"])
    const apiPids: Array<number> = server.listening.annotations.pids
    expect(server.listening.annotations.processes).toBe(2)
    expect(new Set(apiPids).size).toBe(2)
    expect(apiPids).not.toContain(server.process.pid)
    expect(apiPids.every(isProcessAlive)).toBe(true)

    // The CLI works alongside (on the embedded database, through the primary's socket).
    const org = await cli(["org", "create", "--name", "Processes", "--json"])
    expect(org.stderr).toBe("")
    expect(org.code).toBe(0)
    const headers = { authorization: `Bearer ${org.json.apiKey}`, "content-type": "application/json" }

    // Concurrent requests open several connections; the primary deals them out in turn.
    const created = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      fetch(`${server.baseUrl}/customers`, {
        method: "POST",
        headers,
        body: JSON.stringify({ name: `P ${i}`, email: `p${i}@example.com`, externalId: `p-${i}` })
      }).then((response) => response.status)))
    expect(created).toEqual(Array(8).fill(201))
    const read = await Promise.all(Array.from({ length: 24 }, (_, i) =>
      fetch(`${server.baseUrl}/customers/ext/p-${i % 8}`, { headers }).then(async (response) => ({
        status: response.status,
        body: await response.json() as any
      }))))
    expect(read.map((answer) => answer.status)).toEqual(Array(24).fill(200))
    expect(read.map((answer) => answer.body.result.customer.externalId)).toEqual(Array.from({ length: 24 }, (_, i) => `p-${i % 8}`))
    const unauthorized = await fetch(`${server.baseUrl}/customers`, { headers: { authorization: "Bearer sk_nope" } })
    expect(unauthorized.status).toBe(401)

    // Each request's line names the process that answered it (lines are written within 100 ms).
    const servedBy = () =>
      new Set(server.lines().filter((line) => line.message === "request").map((line) => line.annotations.pid as number))
    await eventually(() => expect(server.lines().filter((line) => line.message === "request").length).toBeGreaterThanOrEqual(33))
    expect([...servedBy()].sort()).toEqual([...apiPids].sort())
    expect(server.lines().some((line) => line.message === "request" && line.annotations.status === 401)).toBe(true)

    const exited = new Promise<number | null>((resolve) => server.process.once("exit", resolve))
    server.process.kill("SIGTERM")
    expect(await exited).toBe(0)
    expect(apiPids.filter(isProcessAlive)).toEqual([])

    // The data is still there for the next start.
    const listed = await cli(["customer", "list", "--org", org.json.organization.id, "--json"])
    expect(listed.code).toBe(0)
    expect(listed.json.customers).toHaveLength(8)
  }, 600_000)

  it("refuses a number of processes that is not a whole number of 1 or more", async () => {
    const refused = await cli(["serve", "--processes", "0"])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("--processes")
  })
})
