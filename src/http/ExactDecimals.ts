/**
 * Exact decimals in every JSON answer of the API (src/WireDecimals.ts): the
 * request's fiber encodes its answer with `ExactDecimalsWire` set, so an amount
 * a float cannot carry becomes a marker, and the answer's text gets the
 * amount's digits in its place, a bare JSON number.
 *
 * Every JSON answer is looked at, not only those this fiber encoded: an answer
 * replayed for an `Idempotency-Key` (src/http/IdempotencyKeyHeader.ts) may have
 * been stored before this middleware saw it, whichever of the two runs first.
 * A search for the marker's bytes in an answer that has none costs next to
 * nothing.
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as HttpApp from "@effect/platform/HttpApp"
import { Effect } from "effect"
import { ExactDecimalsWire, markerInJson, replaceMarkers } from "../WireDecimals.ts"

const markerBytes = Buffer.from(markerInJson)

const withExactDecimals = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  const body = response.body
  if (body._tag !== "Uint8Array") return response
  const bytes = Buffer.from(body.body.buffer, body.body.byteOffset, body.body.byteLength)
  if (bytes.indexOf(markerBytes) < 0) return response
  return HttpServerResponse.setBody(response, HttpBody.text(replaceMarkers(bytes.toString("utf8")), body.contentType))
}

/** The API middleware: answers made with exact decimals. */
export const exactDecimals = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.map(Effect.locally(app, ExactDecimalsWire, true), withExactDecimals)
