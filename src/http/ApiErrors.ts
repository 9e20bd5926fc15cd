/**
 * The HTTP API's declared failures: one class per error status, each encoded
 * as that status's envelope (src/http/Envelope.ts `declaredError`). They belong
 * to the edge. The doors build them only for what fails before a service is
 * reached (a missing Authorization header, CLI input that does not decode);
 * every failure of a service is a named error of src/errors.ts, turned into
 * the class of its status (`errorStatus`) by `toApiError`.
 */
import { Schema } from "effect"
import { type ErrorStatus, errorStatus, isServiceError, type ServiceError } from "../errors.ts"

/** Malformed request, or a rejected rule about the request itself. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", { message: Schema.String }) {}

/** Key missing, unknown, revoked or expired. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) {}

/** An explicit organisation that is not the key's. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", { message: Schema.String }) {}

/** Missing, or belonging to another organisation (indistinguishable on purpose). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

/** Clashes with the current state (duplicate key, archived record, completed run). */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", { message: Schema.String }) {}

/** Well-formed but not applicable to the current state. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", { message: Schema.String }) {}

/** The key's rate limit for the route's family is spent; retry after `Retry-After` seconds. */
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", { message: Schema.String }) {}

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

/** The declared failure a service's error is answered with: the class of its status, its message. */
export const toApiError = (error: ServiceError): ApiError =>
  new apiErrorOfStatus[errorStatus[error._tag]]({ message: error.message })

/** The status a door reports a typed failure with, a service's or the edge's own; undefined for anything else. */
export const failureStatus = (failure: unknown): ErrorStatus | undefined =>
  isServiceError(failure) ? errorStatus[failure._tag] : isApiError(failure) ? statusOfApiError[failure._tag] : undefined
