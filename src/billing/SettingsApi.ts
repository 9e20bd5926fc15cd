/**
 * The caller's organisation and its settings over HTTP (`GET`/`PATCH
 * /organization`): the same settings `billing org set` changes, through the
 * same service (`Organizations.updateSettings`), with the same rules.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { documented } from "../http/Documented.ts"
import { Success } from "../http/Envelope.ts"
import { strict } from "../schema.ts"
import { INVOICE_GRACE_HOURS, LATE_USAGE_DAYS, MAX_PAYMENT_INSTRUCTIONS } from "../organizations/Organizations.ts"

export const OrganizationView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  currencyCode: Schema.String,
  reservedWalletEnabled: Schema.Boolean,
  paymentInstructions: Schema.NullOr(Schema.String).annotations({
    description: "How customers pay an OPEN invoice, shown as plain text on its hosted page; null when not set."
  }),
  lateUsageDays: Schema.Number.annotations({ description: "How old a signal's `timestamp` may be, in days." }),
  invoiceGraceHours: Schema.Number.annotations({
    description: "How long a cycle-end usage invoice stays DRAFT for late usage, in hours (0: final at once)."
  }),
  invoiceNumberPrefix: Schema.String.annotations({
    description: "What invoice numbers start with (`INV-` in `INV-000042`). A change applies to invoices finalised " +
      "afterwards; a number already given never changes."
  }),
  createdAt: Schema.Date,
  updatedAt: Schema.Date
}).annotations({ identifier: "Organization" })

export const OrganizationUpdate = Schema.Struct({
  name: Schema.optional(Schema.String.annotations({ description: "1 to 120 characters." })),
  reservedWalletEnabled: Schema.optional(Schema.Boolean).annotations({
    description: "Whether customers' balances show the Reserved Wallet."
  }),
  paymentInstructions: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: `At most ${MAX_PAYMENT_INSTRUCTIONS} characters; null or "" clears them.`
  }),
  lateUsageDays: Schema.optional(Schema.Int).annotations({
    description: `A whole number of days, ${LATE_USAGE_DAYS.min} to ${LATE_USAGE_DAYS.max}.`
  }),
  invoiceGraceHours: Schema.optional(Schema.Int).annotations({
    description: `A whole number of hours, ${INVOICE_GRACE_HOURS.min} to ${INVOICE_GRACE_HOURS.max}.`
  }),
  invoiceNumberPrefix: Schema.optional(Schema.String).annotations({
    description: "0 to 20 characters from letters, digits and `. _ / -`."
  })
}).annotations(strict)

export class OrganizationApi extends HttpApiGroup.make("organization")
  .add(
    HttpApiEndpoint.get("get", "/organization")
      .addSuccess(Success(Schema.Struct({ organization: OrganizationView }), { message: "Organization" }))
      .annotateContext(documented({
        summary: "Read the organisation's settings",
        description: "The organisation the API key belongs to, with its settings."
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/organization")
      .setPayload(OrganizationUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), organization: OrganizationView }), { message: "Organization updated" })
      )
      .annotateContext(documented({
        summary: "Change the organisation's settings",
        description: "Changes the settings sent and leaves the others as they are (`billing org set` does the same). " +
          "A new `invoiceNumberPrefix` applies to invoices finalised from then on.",
        errors: { 400: "A setting out of its range, or a malformed body." }
      }))
  )
  .annotate(OpenApi.Description, "Organization: the workspace the API key belongs to, and its settings.")
{}
