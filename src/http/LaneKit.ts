/**
 * What a raw Node door (a "lane": src/signals/IntakeLane.ts,
 * src/entitlements/CheckLane.ts) needs besides the server kit's answer writing
 * (Envelope.ts) and request log (RequestLog.ts): the JSON of a body when the
 * body rules let the lane judge it, and a replay of a request whose body it
 * has read, for the full HttpApi server to answer; and the exchange itself
 * (`readExchange`): the body read, then one way to answer, to hand over or to
 * refuse, with the request id and the request-log line.
 */
import { type Cause, Effect, FiberSet } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Readable } from "node:stream"
import { codeOf, type ServiceError } from "../errors.ts"
import { bearerToken } from "./Auth.ts"
import { isJsonType, MAX_JSON_DEPTH, jsonDepthExceeds, mayHoldLoneSurrogate } from "./BodyGuard.ts"
import { errorBody, failureAnswer, writeAnswer } from "./Envelope.ts"
import { idempotencyKeyHeader } from "./IdempotencyKeyHeader.ts"
import { rateLimitedMessage, rateLimitHeaders, type RateVerdict } from "./RateLimit.ts"
import * as RequestLog from "./RequestLog.ts"

/** The JSON value of a body, when the body rules let a lane judge it; undefined when the full server must. */
export const parsedBody = (text: string): unknown => {
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH) || mayHoldLoneSurrogate(text)) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * A request whose body has been read, as the full server reads a request: the
 * same headers, method, url and socket, and the same bytes as its body.
 */
export const replayOf = (request: IncomingMessage, body: Buffer): IncomingMessage =>
  Object.assign(Readable.from([body], { objectMode: false }), {
    headers: request.headers,
    rawHeaders: request.rawHeaders,
    method: request.method,
    url: request.url,
    socket: request.socket,
    httpVersion: request.httpVersion,
    httpVersionMajor: request.httpVersionMajor,
    httpVersionMinor: request.httpVersionMinor
  }) as unknown as IncomingMessage

/** A lane's request whose body has been read, and the ways to end it. */
export interface LaneExchange {
  readonly body: Buffer
  readonly requestId: string
  /** Writes the answer, its request id (and `headers`, the rate-limit fields) and its request-log line. */
  readonly finished: (status: number, json: string, headers?: Readonly<Record<string, string>>) => void
  /** Answers 429 for a request its key's tokens did not cover (src/http/RateLimit.ts): nothing of it is done. */
  readonly limited: (verdict: RateVerdict) => void
  /** Replays the request, body and all, into the full server, which answers it. */
  readonly handOver: () => void
  /** Answers a failure of the service with the one failure mapping (`failureAnswer`), with `headers` when given. */
  readonly refused: (cause: Cause.Cause<ServiceError>, headers?: Readonly<Record<string, string>>) => void
}

/** What a lane gives `readExchange`: its log, its fiber runner, and counters of what it did. */
export interface LaneContext {
  readonly log: RequestLog.RequestLogger
  readonly runFork: (effect: Effect.Effect<void>) => unknown
  readonly onAnswered: () => void
  readonly onHandedOver: () => void
}

/** What a lane did since the server started (tests, diagnostics). */
export interface LaneStats {
  /** Requests the lane answered itself: served, or refused by a service or the key check. */
  readonly answered: number
  /** Requests the lane read and handed to the full server to answer. */
  readonly handedOver: number
}

/**
 * A lane's context: the request log, a fiber runner released after the server
 * (which finishes its requests in flight first), and its counters, read by `stats`.
 */
export const makeLaneContext = Effect.gen(function*() {
  const log = yield* RequestLog.RequestLog
  const runFork = yield* FiberSet.makeRuntime<never, void, never>()
  let answered = 0
  let handedOver = 0
  const context: LaneContext = {
    log,
    runFork,
    onAnswered: () => answered++,
    onHandedOver: () => handedOver++
  }
  return { context, runFork, stats: (): LaneStats => ({ answered, handedOver }) } as const
})

/**
 * The bearer key of a request a lane may read: a JSON (or untyped) body of
 * a known length up to `maxBody`, not chunked, without an `Idempotency-Key`
 * (its claim and replay are the full server's, src/http/IdempotencyKeyHeader.ts).
 * Undefined: the request is the full server's.
 */
export const laneSecretOf = (request: IncomingMessage, maxBody: number): string | undefined => {
  const headers = request.headers
  if (headers[idempotencyKeyHeader] !== undefined) return undefined
  const contentType = headers["content-type"]
  if (contentType !== undefined && contentType.trim() !== "" && !isJsonType(contentType)) return undefined
  const length = Number(headers["content-length"])
  if (headers["transfer-encoding"] !== undefined || !(length > 0 && length <= maxBody)) return undefined
  return bearerToken(headers["authorization"])
}

/** Reads `request`'s body, then gives `onBody` the exchange to end it with. */
export const readExchange = (
  request: IncomingMessage,
  response: ServerResponse,
  fallback: (request: IncomingMessage, response: ServerResponse) => void,
  lane: LaneContext,
  onBody: (exchange: LaneExchange) => void
): void => {
  const started = performance.now()
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("error", () => response.destroy())
  request.on("end", () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    const requestId = RequestLog.requestIdOf(request.headers[RequestLog.requestIdHeader])
    const finished = (status: number, json: string, headers?: Readonly<Record<string, string>>) => {
      lane.onAnswered()
      writeAnswer(response, status, json, requestId, headers)
      const now = performance.now()
      lane.log.record(requestId, request.method!, request.url!, status, now - started, now)
    }
    const handOver = () => {
      lane.onHandedOver()
      fallback(replayOf(request, body), response)
    }
    const refused = (cause: Cause.Cause<ServiceError>, headers?: Readonly<Record<string, string>>) => {
      // A client that went away has no answer and no line, as in the full server.
      if (response.destroyed) return
      const failure = failureAnswer(cause)
      // Cannot happen (a lane takes only routes); if it did, the full server answers.
      if (failure._tag === "UnknownRoute") return handOver()
      if (failure.status === 500) lane.runFork(Effect.logError("Unhandled failure", cause))
      finished(failure.status, errorBody(failure.status, failure.message, failure.code, failure.errors), { ...headers, ...failure.headers })
    }
    const limited = (verdict: RateVerdict) =>
      finished(429, errorBody(429, rateLimitedMessage(verdict), codeOf("RateLimited")), rateLimitHeaders(verdict))
    onBody({ body, requestId, finished, handOver, refused, limited })
  })
}
