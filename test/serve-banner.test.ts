/**
 * What `billing serve` says when it starts: on a terminal, the API and docs
 * URLs and the database in use; on a pipe, one JSON line with the same facts.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "./support/Eventually.ts"
import { type PtyProcess, startInPty, stripAnsi } from "./support/Pty.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

let app: TestApp
let dataDir: string
const started: Array<ChildProcess> = []
const terminals: Array<PtyProcess> = []

beforeAll(async () => {
  app = await startTestApp()
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-banner-"))
})
afterAll(async () => {
  for (const child of started) child.kill("SIGKILL")
  for (const terminal of terminals) terminal.kill()
  fs.rmSync(dataDir, { recursive: true, force: true })
  await app.close()
})

describe("billing serve's start banner", () => {
  it("prints one JSON line with the API and docs URLs and the database (host/db, no credentials) on a pipe", async () => {
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--no-worker"], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl }
    })
    started.push(child)
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const line = await eventually(() => {
      const found = output.split("\n").find((text) => text.includes("Listening on"))
      expect(found, output).toBeDefined()
      return JSON.parse(found!)
    }, { timeoutMs: 60_000 })
    const database = new URL(app.databaseUrl)
    const origin = /http:\/\/[\d.]+:\d+/.exec(line.message)![0]
    expect(line.annotations).toMatchObject({
      api: `${origin}/api/v1`,
      docs: `${origin}/docs`,
      database: { kind: "postgresql", host: `${database.hostname}:${database.port}`, database: database.pathname.slice(1) },
      worker: false
    })
    expect(JSON.stringify(line)).not.toContain("postgres://")
    const docs = await fetch(line.annotations.docs)
    expect(docs.status).toBe(200)
    child.kill("SIGTERM")
  }, 120_000)

  it.skipIf(usesRealPostgres)("prints the API URL, the docs URL and the embedded database's folder on a terminal (embedded database only)", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, BILLING_DATA_DIR: dataDir }
    delete env.DATABASE_URL
    delete env.NO_COLOR
    const terminal = startInPty([process.execPath, bin, "serve", "--port", "0"], env)
    terminals.push(terminal)
    const screen = await eventually(() => {
      const text = stripAnsi(terminal.output())
      expect(text, text).toMatch(/Ctrl-C stops/)
      return text
    }, { timeoutMs: 90_000 })
    expect(screen).toMatch(/billing API {2}http:\/\/127\.0\.0\.1:\d+\/api\/v1/)
    expect(screen).toMatch(/docs {9}http:\/\/127\.0\.0\.1:\d+\/docs/)
    expect(screen).toContain(`database     embedded PGlite in ${dataDir}`)
    expect(screen).toContain("worker       running in this process")
    expect(screen).not.toContain("Listening on")
  }, 120_000)
})
