/**
 * `billing serve`'s work: the HTTP server (with its bundled API reference page,
 * a few megabytes of script), the worker loop, the API processes of
 * `--processes N`. Kept out of cli/commands/serve.tsx so that every other
 * command, and `--help`, starts without compiling any of it.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { Command } from "commander"
import * as HttpServer from "@effect/platform/HttpServer"
import { Cause, Context, Data, Deferred, Effect, Exit, Layer, Option, Redacted, Runtime } from "effect"
import cluster, { type Worker } from "node:cluster"
import { makeHttpServer } from "../../src/app/Server.ts"
import { fromEmbedded, fromUrl } from "../../src/db/Database.ts"
import { markLongLived, serveDataDir } from "../../src/db/Embedded.ts"
import { keepAllocationsYoung, limitHeapGrowth } from "../../src/HeapGrowth.ts"
import { DatabaseConfig } from "../../src/config.ts"
import { TelemetryLive } from "../../src/Telemetry.ts"
import { AppServicesLive, ServicesLive } from "../../src/app/Services.ts"
import { ReadSqlLive } from "../../src/db/ReadSql.ts"
import { workerJobs } from "../../src/app/Jobs.ts"
import { pollInterval, runWorker } from "../../src/worker/Worker.ts"
import * as path from "node:path"
import { formatHost, parseConnectionString } from "../../src/db/ConnectionString.ts"
import { outputMode, writeErr, writeOut } from "../Output.ts"
import { databaseKey, recordServeAddress } from "../../src/links/ServeAddress.ts"
import { type LogFormat, type LogFormatChoice, loggerOf, resolveLogFormat } from "../../src/http/LogFormat.ts"

export interface ServeOptions {
  readonly port?: number
  readonly host?: string
  readonly worker: boolean
  readonly processes?: number
  /** `--log-format` (or `BILLING_LOG_FORMAT`); auto when neither. */
  readonly logFormat?: LogFormatChoice
}

/** Set in the environment of the API processes `serve --processes N` starts. */
const apiProcessVariable = "BILLING_SERVE_API_PROCESS"

/** The pool the single process has (src/db/Database.ts); N API processes share it out. */
const totalPool = 20
const poolPerProcess = (processes: number) => Math.max(5, Math.ceil(totalPool / processes))

/**
 * The embedded database's socket takes 64 clients; each API process pools 8,
 * the primary 8, and the CLI needs room while serve runs.
 */
const maxEmbeddedProcesses = 6

/**
 * Log lines in `format` (JSON, or one short line each for a terminal:
 * src/http/LogFormat.ts), and spans exported over OTLP or none made at all
 * (src/Telemetry.ts). Fibers forked while the layers are built (the inbox
 * writer, the worker loop, the server's requests) inherit both.
 */
const processSettings = (format: LogFormat) => Layer.merge(loggerOf(format), TelemetryLive)

const worker = Layer.scopedDiscard(Effect.forkScoped(Effect.flatMap(workerJobs, (jobs) => runWorker(jobs, { once: false, idle: pollInterval() }))))

/** `BILLING_HEAP_GROWTH_PERCENT`, default 50: see src/HeapGrowth.ts and docs/benchmarks.md for the figures behind it. */
const heapGrowthPercent = () => {
  const value = Number(process.env.BILLING_HEAP_GROWTH_PERCENT ?? 50)
  return Number.isInteger(value) && value >= 0 ? value : 50
}

/** The database in use, for the start banner: never the password. */
const databaseInUse = Effect.map(DatabaseConfig, (config) => {
  if (Option.isNone(config.url)) return { kind: "embedded" as const, dataDir: path.resolve(config.dataDir) }
  try {
    const target = parseConnectionString(Redacted.value(config.url.value))
    return { kind: "postgresql" as const, host: target.hosts.map(formatHost).join(","), database: target.database }
  } catch {
    return { kind: "postgresql" as const, host: "(unparsable DATABASE_URL)", database: "" }
  }
})

/**
 * Says where the API is once it listens. A person at a terminal gets the API
 * and docs URLs and the database in a few lines; anything else (a process
 * manager, a test, a pipe) gets the one JSON log line it can parse, with the
 * same facts as annotations.
 */
const announce = (origin: string, worker: boolean, extra: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const database = yield* databaseInUse
    // For the links the CLI prints on this machine (src/links/ServeAddress.ts); a wildcard is no address to open.
    if (origin.startsWith("http://")) recordServeAddress(yield* databaseKey, origin.replace("//0.0.0.0:", "//localhost:"))
    const api = `${origin}/api/v1`
    const docs = `${origin}/docs`
    if (outputMode({}) === "tty") {
      const where = database.kind === "embedded"
        ? `embedded PGlite in ${database.dataDir}`
        : `PostgreSQL ${database.host}/${database.database}`
      writeOut(
        [
          `billing API  ${api}`,
          `docs         ${docs}`,
          `database     ${where}`,
          `worker       ${worker ? "running in this process" : "not in this process (--no-worker)"}`,
          "Ctrl-C stops.",
          ""
        ].join("\n")
      )
      return
    }
    yield* Effect.logInfo(`Listening on ${origin}`).pipe(Effect.annotateLogs({ api, docs, database, worker, ...extra }))
  }).pipe(Effect.orDie)

const originOf = (address: HttpServer.Address) =>
  address._tag === "UnixAddress"
    ? `http+unix://${address.path}`
    : `http://${address.hostname === "::" || address.hostname === "0.0.0.0" ? "0.0.0.0" : address.hostname}:${address.port}`

class ApiProcessFailed extends Data.TaggedError("ApiProcessFailed")<{ readonly message: string }> {}

/**
 * An API process's database: its own pool onto PostgreSQL, or the embedded
 * database the primary holds (found through `server.json` in the data folder,
 * as the CLI finds a running serve). The primary has applied the migrations.
 */
const apiProcessDatabase = (processes: number) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const config = yield* DatabaseConfig
      if (Option.isSome(config.url)) return fromUrl(config.url.value, poolPerProcess(processes))
      return fromEmbedded(yield* serveDataDir(config.dataDir))
    })
  )

/** One of the N API processes: the HTTP server alone, on the port the primary shares out. */
const runApiProcess = (listen: { readonly port: number; readonly host: string }, processes: number, format: LogFormat) => {
  // The primary passes its SIGTERM on; a terminal's Ctrl-C reaches both. The
  // first signal starts the graceful stop; a second must not kill the process
  // half-way through it (the primary sends SIGKILL if a stop takes too long).
  process.on("SIGTERM", () => {})
  process.on("SIGINT", () => {})
  const server = makeHttpServer({ ...listen, logAddress: false, requestLog: { format } }).pipe(
    Layer.provide(ServicesLive.pipe(Layer.provide(ReadSqlLive(poolPerProcess(processes))), Layer.provideMerge(apiProcessDatabase(processes)))),
    Layer.provide(processSettings(format))
  )
  NodeRuntime.runMain(Layer.launch(server), { disablePrettyLogger: true })
}

/**
 * Starts `count` API processes (node:cluster: they share the listening socket,
 * the primary hands each new connection to the next process in turn), waits
 * until all listen, and replaces one that dies. Stopping (the scope closes)
 * sends each SIGTERM and waits for it to exit (SIGKILL after 15 s).
 *
 * Returns an effect that fails when the processes cannot be kept up: one that
 * exits before it listens (a port in use, a start-up failure), or more than
 * 10 replacements in a minute.
 */
const superviseApiProcesses = (count: number, host: string, withWorker: boolean, format: LogFormat) =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    const log = (effect: Effect.Effect<void>) => Runtime.runFork(runtime)(effect)
    const failed = yield* Deferred.make<never, ApiProcessFailed>()
    const fail = (message: string) => Deferred.unsafeDone(failed, Exit.fail(new ApiProcessFailed({ message })))
    const live = new Set<Worker>()
    const replacements: Array<number> = []
    let stopping = false
    // Set at the signal itself, before the interruption reaches the finalizer:
    // an API process that stops on the same Ctrl-C is not replaced.
    const onSignal = () => {
      stopping = true
    }
    process.once("SIGTERM", onSignal)
    process.once("SIGINT", onSignal)

    const start = () =>
      new Promise<{ address: string; port: number }>((resolve, reject) => {
        // The primary's format: the API processes write to the same stdout.
        const child = cluster.fork({ [apiProcessVariable]: "1", BILLING_LOG_FORMAT: format })
        live.add(child)
        let listening = false
        child.once("listening", (address: { address: string; port: number }) => {
          listening = true
          resolve(address)
        })
        child.once("exit", (code, signal) => {
          live.delete(child)
          const how = signal ? `signal ${signal}` : `code ${code}`
          if (!listening) return reject(new ApiProcessFailed({ message: `API process ${child.process.pid} exited (${how}) before it listened` }))
          if (stopping) return
          const now = Date.now()
          replacements.push(now)
          while (replacements[0]! < now - 60_000) replacements.shift()
          if (replacements.length > 10) return fail("API processes keep exiting: more than 10 replaced in a minute")
          log(Effect.logError(`API process ${child.process.pid} exited (${how}); starting another`))
          start().then(
            (address) => log(Effect.logInfo(`API process replaced; listening on ${address.port}`)),
            (error: ApiProcessFailed) => fail(error.message)
          )
        })
      })

    const stopAll = () => {
      stopping = true
      process.removeListener("SIGTERM", onSignal)
      process.removeListener("SIGINT", onSignal)
      return Promise.all(
        [...live].map((child) =>
          new Promise<void>((resolve) => {
            if (child.isDead()) return resolve()
            const kill = setTimeout(() => child.process.kill("SIGKILL"), 15_000)
            child.once("exit", () => {
              clearTimeout(kill)
              resolve()
            })
            child.process.kill("SIGTERM")
          })
        )
      )
    }
    yield* Effect.addFinalizer(() => Effect.promise(stopAll))

    const addresses = yield* Effect.tryPromise({
      try: () => Promise.all(Array.from({ length: count }, start)),
      catch: (error) => error instanceof ApiProcessFailed ? error : new ApiProcessFailed({ message: String(error) })
    })
    const { port } = addresses[0]!
    const hostname = host === "::" ? "0.0.0.0" : host
    yield* announce(`http://${hostname}:${port}`, withWorker, { processes: count, pids: [...live].map((child) => child.process.pid) })
    return Deferred.await(failed)
  })

/** The Node error (`code`, `message`) somewhere in a failure's cause chain. */
const systemErrorIn = (cause: Cause.Cause<unknown>): { readonly code?: string; readonly message?: string; readonly _tag?: string } | undefined => {
  for (const reason of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    for (let at: unknown = reason, depth = 0; typeof at === "object" && at !== null && depth < 5; depth++) {
      const error = at as { readonly code?: unknown; readonly cause?: unknown }
      if (typeof error.code === "string") return at as { code: string }
      at = error.cause
    }
  }
  return undefined
}

/**
 * Failures a person can fix, told in one line on stderr (exit code 1) instead
 * of a logged stack trace: the port is taken (or not ours to take), or the
 * database cannot be reached (src/db/Pool.ts names it and says why).
 */
export const startFailureText = (cause: Cause.Cause<unknown>, listen: { readonly port: number; readonly host: string }): string | undefined => {
  const system = systemErrorIn(cause)
  if (system?.code === "EADDRINUSE") {
    return `port ${listen.port} on ${listen.host} is in use (another billing serve, or another program): ` +
      `stop it, or choose another port with --port N (or PORT=N)`
  }
  if (system?.code === "EACCES") {
    return `port ${listen.port} on ${listen.host} needs privileges this process lacks: choose a port above 1023 with --port N`
  }
  for (const failure of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    const error = failure as { readonly _tag?: unknown; readonly message?: unknown; readonly cause?: { readonly _tag?: unknown } }
    const unreadableUrl = error?.cause?._tag === "ConnectionStringError"
    if (error?._tag === "SqlError" && typeof error.message === "string" && (error.message.startsWith("cannot connect") || unreadableUrl)) {
      return error.message
    }
  }
  return undefined
}

const toldStartFailures = (listen: { readonly port: number; readonly host: string }) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A | void, E, R> =>
  Effect.catchAllCause(effect, (cause) => {
    const text = startFailureText(cause, listen)
    if (text === undefined) return Effect.failCause(cause)
    return Effect.sync(() => {
      writeErr(`error: ${text}\n`)
      process.exitCode = 1
    })
  })

/** What `billing serve` does once its flags are parsed (loaded only by `serve`: see cli/commands/serve.tsx). */
export const runServe = (program: Command, options: ServeOptions) => {
  const port = options.port ?? Number(process.env.PORT ?? 8787)
  const host = options.host ?? process.env.HOST ?? "127.0.0.1"
  const processes = options.processes ?? 1
  keepAllocationsYoung()
  limitHeapGrowth(heapGrowthPercent())
  markLongLived() // the embedded database: never a client of a one-off CLI command's process
  const format = resolveLogFormat(options.logFormat ?? "auto", process.stdout.isTTY === true)
  if (cluster.isWorker && process.env[apiProcessVariable] === "1") return runApiProcess({ port, host }, processes, format)

  const workerLoop = options.worker ? worker : Layer.empty
  if (processes === 1) {
    const api = makeHttpServer({ port, host, logAddress: false, requestLog: { format } }).pipe(
      Layer.tap((context) => announce(originOf(Context.get(context, HttpServer.HttpServer).address), options.worker))
    )
    const server = Layer.merge(api, workerLoop).pipe(
      Layer.provide(AppServicesLive),
      Layer.provide(processSettings(format))
    )
    // SIGTERM and SIGINT interrupt the layer: the server stops accepting,
    // in-flight requests finish, then the pool and the embedded database close.
    return NodeRuntime.runMain(Layer.launch(server).pipe(toldStartFailures({ port, host })), { disablePrettyLogger: true })
  }

  if (process.env.DATABASE_URL === undefined && processes > maxEmbeddedProcesses) {
    program.error(`error: --processes above ${maxEmbeddedProcesses} needs PostgreSQL (DATABASE_URL): the embedded database serves 64 connections`)
  }
  // The primary: migrations, the embedded database's socket (which the API
  // processes join), the worker loop once, and the API processes. SIGTERM
  // stops the API processes first (their in-flight requests finish), then
  // the worker loop, then the database.
  const primary = Effect.scoped(Effect.flatten(superviseApiProcesses(processes, host, options.worker, format))).pipe(
    Effect.provide(workerLoop.pipe(Layer.provideMerge(AppServicesLive))),
    Effect.provide(processSettings(format))
  )
  NodeRuntime.runMain(primary.pipe(toldStartFailures({ port, host })), { disablePrettyLogger: true })
}
