/**
 * The organisation's webhook events over HTTP (issue 37): list them, read one
 * with its deliveries and their attempts, and replay one, through the service
 * of `billing webhook events|event|replay` (src/webhooks/Events.ts) with its
 * rules. Served from the operations floor, which may read both the webhooks
 * and the customers (a `customerId` filter must name a customer).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { documented } from "../http/Documented.ts"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { CustomerId } from "../ids.ts"
import { EventView } from "../webhooks/Events.ts"
import { EventType } from "../webhooks/Webhook.ts"
import { WebhookDeliveryJson } from "../webhooks/WebhooksApi.ts"

const Instant = Schema.Date.annotations({
  message: () => "must be an ISO 8601 timestamp",
  jsonSchema: { type: "string", format: "date-time" }
})

export const EventListParams = Schema.Struct({
  ...PageParams,
  type: Schema.optional(EventType).annotations({ description: "Keeps the events of this type." }),
  customerId: Schema.optional(CustomerId.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "Keeps the events about this customer (the service's customer id); a customer the workspace does " +
      "not have is 404."
  }),
  from: Schema.optional(Instant).annotations({
    description: "Keeps the events triggered at or after this ISO 8601 instant (`triggered_at`)."
  }),
  to: Schema.optional(Instant).annotations({
    description: "Keeps the events triggered before this ISO 8601 instant; `from` must be before it."
  })
})

const EventIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The event's id (`evt_...`): the body's `id`, `X-Service-Event-Id`." })
})

const eventNotFound = "No webhook event with this id in the workspace (another workspace's event is not found either)."

export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", "/events")
      .setUrlParams(EventListParams)
      .addSuccess(Success(Schema.Struct({ events: Schema.Array(EventView) }), { message: "Webhook events" }))
      .annotateContext(documented({
        summary: "List webhook events",
        description: "A page of the workspace's webhook events, **newest first** (the cursor pages towards older " +
          "events), optionally of one type, about one customer, and triggered in `[from, to)`. Each event carries " +
          "its body exactly as delivered, that body's `data`, and its deliveries counted by status. Only stored " +
          "events are listed: an event no endpoint was subscribed to when it was triggered is never stored.",
        errors: {
          400: "A query parameter fails its schema (an unknown `type`, a `from` or `to` that is not an ISO 8601 " +
            "timestamp, a `limit` below 1, an unknown parameter), `from` is not before `to` (`invalid_time_range`), " +
            "or the `cursor` names no event of the workspace (`unknown_cursor`).",
          404: "`customerId` names no customer of the workspace."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/events/:id")
      .setPath(EventIdPath)
      .addSuccess(Success(
        Schema.Struct({
          event: EventView,
          deliveries: Schema.Array(WebhookDeliveryJson).annotations({
            description: "Every delivery of the event (one per endpoint it was sent to, one more per replay), oldest " +
              "first, each with every attempt: start, duration, status code, error."
          })
        }),
        { message: "Webhook event" }
      ))
      .annotateContext(documented({
        summary: "Get a webhook event with its deliveries",
        description: "One event, its body exactly as delivered, and each of its deliveries with every attempt.",
        errors: { 404: eventNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.post("replay", "/events/:id/replay")
      .setPath(EventIdPath)
      .addSuccess(Success(
        Schema.Struct({
          replayed: Schema.Literal(true),
          event: EventView,
          deliveries: Schema.Array(WebhookDeliveryJson).annotations({
            description: "The new deliveries, PENDING, one per endpoint that had the event and is still enabled " +
              "(each names the delivery it repeats in `replayOf`); empty when no such endpoint is left."
          })
        }),
        { message: (result) => `Event queued for ${result.deliveries.length} endpoint(s); the worker sends it next` }
      ))
      .annotateContext(documented({
        summary: "Replay a webhook event",
        description: "Delivers the same event again, as `billing webhook replay --event`: a new delivery of the " +
          "same id and the same body bytes to each endpoint that was sent it and is still enabled, signed at each " +
          "attempt with the endpoint's current secret. An endpoint that was disabled when the event was triggered " +
          "never gets it, nor does one added later. Receivers that ignore an `id` seen before ignore it too.",
        errors: { 404: eventNotFound }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Events: what the service sent (or sends) to your webhook endpoints, with their deliveries; replays " +
      "(docs/webhooks.md \"Events over HTTP\")."
  )
{}
