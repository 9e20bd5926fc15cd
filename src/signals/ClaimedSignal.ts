/**
 * A queued signal as the drain and the spend check read it: the columns they
 * claim, the moment it is billed at, and its body decoded by its route's
 * schema. Every loader of a batch's context takes its signals in this shape.
 */
import { Either, type ParseResult, Schema } from "effect"
import type { Decimal } from "../money.ts"
import { Timestamp } from "../schema.ts"
import { identityDecoder } from "../SchemaCheck.ts"
import { schemaOfRoute, SignalRoute, type Usage } from "./Signal.ts"

/** The columns of a queued signal the drain reads (the inbox row has more, for operators). */
export const ClaimedSignal = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  messageId: Schema.String,
  route: SignalRoute,
  customerId: Schema.NullOr(Schema.String),
  externalId: Schema.NullOr(Schema.String),
  runId: Schema.NullOr(Schema.String),
  compositeRef: Schema.NullOr(Schema.String),
  compositeValue: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String),
  body: Schema.Unknown,
  /** When the usage happened: coalesce(occurred_at, requeued_at, received_at). Billed in the cycle containing it. */
  moment: Timestamp,
  /** Which of the three the moment is: refusals name it (a signal without a timestamp can be retried into a cycle). */
  momentSource: Schema.Literal("TIMESTAMP", "REQUEUED", "RECEIVED"),
  /**
   * The body's `custom` as JSON text (`customColumn`), kept on the signal's usage row as sent. Read as text: the
   * SQL client camelCases the keys of every JSON value it reads (`order_id` came back `orderId`), which is
   * harmless for the body's own fields and wrong for the caller's. Only the drain's claim reads it.
   */
  customText: Schema.optionalWith(Schema.NullOr(Schema.String), { exact: true })
})
export type SignalRecord = typeof ClaimedSignal.Type

/**
 * The columns of a queued signal's moment, for every statement that reads
 * signals as `ClaimedSignal`: its own `timestamp` (usage happened then, however
 * often it is retried), else the moment it was last queued again (its
 * customer took its externalId, an operator replayed it: usage sent without a
 * timestamp is usage "now" each time it is submitted), else its intake.
 */
export const momentColumns = "coalesce(occurred_at, requeued_at, received_at) AS moment, " +
  "CASE WHEN occurred_at IS NOT NULL THEN 'TIMESTAMP' WHEN requeued_at IS NOT NULL THEN 'REQUEUED' ELSE 'RECEIVED' END AS moment_source"

/** The column of `customText`, for the statements that read signals to price them. */
export const customColumn = "(body -> 'custom')::text AS custom_text"

/** The signal's `custom` as sent, or null. */
export const customOf = (signal: SignalRecord): unknown =>
  signal.customText === undefined || signal.customText === null ? null : JSON.parse(signal.customText)

/** A claimed signal with its body decoded by its route's schema. */
export interface DecodedSignal {
  readonly record: SignalRecord
  readonly body: {
    readonly agentKey?: string
    readonly usage?: Usage
    readonly quantity?: Decimal
    /** The spend hold the signal settles, when it names one. */
    readonly reservationId?: string
  }
}

/**
 * Each route's decoder of a stored body, built once; a body of a route that
 * decodes to itself is vouched for by a plain check (SchemaCheck.ts), as at
 * intake: the decoder's copy of every body was a share of the worker's CPU in
 * the drain worth saving (docs/benchmarks.md, "The drain's claim").
 */
const bodyDecoderOf = Object.fromEntries(
  Object.entries(schemaOfRoute).map(([route, schema]) => [route, identityDecoder(schema as Schema.Schema<any, any, never>)])
) as Record<SignalRecord["route"], (body: unknown) => Either.Either<DecodedSignal["body"], ParseResult.ParseError>>

/** Decodes a stored body; one that no longer decodes is a defect of ours, and fails only its signal (this throws). */
export const decodeSignal = (record: SignalRecord): DecodedSignal => ({
  record,
  body: Either.getOrThrowWith(bodyDecoderOf[record.route](record.body), (error) => error)
})
