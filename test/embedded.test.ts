/**
 * The quick start, end to end, on the embedded database: `billing serve` with no
 * DATABASE_URL started in a terminal (its banner: the API and docs URLs, the
 * data folder, the worker), an organisation created by the CLI while it runs,
 * a customer created and read over HTTP, a graceful stop on Ctrl-C, and the
 * CLI reading the same data folder once the server is gone. One server start
 * for all of it: on a fresh folder it is the slowest thing the suite does.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { spawnBilling } from "./support/Cli.ts"
import { eventually } from "./support/Eventually.ts"
import { type PtyProcess, startInPty, stripAnsi } from "./support/Pty.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const bin = fileURLToPath(new URL("../bin/billing.mjs", import.meta.url))
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-embedded-"))
const env = (() => {
  const copy: NodeJS.ProcessEnv = { ...process.env, BILLING_DATA_DIR: dataDir }
  delete copy.DATABASE_URL
  return copy
})()

const cli = (args: ReadonlyArray<string>) => spawnBilling(args, env)

let terminal: PtyProcess | undefined

afterAll(() => {
  terminal?.kill()
  fs.rmSync(dataDir, { recursive: true, force: true })
})

describe.skipIf(usesRealPostgres)("billing serve on the embedded database (embedded database only)", () => {
  it("shows its banner on a terminal, serves, shares its data with the CLI, stops on Ctrl-C, and keeps the data", async () => {
    // As a person starts it: in a terminal, with the worker in the same process.
    const terminalEnv = { ...env }
    delete terminalEnv.NO_COLOR
    terminal = startInPty([process.execPath, bin, "serve", "--port", "0"], terminalEnv)
    const screen = await eventually(() => {
      const text = stripAnsi(terminal!.output())
      expect(text, text).toMatch(/Ctrl-C stops/)
      return text
    })
    const apiUrl = /billing API {2}(http:\/\/127\.0\.0\.1:\d+\/api\/v1)/.exec(screen)?.[1]
    expect(apiUrl, screen).toBeDefined()
    expect(screen).toMatch(/docs {9}http:\/\/127\.0\.0\.1:\d+\/docs/)
    expect(screen).toContain(`database     embedded PGlite in ${dataDir}`)
    expect(screen).toContain("worker       running in this process")
    expect(screen).not.toContain("Listening on")

    const org = await cli(["org", "create", "--name", "Acme", "--json"])
    expect(org.code, org.stderr).toBe(0)
    const apiKey: string = org.json.apiKey

    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" }
    const created = await fetch(`${apiUrl}/customers`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "Embedded Ed", email: "ed@example.com", externalId: "ed-1" })
    })
    expect(created.status).toBe(201)
    const read = await fetch(`${apiUrl}/customers/ext/ed-1`, { headers })
    const body = await read.json() as any
    expect(body.result.customer.name).toBe("Embedded Ed")

    terminal.type("\u0003")
    expect(await terminal.exited, stripAnsi(terminal.output())).toBe(0)
    terminal = undefined

    const listed = await cli(["customer", "list", "--org", org.json.organization.id, "--json"])
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.json.customers.map((c: any) => c.externalId)).toEqual(["ed-1"])
  })
})
