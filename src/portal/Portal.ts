/**
 * Customer-portal access tokens (`pt_`, see SignedToken.ts): short-lived,
 * signed with the organisation's signing secret, naming one customer of one
 * organisation. The portal page (`GET /portal?token=`) trusts nothing else.
 */
import { Effect, Either, Option, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { OrganizationMismatch } from "../errors.ts"
import { checkToken, claimedOrganization, signToken, type TokenRefusal } from "../links/SignedToken.ts"
import { SigningKeys } from "../links/SigningKeys.ts"
import { CustomerId, OrganizationId } from "../ids.ts"
import { givenOrCurrentTime, timeFromNow } from "../time.ts"

/** How long a portal token is valid. */
export const PORTAL_TOKEN_MINUTES = 15

export const PortalClaims = Schema.Struct({ org: OrganizationId, customerId: CustomerId, exp: Schema.Number })
export type PortalClaims = typeof PortalClaims.Type

/** The portal page's address at `origin` for `token`. */
export const portalUrl = (origin: string, token: string) => `${origin}/portal?token=${encodeURIComponent(token)}`

export class Portal extends Effect.Service<Portal>()("Portal", {
  dependencies: [Customers.Default, SigningKeys.Default],
  effect: Effect.gen(function*() {
    const customers = yield* Customers
    const keys = yield* SigningKeys

    /** A token for the customer, and the portal's URL at `origin`. */
    const mint = Effect.fn("Portal.mint")(function*(
      organizationId: OrganizationId,
      input: { readonly customerId: CustomerId; readonly organizationId?: string | undefined },
      origin: string
    ) {
        if (input.organizationId !== undefined && input.organizationId !== organizationId) {
          return yield* new OrganizationMismatch({ message: "organizationId does not match the API key's organisation" })
        }
        yield* customers.get(organizationId, input.customerId)
        const expiresAt = yield* timeFromNow(PORTAL_TOKEN_MINUTES * 60_000)
        const claims: PortalClaims = { org: organizationId, customerId: input.customerId, exp: expiresAt.getTime() }
        const token = signToken(yield* keys.secretOf(organizationId), "pt", claims)
        return { token, expiresAt, customerId: input.customerId, organizationId, url: portalUrl(origin, token) }
      })

    /** The claims of a genuine, unexpired token of `organizationId`; None otherwise. */
    const verify = (organizationId: OrganizationId, token: string, at?: Date) =>
      Effect.map(Effect.zip(keys.secretOf(organizationId), givenOrCurrentTime(at)), ([secret, now]) => {
        const checked = checkToken(secret, "pt", token, PortalClaims, now)
        return Either.isRight(checked) && checked.right.org === organizationId
          ? Option.some(checked.right)
          : Option.none<PortalClaims>()
      }).pipe(Effect.withSpan("Portal.verify"))

    /** Whatever token a person brought: its claims, or why it is refused. */
    const open = (token: string, at?: Date): Effect.Effect<Either.Either<PortalClaims, TokenRefusal>> =>
      Option.match(claimedOrganization("pt", token), {
        onNone: () => Effect.succeed(Either.left("Invalid" as const)),
        onSome: (org) =>
          Effect.map(
            Effect.zip(keys.existingSecretOf(org), givenOrCurrentTime(at)),
            ([secret, now]) =>
              Option.match(secret, {
                onNone: () => Either.left("Invalid" as const),
                onSome: (secret) => checkToken(secret, "pt", token, PortalClaims, now)
              })
          )
      }).pipe(Effect.withSpan("Portal.open"))

    return { mint, verify, open } as const
  })
}) {}
