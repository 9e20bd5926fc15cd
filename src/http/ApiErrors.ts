/**
 * The HTTP API's declared failures: one class per error status, each encoded
 * as that status's envelope (src/http/Envelope.ts `declaredError`). They belong
 * to the edge. The doors build them only for what fails before a service is
 * reached (a missing Authorization header, CLI input that does not decode);
 * every failure of a service is a named error of src/errors.ts, turned into
 * the class of its status (`errorStatus`) by `toApiError`, which keeps its
 * message and its code.
 *
 * Codes (`statusDetail.code`, docs/api.md "Error codes"): a failure's code is
 * the snake_case of the name of what happened (`codeOf`, src/errors.ts): a
 * service error's tag, or one of the edge's own situations below
 * (`edgeErrors`: a request that does not decode, an unknown route, ...). The
 * list of every code (`errorCodes`) is read from those two records, never
 * written out: the OpenAPI document's enums and the docs table come from it.
 */
import { Schema } from "effect"
import { FieldProblemSchema } from "../schema.ts"
import {
  codeOf,
  type CodeOf,
  type ErrorStatus,
  errorStatus,
  type FieldProblem,
  isServiceError,
  type ServiceError,
  type ServiceErrorCode
} from "../errors.ts"

export { FieldProblemSchema }

/**
 * The edge's own failures, which no service reports: each situation's name
 * (its code is derived from it, as a service error's is), its status and when
 * it happens. A missing or malformed Authorization header is the service's
 * `ApiKeyRefused` (the key is missing), not a situation of its own; a request
 * that fails validation is the service's `ValidationFailed` whoever finds it
 * (the edge's schemas, or a service's own checks), so it has one code.
 */
export const edgeErrors = {
  InvalidJson: { status: 400, description: "The request body is not valid JSON." },
  RouteNotFound: { status: 404, description: "No route has this path." },
  MethodNotAllowed: { status: 405, description: "The path does not take this method." },
  UnsupportedMediaType: { status: 415, description: "The body's Content-Type is not JSON." },
  InternalError: {
    status: 500,
    description: "A failure inside the service (or, on a refused signal, while pricing it); the message discloses nothing. Retry with backoff."
  },
  ServiceUnavailable: { status: 503, description: "The process is shutting down; retry on another." },
  DatabaseUnavailable: {
    status: 503,
    description: "No database server that takes writes answers: a failover is under way, or the database restarts or " +
      "cannot be reached. Nothing of the request was committed. Retry after the `Retry-After` seconds (with the same " +
      "idempotency key, where the route takes one)."
  }
} as const

export type EdgeSituation = keyof typeof edgeErrors

/** Every code a failure can be answered with, by the API or the CLI. */
export type ErrorCode = ServiceErrorCode | CodeOf<EdgeSituation>

/** The code of an edge situation. */
export const edgeCode = <S extends EdgeSituation>(situation: S): CodeOf<S> => codeOf(situation)

/** One code, the status it is answered with, and whose it is. */
export interface ErrorCodeEntry {
  readonly code: ErrorCode
  readonly status: number
  /** The service error's tag or the edge situation it is derived from. */
  readonly name: string
  readonly origin: "service" | "edge"
}

/** Every code, derived from `errorStatus` (src/errors.ts) and `edgeErrors`, in status then code order. */
export const errorCodes: ReadonlyArray<ErrorCodeEntry> = [
  ...Object.entries(errorStatus).map(([name, status]) => ({
    code: codeOf(name) as ErrorCode,
    status: status as number,
    name,
    origin: "service" as const
  })),
  ...Object.entries(edgeErrors).map(([name, situation]) => ({
    code: codeOf(name) as ErrorCode,
    status: situation.status as number,
    name,
    origin: "edge" as const
  }))
].sort((a, b) => a.status - b.status || (a.code < b.code ? -1 : a.code > b.code ? 1 : 0))

/** The codes answered with `status`, in code order. */
export const codesOfStatus = (status: number): ReadonlyArray<ErrorCode> =>
  errorCodes.filter((entry) => entry.status === status).map((entry) => entry.code)

const codeField = { description: "The failure's stable machine-readable code (docs/api.md \"Error codes\")." }

/** Malformed request, or a rejected rule about the request itself. Built at the edge, it is `validation_failed`. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.String, { default: () => codeOf("ValidationFailed") }).annotations(codeField),
  /** Every problem, with its field, when the request fails validation. */
  errors: Schema.optional(Schema.Array(FieldProblemSchema))
}) {}

/** Key missing, unknown, revoked or expired: `api_key_refused`, whoever found it. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.String, { default: () => codeOf("ApiKeyRefused") }).annotations(codeField)
}) {}

/** An explicit organisation that is not the key's. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", { message: Schema.String, code: Schema.String }) {}

/** Missing, or belonging to another organisation (indistinguishable on purpose). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String, code: Schema.String }) {}

/** Clashes with the current state (duplicate key, archived record, completed run). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", { message: Schema.String, code: Schema.String }) {}

/** Well-formed but not applicable to the current state. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", {
  message: Schema.String,
  code: Schema.String
}) {}

/** The key's rate limit for the route's family is spent; retry after `Retry-After` seconds. */
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.String, { default: () => codeOf("RateLimited") }).annotations(codeField)
}) {}

export type ApiError = BadRequest | Unauthorized | Forbidden | NotFound | Conflict | Unprocessable | TooManyRequests

/** The declared failure of each status. */
export const apiErrorOfStatus = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  422: Unprocessable,
  429: TooManyRequests
} as const satisfies Record<ErrorStatus, unknown>

const statusOfApiError = Object.fromEntries(
  Object.entries(apiErrorOfStatus).map(([status, errorClass]) => [errorClass._tag, Number(status) as ErrorStatus])
) as Record<ApiError["_tag"], ErrorStatus>

export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" &&
  Object.hasOwn(statusOfApiError, u._tag) && "message" in u

/** The declared failure a service's error is answered with: the class of its status, its message and its code. */
export const toApiError = (error: ServiceError): ApiError => {
  const errorClass = apiErrorOfStatus[errorStatus[error._tag]] as new(props: {
    readonly message: string
    readonly code: string
    readonly errors?: ReadonlyArray<FieldProblem>
  }) => ApiError
  const errors = error._tag === "ValidationFailed" ? error.errors : undefined
  return new errorClass({ message: error.message, code: codeOf(error._tag), ...(errors === undefined ? {} : { errors }) })
}

/** The problems a typed failure names, a service's or the edge's own; undefined when it names none. */
export const failureProblems = (failure: unknown): ReadonlyArray<FieldProblem> | undefined =>
  isServiceError(failure)
    ? failure._tag === "ValidationFailed" ? failure.errors : undefined
    : isApiError(failure) && failure._tag === "BadRequest"
    ? failure.errors
    : undefined

/** The status a door reports a typed failure with, a service's or the edge's own; undefined for anything else. */
export const failureStatus = (failure: unknown): ErrorStatus | undefined =>
  isServiceError(failure) ? errorStatus[failure._tag] : isApiError(failure) ? statusOfApiError[failure._tag] : undefined

/** The code a door reports a typed failure with, a service's or the edge's own; undefined for anything else. */
export const failureCode = (failure: unknown): ErrorCode | undefined =>
  isServiceError(failure) ? codeOf(failure._tag) : isApiError(failure) ? failure.code as ErrorCode : undefined
