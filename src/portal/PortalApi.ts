import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { strict, Timestamp } from "../schema.ts"

const NonEmpty = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))

export const PortalTokenRequest = Schema.Struct({
  customerId: NonEmpty,
  organizationId: Schema.optional(NonEmpty)
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
  )
{}
