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
import { Context, Effect, Layer, Redacted } from "effect"
import { type ApiError, type DomainError, isDomainError, toApiError, Unauthorized } from "../errors.ts"
import { declaredError } from "./Envelope.ts"
import { ApiKeys, type Caller } from "../organizations/ApiKeys.ts"

/** The organisation (and key) the current request acts for. */
export class CurrentOrganization extends Context.Tag("CurrentOrganization")<CurrentOrganization, Caller>() {}

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: declaredError(Unauthorized, 401),
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
    return {
      bearer: (_token: Redacted.Redacted) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const secret = bearerToken(request.headers["authorization"])
          if (secret === undefined) {
            return yield* new Unauthorized({ message: "Missing or malformed Authorization header: expected Bearer <API_KEY>" })
          }
          return yield* keys.authenticate(secret)
        })
    }
  })
)

/**
 * Runs `f` for the organisation of the current request. Every handler goes
 * through here, so this is where a service's domain errors (CustomerArchived,
 * OutOfAllowance, ...) become the API's declared failure of the same status.
 */
export const forOrganization = <A, E, R>(f: (organizationId: string) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(CurrentOrganization, (caller) => f(caller.organizationId)).pipe(
    Effect.mapError((error) => (isDomainError(error) ? toApiError(error) : error) as Exclude<E, DomainError> | ApiError)
  )
