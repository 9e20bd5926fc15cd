/**
 * The origin of the links a person opens (the portal, hosted invoices):
 * `BILLING_PUBLIC_URL` when set (a proxy, TLS, a path prefix), else the address
 * the service answers on: over HTTP the Host the caller reached it by, from
 * the CLI the HOST and PORT `billing serve` listens on.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Config, Effect, Option } from "effect"
import { databaseKey, servedOrigin } from "./ServeAddress.ts"

/**
 * BILLING_PUBLIC_URL without its trailing slashes; empty is unset; a value
 * that is not an http(s) URL stops the caller.
 */
const configured: Effect.Effect<Option.Option<string>> = Effect.orDie(Config.option(Config.string("BILLING_PUBLIC_URL"))).pipe(
  Effect.flatMap(Option.match({
    onNone: () => Effect.succeed(Option.none<string>()),
    onSome: (value) => {
      if (value.trim() === "") return Effect.succeed(Option.none<string>())
      const origin = originOf(value)
      return origin !== undefined
        ? Effect.succeed(Option.some(origin))
        : Effect.dieMessage(`BILLING_PUBLIC_URL must be an http(s) URL, got ${value}`)
    }
  }))
)

// A wildcard listen address is not an address anyone can open.
const openableHost = (host: string) =>
  host === "0.0.0.0" || host === "::" ? "localhost" : host.includes(":") && !host.startsWith("[") ? `[${host}]` : host

const hostHeader = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/

const withPublicUrl = <R>(fallback: Effect.Effect<string, never, R>): Effect.Effect<string, never, R> =>
  Effect.flatMap(configured, (publicUrl) =>
    Option.isSome(publicUrl) ? Effect.succeed(publicUrl.value) : fallback)

/** The origin for links minted while answering an HTTP request. */
export const requestOrigin = withPublicUrl(
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const host = request.headers["host"]
    if (host !== undefined && hostHeader.test(host)) return `http://${host}`
    const socket = NodeHttpServerRequest.toIncomingMessage(request).socket
    return `http://${openableHost(socket.localAddress ?? "127.0.0.1")}:${socket.localPort ?? 80}`
  })
)

/** Where the CLI's origin came from, so that a guess can say it is one. */
export type OriginSource = "BASE_URL" | "BILLING_PUBLIC_URL" | "SERVE" | "HOST_PORT" | "DEFAULT"

/** An http(s) URL as an origin with its path, without trailing slashes; undefined for anything else. */
export const originOf = (value: string): string | undefined => {
  const url = URL.canParse(value) ? new URL(value) : undefined
  return url && (url.protocol === "http:" || url.protocol === "https:")
    ? `${url.origin}${url.pathname}`.replace(/\/+$/, "")
    : undefined
}

/**
 * The origin for links minted by the CLI, which has no request to read it
 * from (docs/portal.md "Links from the CLI"), first of: the command's
 * `--base-url`; `BILLING_PUBLIC_URL`; the address a running `billing serve`
 * of the same database recorded on this machine (src/links/ServeAddress.ts);
 * `HOST` and `PORT`; `http://127.0.0.1:8787`.
 */
export const cliOrigin = (baseUrl?: string): Effect.Effect<{ readonly origin: string; readonly source: OriginSource }> =>
  Effect.gen(function*() {
    if (baseUrl !== undefined) {
      const origin = originOf(baseUrl)
      if (origin === undefined) return yield* Effect.dieMessage(`--base-url must be an http(s) URL, got ${baseUrl}`)
      return { origin, source: "BASE_URL" as const }
    }
    const publicUrl = yield* configured
    if (Option.isSome(publicUrl)) return { origin: publicUrl.value, source: "BILLING_PUBLIC_URL" as const }
    const served = servedOrigin(yield* databaseKey)
    if (served !== undefined) return { origin: served, source: "SERVE" as const }
    const host = yield* Effect.orDie(Config.option(Config.string("HOST")))
    const port = yield* Effect.orDie(Config.option(Config.string("PORT")))
    return {
      origin: `http://${openableHost(Option.getOrElse(host, () => "127.0.0.1"))}:${Option.getOrElse(port, () => "8787")}`,
      source: Option.isSome(host) || Option.isSome(port) ? "HOST_PORT" as const : "DEFAULT" as const
    }
  })
