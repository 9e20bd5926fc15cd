import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Status Co")
})
afterAll(() => app.close())

describe("billing status", () => {
  it("shows the queue, then what the worker made of it", async () => {
    await app.request("POST", "/customers", {
      key: acme.apiKey,
      body: { name: "Queue", email: "q@example.com", externalId: "queue-1" }
    })
    const accepted = await app.request("POST", "/signal/wallet", {
      key: acme.apiKey,
      body: { externalId: "queue-1", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 100 } }
    })
    expect(accepted.status).toBe(202)

    const before = await app.cli(["status", "--org", acme.organizationId, "--json"])
    expect(before.code).toBe(0)
    expect(before.json.signals.queued).toBe(1)
    expect(before.json.signals.oldestQueuedAt).not.toBeNull()

    const drained = await app.cli(["worker", "--once", "--json"])
    expect(drained.code).toBe(0)

    const after = await app.cli(["status", "--org", acme.organizationId, "--json"])
    // The customer has no plan: the signal ends FAILED (422 no active plan), not lost.
    expect(after.json.signals).toMatchObject({ queued: 0, failed: 1, oldestQueuedAt: null })
  })

  it("--watch keeps a live view on screen until stopped", async () => {
    const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
    // A person's terminal: under CI=true Ink would hold every frame until exit.
    const child = spawn(process.execPath, [bin, "status", "--org", acme.organizationId, "--watch", "0.5"], {
      env: { ...process.env, DATABASE_URL: app.databaseUrl, CI: "false" }
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
    await eventually(() => expect(output).toContain("Ctrl-C to stop"), { timeoutMs: 120_000, intervalMs: 200 }).catch(
      (error) => {
        child.kill("SIGKILL")
        throw error
      }
    )
    expect(output).toContain("Webhook deliveries")
    child.kill("SIGINT")
    expect(await exited).toBe(0)
  })
})
