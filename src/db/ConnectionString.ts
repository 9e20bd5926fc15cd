/**
 * A PostgreSQL connection URI with libpq's meaning, including the forms that
 * node-postgres refuses: several hosts (`postgres://u@h1:6001,h2:6002/db`,
 * what pg_auto_failover and managed services hand out) and
 * `target_session_attrs` (which of them a connection may use).
 *
 * node-postgres takes one host; `pg-connection-string` (and the WHATWG URL it
 * uses) fails on a comma in the authority. So the URI is split here, and each
 * host is handed to the driver as a URI of its own (`forHost`) with every
 * other part (user, password, database, `sslmode` and the rest) unchanged.
 *
 * Pure: it reads a string, nothing else (docs/operations.md, "Connection strings").
 */
import { Data } from "effect"

export class ConnectionStringError extends Data.TaggedError("ConnectionStringError")<{ readonly message: string }> {}

/**
 * libpq's values, with its meaning (docs/operations.md):
 * - `any`: the first host that accepts a connection;
 * - `read-write` / `read-only`: the session accepts writes by default, or does not;
 * - `primary` / `standby`: the server is, or is not, in recovery;
 * - `prefer-standby`: a standby if one answers, else any host.
 */
export const sessionAttrs = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"] as const
export type SessionAttrs = typeof sessionAttrs[number]

export interface Host {
  /** A name, an IPv4 address, an IPv6 address without brackets, or a socket folder (starts with `/`). */
  readonly host: string
  readonly port: number
}

export interface ConnectionString {
  readonly hosts: ReadonlyArray<Host>
  readonly targetSessionAttrs: SessionAttrs
  /** The database's name, for messages (`postgres` when the URI names none). */
  readonly database: string
  /** libpq's `connect_timeout` in milliseconds (at least 2 s, as libpq), or undefined when the URI sets none. */
  readonly connectTimeoutMs: number | undefined
  /** The URI for one host: the same user, database and parameters, one host, no `target_session_attrs`. */
  readonly forHost: (host: Host) => string
}

const DEFAULT_PORT = 5432

/** Parameters this module consumes; the driver never sees them. */
const routingParameters = new Set(["target_session_attrs", "load_balance_hosts"])

/** `host:port` as a URI writes it (`[v6]:port`; a socket folder percent-encoded). */
export const formatHost = ({ host, port }: Host) => host.startsWith("/")
  ? `${encodeURIComponent(host)}:${port}`
  : `${host.includes(":") ? `[${host}]` : host}:${port}`

const parsePort = (text: string, whole: string): number => {
  const port = Number(text)
  if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65535) {
    throw new ConnectionStringError({ message: `port "${text}" in ${whole} is not a port number (1-65535)` })
  }
  return port
}

/**
 * A host name, an IPv4 address, an IPv6 address or a socket folder: what a
 * resolver could look up. Anything else (`not a url`, a stray `@`) would only
 * fail later as `getaddrinfo ENOTFOUND`, naming nothing the person typed.
 */
const checkedHost = (host: string, what: string): string => {
  if (host.startsWith("/") || /^[A-Za-z0-9._-]+$/.test(host) || /^[0-9A-Fa-f:.]+(%[\w.-]+)?$/.test(host)) return host
  throw new ConnectionStringError({
    message: `host "${host}" in ${what} is not a host name, an IP address or a socket folder (postgres://user@host:5432/database)`
  })
}

/** One `host[:port]`, `[v6][:port]` or `:port` of a host list. */
const parseHost = (text: string, defaultPort: number, what: string): Host => {
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text)
  if (bracketed !== null) {
    return { host: checkedHost(bracketed[1]!, what), port: bracketed[2] === undefined ? defaultPort : parsePort(bracketed[2], what) }
  }
  const colon = text.lastIndexOf(":")
  const name = decodeURIComponent(colon === -1 ? text : text.slice(0, colon))
  const port = colon === -1 ? defaultPort : parsePort(text.slice(colon + 1), what)
  return { host: name === "" ? "localhost" : checkedHost(name, what), port }
}

/**
 * Why a value is not a PostgreSQL URI, in words that say what to write instead
 * (issue 37: `not a url` answered "getaddrinfo ENOTFOUND base", and a
 * `mysql://` URL was taken for PostgreSQL). Never the value itself: it may
 * hold a password.
 */
const notPostgres = (uri: string, what: string): string => {
  const example = "postgres://user@host:5432/database"
  const unset = what === "DATABASE_URL" ? ", or unset it for the embedded database" : ", or unset it"
  if (uri.trim() === "") return `${what} is set but empty: give ${example}${unset}`
  // Only `scheme://`: in `user:secret@host` the part before the colon is a user name, not a scheme.
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(uri.trim())?.[1]?.toLowerCase()
  if (scheme !== undefined && scheme !== "postgres" && scheme !== "postgresql") {
    return `${what} is a ${scheme}:// URL: billing runs on PostgreSQL only; give ${example}${unset}`
  }
  return `${what} is not a PostgreSQL URI: give ${example} (or postgresql://...)${unset}`
}

/** Hosts that describe themselves as one host: no parameters to route on. */
const isSingle = (hosts: ReadonlyArray<Host>, attrs: SessionAttrs) => hosts.length === 1 && attrs === "any"

/**
 * Parses a `postgres://` or `postgresql://` URI. Throws `ConnectionStringError`
 * naming what is wrong (never the password); `what` is the variable it came
 * from, for the message.
 */
export const parseConnectionString = (uri: string, what = "DATABASE_URL"): ConnectionString => {
  const match = /^(postgres(?:ql)?:\/\/)([^/?#]*)(\/[^?#]*)?(\?[^#]*)?(#.*)?$/.exec(uri)
  if (match === null) throw new ConnectionStringError({ message: notPostgres(uri, what) })
  const [, scheme, authority, path = "", query = ""] = match
  const at = authority!.lastIndexOf("@")
  const userinfo = at === -1 ? "" : authority!.slice(0, at + 1)
  const hostList = at === -1 ? authority! : authority!.slice(at + 1)
  const parameters = new URLSearchParams(query.slice(1))

  // libpq: `host` and `port` parameters, when given, name the hosts instead.
  const hostParameter = parameters.get("host")
  const portParameter = parameters.get("port")
  const portList = portParameter === null ? [] : portParameter.split(",")
  let hosts: Array<Host>
  if (hostParameter !== null && hostParameter !== "") {
    const names = hostParameter.split(",")
    if (portList.length > 1 && portList.length !== names.length) {
      throw new ConnectionStringError({ message: `${what} names ${names.length} hosts but ${portList.length} ports` })
    }
    hosts = names.map((name, index) => ({
      host: name === "" ? "localhost" : checkedHost(name, what),
      port: portList.length === 0 ? DEFAULT_PORT : parsePort(portList[portList.length === 1 ? 0 : index]!, what)
    }))
  } else {
    const defaultPort = portList.length === 1 ? parsePort(portList[0]!, what) : DEFAULT_PORT
    hosts = (hostList === "" ? [""] : hostList.split(",")).map((text) => parseHost(text, defaultPort, what))
  }

  const attrsText = parameters.get("target_session_attrs") ?? "any"
  if (!(sessionAttrs as ReadonlyArray<string>).includes(attrsText)) {
    throw new ConnectionStringError({
      message: `target_session_attrs "${attrsText}" in ${what} is not one of ${sessionAttrs.join(", ")}`
    })
  }
  const targetSessionAttrs = attrsText as SessionAttrs
  const balance = parameters.get("load_balance_hosts")
  if (balance !== null && balance !== "disable") {
    throw new ConnectionStringError({ message: `load_balance_hosts "${balance}" in ${what} is not supported: hosts are tried in order (disable)` })
  }

  const driverParameters = new URLSearchParams()
  for (const [key, value] of parameters) {
    if (!routingParameters.has(key) && key !== "host" && key !== "port") driverParameters.append(key, value)
  }
  const driverQuery = driverParameters.size === 0 ? "" : `?${driverParameters.toString()}`
  const database = decodeURIComponent(path.slice(1)) || "postgres"
  const single = isSingle(hosts, targetSessionAttrs) && ![...routingParameters].some((key) => parameters.has(key))

  const timeoutText = parameters.get("connect_timeout")
  const timeoutSeconds = timeoutText === null ? Number.NaN : Number(timeoutText)
  return {
    hosts,
    targetSessionAttrs,
    database,
    connectTimeoutMs: Number.isInteger(timeoutSeconds) && timeoutSeconds > 0 ? Math.max(timeoutSeconds, 2) * 1000 : undefined,
    // A URI that names one host and no routing goes to the driver as it was written.
    forHost: (host) => single ? uri : `${scheme}${userinfo}${formatHost(host)}${path}${driverQuery}`
  }
}

/** Where a connection string points, for a person: `host:port[,host:port]/database`, never the user or password. */
export const describeConnectionString = (uri: string): string => {
  try {
    const parsed = parseConnectionString(uri)
    return `${parsed.hosts.map(formatHost).join(",")}/${parsed.database}`
  } catch (error) {
    return `(${error instanceof ConnectionStringError ? error.message : "a DATABASE_URL that cannot be read"})`
  }
}
