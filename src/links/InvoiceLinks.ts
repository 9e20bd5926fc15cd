/**
 * Hosted invoice links (`pl_` tokens, see SignedToken.ts): `/pay/{invoiceId}?token=`,
 * naming one invoice of one customer of one organisation. Minted by
 * `POST /invoices/{id}/pay-link` (24 hours) and by the portal page for each
 * invoice it lists (until the portal token expires: the portal never widens
 * the access its token grants).
 */
import { Schema } from "effect"
import { CustomerId, OrganizationId } from "../ids.ts"
import { signToken } from "./SignedToken.ts"

/** Minutes a pay link stays valid. */
export const PAY_LINK_MINUTES = 60 * 24

export const InvoiceLinkClaims = Schema.Struct({
  org: OrganizationId,
  customerId: CustomerId,
  invoiceId: Schema.String,
  exp: Schema.Number
})
export type InvoiceLinkClaims = typeof InvoiceLinkClaims.Type

/** The hosted invoice page's path for a claims set signed with `secret`. */
export const invoicePath = (secret: string, claims: InvoiceLinkClaims) =>
  `/pay/${encodeURIComponent(claims.invoiceId)}?token=${encodeURIComponent(signToken(secret, "pl", claims))}`
