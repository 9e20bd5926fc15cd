/**
 * `billing listen --forward-to URL`: an organisation's webhook events, as they
 * happen, forwarded to a local URL for development.
 *
 * A session is a webhook endpoint of its own (migrations/0012), so the outbox
 * gives it events and deliveries exactly as it gives any endpoint, in the
 * transaction of the change; real endpoints keep their own deliveries,
 * untouched. The worker never claims a session's deliveries: the session's
 * process forwards them, signed with the session's secret in the same scheme
 * as real deliveries, once each (no retries: a developer sees the receiver's
 * answer and triggers again). While it runs the session pushes `listen_until`
 * forward; when it ends (or its process dies and the lease passes) no new
 * event gets a delivery for it, and its undelivered ones are cancelled.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { dieOnSqlError, findAll } from "../db/Sql.ts"
import { makeId, randomToken, type OrganizationId } from "../ids.ts"
import { Timestamp } from "../schema.ts"
import { signatureHeader } from "./Signature.ts"
import { DEFAULT_EVENT_TYPES, type EventType } from "./Webhook.ts"
import { currentTime, timeFromNow } from "../time.ts"

/** How long a session stays subscribed without a heartbeat. */
export const LISTEN_LEASE_SECONDS = 30

export interface ListenSession {
  readonly organizationId: string
  readonly endpointId: string
  readonly secret: string
  readonly events: ReadonlyArray<EventType>
}

const Pending = Schema.Struct({
  id: Schema.String,
  attempts: Schema.Number,
  eventId: Schema.String,
  eventType: Schema.String,
  triggeredAt: Timestamp,
  body: Schema.String
})
export type PendingForward = typeof Pending.Type

export interface Forwarded {
  readonly deliveryId: string
  readonly eventId: string
  readonly eventType: string
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
}

const FORWARD_TIMEOUT_MS = 5_000

/**
 * POSTs one event as the worker would: same body bytes, same headers, signed with the session's secret
 * at `signedAt`. `durationMs` is the receiver's answer time on this process's clock, shown to the operator.
 */
const forward = (url: string, secret: string, delivery: PendingForward, signedAt: Date) =>
  Effect.promise(async () => {
    const started = Date.now()
    try {
      const response = await fetch(url, {
        method: "POST",
        body: delivery.body,
        redirect: "manual",
        signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
        headers: {
          "content-type": "application/json",
          "x-service-signature": signatureHeader(secret, delivery.body, signedAt),
          "x-service-event-id": delivery.eventId,
          "x-service-event-type": delivery.eventType
        }
      })
      await response.body?.cancel()
      return { statusCode: response.status, error: response.ok ? null : `HTTP ${response.status}`, durationMs: Date.now() - started }
    } catch (error) {
      const message = error instanceof Error && error.name === "TimeoutError"
        ? `no answer within ${FORWARD_TIMEOUT_MS / 1000} s`
        : error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error)
      return { statusCode: null, error: message, durationMs: Date.now() - started }
    }
  })

export class WebhookListen extends Effect.Service<WebhookListen>()("WebhookListen", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Opens a session: subscribed from now on, with a secret of its own. */
    const open = Effect.fn("WebhookListen.open")(function*(organizationId: OrganizationId, url: string, events: ReadonlyArray<EventType> | undefined) {
        const session: ListenSession = {
          organizationId,
          endpointId: makeId("whe"),
          secret: `whsec_${randomToken(32)}`,
          events: [...new Set(events ?? DEFAULT_EVENT_TYPES)]
        }
        yield* sql`INSERT INTO webhook_endpoints ${
          sql.insert({
            organizationId,
            id: session.endpointId,
            url,
            events: [...session.events],
            threshold: null,
            secret: session.secret,
            listenUntil: yield* timeFromNow(LISTEN_LEASE_SECONDS * 1000)
          })
        }`
        return session
      }, dieOnSqlError)

    /** Keeps the session subscribed for another lease. */
    const heartbeat = Effect.fn("WebhookListen.heartbeat")((session: ListenSession) =>
      dieOnSqlError(sql`UPDATE webhook_endpoints
        SET listen_until = now() + make_interval(secs => ${LISTEN_LEASE_SECONDS}), updated_at = now()
        WHERE organization_id = ${session.organizationId} AND id = ${session.endpointId}`))

    /** Forwards what is waiting, oldest first; one attempt each, recorded like a worker's. */
    const forwardPending = Effect.fn("WebhookListen.forwardPending")(function*(session: ListenSession, url: string) {
        const pending = yield* findAll(
          Pending,
          sql`SELECT d.id, d.attempts, d.event_id, v.event_type, v.triggered_at, v.body
              FROM webhook_deliveries d
              JOIN webhook_events v ON v.organization_id = d.organization_id AND v.id = d.event_id
              WHERE d.organization_id = ${session.organizationId} AND d.endpoint_id = ${session.endpointId}
                AND d.status = 'PENDING'
              ORDER BY v.triggered_at, d.id
              LIMIT 50`
        )
        const forwarded: Array<Forwarded> = []
        for (const delivery of pending) {
          const startedAt = yield* currentTime
          const outcome = yield* forward(url, session.secret, delivery, startedAt)
          const settledAt = yield* currentTime
          const delivered = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300
          yield* Effect.zipRight(
            sql`INSERT INTO webhook_attempts ${
              sql.insert({
                organizationId: session.organizationId,
                deliveryId: delivery.id,
                attempt: delivery.attempts + 1,
                startedAt,
                durationMs: outcome.durationMs,
                statusCode: outcome.statusCode,
                error: outcome.error
              })
            }`,
            sql`UPDATE webhook_deliveries
                SET status = ${delivered ? "DELIVERED" : "FAILED"}, attempts = attempts + 1, next_attempt_at = NULL,
                    last_status_code = ${outcome.statusCode}, last_error = ${outcome.error},
                    delivered_at = ${delivered ? settledAt : null}, updated_at = now()
                WHERE organization_id = ${session.organizationId} AND id = ${delivery.id} AND status = 'PENDING'`
          ).pipe(sql.withTransaction, dieOnSqlError)
          forwarded.push({ deliveryId: delivery.id, eventId: delivery.eventId, eventType: delivery.eventType, ...outcome })
        }
        return forwarded
      })

    /** Ends a session: unsubscribed at once, and whatever it had not forwarded is cancelled. */
    const close = Effect.fn("WebhookListen.close")((session: ListenSession) =>
      Effect.zipRight(
        sql`UPDATE webhook_endpoints SET enabled = false, removed_at = now(), listen_until = now(), updated_at = now()
            WHERE organization_id = ${session.organizationId} AND id = ${session.endpointId}`,
        sql`UPDATE webhook_deliveries SET status = 'CANCELLED', next_attempt_at = NULL, updated_at = now()
            WHERE organization_id = ${session.organizationId} AND endpoint_id = ${session.endpointId} AND status = 'PENDING'`
      ).pipe(sql.withTransaction, dieOnSqlError))

    /** Sessions whose process died: their lease passed; cancel what they left pending. */
    const sweepExpired = Effect.fn("WebhookListen.sweepExpired")((organizationId: OrganizationId) =>
      dieOnSqlError(sql`UPDATE webhook_deliveries d
        SET status = 'CANCELLED', next_attempt_at = NULL, updated_at = now()
        FROM webhook_endpoints e
        WHERE e.organization_id = ${organizationId} AND e.listen_until IS NOT NULL AND e.listen_until < now()
          AND d.organization_id = e.organization_id AND d.endpoint_id = e.id AND d.status = 'PENDING'`))

    return { open, heartbeat, forwardPending, close, sweepExpired } as const
  })
}) {}
