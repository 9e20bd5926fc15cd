/**
 * The one SQL client of the service. With `DATABASE_URL` it is a pool onto that
 * PostgreSQL; without it, onto the embedded database of `BILLING_DATA_DIR`.
 * Rows come back camelCased; `numeric` and `int8` come back as strings and are
 * decoded by each repository (see `src/money.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { type Duration, Effect, Layer, Option, Redacted, String } from "effect"
import { DatabaseConfig } from "../config.ts"
import { serveDataDir, type EmbeddedAddress } from "./Embedded.ts"
import { acquirePool } from "./Pool.ts"

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
  options: { readonly prepareMarked: boolean }
) =>
  PgClient.layerFromPool({
    acquire: acquirePool({ ...pool, application_name: applicationName }, connectTimeout, options),
    applicationName,
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
 * A client on the PostgreSQL server at `url`; `prepareMarked` false (or a URL
 * with `sharedSessionParameter`) for the embedded database's socket, whose one
 * session the clients share (Pool.ts).
 */
export const fromUrl = (url: Redacted.Redacted, maxConnections = 20, prepareMarked = true) =>
  clientOn({ connectionString: Redacted.value(url), max: maxConnections }, "5 seconds", {
    prepareMarked: prepareMarked && !isSharedSession(Redacted.value(url))
  })

/**
 * A new client's first statement queues behind whichever client holds the
 * embedded database's one session (a starting process's migrations, a batch):
 * on a loaded host that took over 5 s (test/embedded-shared, 2026-11-27).
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
