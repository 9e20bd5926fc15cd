import { Config } from "effect"

/** Where the service finds its database: a PostgreSQL URL, or the embedded database's folder. */
export const DatabaseConfig = Config.all({
  url: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("BILLING_DATA_DIR").pipe(Config.withDefault(".billing"))
})

/** `DATABASE_READ_URL`: the optional connection for reads that tolerate lag (src/db/ReadSql.ts). */
export const ReadDatabaseConfig = Config.option(Config.redacted("DATABASE_READ_URL"))

export const ServerConfig = Config.all({
  port: Config.integer("PORT").pipe(Config.withDefault(8787)),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
})

