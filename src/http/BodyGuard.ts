/**
 * Request bodies are checked once, at the edge, before any route sees them,
 * so that no bad body reaches a schema, a service or the database:
 * - a body declared as anything but JSON is 415 (no Content-Type at all is
 *   read as JSON, as the spec's clients send it);
 * - JSON nested deeper than `MAX_JSON_DEPTH` is 400: schemas and services
 *   walk values recursively, and a 20,000-deep array would overflow the stack;
 * - a string (or object key) holding a lone UTF-16 surrogate is 400, naming
 *   the field: PostgreSQL refuses such text, and it is no character anyway
 *   (the one check, `unstorableText` in src/schema.ts).
 * The depth scan is iterative, so no body, however deep, can exhaust the
 * stack; the text check runs only on a body within the depth limit.
 * Unparseable JSON is left to the framework's own 400.
 *
 * Only a request to a route that exists, with a key that authenticates, has
 * its body judged (the spec's Authentication rule 3: a missing, unknown or
 * expired key is 401, whatever the body): anything else goes on untouched, to
 * the framework's 404 or 405 for an unknown route or method, or the
 * Authentication middleware's 401. The key is looked up as that middleware
 * looks it up (`ApiKeys.authenticate`, the key cache), so it costs no more.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpApp from "@effect/platform/HttpApp"
import { Effect } from "effect"
import { unstorableText } from "../schema.ts"
import type { ApiKeys } from "../organizations/ApiKeys.ts"
import { bearerToken } from "./Auth.ts"
import { edgeCode } from "./ApiErrors.ts"
import { codeOf } from "../errors.ts"
import { errorResponse } from "./Envelope.ts"

/** The deepest nesting of arrays and objects a request body may have. */
export const MAX_JSON_DEPTH = 64

const surrogateEscape = /\\u[dD][89a-fA-F]/

/** Lone surrogates only arrive as \u escapes (UTF-8 cannot carry them): a text without one holds none. */
export const mayHoldLoneSurrogate = (text: string) => surrogateEscape.test(text)

const withBody = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** application/json or any `+json` type, parameters (charset) aside. */
export const isJsonType = (contentType: string) => {
  const media = contentType.split(";")[0]!.trim().toLowerCase()
  return media === "application/json" || (media.startsWith("application/") && media.endsWith("+json"))
}

const hasBody = (headers: Record<string, string | undefined>) =>
  headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0")

/**
 * The nesting depth of a JSON text, counted on its brackets outside strings;
 * stops counting once past `limit`. Malformed text may be miscounted, but it
 * then fails to parse anyway.
 */
export const jsonDepthExceeds = (text: string, limit: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \ */) i++
      else if (c === 34 /* " */) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > limit) return true
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      depth--
    }
  }
  return false
}

const pathText = (path: ReadonlyArray<string | number>) =>
  path.length === 0
    ? "the body"
    : path.map((key, index) => typeof key === "number" ? `[${key}]` : index === 0 ? key : `.${key}`).join("")

const unstorableWords = {
  LONE_SURROGATE: "a lone UTF-16 surrogate (not valid Unicode text)",
  NUL: "a NUL character (text PostgreSQL cannot store)"
} as const

/** Why a request body is refused, as the response to send; undefined when it may go on. */
const refusal = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    if (!withBody.has(request.method) || !hasBody(request.headers)) return undefined
    const contentType = request.headers["content-type"]
    if (contentType !== undefined && contentType.trim() !== "" && !isJsonType(contentType)) {
      return errorResponse(415, `Unsupported Content-Type ${contentType.split(";")[0]!.trim()}: request bodies are JSON (application/json)`, edgeCode("UnsupportedMediaType"))
    }
    const text = yield* Effect.orElseSucceed(request.text, () => undefined)
    if (text === undefined || text === "") return undefined
    if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
      return errorResponse(400, `Invalid request: JSON nested deeper than ${MAX_JSON_DEPTH} levels`, codeOf("ValidationFailed"))
    }
    if (!mayHoldLoneSurrogate(text)) return undefined
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return undefined // the framework answers 400 Invalid JSON
    }
    // The depth was checked above: the walk is bounded by MAX_JSON_DEPTH.
    const unstorable = unstorableText(parsed)
    return unstorable === undefined
      ? undefined
      : errorResponse(
        400,
        `Invalid request: ${pathText(unstorable.path)} holds ${unstorableWords[unstorable.reason]}`,
        codeOf("ValidationFailed"),
        // The field in the notation of every problem's `field` (src/schema.ts `fieldProblems`): keys and indexes with dots.
        [{ field: unstorable.path.length === 0 ? null : unstorable.path.join("."), message: `holds ${unstorableWords[unstorable.reason]}` }]
      )
  })

/** A route of the API, by method and path (src/app/Server.ts builds it from the API). */
export interface RouteMatcher {
  readonly hasRoute: (method: string, path: string) => boolean
}

/** Whether the request's key authenticates; a missing or malformed header does not. */
export type KeyCheck = (authorization: string | undefined) => Effect.Effect<boolean>

/**
 * A `KeyCheck` by `ApiKeys.authenticate`: the lookup the Authentication
 * middleware makes, answered from the same key cache.
 */
export const keyCheckOf = (keys: ApiKeys): KeyCheck => (authorization) => {
  const secret = bearerToken(authorization)
  // Any failure, a database that is away included, leaves the request to the app, whose own
  // authentication fails the same way inside the one failure mapping (a 503, not an empty 500).
  return secret === undefined
    ? Effect.succeed(false)
    : Effect.matchCause(keys.authenticate(secret), { onFailure: () => false, onSuccess: () => true })
}

/** The API middleware: refuses a bad body of an authenticated request to a known route, or runs the app. */
export const guardBodies = (prefix: string, routes: RouteMatcher, keyCheck: KeyCheck) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    // request.url is the request target: a path, except in the absolute form a proxy may send.
    const path = request.url.startsWith("/") ? request.url.split("?")[0]! : new URL(request.url).pathname
    if (!path.startsWith(prefix) || !withBody.has(request.method) || !hasBody(request.headers)) return app
    if (!routes.hasRoute(request.method, path)) return app
    return Effect.flatMap(keyCheck(request.headers["authorization"]), (authenticated): HttpApp.Default<E, R> =>
      authenticated
        ? Effect.flatMap(refusal(request), (response): HttpApp.Default<E, R> => response === undefined ? app : Effect.succeed(response))
        : app)
  })
