/**
 * The webhook outbox: the one door through which a change becomes
 * webhook events. Whoever moves the ordinary Wallet (purchases, adjustments,
 * cycles, usage) calls `walletChanged` inside the transaction that moves it,
 * and the ledger calls `thresholdsCrossed` when a move takes a prepaid balance
 * to a threshold, and the signal worker calls `signalsRefused` in the
 * transaction that ends signals FAILED, so an event exists exactly when the change committed. The
 * lifecycle events of purchases and invoices (src/billing/LifecycleEvents.ts, a floor above) come
 * through `subscribedEndpoints` and `writeEvents`, in the transaction of their change. The
 * worker delivers what is written here (see src/webhooks/Sender.ts).
 *
 * The Reserved Wallet never comes through here: it triggers no event.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { findAll, insertRows, insertRowsStatement, writeTogether } from "../db/Sql.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import type { Decimal } from "../money.ts"
import { Money } from "../schema.ts"
import type { EventType, WalletEventType } from "./Webhook.ts"
import { currentTime, currentTimeMillis } from "../time.ts"
import type { ThresholdCrossing } from "./ThresholdCrossing.ts"

export type { BalanceKind, ThresholdCrossing } from "./ThresholdCrossing.ts"

export type WalletChangeSource = "USAGE" | "ADJUSTMENT" | "PURCHASE" | "RECURRING_GRANT"

export interface WalletChange {
  readonly organizationId: string
  readonly customerId: string
  readonly externalId: string | null
  readonly previousBalance: Decimal
  readonly currentBalance: Decimal
  readonly delta: Decimal
  readonly source: WalletChangeSource
  /** The usage-log row that caused the change, when one did. */
  readonly usageLogId: string | null
  /** The customer's low-balance alert level in USD; null means each endpoint's own threshold applies. */
  readonly alertLevel: Decimal | null
  readonly at: Date
}

const Subscriber = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  events: Schema.Array(Schema.String),
  threshold: Schema.NullOr(Money)
})
type Subscriber = typeof Subscriber.Type

/** Where the drop level came from: the customer's alert level or the endpoint's threshold. */
type LevelSource = "CUSTOMER" | "ENDPOINT"

/** Decimals go into the body as JSON number text straight from their exact digits, never via a float. */
const decimalJson = (value: Decimal) => BigDecimal.format(value)

/**
 * The exact body text of an event. It is stored once and is what every attempt
 * signs and sends, so retries and replays are byte-identical.
 */
const eventBody = (
  id: string,
  eventType: EventType,
  change: WalletChange,
  level: { readonly threshold: Decimal; readonly source: LevelSource } | undefined,
  test = false
) => {
  const data: Array<readonly [string, string]> = [
    ["customer_id", JSON.stringify(change.customerId)],
    ["external_id", JSON.stringify(change.externalId)],
    ["previous_balance", decimalJson(change.previousBalance)],
    ["current_balance", decimalJson(change.currentBalance)],
    ["delta", decimalJson(change.delta)],
    ["source", JSON.stringify(change.source)],
    ["usage_log_id", JSON.stringify(change.usageLogId)]
  ]
  if (level) data.push(["threshold", decimalJson(level.threshold)], ["threshold_source", JSON.stringify(level.source)])
  const dataJson = `{${data.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`
  return `{"id":${JSON.stringify(id)},"event_type":${JSON.stringify(eventType)},"triggered_at":${
    JSON.stringify(change.at.toISOString())
  },${test ? `"test":true,` : ""}"data":${dataJson}}`
}

/** The balance went from above `level` to at or below it. */
const crossedDown = (change: WalletChange, level: Decimal) =>
  BigDecimal.greaterThan(change.previousBalance, level) && BigDecimal.lessThanOrEqualTo(change.currentBalance, level)

/** The mirror: from at or below `level` to above it. */
const crossedUp = (change: WalletChange, level: Decimal) =>
  BigDecimal.lessThanOrEqualTo(change.previousBalance, level) && BigDecimal.greaterThan(change.currentBalance, level)


const thresholdEventBody = (id: string, crossing: ThresholdCrossing) => {
  const data: Array<readonly [string, string]> = [
    ["customer_id", JSON.stringify(crossing.customerId)],
    ["external_id", JSON.stringify(crossing.externalId)],
    ["balance_type", JSON.stringify(crossing.balanceType)],
    ["balance_id", JSON.stringify(crossing.balanceId)],
    ["purchase_id", JSON.stringify(crossing.purchaseId)],
    ["threshold", String(crossing.threshold)],
    ["granted", decimalJson(crossing.granted)],
    ["used", decimalJson(crossing.used)],
    ["remaining", decimalJson(crossing.remaining)],
    ["cycle_index", String(crossing.cycleIndex)],
    ["period_start", JSON.stringify(crossing.periodStart.toISOString())],
    ["period_end", JSON.stringify(crossing.periodEnd.toISOString())],
    ["source", JSON.stringify(crossing.usageLogId === null ? "ADJUSTMENT" : "USAGE")],
    ["usage_log_id", JSON.stringify(crossing.usageLogId)]
  ]
  const dataJson = `{${data.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`
  return `{"id":${JSON.stringify(id)},"event_type":"balance.threshold.crossed","triggered_at":${
    JSON.stringify(crossing.at.toISOString())
  },"data":${dataJson}}`
}

/** A signal the worker refused (ended FAILED), as `signal.refused` tells it. */
export interface RefusedSignal {
  readonly organizationId: string
  readonly rawId: string
  readonly messageId: string
  readonly route: string
  /** The customer, when the workspace has it. */
  readonly customerId: string | null
  readonly externalId: string | null
  readonly agentKey: string | null
  readonly idempotencyKey: string | null
  readonly receivedAt: Date
  readonly occurredAt: Date | null
  readonly error: { readonly status: number; readonly code: string; readonly message: string }
}

const refusedEventBody = (id: string, refused: RefusedSignal, at: Date) => {
  const data = {
    raw_id: refused.rawId,
    message_id: refused.messageId,
    route: refused.route,
    status: "FAILED",
    customer_id: refused.customerId,
    external_id: refused.externalId,
    agent_key: refused.agentKey,
    idempotency_key: refused.idempotencyKey,
    received_at: refused.receivedAt.toISOString(),
    occurred_at: refused.occurredAt?.toISOString() ?? null,
    error: { status: refused.error.status, code: refused.error.code, message: refused.error.message }
  }
  return JSON.stringify({ id, event_type: "signal.refused", triggered_at: at.toISOString(), data })
}

const FiredAlert = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  componentId: Schema.String,
  threshold: Schema.Number
})

/** An endpoint that receives an event committed now (`subscribedEndpoints`). */
export type SubscribedEndpoint = Subscriber

/**
 * The endpoints of `organizations` enabled, not removed, listening (a
 * `billing listen` session until its lease is up) and subscribed to at least
 * one of `eventTypes`: one statement for any number of organisations, none
 * when there is nothing to ask about. By organisation, then id.
 */
export const subscribedEndpoints = (
  sql: SqlClient.SqlClient,
  organizations: ReadonlyArray<string>,
  eventTypes: ReadonlyArray<EventType>
): Effect.Effect<ReadonlyArray<SubscribedEndpoint>> =>
  organizations.length === 0 || eventTypes.length === 0
    ? Effect.succeed([])
    : findAll(
      Subscriber,
      sql`SELECT organization_id, id, events, threshold FROM webhook_endpoints
          WHERE organization_id IN ${sql.in(organizations)} AND ${listeningNow(sql)}
            AND events && ${[...new Set(eventTypes)]}::text[]
          ORDER BY organization_id, id`
    )

/** The endpoints that receive events now: enabled, not removed, and a `billing listen` session not ended. */
const listeningNow = (sql: SqlClient.SqlClient) =>
  sql.literal("enabled AND removed_at IS NULL AND (listen_until IS NULL OR listen_until > now())")

/**
 * A column of another statement (`organizationColumn` its organisation): which of `eventTypes` some
 * endpoint of the organisation listens to now, so that a write that would record one of them learns
 * it in a read it makes anyway instead of a statement of its own.
 */
export const listenedEventsColumn = (
  sql: SqlClient.SqlClient,
  organizationColumn: string,
  eventTypes: ReadonlyArray<EventType>
) =>
  sql`(SELECT coalesce(array_agg(DISTINCT t.event_type), '{}') FROM webhook_endpoints e
        CROSS JOIN LATERAL unnest(e.events) AS t(event_type)
        WHERE e.organization_id = ${sql.literal(organizationColumn)} AND ${listeningNow(sql)}
          AND t.event_type = ANY(${[...eventTypes]}::text[]))`

/**
 * An event whose `data` is built by its caller (the lifecycle events of
 * src/billing/LifecycleEvents.ts): a JSON value, written into the body as
 * `JSON.stringify` writes it.
 */
export interface OutboxEvent {
  readonly organizationId: string
  readonly eventType: EventType
  /** The customer it is about (the event row's `customer_id`). */
  readonly customerId: string | null
  readonly at: Date
  readonly data: unknown
  /** Made by `billing trigger`: the body says `"test": true`. */
  readonly test?: boolean
}

/**
 * Writes `events` with one delivery to each of `endpoints` (found by
 * `subscribedEndpoints` in the same transaction) of the event's organisation
 * subscribed to its type, in the caller's transaction: one statement for any
 * number of events, none when no endpoint takes any. An event no endpoint
 * takes is not stored. Each body is stored once, so every attempt, retry and
 * replay sends the same bytes. The ids of the events written, in order.
 */
export const writeEvents = (
  sql: SqlClient.SqlClient,
  events: ReadonlyArray<OutboxEvent>,
  endpoints: ReadonlyArray<SubscribedEndpoint>
): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    if (events.length === 0 || endpoints.length === 0) return []
    const now = yield* currentTimeMillis
    const rows: Array<Record<string, unknown>> = []
    const deliveries: Array<Record<string, unknown>> = []
    for (const event of events) {
      const recipients = endpoints.filter((endpoint) =>
        endpoint.organizationId === event.organizationId && endpoint.events.includes(event.eventType)
      )
      if (recipients.length === 0) continue
      const id = makeId("evt")
      const triggeredAt = event.at.toISOString()
      rows.push({
        organizationId: event.organizationId,
        id,
        eventType: event.eventType,
        customerId: event.customerId,
        triggeredAt,
        body: `{"id":${JSON.stringify(id)},"event_type":${JSON.stringify(event.eventType)},"triggered_at":${
          JSON.stringify(triggeredAt)
        },${event.test === true ? `"test":true,` : ""}"data":${JSON.stringify(event.data)}}`
      })
      // Due now, or at the change's own instant when a worker runs on a simulated clock (`--now`).
      const due = new Date(Math.min(event.at.getTime(), now)).toISOString()
      for (const endpoint of recipients) {
        deliveries.push({
          organizationId: event.organizationId,
          id: makeId("whd"),
          eventId: id,
          endpointId: endpoint.id,
          status: "PENDING",
          nextAttemptAt: due
        })
      }
    }
    // Foreign keys are checked at the statement's end: the deliveries go with their events, one round trip.
    yield* writeTogether(sql, [insertRowsStatement(sql, "webhook_events", rows), insertRowsStatement(sql, "webhook_deliveries", deliveries)])
    return rows.map((row) => row.id as string)
  })

export class WebhookOutbox extends Effect.Service<WebhookOutbox>()("WebhookOutbox", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * The endpoints of `organizations` that receive an event committed now:
     * enabled, not removed, listening (a `billing webhook listen` endpoint
     * until its time is up), and subscribed to `eventType` when one is named;
     * by organisation, then id.
     */
    const subscribersOf = (organizations: ReadonlyArray<string>, eventType?: string) =>
      findAll(
        Subscriber,
        sql`SELECT organization_id, id, events, threshold FROM webhook_endpoints
            WHERE organization_id IN ${sql.in(organizations)} AND enabled AND removed_at IS NULL
              AND (listen_until IS NULL OR listen_until > now())
              ${eventType === undefined ? sql.literal("") : sql`AND ${eventType} = ANY(events)`}
            ORDER BY organization_id, id`
      )

    /**
     * The events a set of wallet changes causes, with their deliveries, in two
     * statements whatever the number of changes. Whoever is enabled and
     * subscribed when the changes commit gets the events, nobody else ever;
     * an event nobody receives is not stored.
     */
    const walletChangedMany = Effect.fn("WebhookOutbox.walletChangedMany")((changes: ReadonlyArray<WalletChange>): Effect.Effect<void> =>
      Effect.gen(function*() {
        const moved = changes.filter((change) => !BigDecimal.equals(change.previousBalance, change.currentBalance))
        if (moved.length === 0) return
        const organizations = [...new Set(moved.map((change) => change.organizationId))]
        const endpoints = yield* subscribersOf(organizations)
        if (endpoints.length === 0) return
        const events: Array<Record<string, unknown>> = []
        const deliveries: Array<Record<string, unknown>> = []
        const now = yield* currentTimeMillis
        const record = (
          change: WalletChange,
          eventType: EventType,
          recipients: ReadonlyArray<Subscriber>,
          level?: { readonly threshold: Decimal; readonly source: LevelSource }
        ) => {
          if (recipients.length === 0) return
          const eventId = makeId("evt")
          events.push({
            organizationId: change.organizationId,
            id: eventId,
            eventType,
            customerId: change.customerId,
            triggeredAt: change.at.toISOString(),
            body: eventBody(eventId, eventType, change, level)
          })
          // Due now, or at the change's own instant when a worker runs on a simulated clock (`--now`).
          const due = new Date(Math.min(change.at.getTime(), now)).toISOString()
          for (const endpoint of recipients) {
            deliveries.push({
              organizationId: change.organizationId,
              id: makeId("whd"),
              eventId,
              endpointId: endpoint.id,
              status: "PENDING",
              nextAttemptAt: due
            })
          }
        }
        for (const change of moved) {
          const ofOrganization = endpoints.filter((endpoint) => endpoint.organizationId === change.organizationId)
          const subscribedTo = (eventType: EventType) =>
            ofOrganization.filter((endpoint) => endpoint.events.includes(eventType))
          record(change, "wallet.balance.update", subscribedTo("wallet.balance.update"))
          // A drop goes down through the level, a recovery back up through it: the same level rules for both.
          const levelEvents = [
            ["wallet.balance.drop", crossedDown],
            ["wallet.balance.recovered", crossedUp]
          ] as const
          for (const [eventType, crossed] of levelEvents) {
            const subscribers = subscribedTo(eventType)
            if (subscribers.length === 0) continue
            if (change.alertLevel !== null) {
              if (crossed(change, change.alertLevel)) {
                record(change, eventType, subscribers, { threshold: change.alertLevel, source: "CUSTOMER" })
              }
              continue
            }
            // Without a customer level each endpoint's own threshold decides; one event per level crossed.
            const byLevel = new Map<string, { threshold: Decimal; endpoints: Array<Subscriber> }>()
            for (const endpoint of subscribers) {
              if (endpoint.threshold === null || !crossed(change, endpoint.threshold)) continue
              const key = decimalJson(endpoint.threshold)
              const group = byLevel.get(key) ?? { threshold: endpoint.threshold, endpoints: [] }
              group.endpoints.push(endpoint)
              byLevel.set(key, group)
            }
            for (const group of byLevel.values()) {
              record(change, eventType, group.endpoints, { threshold: group.threshold, source: "ENDPOINT" })
            }
          }
        }
        yield* insertRows(sql, "webhook_events", events)
        yield* insertRows(sql, "webhook_deliveries", deliveries)
      }))

    const walletChanged = Effect.fn("WebhookOutbox.walletChanged")((change: WalletChange): Effect.Effect<void> => walletChangedMany([change]))

    /**
     * Prepaid balances that reached thresholds, found by the ledger in the
     * transaction that moved them. Each (balance, cycle, threshold) fires once:
     * the alert row's key decides (a threshold already recorded this cycle is
     * skipped, whatever moved the balance since), and is written whether or
     * not an endpoint listens. An event (one a threshold) goes to the endpoints
     * enabled and subscribed to `balance.threshold.crossed` now; nobody, no
     * event. Three statements whatever the number of crossings, none without one.
     */
    const thresholdsCrossed = Effect.fn("WebhookOutbox.thresholdsCrossed")((crossings: ReadonlyArray<ThresholdCrossing>): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (crossings.length === 0) return
        const organizations = [...new Set(crossings.map((crossing) => crossing.organizationId))]
        const endpoints = yield* subscribersOf(organizations, "balance.threshold.crossed")
        const alertKey = (row: { organizationId: string; purchaseId: string; cycleIndex: number; componentId: string; threshold: number }) =>
          `${row.organizationId}/${row.purchaseId}/${row.cycleIndex}/${row.componentId}/${row.threshold}`
        const byKey = new Map<string, { crossing: ThresholdCrossing; eventId: string | null }>()
        for (const crossing of crossings) {
          const listening = endpoints.some((endpoint) => endpoint.organizationId === crossing.organizationId)
          const key = alertKey(crossing)
          if (!byKey.has(key)) byKey.set(key, { crossing, eventId: listening ? makeId("evt") : null })
        }
        const alerts = [...byKey.values()]
        const column = <A>(pick: (alert: typeof alerts[number]) => A) => alerts.map(pick)
        const fired = yield* findAll(
          FiredAlert,
          sql`INSERT INTO balance_threshold_alerts (organization_id, purchase_id, cycle_index, component_id, threshold,
                customer_id, usage_log_id, event_id, fired_at)
              SELECT * FROM unnest(
                ${column((a) => a.crossing.organizationId)}::text[], ${column((a) => a.crossing.purchaseId)}::text[],
                ${column((a) => a.crossing.cycleIndex)}::int[], ${column((a) => a.crossing.componentId)}::text[],
                ${column((a) => a.crossing.threshold)}::smallint[], ${column((a) => a.crossing.customerId)}::text[],
                ${column((a) => a.crossing.usageLogId)}::text[], ${column((a) => a.eventId)}::text[],
                ${column((a) => a.crossing.at.toISOString())}::timestamptz[])
              ON CONFLICT DO NOTHING
              RETURNING organization_id, purchase_id, cycle_index, component_id, threshold`
        )
        const events: Array<Record<string, unknown>> = []
        const deliveries: Array<Record<string, unknown>> = []
        const now = yield* currentTimeMillis
        for (const row of fired) {
          const { crossing, eventId } = byKey.get(alertKey(row))!
          if (eventId === null) continue
          events.push({
            organizationId: crossing.organizationId,
            id: eventId,
            eventType: "balance.threshold.crossed",
            customerId: crossing.customerId,
            triggeredAt: crossing.at.toISOString(),
            body: thresholdEventBody(eventId, crossing)
          })
          const due = new Date(Math.min(crossing.at.getTime(), now)).toISOString()
          for (const endpoint of endpoints) {
            if (endpoint.organizationId !== crossing.organizationId) continue
            deliveries.push({
              organizationId: crossing.organizationId,
              id: makeId("whd"),
              eventId,
              endpointId: endpoint.id,
              status: "PENDING",
              nextAttemptAt: due
            })
          }
        }
        // Foreign keys are checked at the statement's end: the deliveries go with their events, one round trip.
        yield* writeTogether(sql, [insertRowsStatement(sql, "webhook_events", events), insertRowsStatement(sql, "webhook_deliveries", deliveries)])
      }))

    /**
     * `billing trigger EVENT`: an event of that type for a real customer of the
     * organisation, marked `"test": true`, with nothing moved (delta 0, both
     * balances the wallet's current one; a drop's or recovery's threshold is that balance).
     * It goes to every enabled endpoint and live listen session subscribed to
     * the type, thresholds aside, through the same deliveries as a real event.
     * The number of recipients; none stores nothing, as for real events.
     */
    const testEvent = Effect.fn("WebhookOutbox.testEvent")(function*(
      organizationId: OrganizationId,
      eventType: WalletEventType,
      customer: { readonly id: string; readonly externalId: string | null; readonly balance: Decimal }) {
        const recipients = yield* subscribersOf([organizationId], eventType)
        const id = makeId("evt")
        const at = yield* currentTime
        if (recipients.length === 0) return { id, eventType, recipients: 0 }
        const change: WalletChange = {
          organizationId,
          customerId: customer.id,
          externalId: customer.externalId,
          previousBalance: customer.balance,
          currentBalance: customer.balance,
          delta: BigDecimal.fromBigInt(0n),
          source: "ADJUSTMENT",
          usageLogId: null,
          alertLevel: null,
          at
        }
        const level = eventType === "wallet.balance.update" ? undefined : { threshold: customer.balance, source: "CUSTOMER" as const }
        yield* insertRows(sql, "webhook_events", [{
          organizationId,
          id,
          eventType,
          customerId: customer.id,
          triggeredAt: at.toISOString(),
          body: eventBody(id, eventType, change, level, true)
        }])
        yield* insertRows(
          sql,
          "webhook_deliveries",
          recipients.map((endpoint) => ({
            organizationId,
            id: makeId("whd"),
            eventId: id,
            endpointId: endpoint.id,
            status: "PENDING",
            nextAttemptAt: at.toISOString()
          }))
        )
        return { id, eventType, recipients: recipients.length }
      }, sql.withTransaction)

    /**
     * `signal.refused` for signals the worker ended FAILED, inside the
     * transaction that ends them. One statement finds the endpoints of the
     * signals' organisations enabled and subscribed; only when there is one
     * does `describe` read the signals, and their events and deliveries go in
     * one more. Nobody subscribed, no event and no statement more.
     */
    const signalsRefused = Effect.fn("WebhookOutbox.signalsRefused")(function*(
      organizationIds: ReadonlyArray<string>,
      describe: Effect.Effect<ReadonlyArray<RefusedSignal>>
    ) {
      if (organizationIds.length === 0) return
      const endpoints = yield* subscribersOf([...new Set(organizationIds)], "signal.refused")
      if (endpoints.length === 0) return
      const refusals = yield* describe
      const at = yield* currentTime
      const events: Array<Record<string, unknown>> = []
      const deliveries: Array<Record<string, unknown>> = []
      for (const refused of refusals) {
        const recipients = endpoints.filter((endpoint) => endpoint.organizationId === refused.organizationId)
        if (recipients.length === 0) continue
        const eventId = makeId("evt")
        events.push({
          organizationId: refused.organizationId,
          id: eventId,
          eventType: "signal.refused",
          customerId: refused.customerId,
          triggeredAt: at.toISOString(),
          body: refusedEventBody(eventId, refused, at)
        })
        for (const endpoint of recipients) {
          deliveries.push({
            organizationId: refused.organizationId,
            id: makeId("whd"),
            eventId,
            endpointId: endpoint.id,
            status: "PENDING",
            nextAttemptAt: at.toISOString()
          })
        }
      }
      // Foreign keys are checked at the statement's end: the deliveries go with their events, one round trip.
      yield* writeTogether(sql, [insertRowsStatement(sql, "webhook_events", events), insertRowsStatement(sql, "webhook_deliveries", deliveries)])
    })

    return { walletChanged, walletChangedMany, thresholdsCrossed, signalsRefused, testEvent } as const
  })
}) {}
