import type { Command } from "commander"
import { listFooter, nextCursorOf, withOldest, limitOption } from "../lists.ts"
import { Effect, Layer } from "effect"
import { Box, Text } from "../ui/ink.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { MAX_LIMIT } from "../../src/http/Pagination.ts"
import { toNumber } from "../../src/money.ts"
import { givenOrCurrentTime } from "../../src/time.ts"
import { WebhookDeliveries, type Replayed } from "../../src/webhooks/Deliveries.ts"
import { WebhookEndpoints } from "../../src/webhooks/Endpoints.ts"
import { EventView, WebhookEvents } from "../../src/webhooks/Events.ts"
import { EventListParams } from "../../src/operations/EventsApi.ts"
import {
  DEFAULT_EVENT_TYPES,
  type Delivery,
  DeliveryStatus,
  type Endpoint,
  EndpointCreate,
  EndpointUpdate,
  EVENT_TYPES
} from "../../src/webhooks/Webhook.ts"
import { progressReporter, watch } from "../ui/Live.tsx"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, numberFlag, organizationOf, runnerOn, withOrg } from "../run.ts"
import { parseInstant } from "../instantFlag.ts"
import { decimalFlag } from "../DecimalFlag.ts"
import type { OrganizationId } from "../../src/ids.ts"

const run = runnerOn(Layer.mergeAll(WebhookEndpoints.Default, WebhookDeliveries.Default, WebhookEvents.Default))

interface Flags {
  readonly json?: boolean
  readonly org?: string
}

const endpointJson = (endpoint: Endpoint) => ({
  id: endpoint.id,
  url: endpoint.url,
  events: endpoint.events,
  threshold: endpoint.threshold === null ? null : toNumber(endpoint.threshold),
  enabled: endpoint.enabled
})

/** The secret is printed only where it was just made: by add and rotate-secret. */
const endpointWithSecretJson = (endpoint: Endpoint) => ({ ...endpointJson(endpoint), secret: endpoint.secret })

const endpointStatus = (endpoint: Endpoint) =>
  endpoint.removedAt ? "removed" : endpoint.enabled ? "enabled" : "disabled"

const EndpointView = (props: { readonly title: string; readonly endpoint: Endpoint; readonly showSecret?: boolean }) => (
  <Details
    title={props.title}
    fields={[
      ["id", props.endpoint.id],
      ["url", props.endpoint.url],
      ["events", props.endpoint.events.join(", ")],
      ["threshold", props.endpoint.threshold === null ? "-" : `${toNumber(props.endpoint.threshold)} USD`],
      ["status", endpointStatus(props.endpoint)],
      ...(props.showSecret ? [["secret", props.endpoint.secret] as const] : [])
    ]}
  />
)

const deliveryJson = (delivery: Delivery) => ({
  id: delivery.id,
  eventId: delivery.eventId,
  eventType: delivery.eventType,
  triggeredAt: delivery.triggeredAt.toISOString(),
  endpointId: delivery.endpointId,
  url: delivery.url,
  status: delivery.status,
  attempts: delivery.attempts,
  nextAttemptAt: delivery.nextAttemptAt?.toISOString() ?? null,
  lastStatusCode: delivery.lastStatusCode,
  lastError: delivery.lastError,
  deliveredAt: delivery.deliveredAt?.toISOString() ?? null,
  replayOf: delivery.replayOf,
  createdAt: delivery.createdAt.toISOString(),
  attemptLog: delivery.attemptLog.map((attempt) => ({
    attempt: attempt.attempt,
    startedAt: attempt.startedAt.toISOString(),
    durationMs: attempt.durationMs,
    statusCode: attempt.statusCode,
    error: attempt.error
  }))
})

const DeliveriesTable = (
  props: { readonly deliveries: ReadonlyArray<Delivery>; readonly title?: string; readonly nextCursor?: string | null }
) => {
  const attempts = props.deliveries.flatMap((delivery) => delivery.attemptLog)
  const failed = props.deliveries.filter((delivery) => delivery.status === "FAILED").length
  const meanMs = attempts.length === 0
    ? 0
    : Math.round(attempts.reduce((total, attempt) => total + attempt.durationMs, 0) / attempts.length)
  return (
    <Table
      {...(props.title ? { title: props.title } : {})}
      columns={[
        { header: "DELIVERY", value: (d) => d.id, whole: true },
        { header: "EVENT", value: (d) => d.eventId },
        { header: "TYPE", value: (d) => d.eventType },
        { header: "ENDPOINT", value: (d) => d.url },
        { header: "STATUS", value: (d) => d.status },
        { header: "ATTEMPTS", value: (d) => String(d.attempts), align: "right" },
        {
          header: "CODES",
          value: (d) => d.attemptLog.map((a) => a.statusCode === null ? "ERR" : String(a.statusCode)).join(",") || "-"
        },
        { header: "LAST MS", value: (d) => String(d.attemptLog.at(-1)?.durationMs ?? "-"), align: "right" },
        { header: "NEXT RETRY", value: (d) => d.status === "PENDING" ? d.nextAttemptAt?.toISOString() ?? "-" : "-" },
        { header: "LAST ERROR", value: (d) => d.lastError ?? "" }
      ]}
      rows={props.deliveries}
      footer={`${props.deliveries.length} deliveries, ${failed} failed, ${attempts.length} attempts, mean ${meanMs} ms${
        props.nextCursor ? `; more rows: repeat with --cursor ${props.nextCursor}` : ""
      }`}
    />
  )
}

const WatchedDeliveries = (props: { readonly deliveries: ReadonlyArray<Delivery>; readonly seconds: number; readonly at: Date }) => (
  <DeliveriesTable
    title={`Deliveries at ${props.at.toISOString()}, refreshed every ${props.seconds} s (Ctrl-C to stop)`}
    deliveries={props.deliveries}
  />
)

/** An event as `GET /events` answers it. */
const eventJson = encode(EventView)

/** `3: 1 delivered, 2 failed`: an event's deliveries by status, the empty counts left out. */
const countsText = (event: EventView) => {
  const { total, ...byStatus } = event.deliveryCounts
  const parts = Object.entries(byStatus).filter(([, count]) => count > 0).map(([status, count]) => `${count} ${status}`)
  return parts.length === 0 ? "0" : `${total}: ${parts.join(", ")}`
}

const EventsTable = (props: { readonly events: ReadonlyArray<EventView>; readonly footer: string }) => (
  <Table
    columns={[
      { header: "EVENT", value: (e) => e.id, whole: true },
      { header: "TYPE", value: (e) => `${e.eventType}${e.test ? " (test)" : ""}` },
      { header: "CUSTOMER", value: (e) => e.customerId ?? "-" },
      { header: "TRIGGERED", value: (e) => e.triggeredAt.toISOString() },
      { header: "DELIVERIES", value: countsText }
    ]}
    rows={props.events}
    footer={props.footer}
  />
)

const parseEvents = (value: string) => value.split(",").map((part) => part.trim()).filter((part) => part !== "")

export const registerWebhook = (program: Command) => {
  const webhook = program.command("webhook").description("webhook endpoints, deliveries, retries and replays")

  withOrg(webhook.command("add").description("subscribe an endpoint to wallet, balance, purchase and invoice events"))
    .requiredOption("--url <url>", "where events are POSTed")
    .option(
      "--events <list>",
      `comma-separated event types: ${EVENT_TYPES.join(", ")} (default: ${DEFAULT_EVENT_TYPES.join(",")})`,
      parseEvents
    )
    .option("--threshold <usd>", "drop and recovery level for customers without an alert level of their own", decimalFlag)
    .action((options: Flags & { url: string; events?: Array<string>; threshold?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(EndpointCreate, {
            url: options.url,
            ...(options.events ? { events: options.events } : {}),
            ...(options.threshold !== undefined ? { threshold: options.threshold } : {})
          })
          return yield* Effect.flatMap(WebhookEndpoints, (endpoints) => endpoints.add(organizationId, input))
        }),
        {
          json: (endpoint) => ({ endpoint: endpointWithSecretJson(endpoint) }),
          view: (endpoint) => (
            <EndpointView title="Endpoint added. Verify deliveries with this secret." endpoint={endpoint} showSecret />
          )
        }
      )
    )

  withOrg(webhook.command("list").description("list endpoints"))
    .option("--include-removed", "list removed endpoints too")
    .action((options: Flags & { includeRemoved?: boolean }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(WebhookEndpoints, (endpoints) =>
            endpoints.list(organizationId, { includeRemoved: options.includeRemoved }))
        }),
        {
          json: (endpoints) => ({
            endpoints: endpoints.map((endpoint) => ({
              ...endpointJson(endpoint),
              removedAt: endpoint.removedAt?.toISOString() ?? null,
              createdAt: endpoint.createdAt.toISOString()
            })),
            nextCursor: null
          }),
          view: (endpoints) => (
            <Table
              columns={[
                { header: "ID", value: (e) => e.id },
                { header: "URL", value: (e) => e.url },
                { header: "EVENTS", value: (e) => e.events.join(",") },
                { header: "THRESHOLD", value: (e) => (e.threshold === null ? "-" : String(toNumber(e.threshold))), align: "right" },
                { header: "STATUS", value: endpointStatus }
              ]}
              rows={endpoints}
              footer={`${endpoints.length} endpoint(s)`}
            />
          )
        }
      )
    )

  withOrg(webhook.command("update").description("change an endpoint's URL, events or threshold").argument("<endpointId>"))
    .option("--url <url>", "where events are POSTed")
    .option("--events <list>", `comma-separated event types: ${EVENT_TYPES.join(", ")}`, parseEvents)
    .option(
      "--threshold <usd>",
      "drop and recovery level for customers without an alert level of their own; \"none\" removes it",
      (value: string) => value.trim() === "none" ? "none" : decimalFlag(value)
    )
    .action((id: string, options: Flags & { url?: string; events?: Array<string>; threshold?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(EndpointUpdate, {
            ...(options.url !== undefined ? { url: options.url } : {}),
            ...(options.events ? { events: options.events } : {}),
            ...(options.threshold !== undefined
              ? { threshold: options.threshold === "none" ? null : options.threshold }
              : {})
          })
          return yield* Effect.flatMap(WebhookEndpoints, (endpoints) => endpoints.update(organizationId, id, input))
        }),
        {
          json: (endpoint) => ({ endpoint: endpointJson(endpoint) }),
          view: (endpoint) => <EndpointView title="Endpoint updated" endpoint={endpoint} />
        }
      )
    )

  const endpointCommand = (
    name: string,
    description: string,
    title: string,
    action: (endpoints: WebhookEndpoints, organizationId: OrganizationId, id: string) => Effect.Effect<Endpoint, unknown>,
    showSecret = false
  ) =>
    withOrg(webhook.command(name).description(description).argument("<endpointId>"))
      .action((id: string, options: Flags) =>
        run(
          options,
          Effect.gen(function*() {
            const organizationId = yield* organizationOf(options)
            return yield* Effect.flatMap(WebhookEndpoints, (endpoints) => action(endpoints, organizationId, id))
          }),
          {
            json: (endpoint) => ({ endpoint: showSecret ? endpointWithSecretJson(endpoint) : endpointJson(endpoint) }),
            view: (endpoint) => <EndpointView title={title} endpoint={endpoint} showSecret={showSecret} />
          }
        )
      )

  endpointCommand("enable", "resume deliveries to an endpoint", "Endpoint enabled", (e, org, id) => e.enable(org, id))
  endpointCommand(
    "disable",
    "stop an endpoint: events triggered while it is disabled are never sent to it",
    "Endpoint disabled",
    (e, org, id) => e.disable(org, id)
  )
  endpointCommand(
    "rotate-secret",
    "new signing secret, used at once by every later attempt",
    "Secret rotated",
    (e, org, id) => e.rotateSecret(org, id),
    true
  )
  endpointCommand(
    "remove",
    "remove an endpoint (its delivery history is kept)",
    "Endpoint removed",
    (e, org, id) => e.remove(org, id)
  )

  withOrg(webhook.command("events").description("stored events, newest first, with their deliveries' counts (as GET /events)"))
    .option("--type <type>", `only this event type: ${EVENT_TYPES.join(", ")}`)
    .option("--customer <id>", "only the events about this customer")
    .option("--from <iso>", "only events triggered at or after this instant")
    .option("--to <iso>", "... and before this one")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last event of the previous page (the page goes on towards older events)")
    .action((options: Flags & { type?: string; customer?: string; from?: string; to?: string; limit?: number; cursor?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const filters = yield* decodeInput(EventListParams.pick("type", "from", "to"), {
            ...(options.type !== undefined ? { type: options.type } : {}),
            ...(options.from !== undefined ? { from: options.from } : {}),
            ...(options.to !== undefined ? { to: options.to } : {})
          })
          return yield* Effect.flatMap(WebhookEvents, (events) =>
            events.list(organizationId, {
              page: { limit: Math.min(options.limit ?? 50, MAX_LIMIT), cursor: options.cursor },
              eventType: filters.type,
              customerId: options.customer,
              from: filters.from,
              to: filters.to
            }))
        }),
        {
          json: (events) => ({ events: events.map(eventJson), nextCursor: nextCursorOf(events, options) }),
          view: (events) => <EventsTable events={events} footer={listFooter(`${events.length} event(s)`, events, options)} />
        }
      )
    )

  withOrg(webhook.command("event").description("one event: its body as delivered, and every delivery with its attempts").argument("<eventId>"))
    .action((id: string, options: Flags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(WebhookEvents, (events) => events.get(organizationId, id))
        }),
        {
          json: (found) => ({ event: eventJson(found.event), deliveries: found.deliveries.map(deliveryJson) }),
          view: (found) => (
            <Box flexDirection="column">
              <Details
                title="Event"
                fields={[
                  ["id", found.event.id],
                  ["type", `${found.event.eventType}${found.event.test ? " (test)" : ""}`],
                  ["customer", found.event.customerId ?? "-"],
                  ["triggered", found.event.triggeredAt.toISOString()],
                  ["deliveries", countsText(found.event)],
                  ["body", found.event.body]
                ]}
              />
              <DeliveriesTable deliveries={found.deliveries} />
            </Box>
          )
        }
      )
    )

  withOldest(withOrg(webhook.command("deliveries").description("deliveries, newest first, with every attempt")))
    .option("--endpoint <id>", "only this endpoint's")
    .option("--event <id>", "only this event's")
    .option("--status <status>", "PENDING, DELIVERED, FAILED or CANCELLED")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last delivery of the previous page")
    .option("--watch [seconds]", "keep the table on screen, refreshed every few seconds (default 2), until Ctrl-C", numberFlag)
    .action((
      options: Flags & {
        endpoint?: string
        event?: string
        status?: string
        limit?: number
        cursor?: string
        oldest?: boolean
        watch?: number | true
      }
    ) => {
      const page = Effect.gen(function*() {
        const organizationId = yield* organizationOf(options)
        const status = options.status === undefined
          ? undefined
          : yield* decodeInput(DeliveryStatus, options.status.toUpperCase(), "--status")
        return yield* Effect.flatMap(WebhookDeliveries, (deliveries) =>
          deliveries.list(organizationId, {
            endpointId: options.endpoint,
            eventId: options.event,
            status,
            limit: Math.max(1, Math.min(options.limit ?? 50, MAX_LIMIT)),
            cursor: options.cursor,
            oldestFirst: options.oldest
          }))
      })
      if (options.watch !== undefined && !options.json) {
        const seconds = options.watch === true ? 2 : Math.max(0.5, options.watch)
        return run(options, watch(page, (deliveries, at) => <WatchedDeliveries deliveries={deliveries} seconds={seconds} at={at} />, seconds), {
          json: () => ({}),
          view: () => <Text dimColor>Stopped watching.</Text>
        })
      }
      return run(options, page, {
        json: (deliveries) => ({ deliveries: deliveries.map(deliveryJson), nextCursor: nextCursorOf(deliveries, options) }),
        view: (deliveries) => <DeliveriesTable deliveries={deliveries} nextCursor={nextCursorOf(deliveries, options)} />
      })
    })

  withOrg(webhook.command("retry").description("attempt a delivery again now").argument("<deliveryId>"))
    .action((id: string, options: Flags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(WebhookDeliveries, (deliveries) => deliveries.retry(organizationId, id))
        }),
        {
          json: (delivery) => ({ delivery: deliveryJson(delivery) }),
          view: (delivery) => <DeliveriesTable title="Delivery queued for another attempt" deliveries={[delivery]} />
        }
      )
    )

  withOrg(webhook.command("replay").description("send events again, same id and body, to the endpoints that had them"))
    .option("--event <id>", "one event")
    .option("--since <iso>", "every event triggered at or after this instant")
    .option("--until <iso>", "... and before this one (default: now)")
    .action((options: Flags & { event?: string; since?: string; until?: string }) => {
      const progress = progressReporter({ json: options.json || options.event !== undefined }, "events replayed")
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const service = yield* WebhookDeliveries
          if ((options.event === undefined) === (options.since === undefined)) {
            return yield* new BadRequest({ message: "pass either --event ID or --since ISO [--until ISO]" })
          }
          if (options.event !== undefined) return [yield* service.replay(organizationId, options.event)]
          const since = yield* parseInstant(options.since)
          const until = yield* givenOrCurrentTime(yield* parseInstant(options.until))
          const eventIds = yield* service.eventsBetween(organizationId, since!, until)
          const replayed: Array<Replayed> = []
          if (eventIds.length > 0) progress.update(0, eventIds.length)
          for (const eventId of eventIds) {
            replayed.push(yield* service.replay(organizationId, eventId))
            progress.update(replayed.length, eventIds.length)
          }
          return replayed
        }).pipe(Effect.ensuring(Effect.sync(progress.stop))),
        {
          json: (replayed) => ({
            events: replayed.length,
            deliveries: replayed.reduce((total, r) => total + r.deliveries.length, 0),
            replayed: replayed.map((r) => ({
              eventId: r.event.id,
              eventType: r.event.eventType,
              triggeredAt: r.event.triggeredAt.toISOString(),
              deliveries: r.deliveries.map(deliveryJson)
            }))
          }),
          view: (replayed) => (
            <DeliveriesTable
              title={`Replayed ${replayed.length} event(s); the worker sends them next`}
              deliveries={replayed.flatMap((r) => r.deliveries)}
            />
          )
        }
      )
    })
}
