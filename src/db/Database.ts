/**
 * The one SQL client of the service. With `DATABASE_URL` it is a pool onto that
 * PostgreSQL; without it, onto the embedded database of `BILLING_DATA_DIR`.
 * Rows come back camelCased; `numeric` and `int8` come back as strings and are
 * decoded by each repository (see `src/money.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, String } from "effect"
import { DatabaseConfig } from "../config.ts"
import { serveDataDir, type EmbeddedAddress } from "./Embedded.ts"
import { acquirePool } from "./Pool.ts"

const applicationName = "billing"

const clientOn = (pool: Parameters<typeof acquirePool>[0]) =>
  PgClient.layerFromPool({
    acquire: acquirePool({ ...pool, application_name: applicationName }),
    applicationName,
    transformResultNames: String.snakeToCamel,
    transformQueryNames: String.camelToSnake
  })

export const fromUrl = (url: Redacted.Redacted, maxConnections = 20) =>
  clientOn({ connectionString: Redacted.value(url), max: maxConnections })

export const fromEmbedded = (address: EmbeddedAddress) =>
  clientOn({
    host: address.host,
    port: address.port,
    database: "postgres",
    user: "postgres",
    // pglite-socket multiplexes every client over one PGlite session.
    max: 8
  })

/** The SQL client chosen by the environment (`DATABASE_URL`, else the embedded database). */
export const DatabaseLive = Layer.unwrapScoped(
  Effect.gen(function*() {
    const config = yield* DatabaseConfig
    if (Option.isSome(config.url)) return fromUrl(config.url.value)
    const address = yield* serveDataDir(config.dataDir)
    return fromEmbedded(address)
  })
)
