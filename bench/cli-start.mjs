/**
 * bench/cli-start: how long typical CLI commands take, spawn to exit.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
 *     node bench/cli-start.mjs [--runs 5] ROOT_OF_A_BUILT_CHECKOUT...
 *
 * For each built checkout (`node scripts/build.mjs` run in it) it times each
 * command `--runs` times, the checkouts' runs interleaved so that a change in
 * the machine's load falls on all of them alike, and prints the median in
 * seconds. On PostgreSQL (a database of its own, made from DATABASE_URL's
 * server and dropped at the end) and on the embedded database (a data folder
 * of its own, no `billing serve` running: the command opens the folder
 * itself). Each database holds a demo workspace (`billing seed`), made by
 * the first checkout's CLI. Run by hand; results in
 * docs/benchmarks.md.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"

const args = process.argv.slice(2)
const runsAt = args.indexOf("--runs")
const runs = runsAt >= 0 ? Number(args.splice(runsAt, 2)[1]) : 5
const roots = args.length > 0 ? args : [new URL("..", import.meta.url).pathname.replace(/\/$/, "")]
const adminUrl = process.env.DATABASE_URL
if (!adminUrl) throw new Error("set DATABASE_URL to a PostgreSQL server's database (a database of its own is made there)")

const billing = (root, env, argv) => {
  const started = performance.now()
  const result = spawnSync(process.execPath, [`${root}/bin/billing.mjs`, ...argv], { env, encoding: "utf8" })
  const seconds = (performance.now() - started) / 1000
  if (result.status !== 0) throw new Error(`billing ${argv.join(" ")} (${root}) exited ${result.status}: ${result.stderr}`)
  return { seconds, stdout: result.stdout }
}

const withDatabase = (url, name) => {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}
const psql = (statement) => {
  const result = spawnSync("psql", [adminUrl, "-v", "ON_ERROR_STOP=1", "-c", statement], { encoding: "utf8" })
  if (result.status !== 0) throw new Error(result.stderr)
}

const baseEnv = { ...process.env }
delete baseEnv.DATABASE_URL
delete baseEnv.BILLING_DATA_DIR
delete baseEnv.BILLING_ORG

const dbName = `billing_cli_start_${process.pid}`
psql(`CREATE DATABASE "${dbName}"`)
const dataDir = fs.mkdtempSync("/tmp/cli-start-")
const databases = {
  PostgreSQL: { ...baseEnv, DATABASE_URL: withDatabase(adminUrl, dbName) },
  embedded: { ...baseEnv, BILLING_DATA_DIR: dataDir }
}

const commands = [
  ["--help"],
  ["org", "list", "--json"],
  ["customer", "list", "--json"],
  ["plan", "list"]
]

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

try {
  for (const [database, env] of Object.entries(databases)) {
    // A demo workspace (`billing seed`: customers, plans, ...), so that the lists print something.
    const seeded = JSON.parse(billing(roots[0], env, ["seed", "--json"]).stdout)
    env.BILLING_ORG = seeded.organization.id
    const times = new Map()
    for (let run = 0; run < runs; run++) {
      for (const command of commands) {
        for (const root of roots) {
          const key = `${command.join(" ")}\u0000${root}`
          times.set(key, [...(times.get(key) ?? []), billing(root, env, command).seconds])
        }
      }
    }
    console.log(`\n${database}, median of ${runs} (s)`)
    console.log(["command", ...roots].join("\t"))
    for (const command of commands) {
      console.log([`billing ${command.join(" ")}`, ...roots.map((root) => median(times.get(`${command.join(" ")}\u0000${root}`)).toFixed(2))].join("\t"))
    }
  }
} finally {
  psql(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`)
  fs.rmSync(dataDir, { recursive: true, force: true })
}
