/**
 * A TCP proxy in the test's process, in front of PostgreSQL: a "host" a test
 * can take away and bring back. `cut()` closes every connection through it
 * and refuses new ones (as a database machine that died, or a primary killed
 * by a failover); `restore()` listens again on the same port.
 */
import * as net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Connections accepted so far (each new pool connection or probe is one). */
  readonly accepted: () => number
  readonly cut: () => Promise<void>
  readonly restore: () => Promise<void>
  readonly close: () => Promise<void>
}

const listen = (server: net.Server, port: number) =>
  new Promise<number>((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject)
      resolve((server.address() as net.AddressInfo).port)
    })
  })

export const startTcpProxy = async (target: { readonly host: string; readonly port: number }): Promise<TcpProxy> => {
  const sockets = new Set<net.Socket>()
  let accepted = 0
  const makeServer = () =>
    net.createServer((client) => {
      accepted++
      const upstream = net.connect(target.port, target.host)
      sockets.add(client).add(upstream)
      const drop = () => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
      }
      client.on("error", drop).on("close", drop)
      upstream.on("error", drop).on("close", drop)
      client.pipe(upstream).pipe(client)
    })
  let server = makeServer()
  const port = await listen(server, 0)
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy()
      sockets.clear()
      server.close(() => resolve())
    })
  return {
    port,
    accepted: () => accepted,
    cut: stop,
    restore: async () => {
      server = makeServer()
      await listen(server, port)
    },
    close: stop
  }
}
