/**
 * Webhook delivery, the worker's `webhooks` job. A batch claims due deliveries
 * (`FOR UPDATE SKIP LOCKED`, committed at once: no transaction is ever open
 * across a network call), then sends each in its own fiber, so a slow receiver
 * never holds up another endpoint's deliveries or the next claim. Each endpoint
 * has at most PER_ENDPOINT deliveries in flight per worker, so one dead
 * receiver cannot take every slot.
 *
 * A claim pushes `next_attempt_at` out by a lease: a worker that dies
 * mid-attempt leaves the delivery to be tried again once the lease runs out.
 */
import { SqlClient } from "@effect/sql"
import { Config, ConfigError, Effect, Either, FiberSet, Schema } from "effect"
import { findAll, orDie } from "../db/Sql.ts"
import { faultPoint } from "../Fault.ts"
import { QUEUE_DEPTH_CAP, reportQueue, tally } from "../worker/Stats.ts"
import type { WorkerJob } from "../worker/Worker.ts"
import { signatureHeader } from "./Signature.ts"
import { currentTime, currentTimeMillis } from "../time.ts"

const MAX_IN_FLIGHT = 64
const PER_ENDPOINT = 4
const LEASE_MARGIN_MS = 60_000
/** Pause while deliveries are in flight and nothing new is due. */
const IN_FLIGHT_POLL_MS = 20

const DEFAULT_RETRY_SCHEDULE = "30,120,600,3600,21600"
/** The spec allows up to 5 retries after the first attempt. */
const MAX_RETRIES = 5

const parseSchedule = (text: string): Either.Either<ReadonlyArray<number>, ConfigError.ConfigError> => {
  const delays = text.split(",").map((part) => part.trim())
  const seconds = delays.map(Number)
  return delays.length > MAX_RETRIES || delays.some((part) => part === "") ||
      seconds.some((value) => !Number.isFinite(value) || value < 0)
    ? Either.left(ConfigError.InvalidData(
      ["BILLING_WEBHOOK_RETRY_SCHEDULE"],
      `expected 1 to ${MAX_RETRIES} comma-separated delays in seconds, got ${JSON.stringify(text)}`
    ))
    : Either.right(seconds.map((value) => value * 1000))
}

/** Read at every batch rather than once, so that tests can change the schedule between runs. */
const DeliveryConfig = Config.all({
  /** Milliseconds to wait before retry 1, 2, ...; its length is the number of retries. */
  retryDelaysMs: Config.string("BILLING_WEBHOOK_RETRY_SCHEDULE").pipe(
    Config.withDefault(DEFAULT_RETRY_SCHEDULE),
    Config.mapOrFail(parseSchedule)
  ),
  timeoutMs: Config.integer("BILLING_WEBHOOK_TIMEOUT_MS").pipe(Config.withDefault(5000))
})

const Claimed = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  attempts: Schema.Number,
  endpointId: Schema.String,
  eventId: Schema.String,
  eventType: Schema.String,
  body: Schema.String,
  url: Schema.String,
  secret: Schema.String
})
type Claimed = typeof Claimed.Type

interface Outcome {
  readonly statusCode: number | null
  readonly error: string | null
}

const describeFetchError = (error: unknown, timeoutMs: number): string => {
  if (error instanceof Error && error.name === "TimeoutError") return `timed out after ${timeoutMs} ms`
  const cause = error instanceof Error ? (error.cause as { code?: unknown; message?: unknown } | undefined) : undefined
  if (cause && typeof cause.code === "string") return `connection failed: ${cause.code}`
  if (cause && typeof cause.message === "string") return `connection failed: ${cause.message}`
  return error instanceof Error ? error.message : String(error)
}

/**
 * One POST; never fails: the outcome says what happened. Any 2xx is delivered; redirects are not followed.
 *
 * The timeout is a timer of our own that holds its controller, not `AbortSignal.timeout()` inside
 * `AbortSignal.any()`: Node keeps those source signals only weakly, so a garbage collection during
 * the request could drop the timeout unfired and the attempt then lasted as long as the receiver
 * took (nodejs/node#57736).
 */
const post = (delivery: Claimed, timeoutMs: number, signedAt: Date): Effect.Effect<Outcome> =>
  Effect.promise(async (interrupted) => {
    const controller = new AbortController()
    const timer = setTimeout(
      () => controller.abort(new DOMException(`timed out after ${timeoutMs} ms`, "TimeoutError")),
      timeoutMs
    )
    const onInterrupt = () => controller.abort(interrupted.reason)
    if (interrupted.aborted) onInterrupt()
    else interrupted.addEventListener("abort", onInterrupt, { once: true })
    try {
      const response = await fetch(delivery.url, {
        method: "POST",
        body: delivery.body,
        redirect: "manual",
        signal: controller.signal,
        headers: {
          "content-type": "application/json",
          "x-service-signature": signatureHeader(delivery.secret, delivery.body, signedAt),
          "x-service-event-id": delivery.eventId,
          "x-service-event-type": delivery.eventType
        }
      })
      await response.body?.cancel()
      return { statusCode: response.status, error: response.ok ? null : `HTTP ${response.status}` }
    } catch (error) {
      return { statusCode: null, error: describeFetchError(error, timeoutMs) }
    } finally {
      clearTimeout(timer)
      interrupted.removeEventListener("abort", onInterrupt)
    }
  })

/** The webhook sender's worker job, by name (the worker's view lists it before the services are built). */
export const webhookDeliveryJobName = "webhooks"

export class WebhookSender extends Effect.Service<WebhookSender>()("WebhookSender", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const running = yield* FiberSet.make<void>()
    /** Deliveries in flight in this process, by endpoint. */
    const inFlight = new Map<string, number>()
    let finishedSinceLastBatch = 0
    /** Settled attempts since the last batch, by organisation: what the worker's watchers count. */
    let settledSinceLastBatch: Array<readonly [string, "sent" | "failed"]> = []

    const claim = (now: Date, room: number, leaseUntil: Date) => {
      const busy = [...inFlight.entries()]
      return findAll(
        Claimed,
        sql`WITH busy AS (
              SELECT * FROM unnest(${busy.map(([id]) => id)}::text[], ${busy.map(([, count]) => count)}::int[])
                AS busy (endpoint_id, in_flight)
            ), candidates AS (
              -- The oldest due deliveries of each endpoint, up to its free slots: a backlog at one
              -- endpoint never hides another endpoint's due deliveries.
              SELECT due.organization_id, due.id, due.next_attempt_at
              FROM webhook_endpoints e
              LEFT JOIN busy ON busy.endpoint_id = e.id
              CROSS JOIN LATERAL (
                SELECT d.organization_id, d.id, d.next_attempt_at
                FROM webhook_deliveries d
                WHERE d.organization_id = e.organization_id AND d.endpoint_id = e.id
                  AND d.status = 'PENDING' AND d.next_attempt_at <= ${now}
                ORDER BY d.next_attempt_at, d.id
                LIMIT greatest(${PER_ENDPOINT} - coalesce(busy.in_flight, 0), 0)
              ) due
              -- A listen session's deliveries are forwarded by its own process (src/webhooks/Listen.ts).
              WHERE e.enabled AND e.removed_at IS NULL AND e.listen_until IS NULL
            ), claimed AS (
              SELECT d.organization_id, d.id
              FROM webhook_deliveries d
              JOIN candidates c ON c.organization_id = d.organization_id AND c.id = d.id
              WHERE d.status = 'PENDING' AND d.next_attempt_at <= ${now}
              ORDER BY c.next_attempt_at, c.id
              LIMIT ${room}
              FOR UPDATE OF d SKIP LOCKED
            )
            UPDATE webhook_deliveries d
            SET attempts = d.attempts + 1, next_attempt_at = ${leaseUntil}, updated_at = now()
            FROM claimed, webhook_events v, webhook_endpoints e
            WHERE d.organization_id = claimed.organization_id AND d.id = claimed.id
              AND v.organization_id = d.organization_id AND v.id = d.event_id
              AND e.organization_id = d.organization_id AND e.id = d.endpoint_id
            RETURNING d.organization_id, d.id, d.attempts, d.endpoint_id, d.event_id, v.event_type, v.body, e.url, e.secret`
      )
    }

    /** Records the attempt and decides what comes next, in one transaction. */
    const settle = (delivery: Claimed, startedAt: Date, durationMs: number, outcome: Outcome, nextAttemptAt: Date | null) =>
      Effect.gen(function*() {
        const delivered = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300
        const settledAt = yield* currentTime
        yield* sql`INSERT INTO webhook_attempts ${
          sql.insert({
            organizationId: delivery.organizationId,
            deliveryId: delivery.id,
            attempt: delivery.attempts,
            startedAt,
            durationMs,
            statusCode: outcome.statusCode,
            error: outcome.error
          })
        }`
        const status = delivered ? "DELIVERED" : nextAttemptAt === null ? "FAILED" : "PENDING"
        // A delivery cancelled or retried by hand meanwhile keeps what the operator did.
        yield* sql`UPDATE webhook_deliveries
                   SET status = ${status},
                       next_attempt_at = ${delivered ? null : nextAttemptAt},
                       last_status_code = ${outcome.statusCode},
                       last_error = ${outcome.error},
                       delivered_at = ${delivered ? settledAt : null},
                       updated_at = now()
                   WHERE organization_id = ${delivery.organizationId} AND id = ${delivery.id}
                     AND status = 'PENDING' AND attempts = ${delivery.attempts}`
        yield* faultPoint("webhooks.before-commit") // tests: dies after the POST, before its result commits
        return delivered
      }).pipe(
        sql.withTransaction,
        orDie,
        Effect.tap((delivered) =>
          Effect.sync(() => {
            settledSinceLastBatch.push([delivery.organizationId, delivered ? "sent" : "failed"])
          })
        )
      )

    const attempt = (delivery: Claimed, now: Date, retryDelaysMs: ReadonlyArray<number>, timeoutMs: number) =>
      Effect.gen(function*() {
        const startedAt = yield* currentTime
        const outcome = yield* post(delivery, timeoutMs, startedAt)
        const durationMs = (yield* currentTimeMillis) - startedAt.getTime()
        // Attempt n (1-based) that fails waits retryDelaysMs[n - 1]; past the schedule the delivery has failed.
        const delay = retryDelaysMs[delivery.attempts - 1]
        const nextAttemptAt = delay === undefined ? null : new Date(now.getTime() + durationMs + delay)
        yield* settle(delivery, startedAt, durationMs, outcome, nextAttemptAt)
      })

    /** Deliveries due and not yet being sent, and how late the oldest is. */
    const queueState = (now: Date) =>
      orDie(sql<{ depth: string; oldest: Date | string | null }>`
        SELECT count(*) AS depth, min(next_attempt_at) AS oldest
        FROM (SELECT d.next_attempt_at FROM webhook_deliveries d
              JOIN webhook_endpoints e ON e.organization_id = d.organization_id AND e.id = d.endpoint_id
              WHERE d.status = 'PENDING' AND d.next_attempt_at <= ${now} AND e.listen_until IS NULL
              LIMIT ${QUEUE_DEPTH_CAP}) due`).pipe(
        Effect.map(([row]) => ({
          depth: Number(row?.depth ?? 0),
          lagMs: row?.oldest == null ? 0 : Math.max(0, now.getTime() - new Date(row.oldest).getTime())
        }))
      )

    const release = (endpointId: string) =>
      Effect.sync(() => {
        const count = (inFlight.get(endpointId) ?? 1) - 1
        if (count === 0) inFlight.delete(endpointId)
        else inFlight.set(endpointId, count)
        finishedSinceLastBatch++
      })

    /**
     * Claims what is due and starts sending it. Returns how many deliveries it
     * started or saw finish; while any is still in flight it never returns 0,
     * so `billing worker --once` waits for them.
     */
    const runDue = Effect.fn("WebhookSender.runDue")((now: Date): Effect.Effect<number> =>
      Effect.gen(function*() {
        const { retryDelaysMs, timeoutMs } = yield* Effect.orDie(DeliveryConfig)
        let sending = 0
        for (const count of inFlight.values()) sending += count
        const leaseUntil = new Date(now.getTime() + timeoutMs + LEASE_MARGIN_MS)
        const claimed = sending < MAX_IN_FLIGHT ? yield* claim(now, MAX_IN_FLIGHT - sending, leaseUntil) : []
        for (const delivery of claimed) {
          inFlight.set(delivery.endpointId, (inFlight.get(delivery.endpointId) ?? 0) + 1)
          yield* FiberSet.run(
            running,
            attempt(delivery, now, retryDelaysMs, timeoutMs).pipe(
              Effect.catchAllCause((cause) => Effect.logError(`webhook delivery ${delivery.id} failed`, cause)),
              Effect.ensuring(release(delivery.endpointId))
            )
          )
        }
        if (claimed.length === 0 && sending > 0) yield* Effect.sleep(IN_FLIGHT_POLL_MS)
        const finished = finishedSinceLastBatch
        finishedSinceLastBatch = 0
        const settled = settledSinceLastBatch
        settledSinceLastBatch = []
        yield* tally(settled)
        if (claimed.length + finished > 0) yield* reportQueue(queueState(now))
        return claimed.length + finished + (inFlight.size > 0 ? 1 : 0)
      }))

    /** The worker job: the deliveries due at each call's `now`. */
    const job: WorkerJob = { name: webhookDeliveryJobName, runOnce: runDue }

    return { runDue, job } as const
  })
}) {}
