/**
 * The spec's response envelope, on every answer:
 *   { statusCode, statusDetail: { status: "SUCCESS" | "ERROR", message }, result }
 *
 * Successes: each endpoint declares `Success(ResultSchema, { status, message })`,
 * whose encoding wraps the handler's plain result.
 *
 * Failures: HttpApi encodes errors without an envelope, so `renderFailures`
 * (installed as API-level middleware, which runs before the framework's own
 * error encoding) turns every failure into an envelope first: our typed errors,
 * request decoding errors, unknown routes and methods, unreadable bodies and,
 * as a last resort, defects (500, nothing internal leaked).
 */
import { HttpApiError, HttpApiSchema, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpApp } from "@effect/platform"
import { Cause, Effect, Option, ParseResult, Schema } from "effect"
import type { SqlError } from "@effect/sql"
import { sqlState } from "../db/Sql.ts"
import { errorStatus, isServiceError } from "../errors.ts"
import { describeIssues } from "../schema.ts"

export { describeIssues }

const SuccessDetail = Schema.Struct({
  status: Schema.Literal("SUCCESS"),
  message: Schema.String
})

/**
 * A success body: the handler returns the `result` payload and the schema adds
 * the envelope. `message` may depend on the result (an idempotent replay says so).
 */
export const Success = <S extends Schema.Schema.Any>(
  result: S,
  options: {
    readonly status?: number
    readonly message: string | ((result: Schema.Schema.Type<S>) => string)
  }
) => {
  const status = options.status ?? 200
  const messageOf = typeof options.message === "string" ? () => options.message as string : options.message
  return Schema.transform(
    Schema.Struct({ statusCode: Schema.Int, statusDetail: SuccessDetail, result }),
    Schema.typeSchema(result),
    {
      strict: false,
      decode: (envelope) => (envelope as unknown as { readonly result: Schema.Schema.Type<S> }).result,
      encode: (value) => ({
        statusCode: status,
        statusDetail: { status: "SUCCESS" as const, message: messageOf(value) },
        result: value
      })
    }
  ).annotations(HttpApiSchema.annotations({ status }))
}

/** The envelope schema of an error, for documentation. */
export const ErrorEnvelope = Schema.Struct({
  statusCode: Schema.Int,
  statusDetail: Schema.Struct({ status: Schema.Literal("ERROR"), message: Schema.String }),
  result: Schema.Struct({})
})

export const errorResponse = (status: number, message: string) =>
  HttpServerResponse.unsafeJson(
    { statusCode: status, statusDetail: { status: "ERROR", message }, result: {} },
    { status }
  )

export const successResponse = (status: number, message: string, result: unknown) =>
  HttpServerResponse.unsafeJson(
    { statusCode: status, statusDetail: { status: "SUCCESS", message }, result },
    { status }
  )

const describeParseError = (error: ParseResult.ParseError) =>
  describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))

/** A route table to tell an unknown path (404) from a known path with the wrong method (405). */
export interface RouteTable {
  readonly hasPath: (path: string) => boolean
}

const isDecodable = (path: string) => {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

const unknownRoute = (routes: RouteTable) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const path = new URL(request.url, "http://localhost").pathname
    if (!isDecodable(path)) return errorResponse(400, `Malformed percent-encoding in ${path}`)
    return routes.hasPath(path)
      ? errorResponse(405, `Method ${request.method} is not allowed on ${path}`)
      : errorResponse(404, `No route for ${request.method} ${path}`)
  })

const isSqlError = (u: unknown): u is SqlError.SqlError =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "SqlError"

/** character_not_in_repertoire, untranslatable_character */
const unstorableText = new Set(["22021", "22P05"])

/** Turns every failure of the API into an enveloped response. */
export const renderFailures = (routes: RouteTable) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<never, R> =>
  Effect.catchAllCause(app, (cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error: unknown = failure.value
      if (isServiceError(error)) return Effect.succeed(errorResponse(errorStatus[error._tag], error.message))
      if (error instanceof HttpApiError.HttpApiDecodeError) {
        return Effect.succeed(errorResponse(400, `Invalid request: ${describeIssues(error.issues) || error.message}`))
      }
      if (ParseResult.isParseError(error)) {
        return Effect.succeed(errorResponse(400, `Invalid request: ${describeParseError(error)}`))
      }
      if (error instanceof HttpServerError.RouteNotFound) return unknownRoute(routes)
    }
    for (const defect of Cause.defects(cause)) {
      // HttpApi dies (rather than fails) when a JSON body cannot be parsed.
      if (defect instanceof HttpServerError.RequestError && defect.reason === "Decode") {
        return Effect.succeed(errorResponse(400, "Invalid JSON in request body"))
      }
      // Text PostgreSQL cannot store (a NUL character) is the client's input, not our failure.
      if (isSqlError(defect) && unstorableText.has(sqlState(defect) ?? "")) {
        return Effect.succeed(errorResponse(400, "Invalid request: text must not contain NUL characters"))
      }
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.succeed(errorResponse(503, "The service is shutting down"))
    return Effect.as(
      Effect.logError("Unhandled failure", cause),
      errorResponse(500, "Internal server error")
    )
  })
