/**
 * The webhook bodies as schemas: the OpenAPI document's `webhooks` section is
 * rendered from them (src/app/OpenApiDoc.ts), and the tests decode every body
 * a receiver gets with them, so the document says what is actually sent.
 * The bodies themselves are written by the outbox (src/webhooks/Outbox.ts);
 * EventBody.ts has the same shapes as plain types for receivers.
 */
import { JSONSchema, Schema } from "effect"
import { signalErrorFields } from "../schema.ts"
import { EVENT_TYPES, type EventType } from "./EventBody.ts"

const envelope = <T extends EventType, D extends Schema.Schema.AnyNoContext>(eventType: T, data: D) =>
  Schema.Struct({
    id: Schema.String.annotations({ description: "`evt_...`: the same on every attempt, retry and replay of the event." }),
    event_type: Schema.Literal(eventType),
    triggered_at: Schema.String.annotations({
      description: "ISO 8601. Orders events, which may arrive out of order or more than once."
    }),
    test: Schema.optional(Schema.Literal(true)).annotations({
      description: "Present only on an event made by `billing trigger`: nothing moved."
    }),
    data
  })

const USD = (description: string) => Schema.Number.annotations({ description: `USD, exact decimal. ${description}` })

const walletFields = {
  customer_id: Schema.String,
  external_id: Schema.NullOr(Schema.String),
  previous_balance: USD("The ordinary Wallet before the change."),
  current_balance: USD("The ordinary Wallet after it."),
  delta: USD("current_balance - previous_balance."),
  source: Schema.Literal("USAGE", "ADJUSTMENT", "PURCHASE", "RECURRING_GRANT").annotations({
    description: "What moved the wallet: PURCHASE covers purchase and cycle grants and invoice payments."
  }),
  usage_log_id: Schema.NullOr(Schema.String).annotations({ description: "The usage-log row that caused the change." })
}

const walletLevelData = (levelDescription: string) =>
  Schema.Struct({
    ...walletFields,
    threshold: USD(levelDescription),
    threshold_source: Schema.Literal("CUSTOMER", "ENDPOINT").annotations({
      description: "CUSTOMER: the customer's low-balance alert level; ENDPOINT: the endpoint's own --threshold."
    })
  })

const quantity = (description: string) =>
  Schema.Number.annotations({ description: `In the balance's own unit (credits, outcomes, units, occurrences), exact. ${description}` })

const thresholdData = Schema.Struct({
  customer_id: Schema.String,
  external_id: Schema.NullOr(Schema.String),
  balance_type: Schema.Literal("CREDIT", "OUTCOME", "UNIT", "COMPOSITE"),
  balance_id: Schema.String.annotations({
    description: "The creditId, outcomeId, unitId or compositeId of the balance, as in the customer's balances."
  }),
  purchase_id: Schema.String,
  threshold: Schema.Literal(50, 80, 100).annotations({
    description: "Percent of `granted` used: at most 50 %, 20 % or 0 % of what was granted this cycle is left."
  }),
  granted: quantity("Granted this cycle: the cycle's grant (with rollover and composite debt) plus adjustments."),
  used: quantity("Used this cycle from the grant, just after the move that reached the threshold."),
  remaining: quantity("granted - used (below zero only for a composite's debt)."),
  cycle_index: Schema.Number.annotations({ description: "The purchase's cycle, 0 for the first." }),
  period_start: Schema.String.annotations({ description: "ISO 8601: the cycle's start." }),
  period_end: Schema.String.annotations({ description: "ISO 8601: the cycle's end." }),
  source: Schema.Literal("USAGE", "ADJUSTMENT").annotations({ description: "A priced signal, or a balance adjustment (a claw-back)." }),
  usage_log_id: Schema.NullOr(Schema.String).annotations({ description: "The usage-log row whose move reached the threshold." })
})

const refusedData = Schema.Struct({
  raw_id: Schema.String.annotations({ description: "The signal's id (`sig_...`), as its 202 returned it: `GET /signals/{rawId}`." }),
  message_id: Schema.String,
  route: Schema.Literal("CREDIT", "OUTCOME", "OUTCOME_COMPLETE", "UNIT", "WALLET", "COMPOSITE_COMPLETE").annotations({
    description: "The route the signal was sent to (`/signal/credit`, `/signal/outcome`, ...)."
  }),
  status: Schema.Literal("FAILED"),
  customer_id: Schema.NullOr(Schema.String).annotations({
    description: "The customer, when one was found; null when the signal named none the workspace has."
  }),
  external_id: Schema.NullOr(Schema.String).annotations({ description: "The externalId the signal was sent with, if any." }),
  agent_key: Schema.NullOr(Schema.String),
  idempotency_key: Schema.NullOr(Schema.String),
  received_at: Schema.String.annotations({ description: "ISO 8601: when the signal was accepted (its 202)." }),
  occurred_at: Schema.NullOr(Schema.String).annotations({
    description: "ISO 8601: when the usage happened, as the signal's `timestamp` said; null: at `received_at`."
  }),
  error: Schema.Struct(signalErrorFields)
})

/** Each event type's body. */
export const EventBodySchemas = {
  "wallet.balance.update": envelope("wallet.balance.update", Schema.Struct(walletFields)).annotations({
    description: "The customer's ordinary Wallet went up or down."
  }),
  "wallet.balance.drop": envelope(
    "wallet.balance.drop",
    walletLevelData("The level the wallet went from above to at or below.")
  ).annotations({ description: "The ordinary Wallet went from above a level to at or below it." }),
  "wallet.balance.recovered": envelope(
    "wallet.balance.recovered",
    walletLevelData("The level the wallet went from at or below to above.")
  ).annotations({ description: "The ordinary Wallet went from at or below a level back above it (the mirror of a drop)." }),
  "balance.threshold.crossed": envelope("balance.threshold.crossed", thresholdData).annotations({
    description: "A prepaid credit, outcome, unit or composite balance reached 50, 80 or 100 % used of what was granted " +
      "this cycle; each threshold once a cycle."
  }),
  "signal.refused": envelope("signal.refused", refusedData).annotations({
    description: "The worker refused a signal it had accepted (202): it ended FAILED and bills nothing until it is " +
      "replayed. One event each time a signal is refused (a replay refused again sends another)."
  })
} satisfies { readonly [T in EventType]: Schema.Schema.AnyNoContext }

/**
 * The OpenAPI 3.1 `webhooks` section: one POST per event type, the body's
 * schema and the headers every delivery carries (docs/webhooks.md).
 */
export const webhooksDocument = () => {
  const headers = {
    "X-Service-Signature": {
      description: "`t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\" keyed with the endpoint's whole whsec_ secret>`.",
      required: true,
      schema: { type: "string" }
    },
    "X-Service-Event-Id": { description: "The body's `id`.", required: true, schema: { type: "string" } },
    "X-Service-Event-Type": { description: "The body's `event_type`.", required: true, schema: { type: "string" } }
  }
  return Object.fromEntries(EVENT_TYPES.map((eventType) => {
    const body: Schema.Schema.AnyNoContext = EventBodySchemas[eventType]
    const { $schema: _schema, ...schema } = JSONSchema.make(body, { target: "openApi3.1" })
    return [eventType, {
      post: {
        summary: eventType,
        description: `${schema.description ?? ""} Subscribe an endpoint with \`billing webhook add --events ${eventType}\`. ` +
          "Signed and retried as docs/webhooks.md says.",
        parameters: Object.entries(headers).map(([name, header]) => ({ name, in: "header", ...header })),
        requestBody: { required: true, content: { "application/json": { schema } } },
        responses: {
          "200": {
            description: "Any 2xx answer within the timeout (5 s) delivers the event; anything else is a failed attempt, retried."
          }
        }
      }
    }]
  }))
}
