/**
 * What a raw Node door (a "lane": src/signals/IntakeLane.ts,
 * src/entitlements/CheckLane.ts) needs besides the server kit's answer writing
 * (Envelope.ts) and request log (RequestLog.ts): the JSON of a body when the
 * body rules let the lane judge it, and a replay of a request whose body it
 * has read, for the full HttpApi server to answer.
 */
import type { IncomingMessage } from "node:http"
import { Readable } from "node:stream"
import { MAX_JSON_DEPTH, jsonDepthExceeds, mayHoldLoneSurrogate } from "./BodyGuard.ts"

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
