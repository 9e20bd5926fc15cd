/**
 * The whole service for a test file: a fresh database, migrations, every
 * service, and the real HTTP server on a random loopback port. Tests talk to it
 * the way users do: over HTTP (`request`) and through the CLI.
 *
 * `cli` runs a command in this process through the same command functions as
 * the `billing` binary (cli/program.ts `runCliInProcess`), with its own
 * streams, exit code and environment: starting Node for each command was most
 * of the suite's time. `spawnCli` starts the real binary, for what needs a
 * process of its own: one smoke test per command group, crash and
 * cross-process behaviour, serve and the worker loop.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { type Clock, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { appendFileSync } from "node:fs"
import { runCliInProcess } from "../../cli/program.ts"
import { MigrationsLive } from "../../src/db/Migrations.ts"
import { makeHttpServer } from "../../src/app/Server.ts"
import { Organizations } from "../../src/organizations/Organizations.ts"
import { ServicesLive } from "../../src/app/Services.ts"
import { TelemetryLive } from "../../src/Telemetry.ts"
import { spawnBilling } from "./Cli.ts"
import { startPrism, violationsOf } from "./Prism.ts"
import { EmptyTestDatabaseLive, TestDatabaseLive, TestDatabaseUrl } from "./TestDatabase.ts"
import type { OrganizationId } from "../../src/ids.ts"


const makeLayer = (ownDatabase = false, clock?: Clock.Clock) => {
  const database = Layer.provideMerge(MigrationsLive, ownDatabase ? EmptyTestDatabaseLive : TestDatabaseLive)
  const services = ServicesLive.pipe(Layer.provideMerge(database))
  const app = makeHttpServer({ port: 0, host: "127.0.0.1" }).pipe(
    Layer.provideMerge(services),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)),
    // As `billing serve`: spans exported when OTEL_EXPORTER_OTLP_ENDPOINT is set, the tracer off otherwise.
    Layer.provide(TelemetryLive)
  )
  return clock === undefined ? app : Layer.provide(app, Layer.setClock(clock))
}

type AppContext = Layer.Layer.Success<ReturnType<typeof makeLayer>>

export interface Response {
  readonly status: number
  // Test bodies are inspected field by field; `any` keeps assertions readable.
  readonly body: any
  readonly headers: Headers
}

export interface RequestOptions {
  readonly key?: string | null
  readonly body?: unknown
  /** Sent as-is instead of JSON-encoding `body`. */
  readonly rawBody?: string
  readonly headers?: Record<string, string>
}

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** stdout parsed as JSON, when it is. */
  readonly json: any
}

export interface Tenant {
  readonly organizationId: OrganizationId
  readonly apiKey: string
}

export interface TestApp {
  readonly baseUrl: string
  readonly databaseUrl: string
  readonly run: <A, E>(effect: Effect.Effect<A, E, AppContext>) => Promise<A>
  readonly request: (method: string, path: string, options?: RequestOptions) => Promise<Response>
  /** A fresh organisation with its API key; also the default key of `request`. */
  readonly tenant: (name?: string) => Promise<Tenant>
  /** `billing ...args` in this process, on this app's database. */
  readonly cli: (args: ReadonlyArray<string>, env?: Record<string, string>) => Promise<CliResult>
  /** `billing ...args` as a child process (stdout a pipe), on this app's database. */
  readonly spawnCli: (args: ReadonlyArray<string>, env?: Record<string, string>) => Promise<CliResult>
  readonly close: () => Promise<void>
}

export interface TestAppOptions {
  /**
   * A database no other app of the test process shares, even within the file
   * (created for it, and migrated): by default the file's apps share the
   * file's database.
   */
  readonly ownDatabase?: boolean
  /**
   * The clock every service of the app reads (requests, `app.run`), instead of
   * the system's: a `SettableClock` lets a test say when "now" is for what
   * the API does (the CLI run in process builds its own services, on the
   * system clock).
   */
  readonly clock?: Clock.Clock
}

export const startTestApp = async (options: TestAppOptions = {}): Promise<TestApp> => {
  const runtime = ManagedRuntime.make(makeLayer(options.ownDatabase, options.clock))
  const run = <A, E>(effect: Effect.Effect<A, E, AppContext>) => runtime.runPromise(effect)
  const address = await run(Effect.map(HttpServer.HttpServer, (server) => server.address))
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  const baseUrl = `http://127.0.0.1:${address.port}/api/v1`
  const databaseUrl = await run(TestDatabaseUrl)

  // BILLING_TEST_PRISM_LOG=FILE: the suite's traffic goes through Prism's validation proxy, and each
  // exchange is written to FILE with the ways its answer departs from the OpenAPI document
  // (scripts/contract-check.sh).
  const prismLog = process.env.BILLING_TEST_PRISM_LOG
  const prism = prismLog
    ? await startPrism(
      baseUrl.replace(/\/api\/v1$/, ""),
      await (await fetch(`${baseUrl}/openapi.json`)).json()
    )
    : undefined
  const requestBase = prism ? `${prism.url}/api/v1` : baseUrl

  const request = async (method: string, path: string, options: RequestOptions = {}): Promise<Response> => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.key !== null && options.key !== undefined) headers.authorization = `Bearer ${options.key}`
    let body: string | undefined
    if (options.rawBody !== undefined) body = options.rawBody
    else if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined && headers["content-type"] === undefined) headers["content-type"] = "application/json"
    const base = path === "/openapi.json" ? baseUrl : requestBase
    const response = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) })
    if (prismLog && base !== baseUrl) {
      const found = violationsOf(response).filter((violation) => violation.location[0] === "response")
      appendFileSync(prismLog, `${JSON.stringify({ method, path, status: response.status, violations: found })}\n`)
    }
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body: parsed, headers: response.headers }
  }

  const tenant = async (name = "Test Org"): Promise<Tenant> => {
    const { organization, apiKey } = await run(Effect.flatMap(Organizations, (orgs) => orgs.create({ name })))
    return { organizationId: organization.id, apiKey }
  }

  const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CliResult> =>
    runCliInProcess(args, { env: { ...process.env, DATABASE_URL: databaseUrl, ...env } })

  const spawnCli = async (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CliResult> => {
    const exit = await spawnBilling(args, { ...process.env, DATABASE_URL: databaseUrl, ...env })
    return { code: exit.code ?? 1, stdout: exit.stdout, stderr: exit.stderr, json: exit.json }
  }

  const close = async () => {
    prism?.stop()
    await runtime.dispose()
  }

  return { baseUrl, databaseUrl, run, request, tenant, cli, spawnCli, close }
}
