/**
 * The service's typed failures. Each carries the HTTP status the spec gives it;
 * `src/http/Envelope.ts` is the one place that turns them into responses.
 * Services fail with these directly: the status is part of the business rule
 * (a duplicate externalId IS a conflict), so there is nothing to translate.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/** 400: malformed request or a rejected business rule about the request itself. */
export class BadRequest extends Schema.TaggedError<BadRequest>()(
  "BadRequest",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 401: key missing, unknown, revoked or expired. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

/** 403: an explicit organisation that is not the key's. */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

/** 404: missing, or belonging to another organisation (indistinguishable on purpose). */
export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** 409: clashes with the current state (duplicate key, archived customer, completed run). */
export class Conflict extends Schema.TaggedError<Conflict>()(
  "Conflict",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

/** 422: well-formed but not applicable to the current state. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()(
  "Unprocessable",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 422 })
) {}

export type ApiError = BadRequest | Unauthorized | Forbidden | NotFound | Conflict | Unprocessable

export const errorStatus: Record<ApiError["_tag"], number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  Unprocessable: 422
}

export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in errorStatus &&
  "message" in u

/** The status of every error a client can cause, for declaring on the API. */
export const ClientErrors = [BadRequest, Unauthorized, Forbidden, NotFound, Conflict, Unprocessable] as const
