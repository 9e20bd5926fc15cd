/**
 * Signal intake and the operator's view of the inbox.
 *
 * Intake does only what is cheap and certain (schema, idempotency, an unknown
 * or archived `customerId`), then commits the raw signal to the inbox and
 * answers 202: from then on the signal is never lost. The worker
 * (SignalProcessor.ts) prices it. Outcome and composite completions answer
 * synchronously (404/409/422) and are billed by the worker like any signal.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Either, Exit, Option, ParseResult, Schema } from "effect"
import { constVoid } from "effect/Function"
import { Metering } from "../billing/Metering.ts"
import { ensureActive } from "../customers/Customer.ts"
import { Customers } from "../customers/Customers.ts"
import { Members } from "../members/Members.ts"
import { dieOnSqlError, findAll, findByIdOr, findOne, orDie, pageClause } from "../db/Sql.ts"
import {
  BadRequest,
  Conflict,
  errorStatus,
  NoActivePlan,
  NotFound,
  NotOnPlan,
  type ServiceError,
  Unprocessable,
  UnknownMember
} from "../errors.ts"
import type { Page } from "../Page.ts"
import { makeId } from "../ids.ts"
import { decodesToItself, identityDecoder } from "../SchemaCheck.ts"
import { describeIssues } from "../schema.ts"
import { type InboxRow, InboxWriter, type Refusal, tooOldRefusal, type Written } from "./InboxWriter.ts"
import { liveComposite, lockOccurrence, missingSignals } from "./Occurrences.ts"
import {
  type Acknowledgement,
  type BatchType,
  batchRoutes,
  type CompositeCompleted,
  CompositeCompleteSignal,
  instantOf,
  lateAfterMs,
  maxTimestampLeadMs,
  type OutcomeCompleted,
  OutcomeCompleteSignal,
  maxBatchSize,
  schemaOfRoute,
  type SignalBatchItemResult,
  type SignalBatchResult,
  type SignalInput,
  SignalRecord,
  type SignalRoute,
  type SignalStatus,
  tagOf
} from "./Signal.ts"

/** The routes answered 202 and priced later. */
export type QueuedRoute = Exclude<SignalRoute, "OUTCOME_COMPLETE" | "COMPOSITE_COMPLETE">

export type SignalOf<R extends SignalRoute> = Schema.Schema.Type<(typeof schemaOfRoute)[R]>

export interface SignalListQuery {
  readonly page: Page
  readonly customerId?: string | undefined
  readonly status?: SignalStatus | undefined
}

const Sent = Schema.Struct({ id: Schema.String, messageId: Schema.String, response: Schema.NullOr(Schema.Unknown) })

const acknowledgement = (row: { readonly id: string; readonly messageId: string }): Acknowledgement => ({
  queued: true,
  messageId: row.messageId,
  rawId: row.id
})


const queuedRoutes: ReadonlyArray<QueuedRoute> = ["CREDIT", "OUTCOME", "UNIT", "WALLET"]

/** `make` applied once to each queued route's schema. */
const perQueuedRoute = <A>(make: (schema: Schema.Schema<any, any>) => A): Record<QueuedRoute, A> =>
  Object.fromEntries(queuedRoutes.map((route) => [route, make(schemaOfRoute[route])])) as Record<QueuedRoute, A>

/**
 * Each queued route's decoder, built once (a batch decodes up to 1,000 items).
 * A valid body of a route that decodes to itself is vouched for by a plain check (SchemaCheck.ts).
 */
const decoderOf = perQueuedRoute((schema) => identityDecoder(schema))

/** A request body decoded by its queued route's schema, as the HttpApi route decodes it. */
export const decodeQueued = <R extends QueuedRoute>(route: R, body: unknown) =>
  decoderOf[route](body) as Either.Either<SignalOf<R>, ParseResult.ParseError>

/** Each queued route's encoder, built once: every accepted signal's body goes through one. */
const encoderOf = perQueuedRoute((schema) => Schema.encodeUnknownEither(schema))

/**
 * Routes whose schema decodes every body to itself (strict, so no field is
 * dropped either): encoding the decoded body again would give the same value.
 * The re-encode was 18 % of the intake lane's allocations (docs/benchmarks.md).
 */
const decodedIsEncoded = perQueuedRoute((schema) => decodesToItself(schema.ast))

/** The body the inbox keeps: the request decoded and encoded again by its route's schema. */
export const storedBody = (route: QueuedRoute, input: unknown) =>
  decodedIsEncoded[route] ? input : Either.getOrThrow(encoderOf[route](input))

/** A body its route's schema refuses, in the words the HttpApi routes use. */
const invalidBody = (error: ParseResult.ParseError) =>
  new BadRequest({ message: `Invalid request: ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))}` })

const nul = /\u0000/
const unpairedSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why PostgreSQL could not store a JSON value's text (in a string or a key), if it could not. */
const unstorable = (value: unknown): string | undefined => {
  if (typeof value === "string") {
    if (nul.test(value)) return "text must not contain NUL characters"
    if (unpairedSurrogate.test(value)) return "text must not contain unpaired UTF-16 surrogates"
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  if (Array.isArray(value)) {
    for (const item of value) {
      const why = unstorable(item)
      if (why !== undefined) return why
    }
    return undefined
  }
  for (const key in value) {
    const why = unstorable(key) ?? unstorable((value as Record<string, unknown>)[key])
    if (why !== undefined) return why
  }
  return undefined
}

/** The inbox columns of a request: customerId wins over externalId (rule 1). */
const columnsOf = (input: SignalInput) => {
  const tag = input.composite ? tagOf(input.composite) : undefined
  return {
    customerId: input.customerId ?? null,
    externalId: input.customerId === undefined ? input.externalId ?? null : null,
    idempotencyKey: input.idempotencyKey ?? null,
    agentKey: input.agentKey ?? null,
    runId: input.runId ?? null,
    compositeRef: tag?.refId ?? null,
    compositeValue: tag?.value ?? null,
    member: input.member ?? null
  }
}

/** When a signal's usage happened, as the inbox stores it (`signals.occurred_at`, `signals.late`). */
interface Moment {
  /** The `timestamp` sent, as an instant (ISO 8601, UTC); null when none was sent (the moment of intake). */
  readonly occurredAt: string | null
  /** More than an hour before intake: the backfill lane. */
  readonly late: boolean
  /** The service's clock at intake (only with a timestamp: the window counts back from it). */
  readonly intakeAt: string | undefined
  /** `occurredAt` in epoch milliseconds. */
  readonly occurredMs: number | undefined
}

/** A signal without a timestamp: its moment is its intake (no allocation per request on the intake lane). */
const atIntake: Either.Either<Moment, BadRequest> = Either.right({
  occurredAt: null,
  late: false,
  intakeAt: undefined,
  occurredMs: undefined
})

/**
 * The moment of a decoded request, at intake `now`: a `timestamp` more than
 * 5 minutes ahead of the service's clock is a 400 naming the field. (The
 * late-usage window is the organisation's: the inbox insert checks it.)
 */
const momentOf = (input: SignalInput, now: number): Either.Either<Moment, BadRequest> => {
  if (input.timestamp === undefined) return atIntake
  const intakeAt = new Date(now).toISOString()
  const occurred = instantOf(input.timestamp)
  // The schema has vouched for the text; an instant Date cannot hold is refused as the schema would.
  if (occurred === undefined || Number.isNaN(new Date(occurred).getTime())) {
    return Either.left(new BadRequest({ message: "Invalid request: timestamp: must be an ISO 8601 date-time with a zone offset" }))
  }
  if (occurred > now + maxTimestampLeadMs) {
    return Either.left(new BadRequest({
      message: `Invalid request: timestamp: must not be more than 5 minutes ahead of the service's clock (${intakeAt})`
    }))
  }
  return Either.right({
    occurredAt: new Date(occurred).toISOString(),
    late: occurred < now - lateAfterMs,
    intakeAt,
    occurredMs: occurred
  })
}

export class Signals extends Effect.Service<Signals>()("Signals", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const members = yield* Members
    const metering = yield* Metering
    const writer = yield* InboxWriter

    const sentWithKey = (organizationId: string, route: SignalRoute, key: string | undefined) =>
      key === undefined
        ? Effect.succeed(Option.none<typeof Sent.Type>())
        : findOne(
          Sent,
          sql`SELECT id, message_id, response FROM signals
              WHERE organization_id = ${organizationId} AND route = ${route} AND idempotency_key = ${key}`
        )

    /**
     * The inbox row of a decoded request of a queued route, or why it is
     * refused before anything is written (no customer named; text PostgreSQL
     * cannot store, which would otherwise fail the statement it shares).
     */
    const rowOf = (organizationId: string, route: QueuedRoute, input: SignalInput): Either.Either<InboxRow, BadRequest> => {
      if (input.customerId === undefined && input.externalId === undefined) {
        return Either.left(new BadRequest({ message: "customerId or externalId must be provided" }))
      }
      const moment = momentOf(input, Date.now())
      if (Either.isLeft(moment)) return Either.left(moment.left)
      const body = storedBody(route, input)
      const why = unstorable(body)
      if (why !== undefined) return Either.left(new BadRequest({ message: `Invalid request: ${why}` }))
      const { intakeAt, late, occurredAt } = moment.right
      return Either.right({
        organizationId,
        id: makeId("sig"),
        messageId: makeId("msg"),
        route,
        ...columnsOf(input),
        body,
        occurredAt,
        late,
        intakeAt
      })
    }

    /**
     * Intake of a credit, outcome step, unit or wallet signal, without an
     * effect: `answer` is called once, when the signal is committed to the
     * inbox (or refused). Concurrent requests share one statement
     * (InboxWriter); a repeated idempotency key answers the first signal. The
     * returned function withdraws the request (its client went away).
     */
    const enqueue = <R extends QueuedRoute>(
      organizationId: string,
      route: R,
      input: SignalOf<R>,
      answer: (exit: Exit.Exit<Acknowledgement, BadRequest | Refusal>) => void
    ): (() => void) => {
      const row = rowOf(organizationId, route, input as SignalInput)
      if (Either.isLeft(row)) {
        answer(Exit.fail(row.left))
        return constVoid
      }
      return writer.enqueue(row.right, (exit) => answer(Exit.map(exit, acknowledgement)))
    }

    /** `enqueue` as an effect (202 once committed); interrupting it withdraws the request. */
    const accept = <R extends QueuedRoute>(organizationId: string, route: R, input: SignalOf<R>) =>
      Effect.suspend(() => rowOf(organizationId, route, input as SignalInput)).pipe(
        Effect.flatMap(writer.submit),
        Effect.map(acknowledgement),
        Effect.withSpan("Signals.accept")
      )

    /** One batch item: its inbox row, or the error its single route would have answered. */
    const batchRowOf = (organizationId: string, item: unknown): Either.Either<InboxRow, BadRequest> => {
      if (typeof item !== "object" || item === null || Array.isArray(item)) {
        return Either.left(new BadRequest({ message: "Invalid request: a signal must be a JSON object with a type" }))
      }
      const { type, ...fields } = item as Record<string, unknown>
      if (type === undefined) return Either.left(new BadRequest({ message: "Invalid request: type: is missing" }))
      if (typeof type !== "string" || !Object.hasOwn(batchRoutes, type)) {
        const completion = typeof type === "string" ? /^(outcome|composite)[_ ]?complete$/i.exec(type) : null
        return Either.left(new BadRequest({
          message: completion
            ? `Invalid request: type: ${type} is not accepted in a batch; send it to ` +
              `POST /signal/${completion[1]!.toLowerCase()}/complete`
            : `Invalid request: type: must be one of ${Object.keys(batchRoutes).join(", ")}`
        }))
      }
      const route = batchRoutes[type as BatchType]
      const decoded = decoderOf[route](fields)
      if (Either.isLeft(decoded)) {
        return Either.left(invalidBody(decoded.left))
      }
      return rowOf(organizationId, route, decoded.right as SignalInput)
    }

    /**
     * `POST /signal/batch`: 1 to 1,000 signals, each validated, keyed and
     * queued as its own route would, with its own answer in the request's
     * order. Every accepted item is written by one statement (plus one look-up
     * when keys were taken), whatever the count.
     */
    const acceptBatch = Effect.fn("Signals.acceptBatch")(function*(organizationId: string, items: ReadonlyArray<unknown>) {
        if (items.length < 1 || items.length > maxBatchSize) {
          return yield* new BadRequest({
            message: `Invalid request: signals: must hold 1 to ${maxBatchSize.toLocaleString("en")} signals`
          })
        }
        const prepared = items.map((item) => batchRowOf(organizationId, item))
        const rows = prepared.flatMap((p) => (Either.isRight(p) ? [p.right] : []))
        const written = yield* writer.write(rows)
        let next = 0
        const results = new Array<SignalBatchItemResult>(items.length)
        for (let index = 0; index < items.length; index++) {
          const item = prepared[index]!
          const exit: Exit.Exit<Written, ServiceError> = Either.isLeft(item) ? Exit.fail(item.left) : written[next++]!
          if (Exit.isSuccess(exit)) {
            results[index] = { index, queued: true, messageId: exit.value.messageId, rawId: exit.value.id }
            continue
          }
          const failure = Cause.failureOption(exit.cause)
          if (Option.isNone(failure)) yield* Effect.logError("A batch item could not be written", exit.cause)
          results[index] = {
            index,
            queued: false,
            error: Option.match(failure, {
              onNone: () => ({ statusCode: 500, message: "Internal server error" }),
              onSome: (error) => ({ statusCode: errorStatus[error._tag], message: error.message })
            })
          }
        }
        return { results } satisfies SignalBatchResult
      })

    /** The customer of a synchronous completion: unknown is 404, archived 409. */
    const activeCustomer = (organizationId: string, input: SignalInput) =>
      Effect.gen(function*() {
        const customer = yield* customers.resolve(organizationId, input)
        yield* ensureActive(customer, "cannot receive signals")
        if (input.member !== undefined) {
          const member = yield* members.findByEmail(organizationId, customer.id, input.member)
          if (Option.isNone(member)) {
            return yield* new UnknownMember({ message: `member ${input.member} does not belong to customer ${customer.id}` })
          }
        }
        return customer
      })

    /** The original answer of a completion sent again with the same key. */
    const replayed = <A>(organizationId: string, route: SignalRoute, key: string | undefined) =>
      Effect.map(sentWithKey(organizationId, route, key), Option.map((row) => row.response as A))

    /**
     * The moment of a completion: a `timestamp` ahead of the clock is 400, one
     * older than the workspace's late-usage window 422 (the setting is read
     * here, in the completion's transaction: completions are answered
     * synchronously and read the database anyway).
     */
    const completionMoment = (organizationId: string, input: SignalInput) =>
      Effect.gen(function*() {
        const now = Date.now()
        const moment = momentOf(input, now)
        if (Either.isLeft(moment)) return yield* moment.left
        const occurred = moment.right.occurredMs
        if (occurred !== undefined) {
          const rows = yield* orDie(
            sql<{ readonly lateUsageDays: number }>`SELECT late_usage_days FROM organizations WHERE id = ${organizationId}`
          )
          const days = Number(rows[0]?.lateUsageDays ?? 0)
          if (occurred < now - days * 86_400_000) return yield* tooOldRefusal(days)
        }
        return moment.right
      })

    /** Records a completion in the inbox (the worker bills it) with the answer a repeated key gets back. */
    const recordCompletion = <A>(
      organizationId: string,
      route: "OUTCOME_COMPLETE" | "COMPOSITE_COMPLETE",
      rawId: string,
      input: SignalInput,
      moment: Moment,
      response: A
    ) =>
      Effect.gen(function*() {
        const body = yield* Effect.orDie(Schema.encodeUnknown(schemaOfRoute[route] as Schema.Schema<unknown, unknown>)(input))
        yield* sql`INSERT INTO signals ${
          sql.insert({
            organizationId,
            id: rawId,
            messageId: makeId("msg"),
            route,
            ...columnsOf(input),
            body: JSON.stringify(body),
            response: JSON.stringify(response),
            occurredAt: moment.occurredAt === null ? null : new Date(moment.occurredAt),
            late: moment.late
          })
        }`
        return response
      })

    /** Closes an outcome run: 200 once; 404 for a run with no step of this customer; 409 when already closed. */
    const completeOutcome = Effect.fn("Signals.completeOutcome")(function*(organizationId: string, input: typeof OutcomeCompleteSignal.Type) {
        const earlier = yield* replayed<OutcomeCompleted>(organizationId, "OUTCOME_COMPLETE", input.idempotencyKey)
        if (Option.isSome(earlier)) return earlier.value
        const customer = yield* activeCustomer(organizationId, input)
        const moment = yield* completionMoment(organizationId, input)
        const steps = yield* sql`SELECT 1 FROM signals
          WHERE organization_id = ${organizationId} AND run_id = ${input.runId} AND route = 'OUTCOME'
            AND (customer_id = ${customer.id} OR (customer_id IS NULL AND external_id = ${customer.externalId}))
          LIMIT 1`
        if (steps.length === 0) return yield* new NotFound({ message: `Outcome run ${input.runId} not found` })
        const rawId = makeId("sig")
        const closed = yield* sql`INSERT INTO outcome_runs (organization_id, run_id, customer_id, signal_id)
          VALUES (${organizationId}, ${input.runId}, ${customer.id}, ${rawId})
          ON CONFLICT DO NOTHING RETURNING run_id`
        if (closed.length === 0) {
          // A twin with the same key may have closed it a moment ago: that is a replay, not a clash.
          const twin = yield* replayed<OutcomeCompleted>(organizationId, "OUTCOME_COMPLETE", input.idempotencyKey)
          if (Option.isSome(twin)) return twin.value
          return yield* new Conflict({ message: `Outcome run ${input.runId} has already been completed` })
        }
        return yield* recordCompletion<OutcomeCompleted>(
          organizationId,
          "OUTCOME_COMPLETE",
          rawId,
          { ...input, customerId: customer.id },
          moment,
          { status: "COMPLETED", usageLog: null, rawId }
        )
      }, sql.withTransaction, dieOnSqlError)

    type CompositeAttempt =
      | { readonly _tag: "Completed"; readonly answer: CompositeCompleted }
      | { readonly _tag: "Parked"; readonly missing: ReadonlyArray<string> }

    /**
     * Closes a composite occurrence when every entitlement has reported under
     * the tag (200, billed once however often it is completed); otherwise parks
     * it (422) until the worker sees the last missing signal.
     */
    const completeComposite = Effect.fn("Signals.completeComposite")(function*(organizationId: string, input: typeof CompositeCompleteSignal.Type) {
        const attempt = yield* Effect.gen(function*() {
          const earlier = yield* replayed<CompositeCompleted>(organizationId, "COMPOSITE_COMPLETE", input.idempotencyKey)
          if (Option.isSome(earlier)) return { _tag: "Completed", answer: earlier.value } as CompositeAttempt
          const customer = yield* activeCustomer(organizationId, input)
          const moment = yield* completionMoment(organizationId, input)
          const { refId, value } = tagOf(input.composite)
          const found = yield* liveComposite(sql, organizationId, refId)
          if (Option.isNone(found)) return yield* new NotFound({ message: `No live composite has refId ${refId}` })
          const composite = found.value
          const purchase = yield* metering.currentPurchase(organizationId, customer.id)
          if (Option.isNone(purchase)) return yield* new NoActivePlan({ message: "Customer has no active plan" })
          const sold = purchase.value.snapshot.components.some((c) =>
            c.type === "PRICING_METRIC" && c.targetId === composite.id
          )
          if (!sold) {
            return yield* new NotOnPlan({ message: `Composite ${refId} is not sold on the customer's plan` })
          }
          const answer = (rawId: string): CompositeCompleted => ({
            status: "COMPLETED",
            composite: { id: composite.id, name: composite.name, refId: composite.refId },
            value,
            rawId
          })
          const occurrence = yield* lockOccurrence(sql, organizationId, composite.id, value)
          if (occurrence.status === "COMPLETED") {
            return { _tag: "Completed", answer: answer(occurrence.signalId ?? "") } as CompositeAttempt
          }
          const missing = yield* missingSignals(sql, organizationId, composite, value, customer)
          const parked = missing.length > 0
          const rawId = parked ? null : makeId("sig")
          yield* sql`UPDATE composite_occurrences SET
              status = ${parked ? "PARKED" : "COMPLETED"}, customer_id = ${customer.id}, signal_id = ${rawId},
              member = ${input.member ?? null},
              custom = ${input.custom === undefined ? null : JSON.stringify(input.custom)}::jsonb,
              completed_at = ${parked ? null : new Date()}, updated_at = now()
            WHERE organization_id = ${organizationId} AND composite_id = ${composite.id} AND value = ${value}`
          if (rawId === null) return { _tag: "Parked", missing } as CompositeAttempt
          const completed = yield* recordCompletion(
            organizationId,
            "COMPOSITE_COMPLETE",
            rawId,
            { ...input, customerId: customer.id },
            moment,
            answer(rawId)
          )
          return { _tag: "Completed", answer: completed } as CompositeAttempt
        }).pipe(sql.withTransaction, dieOnSqlError)
        if (attempt._tag === "Parked") {
          return yield* new Unprocessable({
            message: `Composite occurrence is not ready to complete: waiting for ${attempt.missing.join(", ")}; ` +
              "it completes itself once they arrive"
          })
        }
        return attempt.answer
      })

    const list = Effect.fn("Signals.list")((organizationId: string, query: SignalListQuery) =>
      findAll(
        SignalRecord,
        sql`SELECT * FROM signals
            WHERE organization_id = ${organizationId}
              AND (${query.customerId ?? null}::text IS NULL OR customer_id = ${query.customerId ?? null})
              AND (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null})
              ${pageClause(sql, query.page)}`
      ))

    const findRow = findByIdOr(sql, SignalRecord, "signals", (id) => new NotFound({ message: `Signal ${id} not found` }))
    const get = Effect.fn("Signals.get")((organizationId: string, id: string) => findRow(organizationId, id))

    /**
     * Queues a PENDING or FAILED signal again. A PROCESSED one is refused: it
     * was billed, and replaying it would bill it twice.
     */
    const replay = Effect.fn("Signals.replay")(function*(organizationId: string, id: string) {
        const signal = yield* get(organizationId, id)
        if (signal.status === "PROCESSED") {
          return yield* new Conflict({ message: `Signal ${id} was processed already; replaying it would bill it twice` })
        }
        const rows = yield* findAll(
          SignalRecord,
          sql`UPDATE signals SET status = 'QUEUED', error_status = NULL, error_message = NULL
              WHERE organization_id = ${organizationId} AND id = ${id} AND status IN ('PENDING', 'FAILED', 'QUEUED')
              RETURNING *`
        )
        return rows[0] ?? (yield* get(organizationId, id))
      })

    /** The PENDING and FAILED signals of a customer (its own, and those waiting for its externalId). */
    const replayable = Effect.fn("Signals.replayable")(function*(organizationId: string, customerId: string) {
        const customer = yield* customers.get(organizationId, customerId)
        return yield* orDie(
          sql<{ id: string }>`SELECT id FROM signals
            WHERE organization_id = ${organizationId} AND status IN ('PENDING', 'FAILED')
              AND (customer_id = ${customer.id} OR (customer_id IS NULL AND external_id = ${customer.externalId}))
            ORDER BY id`
        ).pipe(Effect.map((rows) => rows.map((row) => row.id)))
      })

    return { enqueue, accept, acceptBatch, completeOutcome, completeComposite, list, get, replay, replayable } as const
  })
}) {}
