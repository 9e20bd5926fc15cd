/**
 * The embedded database is safe to share: CLI commands, a worker loop and
 * `serve`, started together on a fresh data folder with nothing running, all
 * reach the same data or wait for it; none fails with "Connection error".
 * About the embedded database alone (the children run without DATABASE_URL),
 * so it runs in the embedded run only: a PostgreSQL run would repeat it
 * unchanged.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { spawnBilling } from "./support/Cli.ts"
import { HANG_GUARD_MS } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const folders: Array<string> = []
const children: Array<ChildProcess> = []

const freshFolder = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-shared-"))
  folders.push(dir)
  return dir
}

const envFor = (dataDir: string) => {
  const copy: NodeJS.ProcessEnv = { ...process.env, BILLING_DATA_DIR: dataDir }
  delete copy.DATABASE_URL
  return copy
}

/** Several processes start at once on one folder, each waiting its turn: twice the usual hang guard. */
const startLimitMs = 2 * HANG_GUARD_MS

const cli = (dataDir: string, args: ReadonlyArray<string>) => spawnBilling(args, envFor(dataDir), { timeoutMs: startLimitMs })

/** A long-running command; resolves once `ready` shows in its output. */
const start = (dataDir: string, args: ReadonlyArray<string>, ready: RegExp) => {
  const child = spawn(process.execPath, [bin, ...args], { env: { ...envFor(dataDir), BILLING_WORKER_POLL_MS: "50" } })
  children.push(child)
  let output = ""
  let stopTimer = () => {}
  const started = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(" ")} did not start:\n${output}`)), startLimitMs)
    stopTimer = () => clearTimeout(timer)
    const look = (chunk: Buffer) => {
      output += chunk.toString()
      const match = ready.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve(match[1] ?? match[0])
      }
    }
    child.stdout!.on("data", look)
    child.stderr!.on("data", look)
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}:\n${output}`)))
  })
  const stop = () =>
    new Promise<number | null>((resolve) => {
      stopTimer()
      child.removeAllListeners("exit")
      child.once("exit", (code) => resolve(code))
      child.kill("SIGTERM")
    })
  started.catch(() => {}) // awaited where it matters; a command without a ready line is judged by its exit
  return { started, stop, output: () => output }
}

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  for (const dir of folders) fs.rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(usesRealPostgres)("the embedded database shared by several processes (embedded database only)", () => {
  it("serves several CLI commands started at once on a fresh folder, all on the same data", async () => {
    const dataDir = freshFolder()
    const names = ["A", "B", "C", "D", "E"]
    const results = await Promise.all(names.map((name) => cli(dataDir, ["org", "create", "--name", name, "--json"])))
    for (const result of results) {
      expect(result.stderr).not.toContain("Connection error")
      expect(result.code, result.stderr).toBe(0)
    }
    const list = await cli(dataDir, ["org", "list", "--json"])
    expect(list.code, list.stderr).toBe(0)
    expect(list.json.organizations.map((o: any) => o.name).sort()).toEqual(names)
    // Every owner left the folder as it found it: no lock, no socket record.
    expect(fs.existsSync(path.join(dataDir, "open.lock"))).toBe(false)
    expect(fs.existsSync(path.join(dataDir, "server.json"))).toBe(false)
  }, 600_000)

  it("lets serve and CLI commands start together, and a worker loop join them", async () => {
    const dataDir = freshFolder()
    const serve = start(dataDir, ["serve", "--port", "0", "--no-worker"], /Listening on (http:\/\/[\d.]+:\d+)/)
    const creates = await Promise.all(["X", "Y", "Z"].map((name) => cli(dataDir, ["org", "create", "--name", name, "--json"])))
    for (const result of creates) expect(result.code, result.stderr).toBe(0)

    const baseUrl = `${await serve.started}/api/v1`
    const apiKey = creates[0]!.json.apiKey
    const response = await fetch(`${baseUrl}/customers`, { headers: { authorization: `Bearer ${apiKey}` } })
    expect(response.status).toBe(200)

    // The worker loop joins serve's socket; a signal accepted by serve is priced by it.
    const worker = start(dataDir, ["worker"], /$^/)
    const [list, customer] = await Promise.all([
      cli(dataDir, ["org", "list", "--json"]),
      fetch(`${baseUrl}/customers`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "Shared", email: "shared@example.com" })
      })
    ])
    expect(list.code, list.stderr).toBe(0)
    expect(list.json.organizations.map((o: any) => o.name).sort()).toEqual(["X", "Y", "Z"])
    expect(customer.status).toBe(201)

    // The owner (serve) is stopped last: its clients first.
    const workerExit = await worker.stop()
    expect([0, null], worker.output()).toContain(workerExit)
    expect(await serve.stop(), serve.output()).toBe(0)
    expect(worker.output() + serve.output()).not.toContain("Connection error")
  }, 600_000)
})
