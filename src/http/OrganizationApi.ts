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
import { INVOICE_GRACE_HOURS, LATE_USAGE_DAYS, MAX_PAYMENT_INSTRUCTIONS } from "../organizations/Organizations.ts"
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
  }))
}).annotations(strict)

export class OrganizationApi extends HttpApiGroup.make("organization")
  .add(
    HttpApiEndpoint.get("settings", "/organization/settings")
      .addSuccess(Success(Schema.Struct({ organization: OrganizationSettingsJson }), { message: "Organization settings" }))
      .annotateContext(documented({
        summary: "Read the workspace's settings",
        description: "The settings of the API key's organisation, with the API rate limits in force for each route family."
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
          "applies to invoices finalised from then on.",
        errors: { 400: "The body fails its schema, or a setting is out of its range (the message says which)." }
      }))
  )
  .annotate(OpenApi.Description, "The workspace: its settings, its invoice number prefix and its API rate limits.")
{}
