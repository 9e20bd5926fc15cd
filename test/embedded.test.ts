/**
 * The quick start, end to end, on the embedded database: `billing serve` with no
 * DATABASE_URL, an organisation created by the CLI while it runs, a customer
 * created and read over HTTP, a graceful stop on SIGTERM, and the CLI reading
 * the same data folder once the server is gone.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { spawnBilling } from "./support/Cli.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-embedded-"))
const env = (() => {
  const copy: NodeJS.ProcessEnv = { ...process.env, BILLING_DATA_DIR: dataDir }
  delete copy.DATABASE_URL
  return copy
})()

const cli = (args: ReadonlyArray<string>) => spawnBilling(args, env, { timeoutMs: 60_000 })

let server: ChildProcess | undefined

const startServer = () =>
  new Promise<{ process: ChildProcess; baseUrl: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--no-worker"], { env })
    let output = ""
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000)
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /Listening on (http:\/\/[\d.]+:\d+)/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve({ process: child, baseUrl: `${match[1]}/api/v1` })
      }
    })
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.once("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)))
  })

afterAll(() => {
  server?.kill("SIGKILL")
  fs.rmSync(dataDir, { recursive: true, force: true })
})

describe.skipIf(usesRealPostgres)("billing serve on the embedded database (embedded database only)", () => {
  it("serves, shares its data with the CLI, stops gracefully, and keeps the data", async () => {
    const started = await startServer()
    server = started.process

    const org = await cli(["org", "create", "--name", "Acme", "--json"])
    expect(org.code).toBe(0)
    const apiKey: string = org.json.apiKey

    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
    const created = await fetch(`${started.baseUrl}/customers`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "Embedded Ed", email: "ed@example.com", externalId: "ed-1" })
    })
    expect(created.status).toBe(201)
    const read = await fetch(`${started.baseUrl}/customers/ext/ed-1`, { headers })
    const body = await read.json() as any
    expect(body.result.customer.name).toBe("Embedded Ed")

    const exited = new Promise<number | null>((resolve) => started.process.once("exit", resolve))
    started.process.kill("SIGTERM")
    expect(await exited).toBe(0)
    server = undefined

    const listed = await cli(["customer", "list", "--org", org.json.organization.id, "--json"])
    expect(listed.code).toBe(0)
    expect(listed.json.customers.map((c: any) => c.externalId)).toEqual(["ed-1"])
  }, 180_000)
})
