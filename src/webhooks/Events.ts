/**
 * The organisation's webhook events as an operator or a back office reads
 * them (`GET /events`, `billing webhook events`): each event as it was stored
 * when triggered (its body, the exact bytes every delivery sends and signs),
 * with how its deliveries stand, and one event with each of its deliveries
 * and their attempts. A replay goes through `WebhookDeliveries.replay`, the
 * rules of `billing webhook replay`.
 *
 * Events are read newest first: an event log is read from its end, as the
 * CLI's lists are, and as Stripe's event list is. Only stored events are
 * here: an event no endpoint was subscribed to when it was triggered is never
 * stored (docs/webhooks.md).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, findByIdOr, knownCursor, pageClause } from "../db/Sql.ts"
import { InvalidTimeRange, WebhookEventNotFound } from "../errors.ts"
import type { OrganizationId } from "../ids.ts"
import type { Page } from "../Page.ts"
import { AnyJson, Timestamp } from "../schema.ts"
import { type Replayed, WebhookDeliveries } from "./Deliveries.ts"
import { type Delivery, EventType, WebhookEvent } from "./Webhook.ts"

/** How an event's deliveries stand: one per endpoint it was sent to, and one per replay. */
export const DeliveryCounts = Schema.Struct({
  total: Schema.Number,
  pending: Schema.Number,
  delivered: Schema.Number,
  failed: Schema.Number,
  cancelled: Schema.Number
}).annotations({
  identifier: "WebhookDeliveryCounts",
  description: "The event's deliveries by status: one per endpoint it was sent to, and one more per replay."
})
export type DeliveryCounts = typeof DeliveryCounts.Type

/** An event as it is read: its stored body, that body's `data` and `test`, and its deliveries' counts. */
export const EventView = Schema.Struct({
  id: Schema.String.annotations({ description: "The event's id (`evt_...`): the body's `id` and `X-Service-Event-Id`." }),
  eventType: EventType,
  customerId: Schema.NullOr(Schema.String).annotations({
    description: "The customer the event is about; null for a refused signal sent by an externalId no customer held."
  }),
  triggeredAt: Timestamp,
  test: Schema.Boolean.annotations({ description: "true for a test event (`billing trigger`): nothing moved." }),
  data: AnyJson.annotations({
    jsonSchema: {
      type: ["object", "array", "string", "number", "boolean", "null"],
      description: "The body's `data`, parsed: its fields are the event type's, as the document's `webhooks` section has them."
    }
  }),
  body: Schema.String.annotations({
    description: "The body exactly as every delivery sends it (and signs it: HMAC-SHA256 over `<t>.<body>`), " +
      "stored once when the event was triggered."
  }),
  deliveryCounts: DeliveryCounts
}).annotations({ identifier: "WebhookEvent" })
export type EventView = typeof EventView.Type

export interface EventQuery {
  readonly page: Page
  readonly eventType?: EventType | undefined
  readonly customerId?: string | undefined
  /** Events triggered at or after this instant. */
  readonly from?: Date | undefined
  /** Events triggered before this instant. */
  readonly to?: Date | undefined
}

/** The most deliveries one event's read lists (one per endpoint and replay: far more is no real event). */
export const MAX_EVENT_DELIVERIES = 1000

const CountRow = Schema.Struct({ eventId: Schema.String, status: Schema.String, count: Schema.Number })

const noDeliveries: DeliveryCounts = { total: 0, pending: 0, delivered: 0, failed: 0, cancelled: 0 }

/** The parts of a stored body a read shows apart: written by the outbox, so always a JSON object. */
const bodyParts = (body: string) => {
  const parsed = JSON.parse(body) as { readonly data?: unknown; readonly test?: unknown }
  return { data: parsed.data ?? null, test: parsed.test === true }
}

export class WebhookEvents extends Effect.Service<WebhookEvents>()("WebhookEvents", {
  dependencies: [WebhookDeliveries.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const deliveries = yield* WebhookDeliveries

    /** The counts of each event's deliveries by status, in one statement. */
    const countsOf = (organizationId: OrganizationId, eventIds: ReadonlyArray<string>) =>
      eventIds.length === 0
        ? Effect.succeed(new Map<string, DeliveryCounts>())
        : Effect.map(
          findAll(
            CountRow,
            sql`SELECT event_id, status, count(*)::int AS count FROM webhook_deliveries
                WHERE organization_id = ${organizationId} AND ${sql.in("event_id", eventIds)}
                GROUP BY event_id, status`
          ),
          (rows) => {
            const counts = new Map<string, { -readonly [K in keyof DeliveryCounts]: number }>()
            for (const row of rows) {
              const of = counts.get(row.eventId) ?? { ...noDeliveries }
              of.total += row.count
              const status = row.status.toLowerCase() as Exclude<keyof DeliveryCounts, "total">
              of[status] += row.count
              counts.set(row.eventId, of)
            }
            return counts as ReadonlyMap<string, DeliveryCounts>
          }
        )

    const views = (organizationId: OrganizationId, events: ReadonlyArray<WebhookEvent>) =>
      Effect.map(countsOf(organizationId, events.map((event) => event.id)), (counts) =>
        events.map((event): EventView => ({
          id: event.id,
          eventType: event.eventType,
          customerId: event.customerId,
          triggeredAt: event.triggeredAt,
          ...bodyParts(event.body),
          body: event.body,
          deliveryCounts: counts.get(event.id) ?? noDeliveries
        })))

    /** A page of the organisation's events, newest first, narrowed by type, customer and `[from, to)`. */
    const list = Effect.fn("WebhookEvents.list")(function*(organizationId: OrganizationId, query: EventQuery) {
      if (query.from !== undefined && query.to !== undefined && query.from.getTime() >= query.to.getTime()) {
        return yield* new InvalidTimeRange({ message: "from must be before to" })
      }
      const page: Page = { ...query.page, newestFirst: true }
      yield* knownCursor(sql, "webhook_events", organizationId, page)
      const events = yield* findAll(
        WebhookEvent,
        sql`SELECT id, event_type, customer_id, triggered_at, body FROM webhook_events
            WHERE ${
          sql.and([
            sql`organization_id = ${organizationId}`,
            query.eventType === undefined ? sql`TRUE` : sql`event_type = ${query.eventType}`,
            query.customerId === undefined ? sql`TRUE` : sql`customer_id = ${query.customerId}`,
            query.from === undefined ? sql`TRUE` : sql`triggered_at >= ${query.from}`,
            query.to === undefined ? sql`TRUE` : sql`triggered_at < ${query.to}`
          ])
        } ${pageClause(sql, page)}`
      )
      return yield* views(organizationId, events)
    })

    const findEvent = findByIdOr(
      sql,
      WebhookEvent,
      "webhook_events",
      (id) => new WebhookEventNotFound({ message: `Webhook event ${id} not found` }),
      { columns: "id, event_type, customer_id, triggered_at, body" }
    )

    /** One event, and each of its deliveries (replays included) oldest first, with every attempt. */
    const get = Effect.fn("WebhookEvents.get")(function*(organizationId: OrganizationId, id: string) {
      const event = yield* findEvent(organizationId, id)
      const [view] = yield* views(organizationId, [event])
      const sent: ReadonlyArray<Delivery> = yield* deliveries.list(organizationId, {
        eventId: id,
        limit: MAX_EVENT_DELIVERIES,
        oldestFirst: true
      })
      return { event: view!, deliveries: sent }
    })

    /**
     * `billing webhook replay --event ID`: a new delivery of the same event
     * (same id, same body bytes) to each endpoint that had it and is still
     * enabled; the event as it stands after, and the new deliveries.
     */
    const replay = Effect.fn("WebhookEvents.replay")(function*(organizationId: OrganizationId, id: string) {
      const replayed: Replayed = yield* deliveries.replay(organizationId, id)
      const [view] = yield* views(organizationId, [replayed.event])
      return { event: view!, deliveries: replayed.deliveries }
    })

    return { list, get, replay } as const
  })
}) {}
