/**
 * Where a running `billing serve` listens, for the links the CLI prints
 * (`billing portal token`, `billing invoice pay-link`). The CLI has no request
 * to read an address from, and it printed `http://127.0.0.1:8787` while serve
 * listened on another port (issue 37).
 *
 * `billing serve` records its address, when it listens, in a small file of
 * the machine's temporary folder named after the database it serves (the
 * embedded database's folder, or the PostgreSQL hosts and database, never a
 * user or a password), and removes it when it stops. A CLI command on the
 * same database on the same machine reads it; a record whose process is gone
 * is ignored. Beyond one machine (a proxy, TLS, several hosts),
 * `BILLING_PUBLIC_URL` says where customers reach the service
 * (src/links/PublicUrl.ts).
 */
import { Effect, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DatabaseConfig } from "../config.ts"
import { describeConnectionString } from "../db/ConnectionString.ts"

/** The database a process uses, as a key: the embedded folder's absolute path, or `host:port/db` of PostgreSQL. */
export type DatabaseKey = string

/** The key of the database the environment names (`DATABASE_URL`, else `BILLING_DATA_DIR`). */
export const databaseKey: Effect.Effect<DatabaseKey, never> = Effect.orDie(Effect.map(DatabaseConfig, (config) =>
  Option.match(config.url, {
    onSome: (url) => `postgresql ${describeConnectionString(Redacted.value(url))}`,
    onNone: () => `embedded ${path.resolve(config.dataDir)}`
  })))

const recordFile = (database: DatabaseKey) =>
  path.join(os.tmpdir(), `billing-serve-${createHash("sha256").update(database).digest("hex").slice(0, 16)}.json`)

interface Recorded {
  readonly origin: string
  readonly pid: number
  readonly database: DatabaseKey
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: the process exists but is another user's.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Records that this process serves `database` at `origin` (`http://host:port`); returns the removal. */
export const recordServeAddress = (database: DatabaseKey, origin: string): (() => void) => {
  const file = recordFile(database)
  const recorded: Recorded = { origin, pid: process.pid, database }
  try {
    fs.writeFileSync(file, JSON.stringify(recorded))
  } catch {
    // A folder we cannot write to: the CLI falls back to HOST and PORT.
    return () => {}
  }
  const remove = () => {
    try {
      const current = JSON.parse(fs.readFileSync(file, "utf8")) as Recorded
      // Another serve of the same database may have recorded itself since: its record stays.
      if (current.pid === process.pid) fs.rmSync(file, { force: true })
    } catch {
      // gone already
    }
  }
  process.once("exit", remove)
  return remove
}

/** The origin a live `billing serve` of `database` recorded on this machine, if any. */
export const servedOrigin = (database: DatabaseKey): string | undefined => {
  try {
    const recorded = JSON.parse(fs.readFileSync(recordFile(database), "utf8")) as Recorded
    return recorded.database === database && typeof recorded.origin === "string" && isAlive(recorded.pid)
      ? recorded.origin
      : undefined
  } catch {
    return undefined
  }
}
