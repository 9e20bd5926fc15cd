/**
 * Usage signals: the request of each `/signal/*` route, the inbox row, and the
 * acknowledgements. Every request schema is strict: an unknown field (a price,
 * a type, an agentKey where the route has none) is a 400, never ignored.
 */
import { BigDecimal, Schema, SchemaAST } from "effect"
import { Email } from "../customers/Customer.ts"
import { UsageLogEntry } from "../usage/UsageLogEntry.ts"
import { AnyJson, ExternalId, FieldProblemSchema, IdempotencyKey, MoneyInput, namesCustomer, signalErrorFields, strict, Timestamp } from "../schema.ts"

/** The route of a signal: it decides the meter, and scopes idempotency keys. */
export const SignalRoute = Schema.Literal("CREDIT", "OUTCOME", "OUTCOME_COMPLETE", "UNIT", "WALLET", "COMPOSITE_COMPLETE")
export type SignalRoute = typeof SignalRoute.Type

export const SignalStatus = Schema.Literal("QUEUED", "PROCESSED", "PENDING", "FAILED")
export type SignalStatus = typeof SignalStatus.Type

const TokenCount = Schema.Int.pipe(
  Schema.nonNegative({ message: () => "must be a whole number of 0 or more" }),
  Schema.lessThanOrEqualTo(1_000_000_000_000, { message: () => "must be at most 1e12" })
).annotations({ description: "Tokens of this class in the call: a whole number from 0 to 10^12; 0 when left out." })

/** Tokens of one model call. `model` is required; token counts default to 0. */
export const Usage = Schema.Struct({
  model: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(120, { message: () => "must be at most 120 characters" })
  ).annotations({ description: "The model called, enabled in the workspace, such as `gpt-4o`." }),
  inputTokens: Schema.optional(TokenCount),
  outputTokens: Schema.optional(TokenCount),
  cacheTokens: Schema.optional(TokenCount),
  cacheWriteTokens: Schema.optional(TokenCount)
}).annotations({
  ...strict,
  description: "The tokens of one model call. When the model has both cache rates, `cacheTokens` counts cache reads " +
    "only and cache writes go in `cacheWriteTokens`."
})
export type Usage = typeof Usage.Type

const customMaxBytes = 8192

/** Free-form metadata, stored as sent (at most 8 KB of JSON). */
export const Custom = Schema.Record({ key: Schema.String, value: AnyJson }).pipe(
  Schema.filter((custom) => JSON.stringify(custom).length <= customMaxBytes || `must be at most ${customMaxBytes} bytes of JSON`, {
    jsonSchema: {
      description: `Free-form metadata, stored as sent and returned on the usage log: an object of at most ${customMaxBytes} bytes of JSON.`
    }
  })
)

const TagValue = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(255, { message: () => "must be at most 255 characters" })
)

/** `{refId: value}`: exactly one property, named by a composite's refId, valued by the caller's correlation id. */
export const CompositeTag = Schema.Record({ key: Schema.String, value: TagValue }).pipe(
  Schema.filter((tag) => Object.keys(tag).length === 1 || "must hold exactly one property: {refId: value}", {
    jsonSchema: { minProperties: 1, maxProperties: 1 },
    description: "A composite tag: one property named by a composite's `refId`, valued by your own correlation id of " +
      "the occurrence. A tag that names no live composite is ignored."
  })
)
export type CompositeTag = typeof CompositeTag.Type

/** The single refId and value of a tag. */
export const tagOf = (tag: CompositeTag): { readonly refId: string; readonly value: string } => {
  const [refId, value] = Object.entries(tag)[0]!
  return { refId, value }
}

const AgentKeyField = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(80, { message: () => "must be at most 80 characters" })
).annotations({ description: "The `agentKey` of the credit, outcome step or unit this usage is for." })

const RunId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(255, { message: () => "must be at most 255 characters" })
).annotations({ description: "Your id of the outcome run, 1 to 255 characters: every signal of one run shares it." })

const maxQuantity = BigDecimal.fromBigInt(10_000_000n)

export const Quantity = MoneyInput.pipe(
  Schema.filter((q) => BigDecimal.isPositive(q) || "must be above 0"),
  Schema.filter((q) => BigDecimal.lessThanOrEqualTo(q, maxQuantity) || "must be at most 10,000,000", {
    jsonSchema: {
      type: "number",
      exclusiveMinimum: 0,
      maximum: 10_000_000,
      description: "How many units; above 0, at most 10,000,000, fractions allowed; 1 when left out."
    }
  })
)

const isoWithOffset = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(?:Z|([+-])(\d{2}):(\d{2}))$/

const daysInMonth = (year: number, month: number) =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/**
 * The instant (epoch milliseconds) an ISO 8601 date-time with a zone offset
 * names, or undefined when the text is not one: `2026-01-31T23:59:00Z`,
 * `2026-01-31T23:59:00.123+02:00`. The offset is required (a time without one
 * names no instant), fractions stop at milliseconds, and every part must exist
 * on the calendar (no 30 February, no hour 24).
 */
export const instantOf = (text: string): number | undefined => {
  const match = isoWithOffset.exec(text)
  if (match === null) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const millis = match[7] === undefined ? 0 : Number(match[7].padEnd(3, "0"))
  const offsetHours = match[9] === undefined ? 0 : Number(match[9])
  const offsetMinutes = match[10] === undefined ? 0 : Number(match[10])
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return undefined
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, millis)
  const offset = (match[8] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000
  return date.getTime() - offset
}

/** A signal whose moment is this much before its intake is late: it queues in the backfill lane. */
export const lateAfterMs = 60 * 60_000

/** When the usage happened, as the caller says it: an ISO 8601 date-time with a zone offset. */
export const SignalTimestamp = Schema.String.pipe(
  Schema.filter(
    (text) =>
      instantOf(text) !== undefined ||
      "must be an ISO 8601 date-time with a zone offset (Z or +hh:mm) and at most millisecond precision, " +
        "such as 2026-01-31T23:59:00Z",
    {
      jsonSchema: {
        format: "date-time",
        pattern: isoWithOffset.source,
        description: "When the usage happened: an ISO 8601 date-time with a zone offset (`Z` or `+hh:mm`) and at " +
          "most millisecond precision, such as `2026-01-31T23:59:00.250Z`. The moment of intake when left out. " +
          "At most 5 minutes ahead of the service's clock (else 400), and not older than the workspace's " +
          "late-usage window (`billing org settings --late-usage-days`, 35 days by default; else 422). The signal is billed in the " +
          "purchase cycle that contains this moment."
      }
    }
  )
)

/** The id of a spend hold (`POST /entitlements/check` with `reserve`), as that answer gave it. */
export const HoldId = Schema.String.pipe(
  Schema.pattern(/^rsv_[0-9A-Za-z]{1,64}$/, {
    message: () => "must be a reservationId as POST /entitlements/check answered it (rsv_ and letters or digits)"
  })
)

/**
 * `reservationId` on the routes that charge: the signal settles that hold
 * when it is priced (its real cost charged, the hold released). A hold that
 * is unknown, another customer's, already ended or expired is ignored and the
 * signal is priced as usual.
 */
const settles = {
  reservationId: Schema.optional(HoldId).annotations({
    description: "A hold of this customer made by `POST /entitlements/check` with `reserve`: pricing this signal " +
      "charges its real cost and releases the hold (once; a hold that is unknown, another customer's, already " +
      "settled, released or expired is ignored and the signal is priced as usual)."
  })
}

/** Who a signal is for and the optional fields every route shares. */
const common = {
  customerId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "The service's customer id. Required unless `externalId` is sent; wins when both are."
  }),
  externalId: Schema.optional(ExternalId).annotations({
    description: "Your own id of the customer, used when `customerId` is not sent. One that matches no customer yet " +
      "is accepted and kept Pending until the customer exists."
  }),
  member: Schema.optional(Email).annotations({
    description: "E-mail of the customer's member the usage is attributed to (matched case-insensitively)."
  }),
  idempotencyKey: Schema.optional(IdempotencyKey).annotations({
    description: "1 to 255 characters. A repeat with the same key on the same route answers the original signal " +
      "again and records nothing new, whatever its body says (a reused key is never refused)."
  }),
  custom: Schema.optional(Custom),
  timestamp: Schema.optional(SignalTimestamp)
}

export const CreditSignal = Schema.Struct({
  ...common,
  ...settles,
  agentKey: AgentKeyField,
  usage: Usage,
  composite: Schema.optional(CompositeTag)
}).annotations({ ...strict, ...namesCustomer })

export const OutcomeStepSignal = Schema.Struct({
  ...common,
  agentKey: AgentKeyField,
  runId: RunId,
  usage: Schema.optional(Usage),
  composite: Schema.optional(CompositeTag)
}).annotations({ ...strict, ...namesCustomer })

export const OutcomeCompleteSignal = Schema.Struct({
  ...common,
  ...settles,
  runId: RunId
}).annotations({ ...strict, ...namesCustomer })

export const UnitSignal = Schema.Struct({
  ...common,
  ...settles,
  agentKey: AgentKeyField,
  quantity: Schema.optional(Quantity),
  composite: Schema.optional(CompositeTag)
}).annotations({ ...strict, ...namesCustomer })

export const WalletSignal = Schema.Struct({
  ...common,
  ...settles,
  usage: Usage
}).annotations({ ...strict, ...namesCustomer })

export const CompositeCompleteSignal = Schema.Struct({
  ...common,
  composite: CompositeTag
}).annotations({ ...strict, ...namesCustomer })

/** Any accepted request, as the inbox keeps it. */
export interface SignalInput {
  readonly customerId?: string | undefined
  readonly externalId?: string | undefined
  readonly member?: string | undefined
  readonly idempotencyKey?: string | undefined
  readonly custom?: { readonly [key: string]: unknown } | undefined
  readonly agentKey?: string | undefined
  readonly runId?: string | undefined
  readonly composite?: CompositeTag | undefined
  /** When the usage happened (ISO 8601 with a zone offset); the moment of intake when left out. */
  readonly timestamp?: string | undefined
  /** The spend hold this signal settles. */
  readonly reservationId?: string | undefined
}

/** The schema of each route's body, to re-decode what the inbox kept. */
export const schemaOfRoute = {
  CREDIT: CreditSignal,
  OUTCOME: OutcomeStepSignal,
  OUTCOME_COMPLETE: OutcomeCompleteSignal,
  UNIT: UnitSignal,
  WALLET: WalletSignal,
  COMPOSITE_COMPLETE: CompositeCompleteSignal
} as const

/** The `type` of a batch item and the route whose body (and idempotency scope) it takes. */
export const batchRoutes = { credit: "CREDIT", outcome: "OUTCOME", unit: "UNIT", wallet: "WALLET" } as const
export type BatchType = keyof typeof batchRoutes

/** The most signals one batch request (or one CLI batch) carries. */
export const maxBatchSize = 1000

const batchItem = <T extends BatchType, F extends Schema.Struct.Fields>(
  type: T,
  body: Schema.Struct<F>,
  identifier: string,
  route: string
) =>
  Schema.Struct({
    type: Schema.Literal(type).annotations({ description: `Which route this item is the body of: ${route}.` }),
    ...body.fields
  }).annotations({
    ...strict,
    identifier,
    description: `A signal of ${route}, with "type": "${type}"`
  })

/**
 * What one item of a batch may be: the body of one of the four queued routes
 * with its `type`. This is the document's view; the route decodes each item on
 * its own (`Intake.acceptBatch`), so a bad item is that item's error only.
 */
export const SignalBatchItem = Schema.Union(
  batchItem("credit", CreditSignal, "SignalBatchCreditItem", "POST /signal/credit"),
  batchItem("outcome", OutcomeStepSignal, "SignalBatchOutcomeItem", "POST /signal/outcome"),
  batchItem("unit", UnitSignal, "SignalBatchUnitItem", "POST /signal/unit"),
  batchItem("wallet", WalletSignal, "SignalBatchWalletItem", "POST /signal/wallet")
)

/**
 * An item as the route receives it: any JSON value (decoded later, item by
 * item), documented as `SignalBatchItem` (the surrogate is what JSON Schema and
 * OpenAPI read; decoding ignores it).
 */
const RawBatchItem: Schema.Schema<unknown> = Schema.make(
  SchemaAST.annotations(Schema.Unknown.ast, { [SchemaAST.SurrogateAnnotationId]: SignalBatchItem.ast })
)

/** `POST /signal/batch`: 1 to 1,000 signals; any other count refuses the whole request. */
export const SignalBatch = Schema.Struct({
  signals: Schema.Array(RawBatchItem).pipe(
    Schema.minItems(1, { message: () => `must hold 1 to ${maxBatchSize.toLocaleString("en")} signals` }),
    Schema.maxItems(maxBatchSize, { message: () => `must hold 1 to ${maxBatchSize.toLocaleString("en")} signals` })
  ).annotations({
    title: "signals",
    description: "1 to 1,000 signals, each the body of its route with a `type`; each is answered on its own"
  })
}).annotations({ ...strict, identifier: "SignalBatch" })

/** One item's answer: queued like a 202 of its route, or refused with the status its route would answer. */
export const SignalBatchQueued = Schema.Struct({
  index: Schema.Int,
  queued: Schema.Literal(true),
  messageId: Schema.String,
  rawId: Schema.String
}).annotations({ identifier: "SignalBatchQueued" })

export const SignalBatchRefused = Schema.Struct({
  index: Schema.Int,
  queued: Schema.Literal(false),
  error: Schema.Struct({
    statusCode: Schema.Int,
    code: Schema.String.annotations({
      description: "The code the item's own route would answer with (`statusDetail.code`, docs/api.md \"Error codes\")."
    }),
    message: Schema.String,
    errors: Schema.optional(Schema.Array(FieldProblemSchema).annotations({
      description: "On a `validation_failed` item: each problem of the item with its field, as its own route's " +
        "answer would name them (`statusDetail.errors`)."
    }))
  })
}).annotations({ identifier: "SignalBatchRefused" })

export const SignalBatchItemResult = Schema.Union(SignalBatchQueued, SignalBatchRefused)
export type SignalBatchItemResult = typeof SignalBatchItemResult.Type

/** The answers, one per item, in the order of the request. */
export const SignalBatchResult = Schema.Struct({ results: Schema.Array(SignalBatchItemResult) })
export type SignalBatchResult = typeof SignalBatchResult.Type

export const Acknowledgement = Schema.Struct({
  queued: Schema.Literal(true),
  messageId: Schema.String,
  rawId: Schema.String
})
export type Acknowledgement = typeof Acknowledgement.Type

/**
 * The 200 of a queued route asked to wait (`Prefer: wait=N`) and priced within
 * the wait: the signal's usage-log row (`GET /signal/usage-log`'s shape:
 * `usageLog.customerCost`, `usageLog.balance.remaining`) and its ids.
 */
export const PricedSignal = Schema.Struct({
  usageLog: UsageLogEntry,
  messageId: Schema.String,
  rawId: Schema.String
}).annotations({ identifier: "PricedSignal" })
export type PricedSignal = typeof PricedSignal.Type

export const OutcomeCompleted = Schema.Struct({
  status: Schema.Literal("COMPLETED"),
  usageLog: Schema.Null,
  rawId: Schema.String
})
export type OutcomeCompleted = typeof OutcomeCompleted.Type

export const CompositeCompleted = Schema.Struct({
  status: Schema.Literal("COMPLETED"),
  composite: Schema.Struct({ id: Schema.String, name: Schema.String, refId: Schema.String }),
  value: Schema.String,
  rawId: Schema.String
})
export type CompositeCompleted = typeof CompositeCompleted.Type

/** An inbox row, for operators (CLI) and the worker. */
export class SignalRecord extends Schema.Class<SignalRecord>("SignalRecord")({
  organizationId: Schema.String,
  id: Schema.String,
  messageId: Schema.String,
  route: SignalRoute,
  status: SignalStatus,
  customerId: Schema.NullOr(Schema.String),
  externalId: Schema.NullOr(Schema.String),
  idempotencyKey: Schema.NullOr(Schema.String),
  agentKey: Schema.NullOr(Schema.String),
  runId: Schema.NullOr(Schema.String),
  compositeRef: Schema.NullOr(Schema.String),
  compositeValue: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String),
  body: Schema.Unknown,
  attempts: Schema.Int,
  errorStatus: Schema.NullOr(Schema.Int),
  /** The refusal's machine code (`statusDetail.code`, docs/api.md "Error codes"); null while not refused. */
  errorCode: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String),
  usageLogId: Schema.NullOr(Schema.String),
  /** When the usage happened, as the signal's `timestamp` said; null: at `receivedAt`. */
  occurredAt: Schema.NullOr(Timestamp),
  /** The moment is more than an hour before intake: the signal queues in the backfill lane. */
  late: Schema.Boolean,
  receivedAt: Timestamp,
  /** When it was last queued again (its customer took its externalId, a replay); the moment of one without `occurredAt`. */
  requeuedAt: Schema.NullOr(Timestamp),
  processedAt: Schema.NullOr(Timestamp)
}) {}

/** Why a signal was refused (FAILED) or is held (PENDING): what an error answer of the same refusal carries. */
export const SignalError = Schema.Struct(signalErrorFields).annotations({ identifier: "SignalError" })

/** A signal as the API shows it (`GET /signals/{rawId}`, `GET /signals`): where it is in its life, and why. */
export const SignalView = Schema.Struct({
  rawId: Schema.String.annotations({ description: "The signal's id (`sig_...`), as its 202 returned it." }),
  messageId: Schema.String,
  route: SignalRoute.annotations({
    description: "The route it was sent to: `/signal/credit` (CREDIT), `/signal/outcome` (OUTCOME), " +
      "`/signal/outcome/complete` (OUTCOME_COMPLETE), `/signal/unit` (UNIT), `/signal/wallet` (WALLET), " +
      "`/signal/composite/complete` (COMPOSITE_COMPLETE)."
  }),
  status: SignalStatus.annotations({
    description: "QUEUED: accepted, not priced yet. PROCESSED: priced (`usageLogId`). PENDING: held until a customer " +
      "takes its `externalId` (`error` says so). FAILED: refused by the worker (`error` says why); it bills nothing " +
      "until replayed."
  }),
  customerId: Schema.NullOr(Schema.String).annotations({
    description: "The customer, as sent or as found by `externalId` once priced or refused; null while held PENDING."
  }),
  externalId: Schema.NullOr(Schema.String).annotations({ description: "The externalId the signal was sent with, if any." }),
  agentKey: Schema.NullOr(Schema.String),
  runId: Schema.NullOr(Schema.String),
  idempotencyKey: Schema.NullOr(Schema.String),
  usageLogId: Schema.NullOr(Schema.String).annotations({
    description: "Its usage-log row once PROCESSED (`POST /signal/usage-log/lookup`); null otherwise."
  }),
  error: Schema.NullOr(SignalError).annotations({ description: "Why it was refused (FAILED) or is held (PENDING); null otherwise." }),
  receivedAt: Timestamp.annotations({ description: "When it was accepted (its 202)." }),
  occurredAt: Schema.NullOr(Timestamp).annotations({
    description: "When its usage happened, as its `timestamp` said; null: at `requeuedAt` when it was queued again, " +
      "else at `receivedAt`."
  }),
  requeuedAt: Schema.NullOr(Timestamp).annotations({
    description: "When it was last queued again (a customer took its `externalId`, or it was replayed); null: never. " +
      "A signal sent without a `timestamp` is billed in the cycle of this moment."
  }),
  processedAt: Schema.NullOr(Timestamp).annotations({ description: "When the worker last ended it (priced, held or refused)." })
}).annotations({ identifier: "Signal" })
export type SignalView = typeof SignalView.Type

/** The API's view of an inbox row. */
export const toSignalView = (record: SignalRecord): SignalView => ({
  rawId: record.id,
  messageId: record.messageId,
  route: record.route,
  status: record.status,
  customerId: record.customerId,
  externalId: record.externalId,
  agentKey: record.agentKey,
  runId: record.runId,
  idempotencyKey: record.idempotencyKey,
  usageLogId: record.usageLogId,
  error: record.errorStatus === null || (record.status !== "FAILED" && record.status !== "PENDING")
    ? null
    : { status: record.errorStatus, code: record.errorCode ?? "internal_error", message: record.errorMessage ?? "" },
  receivedAt: record.receivedAt,
  occurredAt: record.occurredAt,
  requeuedAt: record.requeuedAt,
  processedAt: record.processedAt
})
