/**
 * `billing listen --forward-to URL` and `billing trigger EVENT`: webhook events
 * on a developer's machine without writing a receiver first (src/webhooks/Listen.ts).
 */
import type { Command } from "commander"
import { Cause, Effect, Fiber, Layer, Logger, LogLevel, ManagedRuntime, Schedule, Schema } from "effect"
import { Text } from "../ui/ink.ts"
import { SqlClient } from "@effect/sql"
import { Customers } from "../../src/customers/Customers.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { Wallets } from "../../src/billing/Wallets.ts"
import { AppServicesLive } from "../../src/app/Services.ts"
import { TelemetryLive } from "../../src/Telemetry.ts"
import { type Forwarded, LISTEN_LEASE_SECONDS, type ListenSession, WebhookListen } from "../../src/webhooks/Listen.ts"
import { WebhookOutbox } from "../../src/webhooks/Outbox.ts"
import {
  DEFAULT_EVENT_TYPES,
  EVENT_TYPES,
  EventType,
  isWalletEventType,
  LIFECYCLE_EVENT_TYPES,
  TriggerableEventType,
  WebhookUrl
} from "../../src/webhooks/Webhook.ts"
import { testLifecycleEvent } from "../../src/billing/LifecycleEvents.ts"
import { outputMode, setExitCode, writeOut } from "../Output.ts"
import { decodeInput, organizationOf, runnerOn, withOrg, writeFailure } from "../run.ts"
import { customerIdOf } from "../customerRef.ts"
import { BillingCommandServices } from "../commandServices.ts"
import { CustomerId, type OrganizationId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

interface ListenFlags {
  readonly json?: boolean
  readonly org?: string
  readonly forwardTo: string
  readonly events?: string
}

const eventsOf = (list: string | undefined) =>
  list === undefined
    ? Effect.succeed(undefined)
    : decodeInput(Schema.Array(EventType), list.split(",").map((part) => part.trim()).filter((part) => part !== ""))

const quietLogs = Layer.merge(
  Logger.minimumLogLevel(LogLevel.Warning),
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

const pollMs = () => Number(process.env.BILLING_LISTEN_POLL_MS ?? 250)

const forwardedLine = (forwarded: Forwarded, json: boolean) => {
  if (json) return JSON.stringify({ forwarded: true, ...forwarded })
  const answer = forwarded.statusCode === null ? `failed: ${forwarded.error}` : `${forwarded.statusCode}`
  return `${new Date().toISOString().slice(11, 19)}  ${forwarded.eventType.padEnd(22)} ${forwarded.eventId}  -> ${answer} (${forwarded.durationMs} ms)`
}

const listen = async (options: ListenFlags) => {
  const runtime = ManagedRuntime.make(AppServicesLive.pipe(Layer.provide(quietLogs), Layer.provide(TelemetryLive)))
  const json = outputMode(options) !== "tty"
  const write = (line: string) => Effect.sync(() => writeOut(`${line}\n`))

  const openSession = Effect.acquireRelease(
    Effect.gen(function*() {
      const organizationId = yield* organizationOf(options)
      const url = yield* decodeInput(WebhookUrl, options.forwardTo)
      const events = yield* eventsOf(options.events)
      const listener = yield* WebhookListen
      yield* listener.sweepExpired(organizationId)
      return { session: yield* listener.open(organizationId, url, events), url }
    }),
    ({ session }) => Effect.flatMap(WebhookListen, (listener) => listener.close(session))
  )

  const announce = (session: ListenSession, url: string) =>
    json
      ? write(JSON.stringify({ listening: true, organizationId: session.organizationId, forwardTo: url, events: session.events, secret: session.secret }))
      : write([
        `Ready. Forwarding ${session.events.join(", ")} events of ${session.organizationId} to ${url}`,
        `Signing secret for this session: ${session.secret}`,
        "Ctrl-C stops."
      ].join("\n"))

  const program = Effect.scoped(
    Effect.gen(function*() {
      const { session, url } = yield* openSession
      const listener = yield* WebhookListen
      yield* announce(session, url)
      const heartbeat = Effect.repeat(listener.heartbeat(session), Schedule.spaced(`${Math.floor(LISTEN_LEASE_SECONDS / 3)} seconds`))
      const forwarding = Effect.repeat(
        Effect.flatMap(listener.forwardPending(session, url), (forwarded) =>
          Effect.forEach(forwarded, (one) => write(forwardedLine(one, json)), { discard: true })),
        Schedule.spaced(`${pollMs()} millis`)
      )
      yield* Effect.race(heartbeat, forwarding)
    })
  )

  const fiber = runtime.runFork(program)
  const stop = () => void runtime.runPromise(Fiber.interrupt(fiber))
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  const exit = await runtime.runPromise(Fiber.await(fiber))
  await runtime.dispose()
  process.off("SIGINT", stop)
  process.off("SIGTERM", stop)
  if (exit._tag === "Failure") {
    if (!Cause.isInterruptedOnly(exit.cause)) {
      writeFailure(options, exit.cause)
      setExitCode(1)
      return
    }
  }
  setExitCode(0)
}

interface TriggerFlags {
  readonly json?: boolean
  readonly org?: string
  readonly customer?: string
  readonly externalId?: string
}

/** The customer a test event is about: the one named, else the organisation's newest active one. */
const customerFor = (organizationId: OrganizationId, options: TriggerFlags) =>
  Effect.gen(function*() {
    if (options.customer !== undefined || options.externalId !== undefined) {
      return yield* customerIdOf(organizationId, options.customer, options.externalId)
    }
    const sql = yield* SqlClient.SqlClient
    const rows = yield* Effect.orDie(sql<{ id: string }>`SELECT id FROM customers
      WHERE organization_id = ${organizationId} AND archived_at IS NULL ORDER BY id DESC LIMIT 1`)
    if (rows.length === 0) {
      return yield* new BadRequest({ message: "a test event is about a customer: create one first, or pass --customer ID or --external-id ID" })
    }
    return CustomerId.make(rows[0]!.id)
  })

export const registerListen = (program: Command) => {
  withOrg(
    program.command("listen").description(
      "forward this organisation's webhook events to a local URL as they happen, signed with a secret of this session (development)"
    )
  )
    .requiredOption("--forward-to <url>", "where each event is POSTed, e.g. http://localhost:3000/webhooks")
    .option("--events <list>", `comma-separated event types: ${EVENT_TYPES.join(", ")} (default: ${DEFAULT_EVENT_TYPES.join(",")})`)
    .action((options: ListenFlags) => listen(options))

  withOrg(
    program.command("trigger").description("make a test event of this type (marked \"test\": true) for endpoints and listeners")
      .argument(
        "<event>",
        "wallet.balance.update, wallet.balance.drop or wallet.balance.recovered (nothing moved), or a lifecycle event: " +
          `${LIFECYCLE_EVENT_TYPES.join(", ")} (about the customer's newest purchase, invoice or credit note)`
      )
  )
    .option("--customer <id>", "the customer the event is about (default: the newest active one)")
    .option("--external-id <id>", "the active customer with this external id")
    .action((event: string, options: TriggerFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const eventType = yield* decodeInput(TriggerableEventType, event)
          const customerId = yield* customerFor(organizationId, options)
          if (!isWalletEventType(eventType)) {
            // A lifecycle event: about the customer's newest purchase or invoice, as the API shows it now.
            const sql = yield* SqlClient.SqlClient
            const triggered = yield* testLifecycleEvent(sql, organizationId, eventType, customerId)
            if (triggered.recordId === null) {
              const record = eventType.startsWith("purchase.") ? "purchase" : eventType.startsWith("credit_note.") ? "credit note" : "invoice"
              return yield* new BadRequest({
                message: `a test ${eventType} is about the customer's newest ${record}, and customer ${customerId} has none: ` +
                  `pass --customer ID or --external-id ID of a customer with one`
              })
            }
            return { id: triggered.id ?? "", eventType, recipients: triggered.recipients, customerId, recordId: triggered.recordId }
          }
          const customer = yield* Effect.flatMap(Customers, (customers) => customers.get(organizationId, customerId))
          const wallet = yield* Effect.flatMap(Wallets, (wallets) => wallets.get(organizationId, customerId))
          const triggered = yield* Effect.flatMap(WebhookOutbox, (outbox) =>
            outbox.testEvent(organizationId, eventType, { id: customer.id, externalId: customer.externalId, balance: wallet.balance }))
          return { ...triggered, customerId, recordId: null as string | null }
        }),
        {
          json: (triggered) => ({
            event: {
              id: triggered.id,
              eventType: triggered.eventType,
              test: true,
              customerId: triggered.customerId,
              ...(triggered.recordId === null ? {} : { recordId: triggered.recordId })
            },
            recipients: triggered.recipients
          }),
          view: (triggered) => (
            <Text>
              {triggered.recipients === 0
                ? `No endpoint or listener takes ${triggered.eventType}: nothing sent.`
                : `Test event ${triggered.id} (${triggered.eventType}) for ${triggered.customerId}${
                  triggered.recordId === null ? "" : ` about ${triggered.recordId}`
                } queued for ${triggered.recipients} recipient(s).`}
            </Text>
          )
        }
      )
    )
}
