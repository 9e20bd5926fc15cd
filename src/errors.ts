/**
 * The service's typed failures, and the one table of the status each is
 * reported with. Services fail with these; they know nothing of HTTP. The API
 * edge (src/http/Auth.ts `forOrganization`, src/http/Envelope.ts) and the
 * worker (a refused signal's `error_status`) both read `errorStatus`, so a
 * refusal has the same status whichever door reports it.
 *
 * Two kinds:
 * - generic failures about the request or a record (BadRequest, NotFound,
 *   Conflict, ...), which the API declares as its error responses;
 * - domain errors named for what happened (CustomerArchived, NoActivePlan,
 *   OutOfAllowance, IdempotencyKeyReused, ...), which the edge turns into the
 *   generic failure of the same status.
 */
import { Data, Schema } from "effect"

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

export type ApiError = BadRequest | Unauthorized | Forbidden | NotFound | Conflict | Unprocessable

// Domain errors: what happened, in the money core's words.

/** The request names a customer id that does not exist in the workspace. */
export class CustomerNotFound extends Data.TaggedError("CustomerNotFound")<{ readonly message: string }> {}

/** The customer is archived: read-only, and it receives no more usage. */
export class CustomerArchived extends Data.TaggedError("CustomerArchived")<{ readonly message: string }> {}

/** The member named is not a member of the customer. */
export class UnknownMember extends Data.TaggedError("UnknownMember")<{ readonly message: string }> {}

/** The customer has no ACTIVE purchase to meter or adjust against. */
export class NoActivePlan extends Data.TaggedError("NoActivePlan")<{ readonly message: string }> {}

/** The agentKey (or composite refId, or run) names nothing live in the workspace. */
export class UnknownTarget extends Data.TaggedError("UnknownTarget")<{ readonly message: string }> {}

/** The usage's model is not enabled in the workspace. */
export class ModelNotEnabled extends Data.TaggedError("ModelNotEnabled")<{ readonly message: string }> {}

/** The target exists but the customer's plan neither sells it nor covers it by a composite it sells. */
export class NotOnPlan extends Data.TaggedError("NotOnPlan")<{ readonly message: string }> {}

/** The ADVANCE allowance cannot cover the usage and the plan has no ARREAR component to overflow to. */
export class OutOfAllowance extends Data.TaggedError("OutOfAllowance")<{ readonly message: string }> {}

/** The usage itself cannot be metered (a quantity not above zero). */
export class InvalidUsage extends Data.TaggedError("InvalidUsage")<{ readonly message: string }> {}

/** An idempotency key sent again with a different request. */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{ readonly message: string }> {}

export type DomainError =
  | CustomerNotFound
  | CustomerArchived
  | UnknownMember
  | NoActivePlan
  | UnknownTarget
  | ModelNotEnabled
  | NotOnPlan
  | OutOfAllowance
  | InvalidUsage
  | IdempotencyKeyReused

export type ServiceError = ApiError | DomainError

/** Why a signal was not billed: every domain error but a key reuse, which intake answers before a signal exists. */
export type Refusal = Exclude<DomainError, IdempotencyKeyReused>

/** The status of every failure a client can cause. */
export const errorStatus: Record<ServiceError["_tag"], 400 | 401 | 403 | 404 | 409 | 422> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  Unprocessable: 422,
  InvalidUsage: 400,
  CustomerNotFound: 404,
  CustomerArchived: 409,
  UnknownMember: 422,
  NoActivePlan: 422,
  UnknownTarget: 422,
  ModelNotEnabled: 422,
  NotOnPlan: 422,
  OutOfAllowance: 422,
  IdempotencyKeyReused: 422
}

const hasTag = (u: unknown, tags: Record<string, unknown>): boolean =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in tags && "message" in u

const apiTags = { BadRequest, Unauthorized, Forbidden, NotFound, Conflict, Unprocessable }

export const isApiError = (u: unknown): u is ApiError => hasTag(u, apiTags)

export const isServiceError = (u: unknown): u is ServiceError => hasTag(u, errorStatus)

export const isDomainError = (u: unknown): u is DomainError => isServiceError(u) && !isApiError(u)

const apiErrorOfStatus = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  422: Unprocessable
} as const

/** The generic failure a domain error is answered with. */
export const toApiError = (error: DomainError): ApiError => new apiErrorOfStatus[errorStatus[error._tag]]({ message: error.message })
