/** The invoices group's handlers (InvoicesApi.ts) over the Invoices, Taxes and Purchases services. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { toPage } from "../http/Pagination.ts"
import { requestOrigin } from "../links/PublicUrl.ts"
import { InvoicePdfs, type RenderedInvoicePdf } from "./InvoicePdfs.ts"
import { Invoices } from "./Invoices.ts"
import { InvoicesApi } from "./InvoicesApi.ts"
import { Purchases } from "./Purchases.ts"
import { Taxes } from "./Taxes.ts"

/** A rendered invoice as the file it is: `application/pdf`, named for the invoice, for `disposition`. */
export const pdfResponse = (pdf: RenderedInvoicePdf, disposition: "attachment" | "inline", headers: Record<string, string> = {}) =>
  HttpServerResponse.uint8Array(pdf.bytes, {
    contentType: "application/pdf",
    headers: {
      "content-disposition": `${disposition}; filename="${pdf.fileName}"`,
      "cache-control": "private, no-store",
      "x-content-type-options": "nosniff",
      ...headers
    }
  })

export const InvoicesHttpLive = HttpApiBuilder.group(groupApi(InvoicesApi), "invoices", (handlers) =>
  Effect.gen(function*() {
    const invoices = yield* Invoices
    const taxes = yield* Taxes
    const purchases = yield* Purchases
    const pdfs = yield* InvoicePdfs
    return handlers
      .handle("upcoming", ({ urlParams }) =>
        forOrganization((org) => purchases.upcoming(org, urlParams)).pipe(Effect.map((list) => ({ invoices: list }))))
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => invoices.list(org, { customerId: urlParams.customerId, page: toPage(urlParams) })).pipe(
          Effect.map((list) => ({ invoices: list }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => invoices.get(org, path.id)).pipe(Effect.map((invoice) => ({ invoice }))))
      .handle("pdf", ({ path }) =>
        forOrganization((org) => pdfs.render(org, path.id)).pipe(Effect.map((pdf) => pdfResponse(pdf, "attachment"))))
      .handle("payLink", ({ path }) =>
        Effect.flatMap(requestOrigin, (origin) => forOrganization((org) => invoices.payLink(org, path.id, origin))))
      .handle("recordPayment", ({ path, payload }) => forOrganization((org) => invoices.pay(org, path.id, payload)))
      .handle("createCreditNote", ({ path, payload }) => forOrganization((org) => invoices.credit(org, path.id, payload)))
      .handle("listCreditNotes", ({ path }) =>
        forOrganization((org) => invoices.creditNotes(org, path.id)).pipe(Effect.map((creditNotes) => ({ creditNotes }))))
      .handle("listPayments", ({ urlParams }) =>
        forOrganization((org) => invoices.listPayments(org, { customerId: urlParams.customerId, page: toPage(urlParams) }))
          .pipe(Effect.map((payments) => ({ payments }))))
      .handle("getPayment", ({ path }) =>
        forOrganization((org) => invoices.getPayment(org, path.id)).pipe(Effect.map((payment) => ({ payment }))))
      .handle("listTaxes", ({ urlParams }) =>
        forOrganization((org) => taxes.list(org, urlParams.active === "true", toPage(urlParams))).pipe(Effect.map((list) => ({ taxes: list }))))
      .handle("createTax", ({ payload }) =>
        forOrganization((org) => taxes.create(org, payload)).pipe(Effect.map((tax) => ({ created: true as const, tax }))))
      .handle("getTax", ({ path }) => forOrganization((org) => taxes.get(org, path.id)).pipe(Effect.map((tax) => ({ tax }))))
      .handle("updateTax", ({ path, payload }) =>
        forOrganization((org) => taxes.update(org, path.id, payload)).pipe(
          Effect.map((tax) => ({ updated: true as const, tax }))
        ))
      .handle("void", ({ path }) =>
        forOrganization((org) => invoices.voidInvoice(org, path.id)).pipe(Effect.map((invoice) => ({ voided: true as const, invoice }))))
  }))
