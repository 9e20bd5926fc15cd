import type { Command } from "commander"
import { Cause, Effect, Exit, Fiber, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { markLongLived } from "../../src/db/Embedded.ts"
import { MigratedDatabaseLive } from "../../src/db/Migrations.ts"
import { TelemetryLive } from "../../src/Telemetry.ts"
import { workerJobNames, workerJobs, WorkerJobsLive } from "../../src/app/Jobs.ts"
import { type BatchReport, summarize } from "../../src/worker/Stats.ts"
import { pollInterval, runWorker } from "../../src/worker/Worker.ts"
import { isInteractive, outputMode, setExitCode, writeOut } from "../Output.ts"
import { runnerOn, withJson, writeFailure } from "../run.ts"
import { parseInstant } from "../instantFlag.ts"
import { loadInk } from "../ui/ink.ts"

const run = runnerOn(WorkerJobsLive)

interface WorkerFlags {
  readonly json?: boolean
  readonly once?: boolean
  readonly now?: string
}

/** One JSON line for a batch that did work: what a log collector reads. */
const logLine = (report: BatchReport) =>
  JSON.stringify({
    level: "INFO",
    time: report.at.toISOString(),
    message: "worker batch",
    job: report.job,
    handled: report.handled,
    durationMs: report.durationMs,
    byOrganization: report.byOrganization,
    ...(report.queue !== null ? { queue: report.queue } : {})
  })

/**
 * Only batches that finished something: an idle poll, or a webhook batch that
 * only waits on deliveries still in flight, says nothing new.
 */
const printLogLine = (report: BatchReport) =>
  Effect.sync(() => {
    if (report.handled > 0 && Object.keys(report.byOrganization).length > 0) writeOut(`${logLine(report)}\n`)
  })

/** Warnings and errors on stderr; stdout is the view's or the log lines'. */
const quietLogs = Layer.merge(
  Logger.minimumLogLevel(LogLevel.Warning),
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

/**
 * The views, loaded only when a person looks at one: a worker that writes
 * JSON lines (a pipe, a process manager) starts without Ink.
 */
const loadViews = () => import("../ui/WorkerView.tsx")

/** `--once`: drain, then a per-job, per-organisation summary (one document with --json). */
const drainOnce = async (options: WorkerFlags) => {
  const reports: Array<BatchReport> = []
  const mode = outputMode(options)
  const views = mode === "json" ? undefined : await loadViews()
  const onBatch = (report: BatchReport) =>
    Effect.zipRight(
      Effect.sync(() => reports.push(report)),
      mode === "plain" ? printLogLine(report) : Effect.void
    )
  return run(
    options,
    Effect.flatMap(parseInstant(options.now), (now) =>
      Effect.map(
        Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: true, now, idle: pollInterval(), onBatch })),
        (handled) => ({ handled, jobs: summarize(workerJobNames, reports) })
      )),
    {
      json: (result) => result,
      view: (result) => {
        const { WorkerSummary } = views!
        return <WorkerSummary summaries={result.jobs} handled={result.handled} />
      }
    }
  )
}

/**
 * The loop, until Ctrl-C (or `q` on a terminal): a live view on a terminal,
 * JSON lines elsewhere. Stopping interrupts the jobs between statements; a
 * batch in flight rolls back and its work is taken again by the next worker.
 */
const loop = async (options: WorkerFlags) => {
  const runtime = ManagedRuntime.make(
    WorkerJobsLive.pipe(Layer.provideMerge(MigratedDatabaseLive), Layer.provide(quietLogs), Layer.provide(TelemetryLive))
  )
  const live = outputMode(options) === "tty"
  const views = live ? await loadViews() : undefined
  const store = views && new views.WorkerStatsStore(workerJobNames)
  const onBatch = store ? (report: BatchReport) => Effect.sync(() => store.add(report)) : printLogLine
  const fiber = runtime.runFork(
    Effect.flatMap(parseInstant(options.now), (now) =>
      Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: false, now, idle: pollInterval(), onBatch })))
  )
  let stopping = false
  const stop = () => {
    if (stopping) return
    stopping = true
    void runtime.runPromise(Fiber.interrupt(fiber))
  }
  const view = views && store
    ? (await loadInk()).render(<views.WorkerLiveView store={store} interactive={isInteractive(options)} onQuit={stop} />, {
      exitOnCtrlC: false,
      patchConsole: false
    })
    : undefined
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  // The runtime's layers may fail to build (a DATABASE_URL that names no PostgreSQL): that is the loop's failure too,
  // told as one line like any other, not an unhandled rejection with a stack trace.
  const awaited = await runtime.runPromiseExit(Fiber.await(fiber))
  const exit: Exit.Exit<unknown, unknown> = Exit.isSuccess(awaited) ? awaited.value : awaited
  view?.unmount()
  await runtime.dispose()
  process.off("SIGINT", stop)
  process.off("SIGTERM", stop)
  if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
    writeFailure(options, exit.cause)
    setExitCode(1)
    return
  }
  // stdin in raw mode (Ink's useInput) would keep the process alive.
  if (process.stdin.isTTY) process.stdin.unref()
  setExitCode(0)
}

export const registerWorker = (program: Command) => {
  withJson(program.command("worker").description("price queued signals, deliver webhooks, renew billing cycles"))
    .option("--once", "drain every job, then exit (for cron) with a summary per job and organisation")
    .option("--now <iso>", "the instant billing cycles treat as now")
    .action((options: WorkerFlags) => {
      // The loop runs until stopped: on the embedded database it never joins a one-off command's process.
      if (!options.once) markLongLived()
      return options.once ? drainOnce(options) : loop(options)
    })
}
