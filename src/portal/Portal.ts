/**
 * Customer-portal access tokens: short-lived, HMAC-SHA256 signed with the
 * organisation's signing secret, naming one customer of one organisation.
 * Form: `pt_<base64url payload>.<hex signature>`; the payload is
 * `{"org","customerId","exp"}` with `exp` in unix milliseconds.
 */
import { Effect, Option } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { Customers } from "../customers/Customers.ts"
import { Forbidden } from "../errors.ts"
import { SigningKeys } from "./SigningKeys.ts"

/** How long a portal token is valid. */
export const PORTAL_TOKEN_MINUTES = 15

export interface PortalClaims {
  readonly org: string
  readonly customerId: string
  readonly exp: number
}

const sign = (secret: string, payload: string) => createHmac("sha256", secret).update(payload).digest("hex")

export class Portal extends Effect.Service<Portal>()("Portal", {
  effect: Effect.gen(function*() {
    const customers = yield* Customers
    const keys = yield* SigningKeys

    const mint = (organizationId: string, input: { readonly customerId: string; readonly organizationId?: string | undefined }) =>
      Effect.gen(function*() {
        if (input.organizationId !== undefined && input.organizationId !== organizationId) {
          return yield* new Forbidden({ message: "organizationId does not match the API key's organisation" })
        }
        yield* customers.get(organizationId, input.customerId)
        const expiresAt = new Date(Date.now() + PORTAL_TOKEN_MINUTES * 60_000)
        const claims: PortalClaims = { org: organizationId, customerId: input.customerId, exp: expiresAt.getTime() }
        const payload = Buffer.from(JSON.stringify(claims)).toString("base64url")
        const secret = yield* keys.secretOf(organizationId)
        return { token: `pt_${payload}.${sign(secret, payload)}`, expiresAt, customerId: input.customerId, organizationId }
      })

    /** The claims of a genuine, unexpired token of `organizationId`; None otherwise. */
    const verify = (organizationId: string, token: string, now = new Date()) =>
      Effect.map(keys.secretOf(organizationId), (secret) => {
        const match = /^pt_([A-Za-z0-9_-]+)\.([0-9a-f]{64})$/.exec(token)
        if (!match) return Option.none<PortalClaims>()
        const expected = Buffer.from(sign(secret, match[1]!), "hex")
        if (!timingSafeEqual(expected, Buffer.from(match[2]!, "hex"))) return Option.none<PortalClaims>()
        const claims = JSON.parse(Buffer.from(match[1]!, "base64url").toString("utf8")) as PortalClaims
        return claims.org === organizationId && claims.exp > now.getTime() ? Option.some(claims) : Option.none<PortalClaims>()
      })

    return { mint, verify } as const
  })
}) {}
