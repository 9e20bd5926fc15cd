/**
 * Intake of the queued signals: credit, outcome step, unit and wallet, one
 * at a time (`accept`) or up to 1,000 in a batch (`acceptBatch`).
 *
 * Intake does only what is cheap and certain (schema, idempotency, an unknown
 * or archived `customerId`, the timestamp's lead and the late-usage window),
 * then commits the raw signal to the inbox and answers 202: from then on the
 * signal is never lost. The worker (SignalProcessor.ts) prices it.
 */
import { Cause, Effect, Either, Exit, Option, ParseResult, Schema } from "effect"
import { constVoid } from "effect/Function"
import { isUnavailableCause } from "../db/Faults.ts"
import { codeOf, errorStatus, type FieldProblem, type ServiceError, ValidationFailed } from "../errors.ts"
import { decodesToItself, identityDecoder } from "../SchemaCheck.ts"
import { describeProblems, fieldProblems } from "../schema.ts"
import { type InboxRow, inboxRowOf, type InvalidBody, momentOf } from "./InboxRow.ts"
import type { OrganizationId } from "../ids.ts"
import { currentTimeMillis } from "../time.ts"
import { awaitAnswer, InboxWriter, type Refusal, type Written } from "./InboxWriter.ts"
import {
  type Acknowledgement,
  type BatchType,
  batchRoutes,
  maxBatchSize,
  schemaOfRoute,
  type SignalBatchItemResult,
  type SignalBatchResult,
  type SignalInput,
  type SignalRoute
} from "./Signal.ts"

/** The routes answered 202 and priced later. */
export type QueuedRoute = Exclude<SignalRoute, "OUTCOME_COMPLETE" | "COMPOSITE_COMPLETE">

export type SignalOf<R extends SignalRoute> = Schema.Schema.Type<(typeof schemaOfRoute)[R]>

/** Why a queued signal is refused: its body (400), its customer (404/409) or its timestamp (400/422). */
export type IntakeRefusal = InvalidBody | Refusal

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
 * The re-encode was a sizeable share of the intake lane's allocations
 * (docs/benchmarks.md, "The intake lane").
 */
const decodedIsEncoded = perQueuedRoute((schema) => decodesToItself(schema.ast))

/** The body the inbox keeps: the request decoded and encoded again by its route's schema. */
export const storedBody = (route: QueuedRoute, input: unknown) =>
  decodedIsEncoded[route] ? input : Either.getOrThrow(encoderOf[route](input))

/** A refusal of the request's own fields, in the words the HttpApi routes use. */
const invalid = (problems: ReadonlyArray<FieldProblem>) =>
  new ValidationFailed({ message: `Invalid request: ${describeProblems(problems)}`, errors: problems })

/** A body its route's schema refuses, in the words the HttpApi routes use. */
const invalidBody = (error: ParseResult.ParseError) => invalid(fieldProblems(ParseResult.ArrayFormatter.formatErrorSync(error)))

/** The inbox row of a decoded request of a queued route received at `now`, or why it is refused before anything is written. */
const rowOf = (
  organizationId: OrganizationId,
  route: QueuedRoute,
  input: SignalInput,
  now: number
): Either.Either<InboxRow, InvalidBody> => {
  const moment = momentOf(input, now)
  if (Either.isLeft(moment)) return Either.left(moment.left)
  return inboxRowOf(organizationId, route, input, storedBody(route, input), moment.right)
}

/** A batch item refused by its shape, its type or its route's schema, as its single route refuses such a body. */
const schemaRefusal = (error: ValidationFailed) => Either.left(error)

/** A batch item's refusal, as an error answer of its single route would carry it. */
const itemError = (error: ServiceError) => ({
  statusCode: errorStatus[error._tag],
  code: codeOf(error._tag),
  message: error.message,
  ...(error._tag === "ValidationFailed" && error.errors !== undefined ? { errors: error.errors } : {})
})

/** One batch item: its inbox row, or the error its single route would have answered. */
const batchRowOf = (organizationId: OrganizationId, item: unknown, now: number): Either.Either<InboxRow, InvalidBody> => {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    return schemaRefusal(invalid([{ field: null, message: "a signal must be a JSON object with a type" }]))
  }
  const { type, ...fields } = item as Record<string, unknown>
  if (type === undefined) return schemaRefusal(invalid([{ field: "type", message: "is missing" }]))
  if (typeof type !== "string" || !Object.hasOwn(batchRoutes, type)) {
    const completion = typeof type === "string" ? /^(outcome|composite)[_ ]?complete$/i.exec(type) : null
    return schemaRefusal(invalid([{
      field: "type",
      message: completion
        ? `${type} is not accepted in a batch; send it to POST /signal/${completion[1]!.toLowerCase()}/complete`
        : `must be one of ${Object.keys(batchRoutes).join(", ")}`
    }]))
  }
  const route = batchRoutes[type as BatchType]
  const decoded = decoderOf[route](fields)
  if (Either.isLeft(decoded)) return schemaRefusal(invalidBody(decoded.left))
  return rowOf(organizationId, route, decoded.right as SignalInput, now)
}

const acknowledgement = (written: Written): Acknowledgement => ({
  queued: true,
  messageId: written.messageId,
  rawId: written.id
})

export class Intake extends Effect.Service<Intake>()("Intake", {
  dependencies: [InboxWriter.Default],
  effect: Effect.gen(function*() {
    const writer = yield* InboxWriter
    // Intake reads the time synchronously (the lane calls `accept` outside any fiber): this layer's Clock, read
    // into a plain function as ApiKeys does for its cache (src/organizations/KeyCache.ts, "Time").
    const clock = yield* Effect.clock

    /**
     * Intake of one credit, outcome step, unit or wallet signal, without an
     * effect (the intake lane runs no fiber for it): `answer` is called once,
     * when the signal is committed to the inbox (or refused). Concurrent
     * requests share one statement (InboxWriter); a repeated idempotency key
     * answers the first signal. The returned function withdraws the request
     * (its client went away). As an effect: `awaitAnswer` (InboxWriter.ts).
     */
    const accept = <R extends QueuedRoute>(
      organizationId: OrganizationId,
      route: R,
      input: SignalOf<R>,
      answer: (exit: Exit.Exit<Acknowledgement, IntakeRefusal>) => void
    ): (() => void) => {
      const row = rowOf(organizationId, route, input as SignalInput, clock.unsafeCurrentTimeMillis())
      if (Either.isLeft(row)) {
        answer(Exit.fail(row.left))
        return constVoid
      }
      return writer.enqueue([row.right], (exits) => answer(Exit.map(exits[0]!, acknowledgement)))
    }

    /**
     * `POST /signal/batch`: 1 to 1,000 signals, each validated, keyed and
     * queued as its own route would, with its own answer in the request's
     * order. Every accepted item is written by one statement (plus one look-up
     * when keys were taken), whatever the count.
     */
    const acceptBatch = Effect.fn("Intake.acceptBatch")(function*(organizationId: OrganizationId, items: ReadonlyArray<unknown>) {
        if (items.length < 1 || items.length > maxBatchSize) {
          return yield* invalid([{ field: "signals", message: `must hold 1 to ${maxBatchSize.toLocaleString("en")} signals` }])
        }
        const now = yield* currentTimeMillis
        const prepared = items.map((item) => batchRowOf(organizationId, item, now))
        const rows = prepared.flatMap((p) => (Either.isRight(p) ? [p.right] : []))
        const written = yield* awaitAnswer<ReadonlyArray<Exit.Exit<Written, Refusal>>, never>((answer) =>
          writer.enqueue(rows, (exits) => answer(Exit.succeed(exits)))
        )
        // The writer stopped under the request (the service is stopping): the whole request is answered 503.
        if (written.some(Exit.isInterrupted)) return yield* Effect.interrupt
        // The database is away: no item is refused for it; the whole request answers 503
        // `database_unavailable`, and the client retries it with the same keys (an item that did
        // commit, during a failover, answers its first rawId then).
        const away = written.find((exit) => Exit.isFailure(exit) && isUnavailableCause(exit.cause))
        // Its cause is the database's absence, never an item's refusal (those are the items' answers).
        if (away !== undefined && Exit.isFailure(away)) return yield* Effect.failCause(away.cause as Cause.Cause<never>)
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
              onNone: () => ({ statusCode: 500, code: "internal_error", message: "Internal server error" }),
              onSome: itemError
            })
          }
        }
        return { results } satisfies SignalBatchResult
      })

    return { accept, acceptBatch } as const
  })
}) {}
