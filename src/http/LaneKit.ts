/**
 * What a raw Node door (a "lane": src/signals/IntakeLane.ts,
 * src/entitlements/CheckLane.ts) needs besides the server kit's answer writing
 * (Envelope.ts) and request log (RequestLog.ts): the JSON of a body when the
 * body rules let the lane judge it, and a replay of a request whose body it
 * has read, for the full HttpApi server to answer; and the exchange itself
 * (`readExchange`): the body read, then one way to answer, to hand over or to
 * refuse, with the request id and the request-log line.
 */
import { type Cause, Effect } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Readable } from "node:stream"
import type { ServiceError } from "../errors.ts"
import { MAX_JSON_DEPTH, jsonDepthExceeds, mayHoldLoneSurrogate } from "./BodyGuard.ts"
import { errorBody, failureAnswer, writeAnswer } from "./Envelope.ts"
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
  /** Writes the answer, its request id and its request-log line. */
  readonly finished: (status: number, json: string) => void
  /** Replays the request, body and all, into the full server, which answers it. */
  readonly handOver: () => void
  /** Answers a failure of the service with the one failure mapping (`failureAnswer`). */
  readonly refused: (cause: Cause.Cause<ServiceError>) => void
}

/** What a lane gives `readExchange`: its log, its fiber runner, and counters of what it did. */
export interface LaneContext {
  readonly log: RequestLog.RequestLog["Type"]
  readonly runFork: (effect: Effect.Effect<void>) => unknown
  readonly onAnswered: () => void
  readonly onHandedOver: () => void
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
    const finished = (status: number, json: string) => {
      lane.onAnswered()
      writeAnswer(response, status, json, requestId)
      const now = performance.now()
      lane.log.record(requestId, request.method!, request.url!, status, now - started, now)
    }
    const handOver = () => {
      lane.onHandedOver()
      fallback(replayOf(request, body), response)
    }
    const refused = (cause: Cause.Cause<ServiceError>) => {
      // A client that went away has no answer and no line, as in the full server.
      if (response.destroyed) return
      const failure = failureAnswer(cause)
      // Cannot happen (a lane takes only routes); if it did, the full server answers.
      if (failure._tag === "UnknownRoute") return handOver()
      if (failure.status === 500) lane.runFork(Effect.logError("Unhandled failure", cause))
      finished(failure.status, errorBody(failure.status, failure.message))
    }
    onBody({ body, requestId, finished, handOver, refused })
  })
}
