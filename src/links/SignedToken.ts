/**
 * The signed, expiring tokens a person carries in a link: `pt_` portal tokens
 * and `pl_` invoice links. Form: `<kind>_<base64url JSON claims>.<hex HMAC-SHA256>`,
 * signed with the organisation's signing secret over the kind and the payload,
 * so a token of one kind is never accepted as the other. The claims name the
 * organisation (`org`), which says whose secret verifies them; nothing in a
 * token is trusted before that check.
 */
import { Either, Option, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { OrganizationId } from "../ids.ts"

export type TokenKind = "pt" | "pl"

/** Why a token is refused: `Expired` only once its signature is genuine. */
export type TokenRefusal = "Invalid" | "Expired"

const sign = (secret: string, kind: TokenKind, payload: string) =>
  createHmac("sha256", secret).update(`${kind}.${payload}`).digest("hex")

export const signToken = (secret: string, kind: TokenKind, claims: { readonly org: string; readonly exp: number }) => {
  const payload = Buffer.from(JSON.stringify(claims)).toString("base64url")
  return `${kind}_${payload}.${sign(secret, kind, payload)}`
}

const tokenPattern = /^(pt|pl)_([A-Za-z0-9_-]{1,2000})\.([0-9a-f]{64})$/

const OrgClaim = Schema.Struct({ org: OrganizationId })

const parsePayload = (payload: string): unknown => {
  try {
    return JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))
  } catch {
    return undefined
  }
}

/** The organisation a token claims, unverified: whose secret to check it with. */
export const claimedOrganization = (kind: TokenKind, token: string): Option.Option<OrganizationId> => {
  const match = tokenPattern.exec(token)
  if (!match || match[1] !== kind) return Option.none()
  return Option.map(Schema.decodeUnknownOption(OrgClaim)(parsePayload(match[2]!)), (claims) => claims.org)
}

/** The claims of a genuine, unexpired token of `kind` signed with `secret`. */
export const checkToken = <C extends { readonly org: string; readonly exp: number }>(
  secret: string,
  kind: TokenKind,
  token: string,
  claims: Schema.Schema<C, any>,
  now: Date
): Either.Either<C, TokenRefusal> => {
  const match = tokenPattern.exec(token)
  if (!match || match[1] !== kind) return Either.left("Invalid")
  const expected = Buffer.from(sign(secret, kind, match[2]!), "hex")
  if (!timingSafeEqual(expected, Buffer.from(match[3]!, "hex"))) return Either.left("Invalid")
  const decoded = Schema.decodeUnknownOption(claims)(parsePayload(match[2]!))
  if (Option.isNone(decoded)) return Either.left("Invalid")
  return decoded.value.exp > now.getTime() ? Either.right(decoded.value) : Either.left("Expired")
}
