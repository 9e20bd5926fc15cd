/**
 * What `billing serve` says when it starts on a pipe: one JSON line with the
 * API and docs URLs and the database in use. The banner a terminal shows is
 * checked where serve is started in one (test/embedded.test.ts).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))

let app: TestApp
const started: Array<ChildProcess> = []

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  for (const child of started) child.kill("SIGKILL")
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
    })
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
  })
})
