/**
 * bench/embedded-start: how long a new embedded database takes to answer.
 *
 *   node bench/embedded-start.mjs [ROOT_OF_A_BUILT_CHECKOUT]
 *
 * Spawns `billing serve --no-worker --port 4777` on an empty data folder (no
 * DATABASE_URL), times spawn to its first HTTP answer and the CPU seconds
 * the server used until then (/proc, every thread), stops it, then times
 * one `billing org list --json` on the same folder. Run by hand; results in
 * docs/benchmarks.md.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
const root = process.argv[2] ?? new URL("..", import.meta.url).pathname.replace(/\/$/, "")
const dir = fs.mkdtempSync("/tmp/fresh-serve-")
const env = { ...process.env, BILLING_DATA_DIR: dir }
delete env.DATABASE_URL
const t0 = performance.now()
const child = spawn(process.execPath, [`${root}/bin/billing.mjs`, "serve", "--port", "4777", "--no-worker"], { env, stdio: "ignore" })
for (;;) {
  try { const r = await fetch("http://127.0.0.1:4777/api/v1/customers"); if (r.status) break } catch {}
  await new Promise((r) => setTimeout(r, 20))
}
const t = (performance.now() - t0) / 1000
// utime and stime, in clock ticks (100 a second on Linux), of every thread of the server.
const [utime, stime] = fs.readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1].split(" ").slice(11, 13).map(Number)
const cpu = (utime + stime) / 100
child.kill("SIGTERM"); await new Promise((r) => child.on("exit", r))
const t1 = performance.now()
const list = spawn(process.execPath, [`${root}/bin/billing.mjs`, "org", "list", "--json"], { env, stdio: "ignore" })
await new Promise((r) => list.on("exit", r))
console.log(`${root}: serve answers on a fresh folder after ${t.toFixed(2)} s (${cpu.toFixed(2)} CPU-s); a CLI command on it afterwards ${((performance.now() - t1) / 1000).toFixed(2)} s`)
fs.rmSync(dir, { recursive: true, force: true })
