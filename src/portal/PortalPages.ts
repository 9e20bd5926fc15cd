/**
 * The customer's pages on the HTTP server, outside `/api/v1` (as `/docs` is):
 * `GET /portal?token=` and `GET /pay/{invoiceId}?token=`. People open them,
 * so every answer is HTML, refusals included (401 for an invalid, tampered,
 * foreign or expired link; 404 for a record that is gone), never the JSON
 * envelope. They are read-only and never cached, never framed, and send no
 * Referer (the token is in the URL).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either } from "effect"
import { formatsFor, localeOf } from "./Format.ts"
import type { Html } from "./Html.ts"
import { contentSecurityPolicy, invoicePage, portalPage, refusalPage, refusalStatus } from "./Pages.ts"
import { PortalView } from "./PortalView.ts"

const respond = (page: Html, status: number) =>
  HttpServerResponse.text(page.text, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-store",
      "content-security-policy": contentSecurityPolicy,
      "referrer-policy": "no-referrer",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY"
    }
  })

const tokenOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://localhost").searchParams.get("token") ?? ""

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
    yield* router.get(
      "/portal",
      page((request, lang) =>
        Effect.map(views.portalPage(tokenOf(request)), (view) =>
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
              onRight: (invoice) => [invoicePage(invoice, formatsFor(lang)), 200] as const
            }))))
    )
  })
)
