/** Webhook endpoints, events, deliveries and attempts (docs/webhooks.md). */
import { BigDecimal, Schema } from "effect"
import { Money, MoneyInput, Timestamp } from "../schema.ts"
import { DEFAULT_EVENT_TYPES, EVENT_TYPES, LIFECYCLE_EVENT_TYPES } from "./EventBody.ts"

export { DEFAULT_EVENT_TYPES, EVENT_TYPES, LIFECYCLE_EVENT_TYPES }
export const EventType = Schema.Literal(...EVENT_TYPES).annotations({
  message: () => `must be one of ${EVENT_TYPES.join(", ")}`
})
export type EventType = typeof EventType.Type

/** The wallet events, which `billing trigger` makes with nothing moved (`WebhookOutbox.testEvent`). */
const WALLET_EVENT_TYPES = ["wallet.balance.update", "wallet.balance.drop", "wallet.balance.recovered"] as const
export type WalletEventType = typeof WALLET_EVENT_TYPES[number]

export const LifecycleEventType = Schema.Literal(...LIFECYCLE_EVENT_TYPES)
export type LifecycleEventType = typeof LifecycleEventType.Type

/**
 * What `billing trigger` makes a test event of: the wallet events, and the
 * lifecycle events (about the customer's newest purchase or invoice, as the
 * API shows it). A threshold event is about a prepaid balance of a purchase
 * and a refusal about a signal; real ones are made by using them.
 */
const TRIGGERABLE = [...WALLET_EVENT_TYPES, ...LIFECYCLE_EVENT_TYPES] as const
export const TriggerableEventType = Schema.Literal(...TRIGGERABLE).annotations({
  message: () => `must be one of ${TRIGGERABLE.join(", ")}`
})
export type TriggerableEventType = typeof TriggerableEventType.Type

/** Whether a triggerable event is a wallet event (else a lifecycle event). */
export const isWalletEventType = (eventType: TriggerableEventType): eventType is WalletEventType =>
  (WALLET_EVENT_TYPES as ReadonlyArray<string>).includes(eventType)

export const WebhookUrl = Schema.String.pipe(
  Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
  Schema.filter((text) => {
    try {
      const url = new URL(text)
      return url.protocol === "http:" || url.protocol === "https:" || "must be an http or https URL"
    } catch {
      return "must be an absolute http or https URL"
    }
  }, {
    jsonSchema: {
      format: "uri",
      description: "Where events are POSTed: an absolute http or https URL, at most 2048 characters."
    }
  })
)

/** An endpoint as stored; `secret` is shown only by add and rotate-secret. */
export class Endpoint extends Schema.Class<Endpoint>("Endpoint")({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(EventType),
  threshold: Schema.NullOr(Money),
  enabled: Schema.Boolean,
  secret: Schema.String,
  removedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

export const EndpointCreate = Schema.Struct({
  url: WebhookUrl,
  events: Schema.optional(
    Schema.Array(EventType).pipe(Schema.minItems(1, { message: () => "must name at least one event" })).annotations({
      description: `The event types sent to it, at least one of ${EVENT_TYPES.join(", ")}; by default ` +
        `${DEFAULT_EVENT_TYPES.join(" and ")}. Repeats count once.`
    })
  ),
  threshold: Schema.optional(Schema.NullOr(
    MoneyInput.pipe(Schema.filter((value) => !BigDecimal.isNegative(value) || "must be 0 or more"))
  ))
})
export type EndpointCreate = typeof EndpointCreate.Type

/**
 * A change of an endpoint: the fields sent change, the others stay; `threshold:
 * null` removes the endpoint's own threshold. `enabled: false` stops deliveries
 * (events triggered meanwhile are never sent to it), `true` resumes them.
 */
export const EndpointUpdate = Schema.Struct({
  url: Schema.optional(WebhookUrl),
  events: EndpointCreate.fields.events,
  threshold: EndpointCreate.fields.threshold,
  enabled: Schema.optional(Schema.Boolean.annotations({
    description: "false stops deliveries (events triggered meanwhile are never sent to it); true resumes them."
  }))
})
export type EndpointUpdate = typeof EndpointUpdate.Type

/**
 * How a secret is shown anywhere but where it was just made (create and
 * rotate-secret): its prefix and its last four characters, enough to tell two
 * secrets apart and never enough to sign with.
 */
export const maskSecret = (secret: string) => `whsec_****${secret.slice(-4)}`

export const DeliveryStatus = Schema.Literal("PENDING", "DELIVERED", "FAILED", "CANCELLED")
export type DeliveryStatus = typeof DeliveryStatus.Type

export class Attempt extends Schema.Class<Attempt>("Attempt")({
  attempt: Schema.Number,
  startedAt: Timestamp,
  durationMs: Schema.Number,
  statusCode: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String)
}) {}

export class Delivery extends Schema.Class<Delivery>("Delivery")({
  id: Schema.String,
  eventId: Schema.String,
  eventType: EventType,
  triggeredAt: Timestamp,
  endpointId: Schema.String,
  url: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Number,
  nextAttemptAt: Schema.NullOr(Timestamp),
  lastStatusCode: Schema.NullOr(Schema.Number),
  lastError: Schema.NullOr(Schema.String),
  deliveredAt: Schema.NullOr(Timestamp),
  replayOf: Schema.NullOr(Schema.String),
  createdAt: Timestamp,
  attemptLog: Schema.Array(Attempt)
}) {}

export class WebhookEvent extends Schema.Class<WebhookEvent>("WebhookEvent")({
  id: Schema.String,
  eventType: EventType,
  customerId: Schema.NullOr(Schema.String),
  triggeredAt: Timestamp,
  body: Schema.String
}) {}
