/**
 * The embedded PostgreSQL: PGlite served over the PostgreSQL wire protocol
 * (see `EmbeddedSocket.ts`), so the very same `@effect/sql-pg` client talks to it.
 *
 * A PGlite data folder can be opened by one process only; any number of
 * processes share it (docs/architecture.md, "Sharing the embedded database"):
 * - The **owner** is the process that takes the folder's `open.lock`
 *   (created exclusively, naming its pid; a lock whose pid is dead is stale and
 *   is taken over). It opens PGlite, serves its socket, and records the
 *   address in `server.json`.
 * - Every other process is a **client**: it connects to that socket. It holds
 *   one idle connection for as long as it runs, its membership, so the owner
 *   knows it is there.
 * - An owner that is done **stays until its clients finish**: it keeps serving
 *   while any client is connected, then refuses new connections, serves the
 *   stragglers that got in, and only then closes the folder. A client that
 *   arrives after that finds no socket and waits for the lock, then owns the
 *   folder itself. So a client never loses its database half-way.
 * - A long-lived process (`serve`, the `worker` loop) joins only a long-lived
 *   owner: otherwise a one-off CLI owner could never finish. It waits for the
 *   short-lived owner to exit, then owns the folder.
 * - Waiting has a ceiling (`BILLING_EMBEDDED_WAIT_MS`, default 5 minutes), and
 *   so does an owner's wait for its clients (`BILLING_EMBEDDED_DRAIN_MS`,
 *   default 60 s; past it, the clients left lose their connections).
 */
import { PGlite } from "@electric-sql/pglite"
import { Data, Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { serveSocket, type SocketServer } from "./EmbeddedSocket.ts"
import { holdsNoCluster, readTemplate } from "./EmbeddedTemplate.ts"

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
  /** Whether the owner runs until stopped (`serve`, the worker loop) rather than for one command. */
  readonly longLived?: boolean
}

const serverFilePath = (dataDir: string) => path.join(dataDir, "server.json")
const lockFilePath = (dataDir: string) => path.join(dataDir, "open.lock")
const reapLockPath = (dataDir: string) => path.join(dataDir, "open.lock.reap")

const millisFromEnv = (name: string, fallback: number) => {
  const value = Number(process.env[name])
  return Number.isFinite(value) && value > 0 ? value : fallback
}

/**
 * Whether this process runs until stopped. `serve` and `billing worker` (without
 * `--once`) say so before they open the database.
 */
let longLivedProcess = false
export const markLongLived = () => {
  longLivedProcess = true
}

/** Whether a process of that pid runs (one of another user counts). */
export const isProcessAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** An open connection to the address, or undefined when nothing answers there. */
const connect = (address: EmbeddedAddress): Promise<net.Socket | undefined> =>
  new Promise((resolve) => {
    const socket = net.connect(address.port, address.host)
    const done = (connected: boolean) => {
      socket.removeAllListeners("connect").removeAllListeners("timeout")
      socket.setTimeout(0)
      if (connected) {
        // Errors after this (the owner killed) reach the client's own pool; the membership only ends.
        socket.on("error", () => {})
        socket.unref()
        resolve(socket)
      } else {
        socket.destroy()
        resolve(undefined)
      }
    }
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
    socket.setTimeout(1000, () => done(false))
  })

const readServerFile = (dataDir: string): ServerFile | undefined => {
  try {
    return JSON.parse(fs.readFileSync(serverFilePath(dataDir), "utf8")) as ServerFile
  } catch {
    return undefined
  }
}

/** The pid a lock or server file names (a lock holds a bare pid, server.json an object). */
const ownerOf = (file: string): number | undefined => {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, "utf8"))
    return typeof parsed === "number" ? parsed : (parsed as ServerFile).pid
  } catch {
    return undefined
  }
}

const createExclusive = (file: string): boolean => {
  try {
    fs.writeFileSync(file, String(process.pid), { flag: "wx" })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  }
}

/**
 * Takes the folder's open lock. A lock whose pid is dead is stale; it is
 * cleared only under a second, short-lived lock (`open.lock.reap`), after
 * reading it again, so two processes that both saw the stale lock cannot
 * both clear it and then both believe they hold the new one.
 */
const acquireLock = (dataDir: string): boolean => {
  const lock = lockFilePath(dataDir)
  if (createExclusive(lock)) return true
  const holder = ownerOf(lock)
  if (holder === undefined || holder === process.pid || isProcessAlive(holder)) return false // being written, or alive
  const reap = reapLockPath(dataDir)
  if (!createExclusive(reap)) {
    const reaper = ownerOf(reap)
    if (reaper !== undefined && !isProcessAlive(reaper)) fs.rmSync(reap, { force: true }) // died while reaping
    return false
  }
  try {
    if (ownerOf(lock) !== holder) return false // someone took it over in between
    fs.rmSync(lock, { force: true })
    return createExclusive(lock)
  } finally {
    fs.rmSync(reap, { force: true })
  }
}

const releaseFiles = (dataDir: string) => {
  for (const file of [serverFilePath(dataDir), lockFilePath(dataDir)]) {
    if (ownerOf(file) === process.pid) fs.rmSync(file, { force: true })
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until no client is connected, or until `deadline`. */
const untilNoClients = async (server: SocketServer, deadline: number) => {
  while (server.connections() > 0 && Date.now() < deadline) await sleep(50)
}

/**
 * The socket's address, served for as long as the scope lives. When the scope
 * closes, the owner serves its clients to the end first (see the top).
 */
const startServer = (db: PGlite, port: number, drainMs = 0): Effect.Effect<SocketServer, EmbeddedDatabaseError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => serveSocket(db, { host: "127.0.0.1", port, maxConnections: 256 }),
      catch: (cause) => new EmbeddedDatabaseError({ message: "cannot start the embedded database socket", cause })
    }),
    (server) =>
      Effect.promise(async () => {
        const deadline = Date.now() + drainMs
        await untilNoClients(server, deadline)
        await server.stopAccepting()
        // A client that connected just before: served to its end too.
        await untilNoClients(server, deadline)
        await server.stop()
      })
  )

const openPGlite = (dataDir: string | undefined) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        // A new cluster starts from the template instead of initdb (EmbeddedTemplate.ts).
        const template = dataDir === undefined || holdsNoCluster(dataDir) ? readTemplate() : undefined
        const options = template === undefined ? {} : { loadDataDir: template }
        const db = dataDir === undefined ? new PGlite(options) : new PGlite(dataDir, options)
        await db.waitReady
        return db
      },
      catch: (cause) => new EmbeddedDatabaseError({ message: `cannot open the embedded database in ${dataDir}`, cause })
    }),
    (db) => Effect.promise(() => db.close())
  )

/** Joins the folder's owner when it is one this process may join: the address, with the membership held for the scope. */
const joinOwner = (dataDir: string, longLived: boolean) =>
  Effect.gen(function*() {
    const file = readServerFile(dataDir)
    if (file === undefined || !isProcessAlive(file.pid) || file.pid === process.pid) return undefined
    if (longLived && file.longLived !== true) return undefined
    const membership = yield* Effect.acquireRelease(
      Effect.promise(() => connect(file)),
      (socket) => Effect.sync(() => socket?.destroy())
    )
    return membership === undefined ? undefined : { host: file.host, port: file.port }
  })

/**
 * Serves the embedded database of `dataDir` for as long as the scope lives,
 * or joins the process that already serves it, or waits for it (see the top).
 */
export const serveDataDir = (dataDir: string, port = 0) =>
  Effect.gen(function*() {
    fs.mkdirSync(dataDir, { recursive: true })
    const longLived = longLivedProcess
    const deadline = Date.now() + millisFromEnv("BILLING_EMBEDDED_WAIT_MS", 300_000)
    for (;;) {
      const address = yield* joinOwner(dataDir, longLived)
      if (address !== undefined) return address
      const locked = yield* Effect.try({
        try: () => acquireLock(dataDir),
        catch: (cause) => new EmbeddedDatabaseError({ message: `cannot lock ${dataDir}`, cause })
      })
      if (locked) break
      if (Date.now() > deadline) {
        return yield* new EmbeddedDatabaseError({
          message: `${dataDir} is held by process ${ownerOf(lockFilePath(dataDir)) ?? "?"} and did not become available`
        })
      }
      yield* Effect.sleep("100 millis")
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => releaseFiles(dataDir)))
    const db = yield* openPGlite(dataDir)
    const server = yield* startServer(db, port, millisFromEnv("BILLING_EMBEDDED_DRAIN_MS", 60_000))
    const file: ServerFile = { host: server.host, port: server.port, pid: process.pid, longLived }
    // Written whole under a temporary name, then renamed: a reader never sees half a file.
    const temporary = `${serverFilePath(dataDir)}.${process.pid}`
    fs.writeFileSync(temporary, JSON.stringify(file))
    fs.renameSync(temporary, serverFilePath(dataDir))
    return { host: server.host, port: server.port } satisfies EmbeddedAddress
  })

/** A throw-away in-memory embedded database, for tests. */
export const serveInMemory = Effect.gen(function*() {
  const db = yield* openPGlite(undefined)
  const server = yield* startServer(db, 0)
  return { host: server.host, port: server.port } satisfies EmbeddedAddress
})
