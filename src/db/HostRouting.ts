/**
 * Which host of a multi-host connection string a new connection goes to, with
 * libpq's meaning of `target_session_attrs` (src/db/ConnectionString.ts), for
 * every pool and listening connection of a process.
 *
 * A router remembers the host that last matched. A new connection goes there
 * and checks, on its own session, that the server still matches (libpq checks
 * each connection the same way). When it does not, or the host cannot be
 * reached, or a connection to it is lost, or a statement is refused as
 * read-only, the router forgets it; the next connection tries the hosts again
 * in order with short probe connections. That is how the pools find a new
 * primary after a failover without a restart: the dead primary's connections
 * fail (their statements answer 503, the worker retries), and the first
 * connection after them finds the promoted standby.
 *
 * While no host matches, connecting fails with SQLSTATE 08001 (the client
 * could not establish a connection), which src/db/Faults.ts counts as
 * transient: the API answers 503 `database_unavailable` and the worker waits.
 */
import Pg from "pg"
import { type ConnectionString, formatHost, type Host, type SessionAttrs } from "./ConnectionString.ts"

/** What a server said of itself, read on a fresh session. */
interface ServerState {
  readonly inRecovery: boolean
  readonly readOnly: boolean
}

const stateQuery = "SELECT pg_is_in_recovery() AS in_recovery, current_setting('transaction_read_only') AS read_only"

const readState = async (client: Pg.Client): Promise<ServerState> => {
  const result = await client.query<{ in_recovery: boolean; read_only: string }>(stateQuery)
  const row = result.rows[0]!
  return { inRecovery: row.in_recovery, readOnly: row.read_only === "on" }
}

/** Whether a server in `state` may serve a session that asks for `attrs` (prefer-standby: the second pass, any). */
export const matches = (attrs: SessionAttrs, state: ServerState): boolean => {
  switch (attrs) {
    case "any":
    case "prefer-standby":
      return true
    case "read-write":
      return !state.readOnly
    case "read-only":
      return state.readOnly
    case "primary":
      return !state.inRecovery
    case "standby":
      return state.inRecovery
  }
}

const stateWords = (state: ServerState) =>
  state.inRecovery ? "a standby" : state.readOnly ? "read-only" : "a read-write primary"

/** The error of a connection that found no host to use: SQLSTATE 08001, transient. */
export class NoMatchingHost extends Error {
  readonly code = "08001"
  constructor(readonly attrs: SessionAttrs, readonly reasons: ReadonlyArray<string>) {
    super(`no host is ${attrs === "prefer-standby" ? "reachable" : attrs}: ${reasons.join("; ")}`)
    this.name = "NoMatchingHost"
  }
}

/** read_only_sql_transaction: a write reached a server that no longer takes them (it was demoted). */
const READ_ONLY_REFUSAL = "25006"

const errorText = (cause: unknown) => {
  const error = cause as { message?: unknown; code?: unknown } | undefined
  if (typeof error?.message === "string" && error.message !== "") return error.message
  if (typeof error?.code === "string") return error.code
  return String(cause)
}

export class HostRouter {
  private current: Host | undefined
  private probing: Promise<Host> | undefined

  constructor(
    readonly target: ConnectionString,
    /** The driver's settings of every connection but its host (timeouts, application name). */
    readonly clientConfig: Pg.ClientConfig
  ) {}

  /** Whether this router has anything to decide: more than one host, or a session to check. */
  get routes(): boolean {
    return this.target.hosts.length > 1 || this.target.targetSessionAttrs !== "any"
  }

  /** The driver's settings for a connection to `host`. */
  configFor(host: Host): Pg.ClientConfig {
    return { ...this.clientConfig, connectionString: this.target.forHost(host) }
  }

  /** The host a new connection should use: the one that matched last, else the first that matches now. */
  choose(): Promise<Host> {
    if (this.current !== undefined) return Promise.resolve(this.current)
    this.probing ??= this.probe().finally(() => {
      this.probing = undefined
    })
    return this.probing
  }

  /** Forgets `host` (if it is still the remembered one): the next connection tries the hosts again. */
  forget(host: Host): void {
    if (this.current === host) this.current = undefined
  }

  /** Whether a connection to `host` in `state` may be kept; forgets the host when not. */
  accept(host: Host, state: ServerState): boolean {
    if (matches(this.target.targetSessionAttrs === "prefer-standby" ? "any" : this.target.targetSessionAttrs, state)) {
      return true
    }
    this.forget(host)
    return false
  }

  private async probe(): Promise<Host> {
    const attrs = this.target.targetSessionAttrs
    const reasons: Array<string> = []
    const passes: ReadonlyArray<SessionAttrs> = attrs === "prefer-standby" ? ["standby", "any"] : [attrs]
    for (const pass of passes) {
      for (const host of this.target.hosts) {
        const client = new Pg.Client(this.configFor(host))
        client.on("error", () => {})
        try {
          await client.connect()
          const state = pass === "any" ? { inRecovery: false, readOnly: false } : await readState(client)
          if (matches(pass, state)) {
            this.current = host
            return host
          }
          reasons.push(`${formatHost(host)} is ${stateWords(state)}`)
        } catch (cause) {
          if (pass === passes[passes.length - 1] || passes.length === 1) {
            reasons.push(`${formatHost(host)}: ${errorText(cause)}`)
          }
        } finally {
          client.end().catch(() => {})
        }
      }
    }
    throw new NoMatchingHost(attrs, reasons)
  }

  /**
   * A client class that connects through this router: `Base` (the driver's
   * client, or one that prepares statements) with its host chosen at connect
   * time, its session checked, and its host forgotten when it is lost.
   */
  clientClass(Base: typeof Pg.Client): typeof Pg.Client {
    const router = this
    const attrs = this.target.targetSessionAttrs
    return class RoutedClient extends Base {
      private routedHost: Host | undefined

      constructor(config?: Pg.ClientConfig) {
        // One attempt at one host is bounded (its connect_timeout), so that a silent host passes the turn.
        super({ ...config, connectionTimeoutMillis: router.clientConfig.connectionTimeoutMillis })
      }

      override connect(callback?: any): any {
        const connecting = (async () => {
          const host = await router.choose()
          this.routedHost = host
          const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } }
          self.host = host.host
          self.port = host.port
          self.connectionParameters.host = host.host
          self.connectionParameters.port = host.port
          this.on("error", () => router.forget(host))
          try {
            await super.connect()
          } catch (cause) {
            router.forget(host)
            throw cause
          }
          if (attrs === "any" || attrs === "prefer-standby") return
          const state = await readState(this as unknown as Pg.Client)
          if (!router.accept(host, state)) {
            await this.end().catch(() => {})
            throw new NoMatchingHost(attrs, [`${formatHost(host)} is ${stateWords(state)} now`])
          }
        })()
        if (callback === undefined) return connecting
        connecting.then(() => callback(null, this), callback)
        return undefined
      }

      override query(...args: Array<any>): any {
        const last = args[args.length - 1]
        if (typeof last === "function") {
          args[args.length - 1] = (error: { code?: unknown } | undefined, result: unknown) => {
            if (error?.code === READ_ONLY_REFUSAL && this.routedHost !== undefined) {
              // A demoted server: this connection can never write again. Ending it makes the pool drop it.
              router.forget(this.routedHost)
              this.end().catch(() => {})
            }
            last(error, result)
          }
        }
        return (super.query as (...a: Array<any>) => any)(...args)
      }
    } as unknown as typeof Pg.Client
  }
}

/**
 * The routers of this process by the URI their pool hands the driver (what
 * `PgClient`'s config shows as its `url`): a listening connection made from
 * that config (src/db/Listen.ts) connects through the same router, so it
 * follows the primary too. Any router of the same URI will do: they route the
 * same hosts the same way.
 */
const routersByUri = new Map<string, HostRouter>()

export const registerRouter = (uri: string, router: HostRouter) => {
  if (router.routes) routersByUri.set(uri, router)
}

/** A client for the `config` a `PgClient` was made with: routed when its pool is. */
export const clientFor = (config: Pg.ClientConfig): Pg.Client => {
  const router = config.connectionString === undefined ? undefined : routersByUri.get(config.connectionString)
  if (router === undefined) return new Pg.Client(config)
  const Routed = router.clientClass(Pg.Client)
  return new Routed({ ...config, connectionString: router.configFor(router.target.hosts[0]!).connectionString })
}
