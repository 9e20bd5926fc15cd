/**
 * Webhook endpoints and their deliveries over HTTP (issue 27): what `billing
 * webhook add|list|update|enable|disable|rotate-secret|remove|deliveries|retry`
 * do, through the same services (Endpoints.ts, Deliveries.ts). A signing secret
 * is shown whole only in the answers of create and rotate-secret, masked
 * (`maskSecret`) everywhere else.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { documented } from "../http/Documented.ts"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { Money, strict, Timestamp } from "../schema.ts"
import { Delivery, DeliveryStatus, EndpointCreate, EndpointUpdate, EventType } from "./Webhook.ts"

export const WebhookEndpointJson = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(EventType),
  threshold: Schema.NullOr(Money).annotations({
    description: "USD: the drop and recovery level for customers without an alert level of their own; null: none."
  }),
  enabled: Schema.Boolean,
  secret: Schema.String.annotations({
    description: "The signing secret (`whsec_...`, HMAC-SHA256 key of `X-Service-Signature`). Whole only in the " +
      "answers of create and rotate-secret; elsewhere masked as `whsec_****` and its last 4 characters."
  }),
  removedAt: Schema.NullOr(Timestamp).annotations({ description: "When it was removed; null while it is live." }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}).annotations({ identifier: "WebhookEndpoint" })

export const WebhookDeliveryJson = Schema.Struct(Delivery.fields).annotations({ identifier: "WebhookDelivery" })

const EndpointIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The endpoint's id (`whe_...`), as returned on create." })
})
const DeliveryIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The delivery's id (`whd_...`)." })
})

const EndpointResult = Schema.Struct({ endpoint: WebhookEndpointJson })
const DeliveryResult = Schema.Struct({ delivery: WebhookDeliveryJson })

const endpointNotFound = "No live webhook endpoint with this id in the workspace (a removed one is not found either)."

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list", "/webhook-endpoints")
      .setUrlParams(Schema.Struct({
        ...PageParams,
        includeRemoved: Schema.optional(Schema.Literal("true", "false")).annotations({
          description: "`true` lists removed endpoints too; by default only live ones are listed."
        })
      }))
      .addSuccess(Success(Schema.Struct({ endpoints: Schema.Array(WebhookEndpointJson) }), { message: "Webhook endpoints" }))
      .annotateContext(documented({
        summary: "List webhook endpoints",
        description: "A page of the workspace's webhook endpoints in creation order, secrets masked."
      }))
  )
  .add(
    HttpApiEndpoint.post("create", "/webhook-endpoints")
      .setPayload(Schema.Struct(EndpointCreate.fields).annotations(strict))
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), endpoint: WebhookEndpointJson }), {
          status: 201,
          message: "Webhook endpoint created: keep its secret, it is shown whole only now"
        })
      )
      .annotateContext(documented({
        summary: "Subscribe a webhook endpoint",
        description: "Subscribes an absolute http or https URL to events (`events`, by default `wallet.balance.update` " +
          "and `wallet.balance.drop`), with an optional USD `threshold` (the drop and recovery level for customers " +
          "without one of their own). The answer carries the signing secret whole, the only time besides " +
          "rotate-secret: verify every delivery's `X-Service-Signature` with it (docs/webhooks.md)."
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/webhook-endpoints/:id")
      .setPath(EndpointIdPath)
      .addSuccess(Success(EndpointResult, { message: "Webhook endpoint" }))
      .annotateContext(documented({
        summary: "Get a webhook endpoint",
        description: "One live endpoint, its secret masked.",
        errors: { 404: endpointNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/webhook-endpoints/:id")
      .setPath(EndpointIdPath)
      .setPayload(Schema.Struct(EndpointUpdate.fields).annotations(strict))
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), endpoint: WebhookEndpointJson }), {
        message: "Webhook endpoint updated"
      }))
      .annotateContext(documented({
        summary: "Update a webhook endpoint",
        description: "Changes the fields sent (`url`, `events`, `threshold`, null removing it, `enabled`). " +
          "`enabled: false` stops deliveries: events triggered while it is disabled are never sent to it, and " +
          "deliveries queued before wait until it is enabled again. The secret is masked in the answer.",
        errors: { 404: endpointNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/webhook-endpoints/:id")
      .setPath(EndpointIdPath)
      .addSuccess(Success(Schema.Struct({ removed: Schema.Literal(true), endpoint: WebhookEndpointJson }), {
        message: "Webhook endpoint removed"
      }))
      .annotateContext(documented({
        summary: "Remove a webhook endpoint",
        description: "Removes the endpoint: nothing is deleted, its pending deliveries are cancelled, its delivery " +
          "history stays readable (`GET /webhook-endpoints/{id}/deliveries`, and `includeRemoved=true` on the list).",
        errors: { 404: endpointNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/webhook-endpoints/:id/rotate-secret")
      .setPath(EndpointIdPath)
      .addSuccess(Success(Schema.Struct({ rotated: Schema.Literal(true), endpoint: WebhookEndpointJson }), {
        message: "Secret rotated: keep the new secret, it is shown whole only now"
      }))
      .annotateContext(documented({
        summary: "Rotate a webhook endpoint's secret",
        description: "A new signing secret, shown whole in this answer only. It takes effect at once: every later " +
          "attempt, retries of earlier events included, is signed with it.",
        errors: { 404: endpointNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/webhook-endpoints/:id/deliveries")
      .setPath(EndpointIdPath)
      .setUrlParams(Schema.Struct({
        ...PageParams,
        status: Schema.optional(DeliveryStatus).annotations({ description: "Keeps deliveries in this status." }),
        eventId: Schema.optional(Schema.String).annotations({ description: "Keeps the deliveries of this event." })
      }))
      .addSuccess(Success(Schema.Struct({ deliveries: Schema.Array(WebhookDeliveryJson) }), { message: "Webhook deliveries" }))
      .annotateContext(documented({
        summary: "List an endpoint's deliveries",
        description: "A page of the endpoint's deliveries in creation order, each with every attempt (start, " +
          "duration, status code, error) and, while PENDING, the time of its next attempt. A removed endpoint's " +
          "history is listed too.",
        errors: { 404: "No webhook endpoint with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.get("getDelivery", "/webhook-deliveries/:id")
      .setPath(DeliveryIdPath)
      .addSuccess(Success(DeliveryResult, { message: "Webhook delivery" }))
      .annotateContext(documented({
        summary: "Get a webhook delivery",
        description: "One delivery with every attempt.",
        errors: { 404: "No webhook delivery with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("retryDelivery", "/webhook-deliveries/:id/retry")
      .setPath(DeliveryIdPath)
      .addSuccess(Success(Schema.Struct({ retried: Schema.Literal(true), delivery: WebhookDeliveryJson }), {
        message: "Delivery queued for another attempt"
      }))
      .annotateContext(documented({
        summary: "Retry a webhook delivery",
        description: "Makes the delivery due now (the worker sends it next). If that attempt fails too, automatic " +
          "retries resume while the schedule has any left; a delivery that had already FAILED gets this one more " +
          "attempt. Same event id, same body bytes, signed with the endpoint's current secret.",
        errors: {
          404: "No webhook delivery with this id in the workspace.",
          409: "The delivery's endpoint is disabled (enable it first) or removed."
        }
      }))
  )
  // Its own name in the document: "webhooks" is the document's section of the events themselves, and the /docs
  // page showed two groups of that name.
  .annotate(OpenApi.Title, "webhook endpoints")
  .annotate(
    OpenApi.Description,
    "The endpoints events are POSTed to, their signing secrets, and their deliveries (docs/webhooks.md); the events " +
      "themselves are in the document's `webhooks` section."
  )
{}
