/**
 * The webhook bodies as schemas: the OpenAPI document's `webhooks` section is
 * rendered from them (src/app/OpenApiDoc.ts), and the tests decode every body
 * a receiver gets with them, so the document says what is actually sent.
 * The bodies themselves are written by the outbox (src/webhooks/Outbox.ts);
 * EventBody.ts has the same shapes as plain types for receivers.
 */
import { JSONSchema, Schema } from "effect"
import { signalErrorFields } from "../schema.ts"
import { EVENT_TYPES, LIFECYCLE_EVENT_TYPES, type EventType, type LifecycleEventType } from "./EventBody.ts"

export const envelope = <T extends EventType, D extends Schema.Schema.AnyNoContext>(eventType: T, data: D) =>
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

/** A number written from its exact digits: `format: decimal`, as the API's Money (client/ reads it as such). */
const exactDecimal = (description: string) =>
  Schema.Number.annotations({ description, jsonSchema: { type: "number", format: "decimal", description } })

const USD = (description: string) => exactDecimal(`USD, exact decimal. ${description}`)

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
  exactDecimal(`In the balance's own unit (credits, outcomes, units, occurrences), exact. ${description}`)

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
  external_id: Schema.NullOr(Schema.String).annotations({
    description: "The customer's externalId when the customer is known and has one (whether the signal named it by " +
      "`customerId` or by `externalId`); else the externalId the signal was sent with; null when neither."
  }),
  agent_key: Schema.NullOr(Schema.String),
  idempotency_key: Schema.NullOr(Schema.String),
  received_at: Schema.String.annotations({ description: "ISO 8601: when the signal was accepted (its 202)." }),
  occurred_at: Schema.NullOr(Schema.String).annotations({
    description: "ISO 8601: when the usage happened, as the signal's `timestamp` said; null: at `received_at`."
  }),
  error: Schema.Struct(signalErrorFields)
})

/** The record a lifecycle event carries: the key of its `data` the record sits under, its type's first word. */
export type LifecycleRecordKind = LifecycleEventType extends `${infer Kind}.${string}` ? Kind : never

const recordKindOf = (eventType: LifecycleEventType) => eventType.slice(0, eventType.indexOf(".")) as LifecycleRecordKind

/** When each lifecycle event is sent (docs/webhooks.md "Lifecycle events"). */
const LIFECYCLE_DESCRIPTIONS = {
  "purchase.created": "A purchase was made (`POST /purchases`), ACTIVE in its first cycle or SCHEDULED for its billing date.",
  "purchase.changed": "A purchase was changed: its plan at once (`POST /purchases/{id}/change` with `NOW`, or a " +
    "SCHEDULED purchase's plan), a plan change scheduled for the cycle end (`CYCLE_END`) or removed, or its " +
    "auto-payment setting (`change` says which).",
  "purchase.cancelled": "A purchase was cancelled (`POST /purchases/{id}/cancel`); its final USAGE invoice, if any, is in `invoice_ids`.",
  "purchase.renewed": "The cycle job moved a purchase into its next cycle (a SCHEDULED purchase into its first one, at " +
    "its billing date), applying a plan change scheduled for that moment; the invoices it issued are in `invoice_ids`.",
  "invoice.created": "An invoice was issued (OPEN, or PAID at issue: free, or paid from the wallet) or drafted (DRAFT, " +
    "inside the grace period).",
  "invoice.finalized": "A DRAFT invoice became final (OPEN, or PAID from the wallet) when its grace period ended: it has " +
    "its number and due date now.",
  "invoice.paid": "An invoice became PAID: a payment recorded (`POST /invoices/{id}/payments`), paid from the wallet " +
    "at issue or at finalisation, or issued free.",
  "invoice.voided": "An OPEN invoice was voided.",
  "invoice.overdue": "The cycle job marked an OPEN invoice overdue: its due date passed unpaid (once an invoice).",
  "credit_note.created": "A credit note was created on an OPEN or PAID invoice (`POST /invoices/{id}/credit-notes`); " +
    "`invoice` is the invoice it credits just after it. A note that left nothing due on an OPEN invoice is followed " +
    "by that invoice's `invoice.paid`."
} satisfies { readonly [T in LifecycleEventType]: string }

/** Any object (its JSON Schema written out: Effect's for `Unknown` carries an `$id` the document would repeat). */
const AnyObject = (description: string) =>
  Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    jsonSchema: { type: "object", additionalProperties: true, description }
  })

/** What a purchase change was (`purchase.changed`). */
const PurchaseChangeKindSchema = Schema.Literal("PLAN_CHANGED", "PLAN_CHANGE_SCHEDULED", "SCHEDULED_CHANGE_REMOVED", "AUTO_PAYMENT_CHANGED")
  .annotations({
    description: "PLAN_CHANGED: the plan changed at once (`when: NOW`, or any plan change of a SCHEDULED purchase); " +
      "PLAN_CHANGE_SCHEDULED: a change for the cycle end was set (`when: CYCLE_END`, see `purchase.scheduledChange`); " +
      "SCHEDULED_CHANGE_REMOVED: that change was removed; AUTO_PAYMENT_CHANGED: `autoPayment` was changed."
  })

/**
 * The body of each lifecycle event, given the schemas of the records the API
 * answers with (`purchase`, `invoice`): the billing floor passes its own
 * (src/billing/LifecycleEventSchemas.ts), so that the OpenAPI document and the
 * tests hold the record to what `GET /purchases/{id}` and `GET /invoices/{id}`
 * answer; `EventBodySchemas` below takes any object for the record.
 */
export const lifecycleBodySchemas = (
  records: { readonly [K in LifecycleRecordKind]: Schema.Schema.AnyNoContext }
): { readonly [T in LifecycleEventType]: Schema.Schema.AnyNoContext } =>
  Object.fromEntries(LIFECYCLE_EVENT_TYPES.map((eventType) => {
    const kind = recordKindOf(eventType)
    const record = records[kind].annotations({
      description: kind === "purchase"
        ? "The purchase just after the change, as `GET /purchases/{id}` answered it then."
        : kind === "credit_note"
        ? "The credit note, as `GET /invoices/{id}/credit-notes` lists it."
        : "The invoice just after the change, with its lines, as `GET /invoices/{id}` answered it then."
    })
    // A credit note's event carries the invoice it credits beside it.
    const creditNoteFields: Record<string, Schema.Schema.AnyNoContext> = kind !== "credit_note" ? {} : {
      invoice: records.invoice.annotations({
        description: "The invoice the note credits, just after it (its `amountDue`, the note in its `creditNotes`), " +
          "as `GET /invoices/{id}` answered it then."
      })
    }
    const purchaseFields = kind !== "purchase" ? {} : {
      previous_attributes: Schema.NullOr(AnyObject(
        "The purchase's fields the change altered, with their values before it (camelCase, as in `purchase`)."
      )).annotations({
        description: "The purchase's fields the change altered, with their values before it (camelCase, as in " +
          "`purchase`); null for a new purchase and for a test event."
      }),
      invoice_ids: Schema.Array(Schema.String).annotations({
        description: "The invoices the change issued, in issue order; each is told by its own `invoice.created`."
      }),
      ...(eventType === "purchase.changed" ? { change: PurchaseChangeKindSchema } : {})
    }
    const data = Schema.Struct({
      customer_id: Schema.String,
      external_id: Schema.NullOr(Schema.String).annotations({ description: "The customer's externalId, if it has one." }),
      [kind]: record,
      ...purchaseFields,
      ...creditNoteFields
    })
    return [eventType, envelope(eventType, data).annotations({ description: LIFECYCLE_DESCRIPTIONS[eventType] })]
  })) as unknown as { readonly [T in LifecycleEventType]: Schema.Schema.AnyNoContext }

/** Any record: the webhooks floor does not know the API's records (`lifecycleBodySchemas`). */
const AnyRecord = AnyObject("A record as the API shows it.")

/** Each event type's body (a lifecycle event's record as any object: billing's schemas check it whole). */
export const EventBodySchemas = {
  ...lifecycleBodySchemas({ purchase: AnyRecord, invoice: AnyRecord, credit_note: AnyRecord }),
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
 * schema and the headers every delivery carries (docs/webhooks.md). `bodies`
 * replaces the schemas of `EventBodySchemas` it names (the lifecycle events'
 * with their records whole); the named schemas they reference (`Money`,
 * `Timestamp`, ...) are added to `definitions`, which the document's
 * `components.schemas` must hold (src/app/OpenApiDoc.ts merges them).
 */
export const webhooksDocument = (
  bodies: { readonly [T in EventType]?: Schema.Schema.AnyNoContext } = {},
  definitions: Record<string, JSONSchema.JsonSchema7> = {}
) => {
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
    const body: Schema.Schema.AnyNoContext = bodies[eventType] ?? EventBodySchemas[eventType]
    const schema = JSONSchema.fromAST(body.ast, { definitions, definitionPath: "#/components/schemas/", target: "openApi3.1" }) as
      JSONSchema.JsonSchema7 & { readonly description?: string }
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
