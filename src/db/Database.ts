/**
 * The one SQL client of the service. With `DATABASE_URL` it is a pool onto that
 * PostgreSQL; without it, onto the embedded database of `BILLING_DATA_DIR`.
 * Rows come back camelCased; `numeric` and `int8` come back as strings and are
 * decoded by each repository (see `src/money.ts`).
 */
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { type Duration, Effect, Layer, Option, Redacted, String } from "effect"
import { DatabaseConfig } from "../config.ts"
import { serveDataDir, type EmbeddedAddress } from "./Embedded.ts"
import { describeConnectionString, parseConnectionString } from "./ConnectionString.ts"
import { HostRouter, registerRouter } from "./HostRouting.ts"
import { acquirePool, type PoolOptions } from "./Pool.ts"

const applicationName = "billing"

/**
 * `snakeToCamel` remembered per column name: every key of every row returned
 * goes through it (a billing-day batch reads a few thousand rows of a dozen
 * columns), and the names are the few our statements select.
 */
const camelNames = new Map<string, string>()
const resultName = (name: string): string => {
  let camel = camelNames.get(name)
  if (camel === undefined) {
    camel = String.snakeToCamel(name)
    if (camelNames.size >= 10_000) camelNames.clear()
    camelNames.set(name, camel)
  }
  return camel
}

const clientOn = (
  pool: Parameters<typeof acquirePool>[0],
  connectTimeout: Duration.DurationInput,
  options: PoolOptions,
  name = applicationName
) =>
  PgClient.layerFromPool({
    acquire: acquirePool({ ...pool, application_name: name }, connectTimeout, options),
    applicationName: name,
    transformResultNames: resultName,
    transformQueryNames: String.camelToSnake
  })

/**
 * A URL that says its server gives every client one shared session (the
 * embedded database's socket, as the tests hand it to the processes they
 * start): `billing_shared_session=1` in its query. The driver ignores the
 * parameter; we send no named prepared statement there (Pool.ts), since two
 * clients preparing one name in one session would collide.
 */
export const sharedSessionParameter = "billing_shared_session=1"

const isSharedSession = (url: string) => {
  try {
    return new URL(url).searchParams.get("billing_shared_session") === "1"
  } catch {
    return false
  }
}

/**
 * How long one connection attempt to one host may take: a host that is gone
 * (not refusing, just silent) must not hold a request, or a probe for the new
 * primary, for the kernel's TCP timeout. libpq's `connect_timeout` in the URL
 * sets it (seconds), as it does for libpq.
 */
const DEFAULT_HOST_CONNECT_TIMEOUT_MS = 5_000


/**
 * What a pool is for: the primary's (`DATABASE_URL`), or the read connection
 * (`DATABASE_READ_URL`, src/db/ReadSql.ts). The read pool names itself
 * `billing-read` to the server (so `pg_stat_activity` on a standby shows it),
 * connects only when a read first needs it, and keeps its router to itself:
 * listening connections follow the primary's router (registerRouter), and a
 * read URL on the same hosts would otherwise take its place.
 */
export type PoolRole = "primary" | "read"

export const readApplicationName = "billing-read"

/**
 * A client on the PostgreSQL server(s) at `url`: one host, or several with
 * libpq's `target_session_attrs` (src/db/ConnectionString.ts, HostRouting.ts).
 * `prepareMarked` false (or a URL with `sharedSessionParameter`) for the
 * embedded database's socket, whose one session the clients share (Pool.ts).
 */
export const fromUrl = (url: Redacted.Redacted, maxConnections = 20, prepareMarked = true, role: PoolRole = "primary") =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const uri = Redacted.value(url)
    const variable = role === "read" ? "DATABASE_READ_URL" : "DATABASE_URL"
    const target = yield* Effect.try({
      try: () => parseConnectionString(uri, variable),
      // Not a failure to connect: the value names no PostgreSQL server, and the message says what to write instead.
      catch: (cause) => new SqlError({ cause, message: (cause as { message?: string }).message ?? `${variable} cannot be read` })
    })
    const name = role === "read" ? readApplicationName : applicationName
    const router = new HostRouter(target, {
      application_name: name,
      connectionTimeoutMillis: target.connectTimeoutMs ?? DEFAULT_HOST_CONNECT_TIMEOUT_MS
    })
    const driverUri = target.forHost(target.hosts[0]!)
    if (role === "primary") registerRouter(driverUri, router)
    return clientOn(
      // A read's standby that went silent answers 503 within its connect_timeout, not the kernel's TCP timeout.
      { connectionString: driverUri, max: maxConnections, ...(role === "read" ? { connectionTimeoutMillis: target.connectTimeoutMs ?? DEFAULT_HOST_CONNECT_TIMEOUT_MS } : {}) },
      // The first connection may try each host in turn (each within its connect_timeout) and
      // check its session, which on a loaded machine takes seconds (docs/benchmarks.md, "Figures that
      // were in code comments").
      "20 seconds",
      {
        prepareMarked: prepareMarked && !isSharedSession(uri),
        router,
        target: describeConnectionString(uri),
        checkAtStart: role === "primary"
      },
      name
    )
  }))

/**
 * A new client's first statement queues behind whichever client holds the
 * embedded database's one session (a starting process's migrations, a batch):
 * on a loaded host that takes seconds (test/embedded-shared; docs/benchmarks.md,
 * "Figures that were in code comments").
 */
const EMBEDDED_CONNECT_TIMEOUT = "30 seconds"

export const fromEmbedded = (address: EmbeddedAddress) =>
  clientOn({
    host: address.host,
    port: address.port,
    database: "postgres",
    user: "postgres",
    // pglite-socket multiplexes every client over one PGlite session.
    max: 8
  }, EMBEDDED_CONNECT_TIMEOUT, { prepareMarked: false })

/** The SQL client chosen by the environment (`DATABASE_URL`, else the embedded database). */
export const DatabaseLive = Layer.unwrapScoped(
  Effect.gen(function*() {
    const config = yield* DatabaseConfig
    if (Option.isSome(config.url)) return fromUrl(config.url.value)
    const address = yield* serveDataDir(config.dataDir)
    return fromEmbedded(address)
  })
)
