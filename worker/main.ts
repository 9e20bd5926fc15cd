/**
 * The worker entry point, for cron or a process manager, under Node
 * (`node bin/billing.mjs worker`, or tsx) and Deno (`deno run -A worker/main.ts`):
 *   --once        drain every job, then exit
 *   --now ISO     the instant billing cycles treat as now
 */
import { Effect, Layer, Logger } from "effect"
import { AppServicesLive } from "../src/app/Services.ts"
import { TelemetryLive } from "../src/Telemetry.ts"
import { workerJobs } from "../src/app/Jobs.ts"
import { pollInterval, runWorker } from "../src/worker/Worker.ts"

const args = process.argv.slice(2)
const once = args.includes("--once")
const nowIndex = args.indexOf("--now")
const now = nowIndex >= 0 ? new Date(args[nowIndex + 1] ?? "") : undefined
if (now !== undefined && Number.isNaN(now.getTime())) {
  process.stderr.write("error: --now takes an ISO 8601 instant\n")
  process.exit(2)
}

const program = Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once, now, idle: pollInterval() })).pipe(
  Effect.tap((handled) => Effect.logInfo(`worker drained ${handled} item(s)`)),
  Effect.provide(AppServicesLive.pipe(Layer.provide(Logger.json), Layer.provide(TelemetryLive)))
)

const controller = new AbortController()
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => controller.abort())

Effect.runPromiseExit(program, { signal: controller.signal }).then((exit) => {
  process.exitCode = exit._tag === "Success" || controller.signal.aborted ? 0 : 1
  if (exit._tag === "Failure" && !controller.signal.aborted) process.stderr.write(`worker failed: ${String(exit.cause)}\n`)
})
