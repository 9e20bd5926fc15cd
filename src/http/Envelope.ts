/**
 * The spec's response envelope, on every answer:
 *   { statusCode, statusDetail: { status: "SUCCESS" | "ERROR", message }, result }
 * and on every error, `statusDetail.code`: the failure's stable machine code
 * (src/http/ApiErrors.ts `errorCodes`, docs/api.md "Error codes").
 *
 * Successes: each endpoint declares `Success(ResultSchema, { status, message })`,
 * whose encoding wraps the handler's plain result.
 *
 * A request that fails validation (`validation_failed`) also names every
 * problem with its field, `statusDetail.errors: [{field, message}]`, additively:
 * `statusCode` and `statusDetail.status/code/message` are as on every error.
 *
 * Failures: HttpApi encodes errors without an envelope, so `renderFailures`
 * (installed as API-level middleware, which runs before the framework's own
 * error encoding) turns every failure into an envelope first: our typed errors,
 * request decoding errors, unknown routes and methods, unreadable bodies and,
 * as a last resort, defects (500, nothing internal leaked).
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as HttpApp from "@effect/platform/HttpApp"
import { Cause, Effect, Option, ParseResult, Schema } from "effect"
import type { SqlError } from "@effect/sql"
import type { ServerResponse } from "node:http"
import { isUnavailableCause } from "../db/Faults.ts"
import { sqlState } from "../db/Sql.ts"
import { codesOfStatus, edgeCode, type ErrorCode, failureCode, failureProblems, failureStatus, FieldProblemSchema } from "./ApiErrors.ts"
import { codeOf, type FieldProblem } from "../errors.ts"
import { describeIssues, describeProblems, fieldProblems } from "../schema.ts"
import { requestIdHeader } from "./RequestLog.ts"

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
    Schema.Struct({ statusCode: Schema.Literal(status), statusDetail: SuccessDetail, result }),
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

/** Every status an error answer can carry; each has its envelope schema below. */
export const errorStatuses = [400, 401, 403, 404, 405, 409, 415, 422, 429, 500, 503] as const
export type ErrorStatus = (typeof errorStatuses)[number]

const EmptyResult = Schema.Struct({}).annotations({
  description: "Always an empty object on an error.",
  jsonSchema: { type: "object", properties: {}, additionalProperties: false }
})

/**
 * The codes of a status's answers, as the document's enum: every code of that
 * status (src/http/ApiErrors.ts `codesOfStatus`). An operation's codes are
 * thus those of the statuses it declares (`x-error-codes`, src/app/OpenApiDoc.ts).
 */
const codeSchema = (status: ErrorStatus) => {
  const codes = codesOfStatus(status)
  const description = "The failure's stable machine-readable code, the snake_case of what happened " +
    "(docs/api.md \"Error codes\"); code against it, not against `message`."
  return codes.length === 0
    ? Schema.String.annotations({ description })
    : Schema.Literal(...(codes as [ErrorCode, ...Array<ErrorCode>])).annotations({ description })
}

/** `statusDetail.errors`, on the 400 envelope only: the one status a request fails validation with. */
const problemsField = Schema.optional(
  Schema.Array(FieldProblemSchema).annotations({
    description: "On every `validation_failed` answer: each problem of the request with its field, all of them " +
      "(at most 100), where `message` names the first few. Absent on other answers."
  })
)

const makeErrorEnvelope = <S extends ErrorStatus>(status: S) =>
  Schema.Struct({
    statusCode: Schema.Literal(status).annotations({ description: "Equals the HTTP status." }),
    statusDetail: Schema.Struct({
      status: Schema.Literal("ERROR"),
      code: codeSchema(status) as Schema.Schema<ErrorCode, string>,
      message: Schema.String.annotations({ description: "What was wrong, for people; not a stable code." }),
      ...(status === 400 ? { errors: problemsField } : {})
    }),
    result: EmptyResult
  }).annotations({
    identifier: `Error${status}`,
    title: `Error ${status}`,
    description: `The envelope of every ${status} answer.`
  })

/**
 * The envelope of each error status. These schemas are both what the OpenAPI
 * document shows for an error and what `errorResponse` encodes every error
 * answer through, so the document cannot drift from the wire.
 */
export const ErrorEnvelope = Object.fromEntries(errorStatuses.map((status) => [status, makeErrorEnvelope(status)])) as {
  readonly [S in ErrorStatus]: ReturnType<typeof makeErrorEnvelope<S>>
}

const encodeErrorEnvelope = Object.fromEntries(
  errorStatuses.map((status) => [status, Schema.encodeSync(ErrorEnvelope[status] as Schema.Schema<unknown>)])
) as Record<ErrorStatus, (envelope: unknown) => unknown>

const validationFailed = codeOf("ValidationFailed")

/**
 * The problems a `validation_failed` answer names: those given, or, from a
 * door that gave none, its message as one problem of the request as a whole.
 * Undefined for every other code.
 */
export const problemsOf = (
  code: string,
  message: string,
  problems: ReadonlyArray<FieldProblem> | undefined
): ReadonlyArray<FieldProblem> | undefined =>
  code !== validationFailed
    ? undefined
    : problems !== undefined && problems.length > 0
    ? problems
    : [{ field: null, message: message.replace(/^Invalid request: /, "") }]

const errorEnvelope = (status: ErrorStatus, message: string, code: ErrorCode, problems?: ReadonlyArray<FieldProblem>) => {
  const errors = status === 400 ? problemsOf(code, message, problems) : undefined
  return encodeErrorEnvelope[status]({
    statusCode: status,
    statusDetail: { status: "ERROR", code, message, ...(errors === undefined ? {} : { errors }) },
    result: {}
  })
}

/**
 * An error answer: its status, its message for people, its code for machines
 * (one of the status's codes) and, when it fails validation, its problems.
 */
export const errorResponse = (status: ErrorStatus, message: string, code: ErrorCode, problems?: ReadonlyArray<FieldProblem>) =>
  HttpServerResponse.unsafeJson(errorEnvelope(status, message, code, problems), { status })

/** The JSON text of an error answer, for a door that writes Node's response itself (`writeAnswer`). */
export const errorBody = (status: ErrorStatus, message: string, code: ErrorCode, problems?: ReadonlyArray<FieldProblem>) =>
  JSON.stringify(errorEnvelope(status, message, code, problems))

/**
 * A declared API error whose encoding is its status's envelope: the handler
 * fails with the typed error (`BadRequest`, ...), the document and the
 * encoder both see `ErrorEnvelope[status]`.
 */
export const declaredError = <
  Self extends { readonly message: string; readonly code: string; readonly errors?: ReadonlyArray<FieldProblem> | undefined },
  S extends ErrorStatus
>(
  errorClass: Schema.Schema<Self, any, never> & {
    new(props: { readonly message: string; readonly code: string; readonly errors?: ReadonlyArray<FieldProblem> }): Self
  },
  status: S
) =>
  Schema.transform(ErrorEnvelope[status], Schema.typeSchema(errorClass), {
    strict: false,
    decode: (envelope) => {
      const detail = envelope.statusDetail as { readonly message: string; readonly code: string; readonly errors?: ReadonlyArray<FieldProblem> }
      return new errorClass({
        message: detail.message,
        code: detail.code,
        ...(detail.errors === undefined ? {} : { errors: detail.errors })
      })
    },
    encode: (error) => {
      const errors = status === 400 ? problemsOf(error.code, error.message, error.errors) : undefined
      return {
        statusCode: status,
        statusDetail: {
          status: "ERROR" as const,
          code: error.code as ErrorCode,
          message: error.message,
          ...(errors === undefined ? {} : { errors })
        },
        result: {}
      }
    }
  }).annotations({
    // The document names a transformation by its own identifier, not its encoded side's.
    ...ErrorEnvelope[status].ast.annotations,
    ...HttpApiSchema.annotations({ status })
  })

/**
 * The JSON text of a success answer whose result encodes to itself, for a door
 * that writes Node's response itself (`writeAnswer`).
 */
export const successBody = (status: number, message: string, result: unknown) =>
  JSON.stringify({ statusCode: status, statusDetail: { status: "SUCCESS", message }, result })

/**
 * Writes an enveloped answer (`successBody`, `errorBody`) straight to Node's
 * response, with the headers the full server sends: JSON, its length, the
 * request id, and the rate-limit fields when given (src/http/RateLimit.ts). For a door that answers without the platform (src/signals/IntakeLane.ts).
 */
export const writeAnswer = (
  response: ServerResponse,
  status: number,
  json: string,
  requestId: string,
  headers?: Readonly<Record<string, string>>
) => {
  response.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(json),
    [requestIdHeader]: requestId
  })
  response.end(json)
}

/** A route table to tell an unknown path (404) from a known path with the wrong method (405). */
export interface RouteTable {
  readonly hasPath: (path: string) => boolean
  /** The methods a known path takes, for the `Allow` header of its 405 (RFC 9110, 15.5.6). */
  readonly methodsOf: (path: string) => ReadonlyArray<string>
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
    if (!isDecodable(path)) return errorResponse(400, `Malformed percent-encoding in ${path}`, validationFailed)
    if (!routes.hasPath(path)) return errorResponse(404, `No route for ${request.method} ${path}`, edgeCode("RouteNotFound"))
    const allowed = routes.methodsOf(path).join(", ")
    return errorResponse(405, `Method ${request.method} is not allowed on ${path}; it takes ${allowed}`, edgeCode("MethodNotAllowed")).pipe(
      HttpServerResponse.setHeader("allow", allowed)
    )
  })

const isSqlError = (u: unknown): u is SqlError.SqlError =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "SqlError"

/** character_not_in_repertoire, untranslatable_character */
const unstorableText = new Set(["22021", "22P05"])

/** How a failure is answered: a status, message and code, or the route-not-found answer (404 or 405). */
export type FailureAnswer =
  | {
    readonly _tag: "Answer"
    readonly status: ErrorStatus
    readonly message: string
    readonly code: ErrorCode
    /** Every problem with its field, on a `validation_failed` answer. */
    readonly errors?: ReadonlyArray<FieldProblem>
    /** Headers the answer carries (`Retry-After` on a 503 `database_unavailable`). */
    readonly headers?: Readonly<Record<string, string>>
  }
  | { readonly _tag: "UnknownRoute" }

const answerWith = (status: ErrorStatus, message: string, code: ErrorCode, errors?: ReadonlyArray<FieldProblem>): FailureAnswer =>
  errors === undefined ? { _tag: "Answer", status, message, code } : { _tag: "Answer", status, message, code, errors }

/**
 * The seconds a client waits before retrying while the database is away: a
 * pg_auto_failover promotion takes seconds (docs/operations.md, "A
 * highly available PostgreSQL: the formation"; docs/benchmarks.md, "Figures
 * that were in code comments"), and a pool finds the new primary with the
 * first connection after it.
 */
export const DATABASE_RETRY_AFTER_SECONDS = 5

const databaseUnavailable: FailureAnswer = {
  _tag: "Answer",
  status: 503,
  message: "The database is unavailable (a failover or restart under way); nothing was committed. Retry after the Retry-After seconds.",
  code: edgeCode("DatabaseUnavailable"),
  headers: { "retry-after": String(DATABASE_RETRY_AFTER_SECONDS) }
}

const invalid = (problems: ReadonlyArray<FieldProblem>) =>
  answerWith(400, `Invalid request: ${describeProblems(problems)}`, validationFailed, problems)

/**
 * The one mapping of a failure to its answer: our typed errors, request
 * decoding errors, unknown routes, unreadable bodies and, as a last resort,
 * defects (500, nothing internal leaked; the caller logs the cause).
 */
export const failureAnswer = (cause: Cause.Cause<unknown>): FailureAnswer => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error: unknown = failure.value
    const status = failureStatus(error)
    if (status !== undefined) {
      return answerWith(status, (error as { readonly message: string }).message, failureCode(error)!, failureProblems(error))
    }
    if (error instanceof HttpApiError.HttpApiDecodeError) {
      const problems = fieldProblems(error.issues)
      return invalid(problems.length > 0 ? problems : [{ field: null, message: error.message }])
    }
    if (ParseResult.isParseError(error)) return invalid(fieldProblems(ParseResult.ArrayFormatter.formatErrorSync(error)))
    if (error instanceof HttpServerError.RouteNotFound) return { _tag: "UnknownRoute" }
  }
  for (const defect of Cause.defects(cause)) {
    // HttpApi dies (rather than fails) when a JSON body cannot be parsed.
    if (defect instanceof HttpServerError.RequestError && defect.reason === "Decode") {
      return answerWith(400, "Invalid JSON in request body", edgeCode("InvalidJson"))
    }
    // Text PostgreSQL cannot store (a NUL character) is the client's input, not our failure.
    if (isSqlError(defect) && unstorableText.has(sqlState(defect) ?? "")) {
      return invalid([{ field: null, message: "text must not contain NUL characters" }])
    }
  }
  if (Cause.isInterruptedOnly(cause)) return answerWith(503, "The service is shutting down", edgeCode("ServiceUnavailable"))
  // A database that is away (no primary, a failover, a restart) is no failure of ours: the client retries.
  if (isUnavailableCause(cause)) return databaseUnavailable
  return answerWith(500, "Internal server error", edgeCode("InternalError"))
}

/** Turns every failure of the API into an enveloped response. */
export const renderFailures = (routes: RouteTable) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<never, R> =>
  Effect.catchAllCause(app, (cause) => {
    const answer = failureAnswer(cause)
    if (answer._tag === "UnknownRoute") return unknownRoute(routes)
    const response = errorResponse(answer.status, answer.message, answer.code, answer.errors).pipe(
      HttpServerResponse.setHeaders(answer.headers ?? {})
    )
    return answer.status === 500 ? Effect.as(Effect.logError("Unhandled failure", cause), response) : Effect.succeed(response)
  })
