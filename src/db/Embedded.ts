/**
 * The embedded PostgreSQL: PGlite served over the PostgreSQL wire protocol
 * (see `EmbeddedSocket.ts`), so the very same `@effect/sql-pg` client talks to it.
 *
 * A PGlite data folder can be opened by one process only. The process that
 * opens it records its socket address in `server.json` inside the folder;
 * any other process (the CLI while `billing serve` runs) connects to that
 * socket instead of opening the folder itself.
 */
import { PGlite } from "@electric-sql/pglite"
import { Data, Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { serveSocket } from "./EmbeddedSocket.ts"

export class EmbeddedDatabaseError extends Data.TaggedError("EmbeddedDatabaseError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface EmbeddedAddress {
  readonly host: string
  readonly port: number
}

interface ServerFile extends EmbeddedAddress {
  readonly pid: number
}

const serverFilePath = (dataDir: string) => path.join(dataDir, "server.json")
const lockFilePath = (dataDir: string) => path.join(dataDir, "open.lock")

const isProcessAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const canConnect = (address: EmbeddedAddress): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(address.port, address.host)
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
    socket.setTimeout(1000, () => done(false))
  })

/** The address of a live embedded server already serving `dataDir`, if any. */
const findRunningServer = async (dataDir: string): Promise<EmbeddedAddress | undefined> => {
  let file: ServerFile
  try {
    file = JSON.parse(fs.readFileSync(serverFilePath(dataDir), "utf8")) as ServerFile
  } catch {
    return undefined
  }
  if (!isProcessAlive(file.pid)) return undefined
  return (await canConnect(file)) ? { host: file.host, port: file.port } : undefined
}

/** Takes the folder's open lock, clearing one left behind by a dead process. */
const acquireLock = (dataDir: string): boolean => {
  const lock = lockFilePath(dataDir)
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: "wx" })
      return true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      const holder = ownerOf(lock)
      if (holder !== undefined && holder !== process.pid && isProcessAlive(holder)) return false
      fs.rmSync(lock, { force: true })
    }
  }
  return false
}

/** The pid a lock or server file names (the lock holds a bare pid, server.json an object). */
const ownerOf = (file: string): number | undefined => {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, "utf8"))
    return typeof parsed === "number" ? parsed : (parsed as ServerFile).pid
  } catch {
    return undefined
  }
}

const releaseFiles = (dataDir: string) => {
  for (const file of [serverFilePath(dataDir), lockFilePath(dataDir)]) {
    if (ownerOf(file) === process.pid) fs.rmSync(file, { force: true })
  }
}

/** The socket's address, served for as long as the scope lives. */
const startServer = (db: PGlite, port: number): Effect.Effect<EmbeddedAddress, EmbeddedDatabaseError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.tryPromise({
        try: () => serveSocket(db, { host: "127.0.0.1", port, maxConnections: 64 }),
        catch: (cause) => new EmbeddedDatabaseError({ message: "cannot start the embedded database socket", cause })
      }),
      (server) => Effect.promise(() => server.stop())
    ),
    (server) => ({ host: server.host, port: server.port })
  )

const openPGlite = (dataDir: string | undefined) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const db = dataDir === undefined ? new PGlite() : new PGlite(dataDir)
        await db.waitReady
        return db
      },
      catch: (cause) => new EmbeddedDatabaseError({ message: `cannot open the embedded database in ${dataDir}`, cause })
    }),
    (db) => Effect.promise(() => db.close())
  )

/**
 * Serves the embedded database of `dataDir` for as long as the scope lives,
 * or joins the process that already serves it.
 */
export const serveDataDir = (dataDir: string, port = 0) =>
  Effect.gen(function*() {
    fs.mkdirSync(dataDir, { recursive: true })
    const running = yield* Effect.promise(() => findRunningServer(dataDir))
    if (running) return running
    const locked = yield* Effect.try({
      try: () => acquireLock(dataDir),
      catch: (cause) => new EmbeddedDatabaseError({ message: `cannot lock ${dataDir}`, cause })
    })
    if (!locked) {
      // Another process is opening the folder right now: wait for its socket.
      for (let attempt = 0; attempt < 100; attempt++) {
        yield* Effect.sleep("100 millis")
        const address = yield* Effect.promise(() => findRunningServer(dataDir))
        if (address) return address
      }
      return yield* new EmbeddedDatabaseError({ message: `${dataDir} is held by another process` })
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => releaseFiles(dataDir)))
    const db = yield* openPGlite(dataDir)
    const address = yield* startServer(db, port)
    const file: ServerFile = { ...address, pid: process.pid }
    fs.writeFileSync(serverFilePath(dataDir), JSON.stringify(file))
    return address
  })

/** A throw-away in-memory embedded database, for tests. */
export const serveInMemory = Effect.gen(function*() {
  const db = yield* openPGlite(undefined)
  return yield* startServer(db, 0)
})
