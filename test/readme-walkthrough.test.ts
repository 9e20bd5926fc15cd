/**
 * The README's "operator's day" runs as written: the fenced block after its
 * marker is read from README.md and run by bash, with `billing` being this
 * checkout's binary, on a fresh database. Edit the README and this test runs
 * the edit; break a command it shows and this test fails.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, expect, it } from "vitest"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

const root = fileURLToPath(new URL("..", import.meta.url))
const MARKER = "<!-- operator's day: run as written by test/readme-walkthrough.test.ts -->"

/** The fenced block right after the marker. */
export const walkthroughBlock = (readme: string): string => {
  const at = readme.indexOf(MARKER)
  if (at < 0) throw new Error("the README has no operator's day marker")
  const match = /```sh\n([\s\S]*?)```/.exec(readme.slice(at + MARKER.length))
  if (match === null) throw new Error("no ```sh block after the operator's day marker")
  return match[1]!
}

let app: TestApp

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.close())

it("the README's operator's day runs as written", async () => {
  const script = walkthroughBlock(fs.readFileSync(path.join(root, "README.md"), "utf8"))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "billing-day-"))
  const prelude = `set -euo pipefail\nbilling() { node ${JSON.stringify(path.join(root, "bin/billing.mjs"))} "$@"; }\n`
  const { BILLING_ORG: _, ...env } = process.env
  const result = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      "bash",
      ["-c", prelude + script],
      { cwd: dir, env: { ...env, DATABASE_URL: app.databaseUrl }, timeout: 540_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr })
    )
  })
  expect(result.code, `stdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(0)
  expect(result.stdout).toContain("4 record(s): 4 created")
  expect(result.stdout).toContain("signals.jsonl: 2 queued, 0 refused")
  // 3 + 5 pages at 0.05, invoiced in arrears at the cycle's end.
  expect(result.stdout).toMatch(/USAGE\s+OPEN\s+0\.4\b/)
  expect(result.stdout).toMatch(/Replayed \d+ event\(s\)/)
  expect(result.stdout).not.toContain("\u001b")
}, 600_000)
