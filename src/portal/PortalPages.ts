/**
 * The customer's pages on the HTTP server, outside `/api/v1` (as `/docs` is):
 * `GET /portal?token=` and `GET /pay/{invoiceId}?token=`, and the hosted
 * invoice's PDF beside it, `GET /pay/{invoiceId}/pdf?token=` (the same signed
 * link, checked by the same code as the page). People open them, so every
 * refusal is HTML (401 for an invalid, tampered, foreign or expired link; 404
 * for a record that is gone), never the JSON envelope. They are read-only and
 * never cached, never framed, and send no Referer (the token is in the URL).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either, Option } from "effect"
import { InvoicePdfs } from "../billing/InvoicePdfs.ts"
import { pdfResponse } from "../billing/InvoicesHttp.ts"
import { invoicePdfHrefOnPage } from "../links/InvoiceLinks.ts"
import { claimedOrganization } from "../links/SignedToken.ts"
import { formatsFor, localeOf } from "./Format.ts"
import type { Html } from "./Html.ts"
import { contentSecurityPolicy, invoicePage, portalPage, refusalPage, refusalStatus } from "./Pages.ts"
import { type PageRefusal, PortalView, usageRangeOf } from "./PortalView.ts"

/** What every answer of these pages carries: never cached, never framed, no Referer. */
const pageHeaders = {
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY"
} as const

const respond = (page: Html, status: number) =>
  HttpServerResponse.text(page.text, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: { ...pageHeaders, "content-security-policy": contentSecurityPolicy }
  })

const tokenOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://localhost").searchParams.get("token") ?? ""

/** The portal's usage chart range (`usage=`): what it does not know shows the current cycle. */
const usageOf = (request: HttpServerRequest.HttpServerRequest) =>
  usageRangeOf(new URL(request.url, "http://localhost").searchParams.get("usage"))

/** Renders a page from the request; a defect is logged and answered with the HTML 500 page. */
const page = <R>(
  build: (request: HttpServerRequest.HttpServerRequest, lang: string) => Effect.Effect<readonly [Html, number], never, R>
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const lang = localeOf(request.headers["accept-language"])
    const [body, status] = yield* build(request, lang).pipe(
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.logError("customer page failed", cause), [refusalPage("Failed", lang), 500] as const)
      )
    )
    return respond(body, status)
  })

export const PortalPagesLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const views = yield* PortalView
    const pdfs = yield* InvoicePdfs

    /**
     * The hosted invoice's PDF: the link is checked exactly as the page checks
     * it (its signature, expiry, invoice and customer), then the invoice is
     * rendered for the organisation and customer the link names. Shown in the
     * browser (`inline`), named for the invoice when saved.
     */
    const hostedPdf = (invoiceId: string) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const lang = localeOf(request.headers["accept-language"])
        const token = tokenOf(request)
        const refused = (refusal: PageRefusal) => respond(refusalPage(refusal, lang), refusalStatus(refusal))
        const view = yield* views.invoicePage(invoiceId, token)
        if (Either.isLeft(view)) return refused(view.left)
        // The page's check verified the token, so the organisation it names is the one that signed it.
        const organizationId = claimedOrganization("pl", token)
        if (Option.isNone(organizationId)) return refused("Invalid")
        return yield* pdfs.render(organizationId.value, invoiceId, view.right.invoice.customerId).pipe(
          Effect.map((pdf) => pdfResponse(pdf, "inline", pageHeaders)),
          Effect.catchTag("InvoiceNotFound", () => Effect.succeed(refused("NotFound")))
        )
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(Effect.logError("customer page failed", cause), Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
            respond(refusalPage("Failed", localeOf(request.headers["accept-language"])), 500)))
        )
      )
    yield* router.get(
      "/portal",
      page((request, lang) =>
        Effect.map(views.portalPage(tokenOf(request), undefined, usageOf(request)), (view) =>
          Either.match(view, {
            onLeft: (refusal) => [refusalPage(refusal, lang), refusalStatus(refusal)] as const,
            onRight: (portal) => [portalPage(portal, formatsFor(lang)), 200] as const
          })))
    )
    yield* router.get(
      "/pay/:invoiceId",
      Effect.flatMap(HttpRouter.params, (params) =>
        page((request, lang) =>
          Effect.map(views.invoicePage(params["invoiceId"] ?? "", tokenOf(request)), (view) =>
            Either.match(view, {
              onLeft: (refusal) => [refusalPage(refusal, lang), refusalStatus(refusal)] as const,
              onRight: (invoice) =>
                [invoicePage(invoice, formatsFor(lang), { pdf: invoicePdfHrefOnPage(invoice.invoice.id, tokenOf(request)) }), 200] as const
            }))))
    )
    yield* router.get("/pay/:invoiceId/pdf", Effect.flatMap(HttpRouter.params, (params) => hostedPdf(params["invoiceId"] ?? "")))
  })
)
