/**
 * Outcome and composite completions: answered synchronously (200, or
 * 404/409/422 at once) and billed by the worker like any signal. A completion
 * is recorded in the inbox, in the transaction that closes its run or
 * occurrence, through the one insert every signal row takes (`insertSignals`),
 * with the answer a repeat of its idempotency key gets back.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Option, Schema } from "effect"
import { CurrentPurchases } from "../billing/CurrentPurchases.ts"
import { ensureActive } from "../customers/Customer.ts"
import { Customers } from "../customers/Customers.ts"
import { Members } from "../members/Members.ts"
import { dieOnSqlError, findOne, orDie } from "../db/Sql.ts"
import {
  CompositeIncomplete,
  CompositeNotFound,
  NoActivePlan,
  NotOnPlan,
  OutcomeRunCompleted,
  OutcomeRunNotFound,
  UnknownMember
} from "../errors.ts"
import { makeId, type OrganizationId } from "../ids.ts"
import { currentTime, currentTimeMillis } from "../time.ts"
import { inboxRowOf } from "./InboxRow.ts"
import { insertSignals } from "./InboxInsert.ts"
import { beyondLateWindow, type Moment, momentOf, tooOldRefusal } from "./LateWindow.ts"
import { liveComposite, lockOccurrence, missingSignals } from "./Occurrences.ts"
import {
  type CompositeCompleted,
  CompositeCompleteSignal,
  type OutcomeCompleted,
  OutcomeCompleteSignal,
  schemaOfRoute,
  type SignalInput,
  type SignalRoute,
  tagOf
} from "./Signal.ts"

const Sent = Schema.Struct({ id: Schema.String, messageId: Schema.String, response: Schema.NullOr(Schema.Unknown) })

export class Completions extends Effect.Service<Completions>()("Completions", {
  dependencies: [Customers.Default, CurrentPurchases.Default, Members.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const members = yield* Members
    const currentPurchases = yield* CurrentPurchases

    const sentWithKey = (organizationId: OrganizationId, route: SignalRoute, key: string | undefined) =>
      key === undefined
        ? Effect.succeed(Option.none<typeof Sent.Type>())
        : findOne(
          Sent,
          // The inbox first; a completion older than the retention window answers from the archive.
          sql`SELECT id, message_id, response FROM (
                SELECT id, message_id, response, 0 AS place FROM signals
                WHERE organization_id = ${organizationId} AND route = ${route} AND idempotency_key = ${key}
                UNION ALL
                SELECT id, message_id, response, 1 AS place FROM signals_archive
                WHERE organization_id = ${organizationId} AND route = ${route} AND idempotency_key = ${key}
              ) sent ORDER BY place, id LIMIT 1`
        )

    /** The customer of a synchronous completion: unknown is 404, archived 409. */
    const activeCustomer = (organizationId: OrganizationId, input: SignalInput) =>
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
    const replayedAnswer = <A>(organizationId: OrganizationId, route: SignalRoute, key: string | undefined) =>
      Effect.map(sentWithKey(organizationId, route, key), Option.map((row) => row.response as A))

    /**
     * The moment of a completion: a `timestamp` ahead of the clock is 400, one
     * older than the workspace's late-usage window 422 (the setting is read
     * here, in the completion's transaction: completions are answered
     * synchronously and read the database anyway).
     */
    const completionMoment = (organizationId: OrganizationId, input: SignalInput) =>
      Effect.gen(function*() {
        const now = yield* currentTimeMillis
        const moment = momentOf(input, now)
        if (Either.isLeft(moment)) return yield* moment.left
        const occurred = moment.right.occurredMs
        if (occurred !== undefined) {
          const rows = yield* orDie(
            sql<{ readonly lateUsageDays: number }>`SELECT late_usage_days FROM organizations WHERE id = ${organizationId}`
          )
          const days = Number(rows[0]?.lateUsageDays ?? 0)
          if (beyondLateWindow(occurred, now, days)) return yield* tooOldRefusal(days)
        }
        return moment.right
      })

    /**
     * Records a completion in the inbox (the worker bills it), by the one insert, with the answer a repeated
     * key gets back. Only a twin sent with the same key at the same moment for another run or occurrence can
     * find the key taken here: the transaction is rolled back (nothing closed) and the request answered 500,
     * as the unique index did before; its retry is answered the first completion.
     */
    const recordCompletion = <A>(
      organizationId: OrganizationId,
      route: "OUTCOME_COMPLETE" | "COMPOSITE_COMPLETE",
      rawId: string,
      input: SignalInput,
      moment: Moment,
      response: A
    ) =>
      Effect.gen(function*() {
        const body = yield* Effect.orDie(Schema.encodeUnknown(schemaOfRoute[route] as Schema.Schema<unknown, unknown>)(input))
        const row = yield* inboxRowOf(organizationId, route, input, body, moment, { id: rawId, response })
        const [written] = yield* insertSignals(sql, [row])
        const { replayed } = yield* written!
        if (replayed) return yield* Effect.die(new Error(`idempotencyKey ${input.idempotencyKey} was taken meanwhile`))
        return response
      })

    /** Closes an outcome run: 200 once; 404 for a run with no step of this customer; 409 when already closed. */
    const completeOutcome = Effect.fn("Completions.completeOutcome")(function*(organizationId: OrganizationId, input: typeof OutcomeCompleteSignal.Type) {
        const earlier = yield* replayedAnswer<OutcomeCompleted>(organizationId, "OUTCOME_COMPLETE", input.idempotencyKey)
        if (Option.isSome(earlier)) return earlier.value
        const customer = yield* activeCustomer(organizationId, input)
        const moment = yield* completionMoment(organizationId, input)
        // A completed run's steps may have moved to the archive (the history job moves them once the run
        // is closed and billed): its completion row says the run exists, and the insert below answers 409.
        const steps = yield* sql`SELECT 1 FROM signals
          WHERE organization_id = ${organizationId} AND run_id = ${input.runId} AND route = 'OUTCOME'
            AND (customer_id = ${customer.id} OR (customer_id IS NULL AND external_id = ${customer.externalId}))
          UNION ALL
          SELECT 1 FROM outcome_runs
          WHERE organization_id = ${organizationId} AND run_id = ${input.runId} AND customer_id = ${customer.id}
          LIMIT 1`
        if (steps.length === 0) return yield* new OutcomeRunNotFound({ message: `Outcome run ${input.runId} not found` })
        const rawId = makeId("sig")
        const closed = yield* sql`INSERT INTO outcome_runs (organization_id, run_id, customer_id, signal_id)
          VALUES (${organizationId}, ${input.runId}, ${customer.id}, ${rawId})
          ON CONFLICT DO NOTHING RETURNING run_id`
        if (closed.length === 0) {
          // A twin with the same key may have closed it a moment ago: that is a replay, not a clash.
          const twin = yield* replayedAnswer<OutcomeCompleted>(organizationId, "OUTCOME_COMPLETE", input.idempotencyKey)
          if (Option.isSome(twin)) return twin.value
          return yield* new OutcomeRunCompleted({ message: `Outcome run ${input.runId} has already been completed` })
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
    const completeComposite = Effect.fn("Completions.completeComposite")(function*(organizationId: OrganizationId, input: typeof CompositeCompleteSignal.Type) {
        const attempt = yield* Effect.gen(function*() {
          const earlier = yield* replayedAnswer<CompositeCompleted>(organizationId, "COMPOSITE_COMPLETE", input.idempotencyKey)
          if (Option.isSome(earlier)) return { _tag: "Completed", answer: earlier.value } as CompositeAttempt
          const customer = yield* activeCustomer(organizationId, input)
          const moment = yield* completionMoment(organizationId, input)
          const { refId, value } = tagOf(input.composite)
          const found = yield* liveComposite(sql, organizationId, refId)
          if (Option.isNone(found)) return yield* new CompositeNotFound({ message: `No live composite has refId ${refId}` })
          const composite = found.value
          const purchase = yield* currentPurchases.currentPurchase(organizationId, customer.id)
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
          const completedAt = parked ? null : yield* currentTime
          yield* sql`UPDATE composite_occurrences SET
              status = ${parked ? "PARKED" : "COMPLETED"}, customer_id = ${customer.id}, signal_id = ${rawId},
              member = ${input.member ?? null},
              custom = ${input.custom === undefined ? null : JSON.stringify(input.custom)}::jsonb,
              completed_at = ${completedAt}, updated_at = now()
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
          return yield* new CompositeIncomplete({
            message: `Composite occurrence is not ready to complete: waiting for ${attempt.missing.join(", ")}; ` +
              "it completes itself once they arrive"
          })
        }
        return attempt.answer
      })

    return { completeOutcome, completeComposite } as const
  })
}) {}
