/**
 * The `Idempotency-Key` header on every POST of the API (docs/api.md,
 * "Idempotency-Key on every POST"), with Stripe's meaning: a POST sent again
 * with the same key and the same request (method, path, body) within 24 hours
 * gets the first answer again (same status, same body, `Idempotent-Replayed:
 * true`) and changes nothing; the same key with another request is 422
 * `idempotency_key_reused`. Keys are the organisation's (the API key's).
 *
 * One middleware of the API, around every route: it claims the key before the
 * route runs (src/idempotency/KeyedRequests.ts, a committed row, so a
 * concurrent repeat in any process finds it), runs the route, and records its
 * answer, or gives the key back when the answer is one a retry must not get
 * again:
 *  - stored and replayed: every 2xx, and every 4xx of a request that ran (a
 *    404 of a missing customer, a 409, a 422, a service's own 400 code);
 *  - not stored (the key is free again, a retry runs): a request that never
 *    ran (`validation_failed`, `invalid_json`, `unsupported_media_type`,
 *    `api_key_refused`, `rate_limited`) and every 5xx (a retry runs again, as
 *    the 5xx invites it to).
 * A repeat that finds the first request still running waits for its answer
 * (up to `MAX_WAIT_MS`, then 409 `idempotency_key_in_use`). Once claimed, the
 * route runs to its end even if the client goes away, so that the retry gets
 * its answer.
 *
 * The body's `idempotencyKey` fields (signals, adjustments, payments, ...)
 * keep their own meaning; the header is checked first, outside them
 * (docs/api.md says how the two meet).
 *
 * The raw lanes (src/signals/IntakeLane.ts, src/entitlements/CheckLane.ts)
 * leave a request with the header to the full server (src/http/LaneKit.ts).
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, FiberRef, Option } from "effect"
import { createHash } from "node:crypto"
import { codeOf } from "../errors.ts"
import { fingerprintOf } from "../idempotency/Idempotency.ts"
import { type ClaimOutcome, KEY_LIFETIME_MS, KeyedRequests, type StoredAnswer } from "../idempotency/KeyedRequests.ts"
import type { ApiKeys, Caller } from "../organizations/ApiKeys.ts"
import { edgeCode, type ErrorCode } from "./ApiErrors.ts"
import { bearerToken } from "./Auth.ts"
import type { RouteMatcher } from "./BodyGuard.ts"
import { jsonDepthExceeds, MAX_JSON_DEPTH } from "./BodyGuard.ts"
import { errorResponse, renderFailures, type RouteTable } from "./Envelope.ts"
import { familyOf, RateLimiter, rateLimitedMessage, rateLimitHeaders } from "./RateLimit.ts"

/** The request header (RFC draft-ietf-httpapi-idempotency-key-header), lower case as Node gives it. */
export const idempotencyKeyHeader = "idempotency-key"

/** The header of a replayed answer. */
export const idempotentReplayedHeader = "idempotent-replayed"

/** The longest key; a key is 1 to this many printable ASCII characters. */
export const MAX_KEY_LENGTH = 255

const keyPattern = new RegExp(`^[\\x20-\\x7E]{1,${MAX_KEY_LENGTH}}$`)

/** Whether a header value is a usable key: 1 to 255 printable ASCII characters (spaces inside allowed). */
export const isValidIdempotencyKey = (key: string) => keyPattern.test(key)

/** How long a repeat waits for a first request still running before it is answered 409. */
export const MAX_WAIT_MS = 15_000

/**
 * The codes of answers given before the route ran: the key is given back, so
 * that the corrected (or rate-allowed) request can use it.
 */
const notRun: ReadonlySet<string> = new Set<ErrorCode>([
  codeOf("ValidationFailed"),
  edgeCode("InvalidJson"),
  edgeCode("UnsupportedMediaType"),
  edgeCode("RouteNotFound"),
  edgeCode("MethodNotAllowed"),
  codeOf("ApiKeyRefused"),
  codeOf("RateLimited")
])

/** The answer's headers worth replaying: what describes the body, and the signal routes' `Preference-Applied`. */
const replayedHeaders = ["content-type", "preference-applied", "location"] as const

/** A JSON value with its objects' keys in order, so that two bodies differing only in key order are the same request. */
const canonical = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonical)
  if (typeof value === "object" && value !== null) {
    const sorted: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) sorted[key] = canonical((value as Record<string, unknown>)[key])
    return sorted
  }
  return value
}

/** The body as the fingerprint sees it: its canonical JSON value, or its text when it is not JSON. */
const bodyPart = (text: string): unknown => {
  if (text === "") return null
  try {
    return { json: canonical(JSON.parse(text)) }
  } catch {
    return { text }
  }
}

/** The fingerprint of a request: a hash of its method, path (with its query) and body. */
export const requestFingerprint = (method: string, path: string, search: string, body: string) =>
  createHash("sha256").update(fingerprintOf([method, path, search, bodyPart(body)])).digest("hex")

/** The path and query of a request target (the absolute form a proxy may send included), without a trailing slash. */
const targetOf = (url: string) => {
  const parsed = new URL(url, "http://localhost")
  const path = parsed.pathname.length > 1 ? parsed.pathname.replace(/\/+$/, "") : parsed.pathname
  return { path, search: parsed.search }
}

/** The answer a repeat gets: the first one's status, body and headers, said to be a replay. */
const replayOf = (answer: StoredAnswer) => {
  const { "content-type": contentType, ...headers } = answer.headers
  return HttpServerResponse.text(answer.body, {
    status: answer.status,
    contentType: contentType ?? "application/json",
    headers: { ...headers, [idempotentReplayedHeader]: "true" }
  })
}

/** What of `response` is stored: undefined when its body is not one the middleware can keep (never for this API's POSTs). */
const storedOf = (response: HttpServerResponse.HttpServerResponse): StoredAnswer | undefined => {
  const body = response.body
  let text: string
  if (body._tag === "Uint8Array") text = new TextDecoder().decode(body.body)
  else if (body._tag === "Empty") text = ""
  else return undefined
  const headers: Record<string, string> = {}
  for (const name of replayedHeaders) {
    const value = response.headers[name]
    if (value !== undefined) headers[name] = value
  }
  const contentType = body._tag === "Uint8Array" ? body.contentType : undefined
  if (headers["content-type"] === undefined && contentType !== undefined) headers["content-type"] = contentType
  return { status: response.status, headers, body: text }
}

/** Whether an answer is kept for the key's repeats: every 2xx, and every 4xx of a request that ran. */
export const isStoredAnswer = (answer: StoredAnswer) => {
  if (answer.status < 400) return answer.status >= 200
  if (answer.status >= 500) return false
  let code: unknown
  try {
    code = (JSON.parse(answer.body) as { statusDetail?: { code?: unknown } }).statusDetail?.code
  } catch {
    return true
  }
  return !(typeof code === "string" && notRun.has(code))
}

/**
 * What of a route's answer is recorded for its repeats, when not all of it may
 * be kept: a route sets it while it runs (`POST /api-keys` records its answer
 * with the new key's secret left out, since the service keeps only the key's
 * hash; src/http/ApiKeysHttp.ts). Unset, the answer is recorded as it is sent.
 */
export const recordedAnswer = FiberRef.unsafeMake<Option.Option<(body: string) => string>>(Option.none())

const sleepAfter = (attempt: number) => Math.min(10 * 2 ** attempt, 200)

/** What the middleware needs: the key lookup (the Authentication middleware's, from the key cache), the buckets, the records. */
export interface IdempotencyDeps {
  readonly keys: ApiKeys
  readonly limiter: RateLimiter
  readonly records: KeyedRequests
}

/**
 * The API middleware: a POST to a route of the API under `prefix`, with an
 * `Idempotency-Key` and a key that authenticates, is run once per key;
 * anything else goes on untouched (without a valid API key, the route's own
 * 401 answers).
 */
export const idempotentPosts = (prefix: string, routes: RouteMatcher & RouteTable, deps: IdempotencyDeps) =>
<E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request): HttpApp.Default<E, R> => {
    if (request.method !== "POST") return app
    const key = request.headers[idempotencyKeyHeader]
    if (key === undefined) return app
    const { path, search } = targetOf(request.url)
    if (!path.startsWith(prefix) || !routes.hasRoute("POST", path)) return app
    const secret = bearerToken(request.headers["authorization"])
    if (secret === undefined) return app
    // Any failure of the look-up (a refused key, a database away) is the route's own to answer.
    return Effect.matchEffect(deps.keys.authenticate(secret), {
      onFailure: () => app,
      onSuccess: (caller) => renderFailures(routes)(keyed(app, request, caller, key, path, search, routes, deps))
    })
  })

const keyed = <E, R>(
  app: HttpApp.Default<E, R>,
  request: HttpServerRequest.HttpServerRequest,
  caller: Caller,
  key: string,
  path: string,
  search: string,
  routes: RouteTable,
  deps: IdempotencyDeps
): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    if (!isValidIdempotencyKey(key)) {
      return errorResponse(
        400,
        `Invalid request: Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters`,
        codeOf("ValidationFailed")
      )
    }
    const text = yield* Effect.option(request.text)
    // An unreadable or too deeply nested body is the route's to refuse (400), before any key is claimed.
    if (Option.isNone(text) || jsonDepthExceeds(text.value, MAX_JSON_DEPTH)) return yield* app
    const keyedRequest = { fingerprint: requestFingerprint(request.method, path, search, text.value), method: request.method, path }

    /** An answer of the middleware's own (a replay, a refusal): it costs the key a token, as the route would. */
    const ownAnswer = (response: HttpServerResponse.HttpServerResponse) => {
      const verdict = deps.limiter.take(caller, familyOf(request.method, request.url))
      const headers = rateLimitHeaders(verdict)
      return verdict.allowed
        ? HttpServerResponse.setHeaders(response, headers)
        : HttpServerResponse.setHeaders(errorResponse(429, rateLimitedMessage(verdict), codeOf("RateLimited")), headers)
    }

    let waited = 0
    for (let attempt = 0;; attempt++) {
      const outcome: ClaimOutcome = yield* deps.records.claim(caller.organizationId, key, keyedRequest)
      switch (outcome._tag) {
        case "Claimed":
          return yield* owned(app, request, caller, key, outcome.token, routes, deps)
        case "Answered":
          return ownAnswer(replayOf(outcome.answer))
        case "Reused":
          return ownAnswer(errorResponse(
            422,
            `Idempotency-Key ${key} was already used with a different request (${outcome.first.method} ${outcome.first.path}, ` +
              `at ${outcome.first.createdAt.toISOString()}); a key stands for one request for ${KEY_LIFETIME_MS / 3_600_000} hours`,
            codeOf("IdempotencyKeyReused")
          ))
        case "InFlight": {
          if (waited >= MAX_WAIT_MS) {
            return HttpServerResponse.setHeader(
              ownAnswer(errorResponse(
                409,
                `A request with Idempotency-Key ${key} is still being processed; retry shortly with the same key to get its answer`,
                codeOf("IdempotencyKeyInUse")
              )),
              "retry-after",
              "1"
            )
          }
          const pause = sleepAfter(attempt)
          waited += pause
          yield* Effect.sleep(pause)
        }
      }
    }
  })

/**
 * The claimed request: the route runs to its end (the client going away does
 * not stop it), with the failures answered as everywhere (`renderFailures`),
 * and its answer is recorded, or the key given back. The route's own
 * pre-response handlers (the rate-limit fields, `Preference-Applied`) are
 * applied here, so that what is recorded is what is sent.
 */
const owned = <E, R>(
  app: HttpApp.Default<E, R>,
  request: HttpServerRequest.HttpServerRequest,
  caller: Caller,
  key: string,
  token: string,
  routes: RouteTable,
  deps: IdempotencyDeps
) =>
  Effect.uninterruptible(
    Effect.gen(function*() {
      const [response, handlers, rewrite] = yield* Effect.locally(
        Effect.locally(
          Effect.all([renderFailures(routes)(app), FiberRef.get(HttpApp.currentPreResponseHandlers), FiberRef.get(recordedAnswer)]),
          HttpApp.currentPreResponseHandlers,
          Option.none()
        ),
        recordedAnswer,
        Option.none()
      )
      const sent = Option.isSome(handlers)
        ? yield* Effect.orElseSucceed(handlers.value(request, response), () => response)
        : response
      const answer = storedOf(sent)
      const stored = answer === undefined || Option.isNone(rewrite) ? answer : { ...answer, body: rewrite.value(answer.body) }
      const record = stored !== undefined && isStoredAnswer(stored)
        ? deps.records.complete(caller.organizationId, key, token, stored)
        : deps.records.release(caller.organizationId, key, token)
      // A record that cannot be written leaves the claim to its lease (docs/api.md): the answer is still sent.
      yield* Effect.catchAllCause(record, (cause) =>
        Effect.logWarning(`the answer of Idempotency-Key ${key} could not be recorded; the key is held until its lease ends`, cause))
      return sent
    })
  )

// The OpenAPI document (src/app/OpenApiDoc.ts calls these on every POST operation).

type DocumentedOperation = {
  parameters?: Array<unknown>
  responses: Record<string, unknown>
}

const keyParameter = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description: "Makes a POST safe to retry: the same key with the same request (method, path, body) within 24 hours " +
    "gets the first answer again (same status and body, `Idempotent-Replayed: true`) and changes nothing; with " +
    "another request it is 422 `idempotency_key_reused`. 1 to 255 printable ASCII characters; keys are your " +
    "organisation's (docs/api.md, \"Idempotency-Key on every POST\").",
  schema: { type: "string", minLength: 1, maxLength: MAX_KEY_LENGTH, pattern: "^[ -~]+$" }
}

const replayedHeaderDoc = {
  description: "`true` on an answer replayed for a repeated `Idempotency-Key` (the first answer's status and body); " +
    "absent otherwise.",
  schema: { type: "string", enum: ["true"] }
}

const keyErrors = {
  409: "A request with the same `Idempotency-Key` is still being processed after this one waited " +
    `${MAX_WAIT_MS / 1000} seconds for it (\`idempotency_key_in_use\`): retry after the \`Retry-After\` seconds with ` +
    "the same key to get its answer.",
  422: "The `Idempotency-Key` was used in the last 24 hours with a different request (`idempotency_key_reused`); " +
    "nothing was done."
} as const

/**
 * The key's parameter and its error statuses on a POST operation, before the
 * document's own error responses are put together: `written` makes the
 * response of a status (src/http/Documented.ts `errorResponse`), and an
 * operation that declares the status already has the key's case added to its words.
 */
export const documentIdempotencyKey = (
  operation: DocumentedOperation,
  written: {
    readonly make: (status: 409 | 422, description: string) => unknown
    readonly is: (response: object) => boolean
  }
) => {
  operation.parameters = [...(operation.parameters ?? []), keyParameter]
  for (const status of [409, 422] as const) {
    const own = operation.responses[String(status)] as { readonly description?: string } | undefined
    const words = own !== undefined && written.is(own) && own.description !== undefined
      ? `${own.description} Or: ${keyErrors[status]}`
      : keyErrors[status]
    operation.responses[String(status)] = written.make(status, words)
  }
}

/** The statuses whose answers may be replays: successes, and the client errors of a request that ran. */
const replayable = (status: string) =>
  status.startsWith("2") || (status.startsWith("4") && !["401", "405", "415", "429"].includes(status))

/** `Idempotent-Replayed` on the responses of a POST operation that a repeat may get again. */
export const documentReplayedHeader = (operation: DocumentedOperation) => {
  for (const [status, response] of Object.entries(operation.responses)) {
    if (!replayable(status)) continue
    const current = response as { headers?: Record<string, unknown> }
    operation.responses[status] = { ...current, headers: { ...current.headers, "Idempotent-Replayed": replayedHeaderDoc } }
  }
}
