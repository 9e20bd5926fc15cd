/**
 * Which database a command uses, in words for its errors and notes: without
 * `DATABASE_URL` a command opens the embedded database of `BILLING_DATA_DIR`
 * (default `./.billing`, relative to where it runs), and a command run from
 * another folder used to open a new, empty one there in silence, then answer
 * "Organization ... not found". Now it says where, and that it just made it.
 * PostgreSQL is named by host and database, never by its URL (no password).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describeConnectionString } from "../src/db/ConnectionString.ts"

export interface CommandDatabase {
  /** `embedded PGlite in /abs/.billing` or `PostgreSQL host:port/database`. */
  readonly text: string
  /** The embedded folder held no database before this command (it creates one). */
  readonly createdNow: boolean
}

/** The database of a command about to run in `env`; read before it opens it. */
export const commandDatabase = (env: Readonly<Record<string, string | undefined>>): CommandDatabase => {
  const url = env.DATABASE_URL
  if (url !== undefined && url !== "") return { text: `PostgreSQL ${describeConnectionString(url)}`, createdNow: false }
  const dataDir = path.resolve(env.BILLING_DATA_DIR ?? ".billing")
  return { text: `embedded PGlite in ${dataDir}`, createdNow: !fs.existsSync(path.join(dataDir, "PG_VERSION")) }
}

/** The note a command that made a new embedded database prints on stderr. */
export const createdNote = (database: CommandDatabase) =>
  `note: no database was there: this command created a new, empty one (${database.text}). ` +
  "Run commands from the folder that holds your .billing, or set BILLING_DATA_DIR or DATABASE_URL."

/** What a "not found" failure adds: where it looked. */
export const whereLooked = (database: CommandDatabase) =>
  database.createdNow
    ? ` (database: ${database.text}, created just now by this command, so it holds nothing yet)`
    : ` (database: ${database.text})`
