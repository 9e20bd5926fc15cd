/**
 * Hosted invoice links (`pl_` tokens, see SignedToken.ts): `/pay/{invoiceId}?token=`,
 * naming one invoice of one customer of one organisation. Minted by
 * `POST /invoices/{id}/pay-link` (24 hours) and by the portal page for each
 * invoice it lists (until the portal token expires: the portal never widens
 * the access its token grants). The invoice's PDF sits beside its page,
 * `/pay/{invoiceId}/pdf?token=`, opened by the same token: whoever may see the
 * page may download its PDF, and no one else (docs/billing.md "PDF").
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

const withToken = (path: string, token: string) => `${path}?token=${encodeURIComponent(token)}`

/** The hosted invoice page's path for a signed `pl_` token of `invoiceId`. */
export const invoicePagePathOfToken = (invoiceId: string, token: string) =>
  withToken(`/pay/${encodeURIComponent(invoiceId)}`, token)

/** The hosted invoice's PDF, beside its page: the same token opens it. */
export const invoicePdfPathOfToken = (invoiceId: string, token: string) =>
  withToken(`/pay/${encodeURIComponent(invoiceId)}/pdf`, token)

/**
 * The PDF's link as the hosted page writes it: relative to the page
 * (`/pay/{invoiceId}?token=`), so it stays beside the page whatever path
 * prefix `BILLING_PUBLIC_URL` puts in front of it.
 */
export const invoicePdfHrefOnPage = (invoiceId: string, token: string) =>
  withToken(`${encodeURIComponent(invoiceId)}/pdf`, token)

/** The hosted invoice page's path for a claims set signed with `secret`. */
export const invoicePath = (secret: string, claims: InvoiceLinkClaims) =>
  invoicePagePathOfToken(claims.invoiceId, signToken(secret, "pl", claims))

/** The hosted invoice's PDF for a claims set signed with `secret`. */
export const invoicePdfPath = (secret: string, claims: InvoiceLinkClaims) =>
  invoicePdfPathOfToken(claims.invoiceId, signToken(secret, "pl", claims))
