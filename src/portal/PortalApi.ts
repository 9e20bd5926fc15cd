import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { strict, Timestamp } from "../schema.ts"
import { customerNotFound } from "../customers/CustomersApi.ts"
import { CustomerId } from "../ids.ts"

const NonEmpty = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))

export const PortalTokenRequest = Schema.Struct({
  customerId: CustomerId.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "The service's id of the customer the portal shows."
  }),
  organizationId: Schema.optional(NonEmpty).annotations({
    description: "Your organisation's id; when sent it must be the key's organisation (403 otherwise)."
  })
}).annotations(strict)

export const PortalToken = Schema.Struct({
  token: Schema.String,
  expiresAt: Timestamp,
  customerId: Schema.String,
  organizationId: Schema.String,
  /** The portal page for this token: `{origin}/portal?token=...`. */
  url: Schema.String
})

export class PortalApi extends HttpApiGroup.make("portal")
  .add(
    HttpApiEndpoint.post("token", "/portal/token")
      .setPayload(PortalTokenRequest)
      .addSuccess(Success(PortalToken, { message: "Portal token created" }))
      .annotateContext(documented({
        summary: "Mint a customer-portal token",
        description: "A short-lived signed token that opens the customer portal (balances, usage, invoices) for one " +
          "customer, to hand to that customer's browser. It grants nothing else.",
        errors: {
          403: "`organizationId` is sent and is not the key's organisation.",
          404: customerNotFound.byId
        }
      }))
  )
  .annotate(OpenApi.Description, "Portal: access tokens for the hosted customer portal.")
{}
