/**
 * docs/api.md's "worked integration from a blank project" runs as written
 * (issue 37, point 5): `billing serve` from this checkout on a fresh database,
 * an organisation made by `billing org create`, then the documented steps in a
 * new folder: its shell block (`mkdir`, `npm init -y`, `npm install
 * "$BILLING_CHECKOUT/client"`), its `integrate.mjs` and its run command,
 * under plain `node`. What the script prints must be the output the section
 * shows (ids aside). client/README.md shows the same script: the two must not
 * drift apart.
 *
 * Embedded: `serve` with no `DATABASE_URL` opens a data folder of its own, and
 * the CLI joins it, as on a laptop. PostgreSQL: this file's database.
 */
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"
import { blankDirectory, clientDirectory, ensureClientBuilt, plainEnv, root, runAsync } from "./support/ClientPackage.ts"
import { spawnServe } from "./support/ServeProcess.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

const MARKER = "<!-- worked integration: run as written by test/client-integration.test.ts -->"
const README_MARKER = "<!-- the whole integration: docs/api.md's, run by test/client-integration.test.ts -->"

/** The fenced blocks of `language` after `marker` in `text`, in order. */
const blocksAfter = (text: string, marker: string, language: string): Array<string> => {
  const at = text.indexOf(marker)
  if (at < 0) throw new Error(`no marker ${marker}`)
  return [...text.slice(at + marker.length).matchAll(new RegExp("```" + language + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]!)
}

const docs = fs.readFileSync(path.join(root, "docs", "api.md"), "utf8")
const [setup, runCommand] = blocksAfter(docs, MARKER, "sh")
const [script] = blocksAfter(docs, MARKER, "js")
const [output] = blocksAfter(docs, MARKER, "text")

let app: TestApp | undefined
let serve: { readonly child: ChildProcess; readonly baseUrl: string } | undefined
let work: string

beforeAll(async () => {
  await ensureClientBuilt()
  work = blankDirectory("billing-integration-")
}, 600_000)

afterAll(async () => {
  if (serve !== undefined && serve.child.exitCode === null) {
    const exited = new Promise((resolve) => serve!.child.once("exit", resolve))
    serve.child.kill("SIGTERM")
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))])
    if (serve.child.exitCode === null) serve.child.kill("SIGKILL")
  }
  await app?.close()
  if (work !== undefined) fs.rmSync(work, { recursive: true, force: true })
})

it("client/README.md shows the same integration as docs/api.md", () => {
  const readme = fs.readFileSync(path.join(clientDirectory, "README.md"), "utf8")
  expect(blocksAfter(readme, README_MARKER, "js")[0]).toBe(script)
})

it("the worked integration runs as written against billing serve, and prints what the section shows", async () => {
  expect([setup, script, runCommand, output].every((block) => block !== undefined)).toBe(true)
  // The service, as its steps say: `billing serve` (this checkout's binary) and an organisation with its key.
  let database: Record<string, string>
  if (usesRealPostgres) {
    app = await startTestApp()
    database = { DATABASE_URL: app.databaseUrl }
  } else {
    database = { BILLING_DATA_DIR: path.join(work, "billing-data") }
  }
  const env = plainEnv(database)
  if (!usesRealPostgres) delete env.DATABASE_URL
  serve = await spawnServe(env)
  const billingUrl = serve.baseUrl.replace(/\/api\/v1$/, "")
  const created = JSON.parse(await runAsync(process.execPath, [path.join(root, "bin", "billing.mjs"), "org", "create", "--name", "Acme", "--json"], root, env))
  expect(created.apiKey).toMatch(/^sk_/)

  // The product's steps, in a folder of their own, as written.
  const shell = (block: string, cwd: string, extra: Record<string, string> = {}) =>
    runAsync("bash", ["-c", `set -euo pipefail\n${block}`], cwd, plainEnv({ BILLING_CHECKOUT: root, npm_config_offline: "true", ...extra }))
  await shell(setup!, work)
  const project = path.join(work, "acme-agents")
  expect(fs.realpathSync(path.join(project, "node_modules", "@billing", "client"))).toBe(fs.realpathSync(clientDirectory))
  fs.writeFileSync(path.join(project, "integrate.mjs"), script!)
  expect(runCommand).toContain("BILLING_API_KEY=sk_... ")
  const printed = await shell(runCommand!.replace("sk_...", created.apiKey), project, { BILLING_URL: billingUrl })

  const withoutIds = (text: string) => text.replace(/\bcus_[0-9a-z]+/g, "cus_...").trim()
  expect(withoutIds(printed)).toBe(withoutIds(output!))
}, 600_000)
