/**
 * bench/count-statements: a preload for the processes the benchmarks measure.
 *
 *   BENCH_STATEMENTS_FILE=/tmp/x.jsonl node --import ./bench/count-statements.mjs bin/billing.mjs worker --once
 *
 * It counts every statement the process sends to PostgreSQL through node-postgres
 * (`pg`'s `Client.prototype.query`, which `Pool.query`, `@effect/sql-pg`, BEGIN,
 * SAVEPOINT and COMMIT all go through) and, when the process exits, appends one
 * JSON line to the file named by BENCH_STATEMENTS_FILE:
 *
 *   {"pid":123,"argv":["worker","--once"],"statements":4567,"byKind":{"SELECT":..},"maxRssKb":..,"rssKb":..}
 *
 * `maxRssKb` is the process's peak resident memory and `rssKb` its resident
 * memory at exit (process.resourceUsage / process.memoryUsage), a cross-check of
 * what the benchmark samples from /proc.
 *
 * `pg` is imported here through the same ESM entry as `@effect/sql-pg` imports
 * it, before `bin/billing.mjs` registers tsx, so both share one module instance
 * (and one `Client` class). The CommonJS entry is patched too, once, in case
 * something requires it.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import pg from "pg"

const file = process.env.BENCH_STATEMENTS_FILE
const marker = Symbol.for("bench.countStatements")

let statements = 0
/** Statements by their first keyword (SELECT, INSERT, UPDATE, WITH, BEGIN, SAVEPOINT, ...). */
const byKind = Object.create(null)

const kindOf = (query) => {
  const text = typeof query === "string" ? query : query && typeof query.text === "string" ? query.text : ""
  // Leading comments (`-- ...` lines, `/* ... */`) skipped.
  const match = /^(?:\s+|--[^\n]*\n|\/\*[\s\S]*?\*\/)*([A-Za-z]+)/.exec(text)
  return match ? match[1].toUpperCase() : "OTHER"
}

const patch = (Client) => {
  if (!Client || !Client.prototype || Client.prototype[marker]) return
  const original = Client.prototype.query
  Client.prototype.query = function countedQuery(query, ...rest) {
    statements++
    const kind = kindOf(query)
    byKind[kind] = (byKind[kind] ?? 0) + 1
    return original.call(this, query, ...rest)
  }
  Client.prototype[marker] = true
}

patch(pg.Client)
try {
  patch(createRequire(import.meta.url)("pg").Client)
} catch {
  // no CommonJS entry: the ESM one is patched
}

// The measured process may be another checkout's (`--root`): its bin loads the `pg` of its own
// node_modules, a module instance of its own, which is patched too (ESM and CommonJS entries).
const measured = process.argv[1]
if (measured) {
  try {
    const requireMeasured = createRequire(measured)
    const manifestPath = requireMeasured.resolve("pg/package.json")
    const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"))
    const esmEntry = manifest.exports?.["."]?.import
    const entry = typeof esmEntry === "string" ? esmEntry : esmEntry?.default
    if (typeof entry === "string") {
      const esm = await import(pathToFileURL(path.join(path.dirname(manifestPath), entry)).href)
      patch((esm.default ?? esm).Client)
    }
    patch(requireMeasured("pg").Client)
  } catch {
    // no pg beside the measured entry: the bench's own is the one it loads
  }
}

process.on("exit", () => {
  if (!file) return
  const line = {
    pid: process.pid,
    argv: process.argv.slice(2),
    statements,
    byKind,
    maxRssKb: process.resourceUsage().maxRSS,
    rssKb: Math.round(process.memoryUsage.rss() / 1024)
  }
  fs.appendFileSync(file, `${JSON.stringify(line)}\n`)
})
