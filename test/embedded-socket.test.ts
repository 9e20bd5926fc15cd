/**
 * The embedded database's socket: several clients share one PGlite session, so
 * the socket must never let one client's messages land in the middle of
 * another's exchange or transaction (electric-sql/pglite#1046). A raw protocol
 * client holds an exchange half done while the service's own SQL client asks
 * for the session.
 *
 * No fixed sleeps: a test goes on once it has seen what it needs (the other
 * client's messages waiting at the socket, a message running in the
 * database, the socket server noticing a client left), bounded by a limit
 * only a stuck test reaches.
 */
import { PGlite } from "@electric-sql/pglite"
import { SqlClient } from "@effect/sql"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as net from "node:net"
import { fromEmbedded } from "../src/db/Database.ts"
import { serveSocket, type SocketServer } from "../src/db/EmbeddedSocket.ts"
import { readTemplate } from "../src/db/EmbeddedTemplate.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const frame = (type: string, ...parts: Array<Buffer>): Buffer => {
  const body = Buffer.concat(parts)
  const length = Buffer.alloc(4)
  length.writeInt32BE(body.length + 4)
  return Buffer.concat([Buffer.from(type), length, body])
}
const cstring = (text: string) => Buffer.from(`${text}\0`)
const int16 = (value: number) => Buffer.from([value >> 8, value & 0xff])
const int32 = (value: number) => {
  const buffer = Buffer.alloc(4)
  buffer.writeInt32BE(value)
  return buffer
}

const parse = (sql: string) => frame("P", cstring(""), cstring(sql), int16(0))
const bind = (...params: Array<string>) =>
  frame(
    "B",
    cstring(""),
    cstring(""),
    int16(0),
    int16(params.length),
    ...params.flatMap((param) => [int32(Buffer.byteLength(param)), Buffer.from(param)]),
    int16(0)
  )
const execute = frame("E", cstring(""), int32(0))
const flush = frame("H")
const sync = frame("S")
const query = (sql: string) => frame("Q", cstring(sql))

interface BackendMessage {
  readonly type: string
  readonly body: Buffer
}

/** A PostgreSQL frontend at the level of single protocol messages. */
const rawClient = async (server: SocketServer) => {
  const socket = net.connect(server.port, server.host)
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
  const received: Array<BackendMessage> = []
  let pending = Buffer.alloc(0)
  socket.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk])
    while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
      const end = 1 + pending.readInt32BE(1)
      received.push({ type: String.fromCharCode(pending[0]!), body: pending.subarray(5, end) })
      pending = pending.subarray(end)
    }
  })
  /** Waits (within a limit) for a message of `type` and returns every message up to it. */
  const until = async (type: string): Promise<Array<BackendMessage>> => {
    const index = await eventually(() => {
      const found = received.findIndex((message) => message.type === type)
      if (found === -1) {
        throw new Error(`no "${type}" message yet; received so far: ${JSON.stringify(received.map((m) => m.type).join(""))}`)
      }
      return found
    }, { intervalMs: 5 })
    return received.splice(0, index + 1)
  }
  const startup = Buffer.concat([int32(196608), cstring("user"), cstring("postgres"), cstring("database"), cstring("postgres"), Buffer.from([0])])
  socket.write(Buffer.concat([int32(startup.length + 4), startup]))
  await until("Z")
  return { send: (...messages: Array<Buffer>) => socket.write(Buffer.concat(messages)), until, socket }
}

/** Only a stuck test waits this long for what it observes. */
const stuckMs = HANG_GUARD_MS

/** A promise and whether it has settled yet. */
const tracked = <A>(promise: Promise<A>) => {
  const state = { settled: false, promise }
  promise.then(() => (state.settled = true), () => (state.settled = true))
  return state
}

/**
 * Waits until another client's statement is waiting at the socket for the
 * session, or (a queue that let it in, as pglite-socket's did) has been
 * answered already: either way it has reached the socket, and the test's
 * next step comes after it.
 */
const untilQueuedOrAnswered = (other: { readonly settled: boolean }) =>
  eventually(() => {
    if (!other.settled && server.waiting() === 0) throw new Error("the other client's statement has not reached the socket yet")
  }, { timeoutMs: stuckMs, intervalMs: 2 })

/** The first column of every DataRow, as text. */
const firstColumns = (messages: ReadonlyArray<BackendMessage>) =>
  messages.filter((message) => message.type === "D").map(({ body }) => body.subarray(6, 6 + body.readInt32BE(2)).toString())

/** What the database does with one protocol message; a test may put failures and delays in front of it. */
type Wrap = (message: Uint8Array, execute: () => Promise<void>) => Promise<void>
const passThrough: Wrap = (_message, execute) => execute()

/**
 * One embedded database for the file: starting PGlite is most of this file's
 * time, while a socket server and a client pool on it cost next to nothing.
 * Each test gets a server and a pool of its own, and puts its own `wrap` in
 * front of the database (pass-through unless it says otherwise).
 */
let db: PGlite
let wrap: Wrap = passThrough
let server: SocketServer
let scope: Scope.CloseableScope
let sql: SqlClient.SqlClient

beforeAll(async () => {
  if (usesRealPostgres) return
  // From the cluster template, as the service opens a new database (no initdb).
  const template = readTemplate()
  db = new PGlite(template === undefined ? {} : { loadDataDir: template })
  await db.waitReady
  const execute = db.execProtocolRawStream.bind(db)
  db.execProtocolRawStream = (message, options) => wrap(message, () => execute(message, options))
})
afterAll(() => db?.close())

const startServer = async (testWrap: Wrap = passThrough) => {
  wrap = testWrap
  server = await serveSocket(db, { host: "127.0.0.1", port: 0, maxConnections: 16 })
  scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(fromEmbedded(server), scope))
  sql = Context.get(context, SqlClient.SqlClient)
}

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const runExit = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromiseExit(effect)

afterEach(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await server.stop()
  wrap = passThrough
  // Whatever a failed test left open in the one session ends here, not in the next test.
  if (db.isInTransaction()) await db.exec("ROLLBACK")
})

describe.skipIf(usesRealPostgres)("one session, many clients (embedded database only)", () => {
  beforeEach(() => startServer())

  it("keeps a client's extended-protocol exchange whole while another client queries", async () => {
    const raw = await rawClient(server)
    raw.send(parse("SELECT $1::int * 2 AS doubled"), flush)
    await raw.until("1")
    // Another client's Parse now would replace the unnamed statement the raw client is about to bind.
    const other = tracked(run(sql<{ echoed: string }>`SELECT ${"other"}::text AS echoed`))
    await untilQueuedOrAnswered(other)
    raw.send(bind("21"), execute, sync)
    expect(firstColumns(await raw.until("Z"))).toEqual(["42"])
    expect(await other.promise).toEqual([{ echoed: "other" }])
    raw.socket.destroy()
  })

  it("keeps a client's transaction whole, and rolls it back when the client goes away", async () => {
    await run(sql`DROP TABLE IF EXISTS notes`)
    await run(sql`CREATE TABLE notes (body text)`)
    const raw = await rawClient(server)
    raw.send(query("BEGIN"))
    await raw.until("Z")
    raw.send(query("INSERT INTO notes VALUES ('uncommitted')"))
    await raw.until("Z")
    const counted = tracked(run(sql<{ notes: string }>`SELECT count(*)::text AS notes FROM notes`))
    await untilQueuedOrAnswered(counted)
    raw.socket.destroy()
    expect(await counted.promise).toEqual([{ notes: "0" }])
    await run(sql`INSERT INTO notes VALUES (${"kept"})`)
    expect(await run(sql`SELECT body FROM notes`)).toEqual([{ body: "kept" }])
  })

  it("serves the others when a client leaves in the middle of an exchange", async () => {
    const raw = await rawClient(server)
    raw.send(parse("SELECT $1::int AS half_done"), flush)
    await raw.until("1")
    raw.socket.destroy()
    expect(await run(sql<{ answer: number }>`SELECT ${7}::int AS answer`)).toEqual([{ answer: 7 }])
  })
})

const isParse = (message: Uint8Array) => message[0] === "P".charCodeAt(0)

describe.skipIf(usesRealPostgres)("a failure inside the database (embedded database only)", () => {
  beforeEach(() => {
    let failed = false
    return startServer((message, execute) => {
      if (failed || !isParse(message)) return execute()
      failed = true
      return Promise.reject(new Error("injected failure"))
    })
  })

  it("fails that client's statement and answers the next one", async () => {
    const failed = await runExit(sql`SELECT ${1}::int AS answer`)
    expect(Exit.isFailure(failed)).toBe(true)
    expect(await run(sql<{ answer: number }>`SELECT ${2}::int AS answer`)).toEqual([{ answer: 2 }])
  })
})

describe.skipIf(usesRealPostgres)("a client that leaves while its message runs (embedded database only)", () => {
  /** The slow Parse has reached the database; it runs on until `finish` is called. */
  let started: Promise<void>
  let finish: () => void
  // A failed test must not leave the database held by the gate.
  afterEach(() => finish())
  beforeEach(() => {
    let markStarted!: () => void
    started = new Promise<void>((resolve) => (markStarted = resolve))
    const finished = new Promise<void>((resolve) => (finish = resolve))
    return startServer(async (message, execute) => {
      if (isParse(message) && Buffer.from(message).includes("slow_parse")) {
        markStarted()
        await finished
      }
      return execute()
    })
  })

  it("still gives the session back to the others", async () => {
    const raw = await rawClient(server)
    const connected = server.connections()
    raw.send(parse("SELECT $1::int AS slow_parse"), flush)
    await started
    raw.socket.destroy()
    // The socket server has seen the client go while its Parse still runs.
    await eventually(() => expect(server.connections()).toBe(connected - 1), { timeoutMs: stuckMs, intervalMs: 2 })
    const answer = run(sql<{ answer: number }>`SELECT ${3}::int AS answer`)
    finish()
    expect(await answer).toEqual([{ answer: 3 }])
  })
})
