import { type ChildProcess, spawn } from "node:child_process"
import pg from "pg"

/** What the benchmarks share: a bounded-concurrency load runner with latency percentiles. */

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

/** Runs `count` tasks `concurrency` at a time; the rate per second, per-task latency percentiles in ms, and the elapsed seconds. */
export const load = async (count: number, concurrency: number, task: (index: number) => Promise<void>) => {
  const latencies = new Array<number>(count)
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const index = next++
      const t0 = performance.now()
      await task(index)
      latencies[index] = performance.now() - t0
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const sorted = [...latencies].sort((a, b) => a - b)
  return { rate: Math.round(count / seconds), p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), seconds }
}

/**
 * The yardstick every figure is stated against (docs/benchmarks.md): plain
 * single-row INSERTs of a signal-sized JSONB row through node-postgres, a pool
 * of 10, 64 concurrent callers, into a table without any index. Run in the
 * same minutes as what it is compared with, on the same database.
 */
export const plainInsertYardstick = async (url: string, count: number, callers = 64) => {
  const table = `bench_yardstick_${process.pid}`
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  try {
    await pool.query(`CREATE TABLE ${table} (id text, body jsonb)`)
    const body = JSON.stringify({ agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } })
    const result = await load(count, callers, async (index) => {
      await pool.query(`INSERT INTO ${table} (id, body) VALUES ($1, $2::jsonb)`, [`y${index}`, body])
    })
    await pool.query(`DROP TABLE ${table}`)
    return result
  } finally {
    await pool.end()
  }
}

/** A CLI process's exit code and output (stderr: its last 8,000 characters). */
export interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Spawns `node [--import preload] [nodeArgs] bin/billing.mjs ...args` (the node
 * process itself, so its pid is the CLI's), keeping every child in `running`
 * so a bench can end them all on Ctrl-C. With `statsFile`, the statement
 * counter (bench/count-statements.mjs) appends its line there on exit.
 */
export const cliProcesses = (options: {
  readonly root: string
  readonly cliPath: string
  readonly preload: string
  readonly env: NodeJS.ProcessEnv
  readonly nodeArgs: ReadonlyArray<string>
}) => {
  const running = new Set<ChildProcess>()
  const spawnCli = (args: ReadonlyArray<string>, statsFile?: string) => {
    const child = spawn(
      process.execPath,
      [...(statsFile ? ["--import", options.preload] : []), ...options.nodeArgs, options.cliPath, ...args],
      {
        cwd: options.root,
        env: statsFile ? { ...options.env, BENCH_STATEMENTS_FILE: statsFile } : options.env,
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    running.add(child)
    return child
  }
  const finished = (child: ChildProcess) =>
    new Promise<Finished>((resolve) => {
      let stdout = ""
      let stderr = ""
      child.stdout?.on("data", (chunk) => (stdout += chunk))
      child.stderr?.on("data", (chunk) => (stderr = (stderr + chunk).slice(-8000)))
      child.on("close", (code) => {
        running.delete(child)
        resolve({ code, stdout, stderr })
      })
    })
  return { running, spawnCli, finished }
}
