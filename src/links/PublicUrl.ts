/**
 * The origin of the links a person opens (the portal, hosted invoices):
 * `BILLING_PUBLIC_URL` when set (a proxy, TLS, a path prefix), else the address
 * the service answers on: over HTTP the Host the caller reached it by, from
 * the CLI the HOST and PORT `billing serve` listens on.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Config, Effect, Option } from "effect"

/** BILLING_PUBLIC_URL without its trailing slashes; a value that is not an http(s) URL stops the caller. */
const configured: Effect.Effect<Option.Option<string>> = Effect.orDie(Config.option(Config.string("BILLING_PUBLIC_URL"))).pipe(
  Effect.flatMap(Option.match({
    onNone: () => Effect.succeed(Option.none<string>()),
    onSome: (value) => {
      const url = URL.canParse(value) ? new URL(value) : undefined
      return url && (url.protocol === "http:" || url.protocol === "https:")
        ? Effect.succeed(Option.some(`${url.origin}${url.pathname}`.replace(/\/+$/, "")))
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

/** The origin for links minted by the CLI, which has no request to read it from. */
export const configuredOrigin = withPublicUrl(
  Effect.sync(() => `http://${openableHost(process.env.HOST ?? "127.0.0.1")}:${process.env.PORT ?? 8787}`)
)
