/**
 * A POST over node:http that chooses which door answers it: with a
 * Content-Length a lane may take it (src/signals/IntakeLane.ts,
 * src/entitlements/CheckLane.ts); chunked, only the full server can. The
 * lanes' parity tests send each case both ways.
 */
import * as http from "node:http"
import { expect } from "vitest"

export interface LaneAnswer {
  readonly status: number
  readonly body: any
  readonly headers: http.IncomingHttpHeaders
}

export const postVia = (
  baseUrl: string,
  apiKey: string,
  path: string,
  text: string,
  options: { readonly chunked: boolean; readonly headers?: Record<string, string> }
) =>
  new Promise<LaneAnswer>((resolve, reject) => {
    const url = new URL(`${baseUrl}${path}`)
    const request = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname + url.search,
      method: "POST",
      headers: {
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        ...(options.chunked ? {} : { "content-length": Buffer.byteLength(text) }),
        ...options.headers
      }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk) => chunks.push(chunk))
      response.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        resolve({ status: response.statusCode ?? 0, body: raw === "" ? raw : JSON.parse(raw), headers: response.headers })
      })
    })
    request.on("error", reject)
    if (options.chunked) {
      // Two writes: the body goes out in chunks, as a streaming client sends it.
      request.write(text.slice(0, 1))
      request.end(text.slice(1))
    } else {
      request.end(text)
    }
  })

/** A lane under test: where to send, as whom, what its counters say, and how to blank what differs by nature in a body. */
export interface LaneUnderTest {
  readonly baseUrl: string
  readonly apiKey: string
  readonly stats: () => Promise<{ readonly answered: number; readonly handedOver: number }>
  readonly comparable: (body: unknown) => unknown
}

/**
 * Sends `text` to `path` through the lane and then chunked through the full
 * server; asserts which door the lane took (`door`), and that both answered
 * the same status, body (as `comparable` sees it) and headers, but for those
 * that differ by nature (date, the request's id, the length of new ids).
 */
export const sameBothWays = async (
  lane: LaneUnderTest,
  path: string,
  text: string,
  door: "answered" | "handedOver",
  headers?: Record<string, string>
): Promise<LaneAnswer> => {
  const post = (chunked: boolean) => postVia(lane.baseUrl, lane.apiKey, path, text, { chunked, ...(headers ? { headers } : {}) })
  const before = await lane.stats()
  const viaLane = await post(false)
  const afterLane = await lane.stats()
  const viaFull = await post(true)
  const afterFull = await lane.stats()
  expect(afterLane[door] - before[door], `the lane ${door} ${path} ${text.slice(0, 60)}`).toBe(1)
  expect(afterFull, "a chunked request is the full server's").toEqual(afterLane)
  expect(viaLane.status, JSON.stringify(viaLane.body)).toBe(viaFull.status)
  expect(lane.comparable(viaLane.body)).toEqual(lane.comparable(viaFull.body))
  const compared = (headers: http.IncomingHttpHeaders) => {
    // The rate-limit fields count the key's tokens, one fewer on the second request: there, not equal.
    const { date: _date, "x-request-id": _id, "content-length": _length, ratelimit, ...rest } = headers
    if (ratelimit !== undefined) expect(ratelimit).toMatch(/^"signals";r=\d+;t=\d+$/)
    return { ...rest, ratelimit: ratelimit === undefined ? "absent" : "present" }
  }
  expect(compared(viaLane.headers)).toEqual(compared(viaFull.headers))
  expect(viaLane.headers["x-request-id"]).toMatch(/\S/)
  return viaLane
}
