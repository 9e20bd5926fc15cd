/**
 * The invoices group: invoices (the upcoming ones computed, never stored),
 * hosted pay links, payments, credit notes and the tax rates invoices apply.
 * Handlers: InvoicesHttp.ts; the services: Invoices.ts, Taxes.ts, and
 * Purchases.ts for the upcoming invoices.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { ActiveParam, PageParams } from "../http/Pagination.ts"
import { CustomerId } from "../ids.ts"
import { ExternalId, Timestamp } from "../schema.ts"
import { CustomerFilter, RecordIdPath } from "./BillingParams.ts"
import { CreditNote, CreditNoteCreate } from "./CreditNote.ts"
import { CreditNoteCreated, Invoice, Payment, PaymentCreate, PaymentRecorded } from "./Invoice.ts"
import { Tax, TaxCreate, TaxUpdate } from "./Taxes.ts"

/** An invoice the cycle job would issue, computed and never stored: it has no id yet. */
export const UpcomingInvoice = Schema.Struct({
  ...Invoice.fields,
  id: Schema.Null.annotations({ description: "Always null: the invoice is not issued yet." }),
  number: Schema.Null.annotations({ description: "Always null: a number is given when an invoice is issued final." })
})

const UpcomingParams = Schema.Struct({
  customerId: Schema.optional(CustomerId).annotations({
    description: "The service's customer id. Required unless `externalId` is sent; wins when both are."
  }),
  externalId: Schema.optional(ExternalId).annotations({
    description: "Your own id of an active customer, used when `customerId` is not sent."
  })
})

export const PayLink = Schema.Struct({ invoiceId: Schema.String, url: Schema.String, expiresAt: Timestamp })

/** An invoice's PDF (src/billing/InvoicePdf.ts): the bytes themselves, not an envelope. */
export const InvoicePdfFile = HttpApiSchema.Uint8Array({ contentType: "application/pdf" }).annotations({
  description: "The invoice as an A4 PDF document: its number, status, dates, lines, taxes and totals, the " +
    "organisation's billing contact and the customer billed.",
  jsonSchema: { type: "string", format: "binary" }
})

export class InvoicesApi extends HttpApiGroup.make("invoices")
  .add(
    HttpApiEndpoint.get("upcoming", "/invoices/upcoming")
      .setUrlParams(UpcomingParams)
      .addSuccess(Success(Schema.Struct({ invoices: Schema.Array(UpcomingInvoice) }), { message: "Upcoming invoices" }))
      .annotateContext(documented({
        summary: "Preview a customer's upcoming invoices",
        description: "What the cycle job would issue at the end of the current cycle if no more usage arrived, " +
          "computed by the cycle job's own code and never stored (`id` and `number` null): the ending cycle's USAGE " +
          "invoice (when it bills anything) and the next cycle's PLAN invoice, a scheduled plan change applied, with " +
          "the active taxes and the auto-payment the wallet would make now. A SCHEDULED purchase: its first PLAN " +
          "invoice. No live purchase: an empty list.",
        errors: {
          400: "Neither `customerId` nor `externalId` is sent, or the `externalId` is malformed.",
          404: "No customer with this id, or no active customer with this `externalId`."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/invoices")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ invoices: Schema.Array(Invoice) }), { message: "Invoices" }))
      .annotateContext(documented({
        summary: "List invoices",
        description: "A page of the workspace's invoices in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/invoices/:id")
      .setPath(RecordIdPath)
      .addSuccess(Success(Schema.Struct({ invoice: Invoice }), { message: "Invoice" }))
      .annotateContext(documented({
        summary: "Get an invoice",
        description: "One invoice with its lines, taxes and totals.",
        errors: { 404: "No invoice with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.get("pdf", "/invoices/:id/pdf")
      .setPath(RecordIdPath)
      .addSuccess(InvoicePdfFile)
      .annotateContext(documented({
        summary: "Download an invoice as a PDF",
        description: "The invoice as a PDF document (`application/pdf`, not the JSON envelope), for any status: " +
          "a DRAFT says it is not final, a VOID one that nothing is due. Amounts are printed digit for digit as " +
          "`GET /invoices/{id}` answers them. The answer names the file (`Content-Disposition: attachment; " +
          "filename=\"INV-000042.pdf\"`). A refusal is the JSON envelope, like every other route's.",
        errors: { 404: "No invoice with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("payLink", "/invoices/:id/pay-link")
      .setPath(RecordIdPath)
      .addSuccess(Success(PayLink, { message: "Pay link created" }))
      .annotateContext(documented({
        summary: "Mint a hosted pay link for an invoice",
        description: "A short-lived URL of the invoice's hosted payment page, for an OPEN invoice only.",
        errors: {
          404: "No invoice with this id in the workspace.",
          409: "The invoice is not OPEN: a DRAFT (inside its grace period) is never payable, PAID and VOID owe nothing."
        }
      }))
  )
  .add(
    HttpApiEndpoint.post("recordPayment", "/invoices/:id/payments")
      .setPath(RecordIdPath)
      .setPayload(PaymentCreate)
      .addSuccess(
        Success(PaymentRecorded, {
          status: 201,
          message: (result) =>
            result.replayed
              ? "Already processed: this idempotencyKey was used before; nothing was recorded again"
              : "Payment recorded"
        })
      )
      .annotateContext(documented({
        summary: "Record a payment of an invoice",
        description: "Records a payment received outside the service (a bank transfer, a cheque) for an OPEN " +
          "invoice: all that is due (`amountDue`: the total less its credit notes), method `MANUAL`, with an optional `reference`; the invoice becomes PAID. " +
          "The same rules as `billing invoice pay`. Send an `idempotencyKey` to make a retry safe: a repeat of the " +
          "same request (same invoice, same reference) records nothing and answers the first payment again with " +
          "`replayed: true`, even though the invoice is PAID by then.",
        errors: {
          404: "No invoice with this id in the workspace.",
          409: "The invoice is not OPEN: a DRAFT (inside its grace period) is never payable, PAID and VOID owe nothing.",
          422: "The `idempotencyKey` was used before with a different request (another invoice or reference). " +
            "Nothing is recorded."
        }
      }))
  )
  .add(
    HttpApiEndpoint.post("createCreditNote", "/invoices/:id/credit-notes")
      .setPath(RecordIdPath)
      .setPayload(CreditNoteCreate)
      .addSuccess(
        Success(CreditNoteCreated, {
          status: 201,
          message: (result) =>
            result.replayed
              ? "Already processed: this idempotencyKey was used before; nothing was created again"
              : "Credit note created"
        })
      )
      .annotateContext(documented({
        summary: "Credit an invoice (a credit note)",
        description: "Corrects an OPEN or PAID invoice without editing it: a credit note of `amount` (that much of " +
          "the total, taxes included) or of `lines` (named lines, by their place in `lines` from 1, with the " +
          "invoice's taxes on them), with a `reason`, numbered `CN-000001` in a sequence of its own. On an OPEN " +
          "invoice it lowers `amountDue` (at 0 the invoice becomes PAID, with no payment); on a PAID invoice its " +
          "amount is credited to the customer's wallet (a wallet ledger entry of type ADJUSTMENT). Never more than " +
          "remains: the total less earlier credit notes. The answer carries the note and the invoice as it is now. " +
          "Send an `idempotencyKey` to make a retry safe.",
        errors: {
          400: "The body fails its schema: neither or both of `amount` and `lines`, an amount not positive or finer " +
            "than a cent, a line named twice, an empty `reason`.",
          404: "No invoice with this id in the workspace.",
          409: "The invoice is a DRAFT (not final yet) or VOID (nothing is owed): `invoice_not_creditable`.",
          422: "More than remains to credit, of the invoice or of a line (`credit_exceeds_remaining`); a line the " +
            "invoice does not have (`unknown_invoice_line`); lines that come to less than a cent " +
            "(`credit_note_empty`); the `idempotencyKey` used before with another request (`idempotency_key_reused`). " +
            "Nothing is written."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("listCreditNotes", "/invoices/:id/credit-notes")
      .setPath(RecordIdPath)
      .addSuccess(Success(Schema.Struct({ creditNotes: Schema.Array(CreditNote) }), { message: "Credit notes" }))
      .annotateContext(documented({
        summary: "List an invoice's credit notes",
        description: "The credit notes against one invoice, oldest first (the same as the invoice's `creditNotes`).",
        errors: { 404: "No invoice with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.get("listPayments", "/payments")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ payments: Schema.Array(Payment) }), { message: "Payments" }))
      .annotateContext(documented({
        summary: "List payments",
        description: "A page of the workspace's payments in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("getPayment", "/payments/:id")
      .setPath(RecordIdPath)
      .addSuccess(Success(Schema.Struct({ payment: Payment }), { message: "Payment" }))
      .annotateContext(documented({
        summary: "Get a payment",
        description: "One payment and the invoice it paid.",
        errors: { 404: "No payment with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.get("listTaxes", "/taxes")
      .setUrlParams(Schema.Struct({ ...PageParams, ...ActiveParam }))
      .addSuccess(Success(Schema.Struct({ taxes: Schema.Array(Tax) }), { message: "Taxes" }))
      .annotateContext(documented({
        summary: "List taxes",
        description: "The workspace's taxes, oldest first, archived ones included; `active=true` keeps the taxes " +
          "that apply to new invoices."
      }))
  )
  .add(
    HttpApiEndpoint.post("createTax", "/taxes")
      .setPayload(TaxCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), tax: Tax }), { status: 201, message: "Tax created" })
      )
      .annotateContext(documented({
        summary: "Create a tax",
        description: "A tax rate applied to the invoices created from now on while it is active."
      }))
  )
  .add(
    HttpApiEndpoint.get("getTax", "/taxes/:id")
      .setPath(RecordIdPath)
      .addSuccess(Success(Schema.Struct({ tax: Tax }), { message: "Tax" }))
      .annotateContext(documented({
        summary: "Get a tax",
        description: "One tax by id, active or not.",
        errors: { 404: "No tax with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.patch("updateTax", "/taxes/:id")
      .setPath(RecordIdPath)
      .setPayload(TaxUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), tax: Tax }), { message: "Tax updated" }))
      .annotateContext(documented({
        summary: "Update a tax",
        description: "Changes the fields sent; invoices already created keep the tax they were created with.",
        errors: { 404: "No tax with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("void", "/invoices/:id/void")
      .setPath(RecordIdPath)
      .addSuccess(Success(Schema.Struct({ voided: Schema.Literal(true), invoice: Invoice }), { message: "Invoice voided" }))
      .annotateContext(documented({
        summary: "Void an invoice",
        description: "Voids an OPEN invoice, as `billing invoice void`: it becomes VOID (`voidedAt` set) and nothing " +
          "is due on it any more; an `invoice.voided` event is sent to the endpoints subscribed to it. Nothing else " +
          "moves: a wallet grant or balance the invoice's purchase gave stays, and the purchase goes on (cancel it " +
          "with `POST /purchases/{id}/cancel`). A DRAFT cannot be voided until it is final; a PAID invoice is " +
          "corrected with a credit note instead.",
        errors: {
          404: "No invoice with this id in the workspace.",
          409: "The invoice is not OPEN (`invoice_not_open`): a DRAFT (inside its grace period), a PAID one (credit " +
            "it instead) or one VOID already. Nothing changes."
        }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Invoices, payments, credit notes and taxes: the documents billing produces, hosted pay links, and the tax " +
      "rates applied."
  )
{}
