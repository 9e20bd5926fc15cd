/**
 * The socket in front of the embedded database: many PostgreSQL clients, one
 * PGlite session behind them.
 *
 * pglite-socket's own server (0.2.17) hands the session to another client
 * between any two protocol messages unless a transaction block is open. An
 * extended-protocol exchange (Parse, Bind, Describe, Execute, Sync) is not a
 * transaction block, so under load one client's Parse replaced another's
 * unnamed statement and its Bind failed with "unnamed prepared statement does
 * not exist" (electric-sql/pglite#1046). One failed message also left that
 * queue stuck for good. This queue keeps the session with one client until it
 * reaches a point where PostgreSQL itself would be idle (a Sync or simple
 * Query outside a transaction block) and keeps going after a failure.
 * pglite-socket still does the wire framing, through its public handler.
 */
import type { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketHandler, type PGLiteSocketHandlerOptions } from "@electric-sql/pglite-socket"
import * as net from "node:net"

interface QueuedMessage {
  readonly handlerId: number
  readonly message: Uint8Array
  readonly onData: (data: Uint8Array) => void
  readonly resolve: (bytes: number) => void
  readonly reject: (error: unknown) => void
}

const SYNC = 0x53 // "S"
const QUERY = 0x51 // "Q"
const TERMINATE = 0x58 // "X"
const SYNC_MESSAGE = new Uint8Array([SYNC, 0, 0, 0, 4])

const simpleQuery = (sql: string): Uint8Array => {
  const text = Buffer.from(`${sql}\0`)
  const message = Buffer.alloc(5 + text.length)
  message[0] = QUERY
  message.writeInt32BE(4 + text.length, 1)
  text.copy(message, 5)
  return message
}
const ROLLBACK_MESSAGE = simpleQuery("ROLLBACK")

/**
 * A message after which the session waits for any client: the end of an
 * extended-protocol exchange, a simple query, a goodbye, or the startup
 * packet (the only message without a type byte; its length starts with 0).
 */
const endsExchange = (message: Uint8Array): boolean => {
  const type = message[0]
  return type === SYNC || type === QUERY || type === TERMINATE || type === 0
}

const ignore = () => {}

export class SessionQueue {
  private queue: Array<QueuedMessage> = []
  private processing = false
  /** The client whose exchange or transaction holds the session, if any. */
  private owner: number | undefined = undefined
  /** The client whose message the session is running right now. */
  private running: number | undefined = undefined
  /** Clients that left while holding the session or running a message. */
  private readonly departed = new Set<number>()

  constructor(private readonly db: PGlite) {}

  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ handlerId, message, onData, resolve, reject })
      void this.process()
    })
  }

  getQueueLength(): number {
    return this.queue.length
  }

  clearQueueForHandler(handlerId: number): void {
    this.queue = this.queue.filter((item) => {
      if (item.handlerId !== handlerId) return true
      item.reject(new Error("Handler disconnected"))
      return false
    })
  }

  /**
   * A client left. If it holds the session, or will once its running message
   * ends, the queue closes what it left open before serving anyone else.
   */
  async clearTransactionIfNeeded(handlerId: number): Promise<void> {
    if (this.owner !== handlerId && this.running !== handlerId) return
    this.departed.add(handlerId)
    await this.process()
  }

  /** Ends the exchange and rolls back the transaction a departed client left open. */
  private async abandon(handlerId: number): Promise<void> {
    try {
      // Not db.exec: it waits for the very lock runExclusive holds.
      await this.db.runExclusive(async () => {
        await this.db.execProtocolRawStream(SYNC_MESSAGE, { onRawData: ignore })
        if (this.db.isInTransaction()) await this.db.execProtocolRawStream(ROLLBACK_MESSAGE, { onRawData: ignore })
      })
    } catch {
      // The session answers the next client's messages either way.
    }
    this.departed.delete(handlerId)
    this.owner = undefined
  }

  private next(): QueuedMessage | undefined {
    if (this.owner === undefined) return this.queue.shift()
    const index = this.queue.findIndex((item) => item.handlerId === this.owner)
    return index === -1 ? undefined : this.queue.splice(index, 1)[0]
  }

  private async process(): Promise<void> {
    if (this.processing) return
    this.processing = true
    try {
      for (;;) {
        if (this.owner !== undefined && this.departed.has(this.owner)) {
          await this.abandon(this.owner)
          continue
        }
        const item = this.next()
        if (item === undefined) break
        this.running = item.handlerId
        let bytes = 0
        try {
          await this.db.runExclusive(() =>
            this.db.execProtocolRawStream(item.message, {
              onRawData: (data) => {
                bytes += data.length
                item.onData(data)
              }
            })
          )
          item.resolve(bytes)
        } catch (error) {
          item.reject(error)
        }
        this.running = undefined
        this.owner = endsExchange(item.message) && !this.db.isInTransaction() ? undefined : item.handlerId
        if (this.owner === undefined) this.departed.delete(item.handlerId)
      }
    } finally {
      this.processing = false
    }
  }
}

export interface SocketServer {
  readonly host: string
  readonly port: number
  /** Clients connected right now. */
  readonly connections: () => number
  /** Messages received and waiting for the session right now (tests observe a client queued behind another). */
  readonly waiting: () => number
  /** Refuses new connections; those already open are served on. */
  readonly stopAccepting: () => Promise<void>
  readonly stop: () => Promise<void>
}

/** Serves `db` on host:port (0 picks a free port) to at most `maxConnections` clients. */
export const serveSocket = (
  db: PGlite,
  options: { readonly host: string; readonly port: number; readonly maxConnections: number }
): Promise<SocketServer> => {
  // The handler is typed against pglite-socket's own queue class; ours has the same methods.
  const sessionQueue = new SessionQueue(db)
  const queryQueue = sessionQueue as unknown as PGLiteSocketHandlerOptions["queryQueue"]
  const handlers = new Set<PGLiteSocketHandler>()
  const server = net.createServer((socket) => {
    if (handlers.size >= options.maxConnections) {
      socket.end("Too many connections\n")
      return
    }
    const handler = new PGLiteSocketHandler({ queryQueue, closeOnDetach: true })
    const forget = () => handlers.delete(handler)
    handler.addEventListener("close", forget)
    handler.addEventListener("error", forget)
    handlers.add(handler)
    handler.attach(socket).catch(() => {
      forget()
      socket.destroy()
    })
  })
  let closed: Promise<void> | undefined
  const stopAccepting = async () => {
    closed ??= new Promise<void>((resolve) => server.close(() => resolve()))
  }
  const stop = async () => {
    await stopAccepting()
    // Detaching rolls back what a client left open, before the database itself closes.
    await Promise.allSettled([...handlers].map((handler) => handler.detach(true)))
    handlers.clear()
    await closed
  }
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, options.host, () => {
      const address = server.address() as net.AddressInfo
      resolve({
        host: options.host,
        port: address.port,
        connections: () => handlers.size,
        waiting: () => sessionQueue.getQueueLength(),
        stopAccepting,
        stop
      })
    })
  })
}
