/**
 * Bearer-key authentication for every API route. The platform's bearer decoder
 * neither checks the `Bearer ` prefix nor tells a missing header from an empty
 * token, so the raw header is checked here before the key is looked up.
 * The lookup is `ApiKeys.authenticate`, answered from the process's key cache
 * (src/organizations/KeyCache.ts): no database round trip for a known key.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { isServiceError, type ServiceError } from "../errors.ts"
import { type ApiError, toApiError, TooManyRequests, Unauthorized } from "./ApiErrors.ts"
import { declaredError } from "./Envelope.ts"
import { ApiKeys, type Caller } from "../organizations/ApiKeys.ts"
import type { OrganizationId } from "../ids.ts"
import { authenticationCost, familyOf, RateLimiter } from "./RateLimit.ts"

/** The organisation (and key) the current request acts for. */
export class CurrentOrganization extends Context.Tag("CurrentOrganization")<CurrentOrganization, Caller>() {}

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(declaredError(Unauthorized, 401), declaredError(TooManyRequests, 429)),
  provides: CurrentOrganization,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const bearerPattern = /^Bearer +(\S+)\s*$/i

/** The key of an `Authorization: Bearer <key>` header; undefined when the header is missing or malformed. */
export const bearerToken = (header: string | undefined): string | undefined =>
  header === undefined ? undefined : bearerPattern.exec(header)?.[1]

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limiter = yield* RateLimiter
    return {
      bearer: (_token: Redacted.Redacted) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const secret = bearerToken(request.headers["authorization"])
          if (secret === undefined) {
            return yield* new Unauthorized({ message: "Missing or malformed Authorization header: expected Bearer <API_KEY>" })
          }
          const caller = yield* Effect.mapError(keys.authenticate(secret), (refused) => new Unauthorized({ message: refused.message }))
          // The key's tokens for the route's family, before the handler does anything (src/http/RateLimit.ts).
          yield* Effect.mapError(
            limiter.limit(caller, familyOf(request.method, request.originalUrl), authenticationCost(request.method, request.originalUrl)),
            (limited) => new TooManyRequests({ message: limited.message })
          )
          return caller
        })
    }
  })
)

/**
 * Runs `f` for the caller of the current request (its organisation and key).
 * Every handler goes through here or `forOrganization`, so this is where a
 * service's named errors (CustomerArchived, PlanNotFound, ...) become the API's
 * declared failure of their status (`toApiError`, from `errorStatus`).
 */
export const forCaller = <A, E, R>(f: (caller: Caller) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(CurrentOrganization, f).pipe(
    Effect.mapError((error) => (isServiceError(error) ? toApiError(error) : error) as Exclude<E, ServiceError> | ApiError)
  )

/** Runs `f` for the organisation of the current request; its errors as `forCaller` answers them. */
export const forOrganization = <A, E, R>(f: (organizationId: OrganizationId) => Effect.Effect<A, E, R>) =>
  forCaller((caller) => f(caller.organizationId))
