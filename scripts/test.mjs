#!/usr/bin/env node
/**
 * `npm test`: the build (scripts/build.mjs), then the type check and the suite at once. The suite
 * leaves a core idle much of the time (it waits on child processes, sockets
 * and timers), and `tsc` needs one for some 20 s: run at the lowest priority,
 * it takes only that idle time, so the suite is not slowed and the type
 * check's time is saved. Once the suite is done the type check is put back
 * at normal priority: beside other busy work (a loaded CI machine) the lowest
 * priority starved it for minutes after the suite had finished. The type
 * check's output is held back and printed after the suite's, so the two never
 * interleave; the exit code is non-zero when either fails. Arguments go to
 * vitest (`npm test -- test/x.test.ts`). `BILLING_TYPECHECK=skip` leaves the
 * type check out (`.ci/run`'s second run: the same code, checked by its first).
 * `BILLING_BUILD=skip` leaves the build out: `.ci/run` builds once (`npm ci`)
 * and runs the restore drill and the formation's tests from `dist/` beside the
 * suite, and a build removes `dist/` first, under their feet.
 */
import { spawn, spawnSync } from "node:child_process"
import { setPriority } from "node:os"
import { fileURLToPath } from "node:url"
import getExePath from "../node_modules/typescript-7/lib/getExePath.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const bin = (name) => fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url))

if (process.env.BILLING_BUILD !== "skip") {
  const build = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: root, stdio: "inherit" })
  if (build.status !== 0) process.exit(build.status ?? 1)
}

const started = Date.now()
const seconds = (since) => `${Math.round((Date.now() - since) / 1000)} s`

const skipTypecheck = process.env.BILLING_TYPECHECK === "skip"
let typecheckPid

// The type check runs TypeScript 7, the native compiler (devDependency `typescript-7`): the same
// verdict on this code for a quarter of 5.9's CPU (docs/testing.md). Its executable is started
// directly, not through its node launcher, so that the priorities set below reach the process
// doing the work. TypeScript 5.9 (`typescript`) stays for the tools that use its JavaScript API.
const typecheck = skipTypecheck ? Promise.resolve({ code: 0, output: "", took: "0 s" }) : new Promise((resolve) => {
  const child = spawn(getExePath(), ["--noEmit", "-p", "tsconfig.json"], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  try {
    setPriority(child.pid, 19)
    typecheckPid = child.pid
  } catch {
    // Not allowed here: it runs at normal priority.
  }
  let output = ""
  child.stdout.on("data", (chunk) => (output += chunk))
  child.stderr.on("data", (chunk) => (output += chunk))
  child.on("close", (code) => resolve({ code: code ?? 1, output, took: seconds(started) }))
})

const suite = new Promise((resolve) => {
  const child = spawn(bin("vitest"), ["run", ...process.argv.slice(2)], { cwd: root, stdio: "inherit" })
  child.on("close", (code) => resolve(code ?? 1))
})

const suiteCode = await suite
if (typecheckPid !== undefined) {
  try {
    setPriority(typecheckPid, 0)
  } catch {
    // Raising a priority needs privileges this user lacks, or tsc has ended: it goes on as it was.
  }
}
const checked = await typecheck
process.stdout.write(
  skipTypecheck
    ? "\ntype check: skipped (BILLING_TYPECHECK=skip)\n"
    : checked.code === 0
    ? `\ntype check (tsc --noEmit, TypeScript 7): no errors, ${checked.took}\n`
    : `\ntype check (tsc --noEmit) failed after ${checked.took}:\n${checked.output}`
)
process.exit(suiteCode !== 0 ? suiteCode : checked.code)
