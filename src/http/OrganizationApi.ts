/**
 * The caller's own organisation over HTTP: all its settings, rate limits and
 * the invoice number prefix included (issue 27), read and changed through the
 * same service as `billing org settings` (`Organizations.updateSettings`), with
 * the same rules. Served from the HTTP kit's folder because
 * src/organizations/ sits below the kit (the kit authenticates with its API
 * keys) and may not import it. One route pair holds every setting.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import {
  BILLING_CONTACT,
  INVOICE_GRACE_HOURS,
  LATE_USAGE_DAYS,
  MAX_PAYMENT_INSTRUCTIONS,
  PAYMENT_TERMS_DAYS
} from "../organizations/Organizations.ts"
import { RateLimitsChange, RateLimitSchema } from "../organizations/RateLimits.ts"
import { strict, Timestamp } from "../schema.ts"
import { documented } from "./Documented.ts"
import { Success } from "./Envelope.ts"

const RateLimitInForce = Schema.Struct({
  ...RateLimitSchema.fields,
  source: Schema.Literal("DEFAULT", "ORGANIZATION").annotations({
    description: "`ORGANIZATION` when the workspace set this family's limit, `DEFAULT` when it is the built-in one."
  })
})

/** The billing contact customers are shown (hosted invoice page, PDF). */
export const BillingContact = Schema.Struct({
  email: Schema.NullOr(Schema.String).annotations({ description: "The billing contact's e-mail address; null when not set." }),
  addressLines: Schema.Array(Schema.String).annotations({
    description: "The billing contact's postal address, one line an element (free text); empty when not set."
  })
}).annotations({ identifier: "BillingContact" })

/** Payment terms as a request sends them: whole days in range, else 400 `validation_failed`. */
export const PaymentTermsDays = Schema.Number.pipe(
  Schema.int({ message: () => "payment terms must be a whole number of days" }),
  Schema.between(PAYMENT_TERMS_DAYS.min, PAYMENT_TERMS_DAYS.max, {
    message: () => `payment terms must be from ${PAYMENT_TERMS_DAYS.min} to ${PAYMENT_TERMS_DAYS.max} days`
  })
)

const ContactEmail = Schema.String.pipe(
  Schema.maxLength(BILLING_CONTACT.emailMax, { message: () => `must be at most ${BILLING_CONTACT.emailMax} characters` }),
  Schema.pattern(/^$|^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "must be an e-mail address (or empty to clear it)" })
)

const AddressLine = Schema.String.pipe(
  Schema.filter((line) => line.trim().length > 0 || "must not be blank"),
  Schema.maxLength(BILLING_CONTACT.lineMax, { message: () => `must be at most ${BILLING_CONTACT.lineMax} characters` }),
  Schema.pattern(/^[^\r\n]*$/, { message: () => "must be one line (send one element a line)" })
)

const BillingContactChange = Schema.Struct({
  email: Schema.optional(Schema.NullOr(ContactEmail).annotations({
    description: `The billing contact's e-mail address, at most ${BILLING_CONTACT.emailMax} characters; null or "" clears it.`
  })),
  addressLines: Schema.optional(Schema.NullOr(
    Schema.Array(AddressLine).pipe(
      Schema.maxItems(BILLING_CONTACT.lines, { message: () => `must be at most ${BILLING_CONTACT.lines} lines` })
    )
  ).annotations({
    description: `The postal address, one line an element: at most ${BILLING_CONTACT.lines} lines of 1 to ` +
      `${BILLING_CONTACT.lineMax} characters; null or [] clears it.`
  }))
}).annotations(strict)

export const OrganizationSettingsJson = Schema.Struct({
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
  rateLimits: Schema.Struct({ signals: RateLimitInForce, reads: RateLimitInForce, writes: RateLimitInForce }).annotations({
    description: "The API rate limits in force, per API key and route family, counted in each API process (docs/api.md)."
  }),
  paymentTermsDays: Schema.Number.annotations({
    description: "Days after an invoice becomes final that it is due (its `dueDate`), for every customer without " +
      "terms of its own (0: due at once)."
  }),
  billingContact: BillingContact.annotations({
    description: "Who customers contact about their invoices, shown on the hosted invoice page."
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}).annotations({ identifier: "OrganizationSettings" })

export const OrganizationSettingsChange = Schema.Struct({
  name: Schema.optional(Schema.String.annotations({ description: "The workspace's name, 1 to 120 characters." })),
  reservedWalletEnabled: Schema.optional(Schema.Boolean.annotations({ description: "Turns the Reserved Wallet on or off." })),
  paymentInstructions: Schema.optional(Schema.NullOr(Schema.String).annotations({
    description: `How customers pay an OPEN invoice, shown on its hosted page; at most ${MAX_PAYMENT_INSTRUCTIONS} ` +
      "characters; null or an empty string clears it."
  })),
  lateUsageDays: Schema.optional(Schema.Number.annotations({
    description: `How old a signal's \`timestamp\` may be, in whole days (${LATE_USAGE_DAYS.min} to ${LATE_USAGE_DAYS.max}).`
  })),
  invoiceGraceHours: Schema.optional(Schema.Number.annotations({
    description: `How long a cycle-end usage invoice stays DRAFT, in whole hours (${INVOICE_GRACE_HOURS.min} to ` +
      `${INVOICE_GRACE_HOURS.max}).`
  })),
  invoiceNumberPrefix: Schema.optional(Schema.String.annotations({
    description: "What invoice numbers finalised from now on start with: 0 to 20 characters from letters, digits and " +
      "`. _ / -`. A number already given never changes."
  })),
  rateLimits: Schema.optional(RateLimitsChange.annotations({
    description: "API rate limits by route family (`signals`, `reads`, `writes`), each `{perSecond, burst}`: a family " +
      "sent changes, `null` puts it back to the default, one left out stays. In force within half a second."
  })),
  paymentTermsDays: Schema.optional(PaymentTermsDays.annotations({
    description: `Days after an invoice becomes final that it is due, in whole days (${PAYMENT_TERMS_DAYS.min} to ` +
      `${PAYMENT_TERMS_DAYS.max}), for customers without terms of their own. Applies to invoices finalised from then on.`
  })),
  billingContact: Schema.optional(BillingContactChange.annotations({
    description: "The billing contact shown to customers: `email` and `addressLines`, each changed when sent " +
      "(null clears it) and kept when left out."
  }))
}).annotations(strict)

export class OrganizationApi extends HttpApiGroup.make("organization")
  .add(
    HttpApiEndpoint.get("settings", "/organization/settings")
      .addSuccess(Success(Schema.Struct({ organization: OrganizationSettingsJson }), { message: "Organization settings" }))
      .annotateContext(documented({
        summary: "Read the workspace's settings",
        description: "The settings of the API key's organisation, with the API rate limits in force for each route " +
          "family, the payment terms and the billing contact."
      }))
  )
  .add(
    HttpApiEndpoint.patch("updateSettings", "/organization/settings")
      .setPayload(OrganizationSettingsChange)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), organization: OrganizationSettingsJson }), {
        message: "Organization settings updated"
      }))
      .annotateContext(documented({
        summary: "Change the workspace's settings",
        description: "Changes the settings sent, as `billing org settings` does, and leaves the others. Rate limits " +
          "reach every API process within half a second (the key cache's lifetime); a new `invoiceNumberPrefix` " +
          "or `paymentTermsDays` applies to invoices finalised from then on.",
        errors: { 400: "The body fails its schema, or a setting is out of its range (the message says which)." }
      }))
  )
  .annotate(
    OpenApi.Description,
    "The workspace: its settings, its invoice number prefix, payment terms, billing contact and API rate limits."
  )
{}
