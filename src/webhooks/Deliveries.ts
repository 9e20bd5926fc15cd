/**
 * What operators do with deliveries: look at them (every attempt with its
 * status code, duration and error, and the next retry), retry one by hand, and
 * replay events. A replay sends the stored event again, byte for byte with the
 * same id, as a new delivery to each endpoint that was sent it the first time;
 * an endpoint that was disabled when the event was triggered never gets it.
 */
import { SqlClient } from "@effect/sql"
import { Array as Arr, Effect, Option, Schema } from "effect"
import { dieOnSqlError, findAll, findByIdOr, findOne, foundOr, knownCursor } from "../db/Sql.ts"
import {
  InvalidTimeRange,
  WebhookDeliveryNotFound,
  WebhookEndpointDisabled,
  WebhookEndpointRemoved,
  WebhookEventNotFound
} from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { Attempt, Delivery, type DeliveryStatus, WebhookEvent } from "./Webhook.ts"
import { currentTime } from "../time.ts"

export interface DeliveryQuery {
  readonly endpointId?: string | undefined
  readonly eventId?: string | undefined
  readonly status?: DeliveryStatus | undefined
  readonly limit: number
  /** The id of the last delivery of the previous page. */
  readonly cursor?: string | undefined
  /** Deliveries are listed newest first unless this is set. */
  readonly oldestFirst?: boolean | undefined
}

const AttemptRow = Schema.Struct({ deliveryId: Schema.String, ...Attempt.fields })

const DeliveryRow = Schema.Struct(Delivery.fields).omit("attemptLog")

export interface Replayed {
  readonly event: WebhookEvent
  readonly deliveries: ReadonlyArray<Delivery>
}

export class WebhookDeliveries extends Effect.Service<WebhookDeliveries>()("WebhookDeliveries", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const selectDeliveries = (
      organizationId: OrganizationId,
      where: ReturnType<typeof sql.and>,
      limit: number,
      oldestFirst = false
    ) =>
      Effect.gen(function*() {
        const rows = yield* findAll(
          DeliveryRow,
          sql`SELECT d.id, d.event_id, v.event_type, v.triggered_at, d.endpoint_id, e.url, d.status, d.attempts,
                     d.next_attempt_at, d.last_status_code, d.last_error, d.delivered_at, d.replay_of, d.created_at
              FROM webhook_deliveries d
              JOIN webhook_events v ON v.organization_id = d.organization_id AND v.id = d.event_id
              JOIN webhook_endpoints e ON e.organization_id = d.organization_id AND e.id = d.endpoint_id
              WHERE d.organization_id = ${organizationId} AND ${where}
              ORDER BY d.id ${sql.unsafe(oldestFirst ? "ASC" : "DESC")}
              LIMIT ${limit}`
        )
        if (rows.length === 0) return []
        const attempts = yield* findAll(
          AttemptRow,
          sql`SELECT delivery_id, attempt, started_at, duration_ms, status_code, error FROM webhook_attempts
              WHERE organization_id = ${organizationId} AND ${sql.in("delivery_id", rows.map((row) => row.id))}
              ORDER BY delivery_id, attempt`
        )
        return rows.map((row) =>
          new Delivery({
            ...row,
            attemptLog: attempts.filter((attempt) => attempt.deliveryId === row.id).map(({ deliveryId: _, ...attempt }) =>
              new Attempt(attempt)
            )
          })
        )
      })

    const list = Effect.fn("WebhookDeliveries.list")((organizationId: OrganizationId, query: DeliveryQuery) =>
      Effect.zipRight(knownCursor(sql, "webhook_deliveries", organizationId, { limit: query.limit, cursor: query.cursor }), selectDeliveries(
        organizationId,
        sql.and([
          query.endpointId !== undefined ? sql`d.endpoint_id = ${query.endpointId}` : sql`TRUE`,
          query.eventId !== undefined ? sql`d.event_id = ${query.eventId}` : sql`TRUE`,
          query.status !== undefined ? sql`d.status = ${query.status}` : sql`TRUE`,
          query.cursor === undefined ? sql`TRUE` : query.oldestFirst ? sql`d.id > ${query.cursor}` : sql`d.id < ${query.cursor}`
        ]),
        query.limit,
        query.oldestFirst
      )))

    const get = Effect.fn("WebhookDeliveries.get")((organizationId: OrganizationId, id: string) =>
      foundOr(() => new WebhookDeliveryNotFound({ message: `Webhook delivery ${id} not found` }))(
        Effect.map(selectDeliveries(organizationId, sql.and([sql`d.id = ${id}`]), 1), Arr.head)
      ))

    const EndpointState = Schema.Struct({ enabled: Schema.Boolean, removed: Schema.Boolean })

    /** Makes a delivery due now for one more attempt; if that fails too, automatic retries resume while any are left. */
    const retry = Effect.fn("WebhookDeliveries.retry")(function*(organizationId: OrganizationId, id: string) {
        const delivery = yield* get(organizationId, id)
        const endpoint = yield* findOne(
          EndpointState,
          sql`SELECT enabled, removed_at IS NOT NULL AS removed FROM webhook_endpoints
              WHERE organization_id = ${organizationId} AND id = ${delivery.endpointId}`
        )
        if (Option.isNone(endpoint) || endpoint.value.removed) {
          return yield* new WebhookEndpointRemoved({ message: `Webhook endpoint ${delivery.endpointId} has been removed` })
        }
        if (!endpoint.value.enabled) {
          return yield* new WebhookEndpointDisabled({ message: `Webhook endpoint ${delivery.endpointId} is disabled; enable it first` })
        }
        yield* sql`UPDATE webhook_deliveries SET status = 'PENDING', next_attempt_at = now(), updated_at = now()
                   WHERE organization_id = ${organizationId} AND id = ${id}`
        return yield* get(organizationId, id)
      }, sql.withTransaction, dieOnSqlError)

    const findEvent = findByIdOr(
      sql,
      WebhookEvent,
      "webhook_events",
      (id) => new WebhookEventNotFound({ message: `Webhook event ${id} not found` }),
      { columns: "id, event_type, customer_id, triggered_at, body" }
    )
    const getEvent = Effect.fn("WebhookDeliveries.getEvent")((organizationId: OrganizationId, id: string) => findEvent(organizationId, id))

    /** A new delivery of the event to each live, enabled endpoint that was sent it before. */
    const replay = Effect.fn("WebhookDeliveries.replay")((organizationId: OrganizationId, eventId: string): Effect.Effect<Replayed, WebhookEventNotFound> =>
      Effect.gen(function*() {
        const event = yield* getEvent(organizationId, eventId)
        const previous = yield* findAll(
          Schema.Struct({ id: Schema.String, endpointId: Schema.String }),
          sql`SELECT DISTINCT ON (d.endpoint_id) d.id, d.endpoint_id
              FROM webhook_deliveries d
              JOIN webhook_endpoints e ON e.organization_id = d.organization_id AND e.id = d.endpoint_id
              WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId}
                AND e.enabled AND e.removed_at IS NULL
              ORDER BY d.endpoint_id, d.id DESC`
        )
        const ids = previous.map(() => makeId("whd"))
        const due = yield* currentTime
        if (previous.length > 0) {
          yield* sql`INSERT INTO webhook_deliveries ${
            sql.insert(previous.map((delivery, i) => ({
              organizationId,
              id: ids[i]!,
              eventId,
              endpointId: delivery.endpointId,
              status: "PENDING",
              nextAttemptAt: due,
              replayOf: delivery.id
            })))
          }`
        }
        // Inserted just above in this transaction: one missing would be our bug, not the caller's.
        const deliveries = yield* Effect.forEach(ids, (id) => Effect.orDie(get(organizationId, id)))
        return { event, deliveries }
      }).pipe(sql.withTransaction, dieOnSqlError))

    /** Event ids triggered in [since, until), oldest first: what a range replay walks through. */
    const eventsBetween = Effect.fn("WebhookDeliveries.eventsBetween")((organizationId: OrganizationId, since: Date, until: Date) =>
      since.getTime() >= until.getTime()
        ? Effect.fail(new InvalidTimeRange({ message: "--since must be before --until" }))
        : Effect.map(
          findAll(
            Schema.Struct({ id: Schema.String }),
            sql`SELECT id FROM webhook_events
                WHERE organization_id = ${organizationId} AND triggered_at >= ${since} AND triggered_at < ${until}
                ORDER BY triggered_at, id`
          ),
          (rows) => rows.map((row) => row.id)
        ))

    return { list, get, retry, replay, getEvent, eventsBetween } as const
  })
}) {}
