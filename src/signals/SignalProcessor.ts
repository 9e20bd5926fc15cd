/**
 * The worker job that prices queued signals (DESIGN §4-§6).
 *
 * A batch is one transaction: claim the oldest QUEUED rows with
 * `FOR UPDATE SKIP LOCKED` (so workers never share a row), price each signal in
 * a savepoint of its own, write its usage-log row, move the balances through
 * Metering, and mark it PROCESSED, PENDING or FAILED. A crash before the commit
 * leaves every claimed row QUEUED with nothing billed; the commit makes billing
 * and the status change visible together, so no signal is billed twice.
 *
 * Workers claim disjoint sets of customers (see `claim`), so they rarely meet
 * on a balance row; a deadlock with anything else rolls the batch back and it
 * is retried.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { BigDecimal, Cause, Data, Effect, Option, Schedule, Schema } from "effect"
import { type CurrentPurchase, Metering, planCoverage } from "../billing/Metering.ts"
import { Customer } from "../customers/Customer.ts"
import { findAll, findOne, orDie, sqlState } from "../db/Sql.ts"
import { type ApiError, Conflict, errorStatus, isApiError, NotFound, Unprocessable } from "../errors.ts"
import { makeId } from "../ids.ts"
import { type Decimal, ONE, toSql, ZERO } from "../money.ts"
import type { Model } from "../models/Model.ts"
import { Members } from "../members/Members.ts"
import { Models } from "../models/Models.ts"
import { chargeCredit, providerCost, type TokenUsage } from "../pricing/Pricing.ts"
import { Money } from "../schema.ts"
import type { WorkerJob } from "../worker/Worker.ts"
import { liveComposite, type LiveComposite, lockOccurrence, missingSignals } from "./Occurrences.ts"
import { schemaOfRoute, SignalRecord, type Usage } from "./Signal.ts"

/** Signals claimed per transaction. */
const BATCH_SIZE = 100

class CreditRow extends Schema.Class<CreditRow>("CreditRow")({
  id: Schema.String,
  name: Schema.String,
  basePrice: Money,
  tokensPerCredit: Money,
  marginPercent: Money
}) {}

class StepRow extends Schema.Class<StepRow>("StepRow")({
  outcomeId: Schema.String,
  outcomeName: Schema.String,
  stepName: Schema.String
}) {}

class UnitRow extends Schema.Class<UnitRow>("UnitRow")({ id: Schema.String, name: Schema.String }) {}

class OccurrenceBilling extends Schema.Class<OccurrenceBilling>("OccurrenceBilling")({
  compositeId: Schema.String,
  compositeName: Schema.String,
  refId: Schema.String,
  value: Schema.String,
  custom: Schema.NullOr(Schema.Unknown)
}) {}

/** What a processed signal writes to the usage log. */
interface UsageRow {
  readonly meter: "CREDIT" | "OUTCOME_STEP" | "OUTCOME" | "UNIT" | "WALLET" | "COMPOSITE"
  readonly entitlementId: string | null
  readonly entitlementName: string | null
  readonly agentKey: string | null
  readonly usage: Usage | null
  readonly quantity: Decimal
  readonly providerCost: Decimal
  readonly customerCost: Decimal
  readonly billingMode: string | null
  readonly balanceRemaining: Decimal | null
  readonly purchaseId: string | null
  readonly runId: string | null
  readonly composite: { readonly id: string; readonly refId: string; readonly value: string } | null
  readonly custom: unknown
}

type Processed =
  | { readonly _tag: "Processed"; readonly customerId: string; readonly usageLogId: string }
  | { readonly _tag: "Pending"; readonly message: string }

/** A refused signal keeps the status its refusal would have had as a synchronous answer. */
interface Failed {
  readonly _tag: "Failed"
  readonly status: number
  readonly message: string
}

type Ended = Processed | Failed

const tokensOf = (usage: Usage): TokenUsage => ({
  inputTokens: BigDecimal.fromBigInt(BigInt(usage.inputTokens ?? 0)),
  outputTokens: BigDecimal.fromBigInt(BigInt(usage.outputTokens ?? 0)),
  cacheTokens: BigDecimal.fromBigInt(BigInt(usage.cacheTokens ?? 0)),
  cacheWriteTokens: BigDecimal.fromBigInt(BigInt(usage.cacheWriteTokens ?? 0))
})

/** Deadlocks and serialisation failures: the batch is rolled back and tried again. */
const retryableStates = new Set(["40P01", "40001"])

const isRetryable = (cause: Cause.Cause<unknown>) =>
  [...Cause.defects(cause), ...Cause.failures(cause)].some((error) =>
    typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "SqlError" &&
    retryableStates.has(sqlState(error as SqlError.SqlError) ?? "")
  )

/** A batch the database rolled back (deadlock, serialisation failure): run it again. */
class RetryableBatch extends Data.TaggedError("RetryableBatch") {}

/** Per-batch memo of lookups that cannot change meaningfully within one transaction. */
const memo = <A, E, R>(cache: Map<string, A>, key: string, lookup: Effect.Effect<A, E, R>) => {
  const hit = cache.get(key)
  return hit !== undefined ? Effect.succeed(hit) : Effect.tap(lookup, (value) => Effect.sync(() => cache.set(key, value)))
}

export class SignalProcessor extends Effect.Service<SignalProcessor>()("SignalProcessor", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const metering = yield* Metering
    const models = yield* Models
    const members = yield* Members

    const batchCaches = () => ({
      models: new Map<string, Model>(),
      credits: new Map<string, Option.Option<CreditRow>>(),
      steps: new Map<string, Option.Option<StepRow>>(),
      units: new Map<string, Option.Option<UnitRow>>(),
      composites: new Map<string, Option.Option<LiveComposite>>(),
      purchases: new Map<string, Option.Option<CurrentPurchase>>()
    })
    type Caches = ReturnType<typeof batchCaches>

    const activeCustomerByExternalId = (organizationId: string, externalId: string) =>
      findOne(
        Customer,
        sql`SELECT * FROM customers
            WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND archived_at IS NULL`
      )

    /**
     * The signal's customer. An externalId nobody holds makes the signal
     * PENDING; the advisory lock pairs with `requeuePendingSignals`, so a
     * customer taking that externalId right now either is seen here or requeues it.
     */
    const customerOf = (signal: SignalRecord) =>
      Effect.gen(function*() {
        if (signal.customerId !== null) {
          const found = yield* findOne(
            Customer,
            sql`SELECT * FROM customers WHERE organization_id = ${signal.organizationId} AND id = ${signal.customerId}`
          )
          if (Option.isNone(found)) return yield* new NotFound({ message: `Customer ${signal.customerId} not found` })
          return Option.some(found.value)
        }
        const externalId = signal.externalId ?? ""
        const found = yield* activeCustomerByExternalId(signal.organizationId, externalId)
        if (Option.isSome(found)) return found
        yield* orDie(sql`SELECT pg_advisory_xact_lock(hashtext(${signal.organizationId}), hashtext(${externalId}))`)
        return yield* activeCustomerByExternalId(signal.organizationId, externalId)
      })

    const rates = (caches: Caches, org: string, modelId: string) =>
      memo(caches.models, `${org}/${modelId}`, Effect.map(models.ratesFor(org, [modelId]), (found) => found.get(modelId)!))

    const purchaseOf = (caches: Caches, org: string, customerId: string) =>
      Effect.flatMap(
        memo(caches.purchases, `${org}/${customerId}`, metering.currentPurchase(org, customerId)),
        Option.match({
          onNone: () => Effect.fail(new Unprocessable({ message: "Customer has no active plan" })),
          onSome: Effect.succeed
        })
      )

    const notInWorkspace = (kind: string, agentKey: string) =>
      new Unprocessable({ message: `agentKey ${agentKey} is not a live ${kind} of this workspace` })

    const notSold = (agentKey: string) =>
      new Unprocessable({
        message: `agentKey ${agentKey} is not sold on the customer's plan nor covered by a composite that is`
      })

    const credit = (caches: Caches, org: string, agentKey: string) =>
      Effect.flatMap(
        memo(
          caches.credits,
          `${org}/${agentKey}`,
          findOne(
            CreditRow,
            sql`SELECT id, name, base_price, tokens_per_credit, margin_percent FROM credits
                WHERE organization_id = ${org} AND agent_key = ${agentKey} AND is_active`
          )
        ),
        Option.match({ onNone: () => Effect.fail(notInWorkspace("credit", agentKey)), onSome: Effect.succeed })
      )

    const step = (caches: Caches, org: string, agentKey: string) =>
      Effect.flatMap(
        memo(
          caches.steps,
          `${org}/${agentKey}`,
          findOne(
            StepRow,
            sql`SELECT o.id AS outcome_id, o.name AS outcome_name, s.name AS step_name
                FROM outcome_steps s
                JOIN outcomes o ON o.organization_id = s.organization_id AND o.id = s.outcome_id
                WHERE s.organization_id = ${org} AND s.agent_key = ${agentKey} AND s.removed_at IS NULL AND o.is_active
                ORDER BY o.id LIMIT 1`
          )
        ),
        Option.match({ onNone: () => Effect.fail(notInWorkspace("outcome step", agentKey)), onSome: Effect.succeed })
      )

    const unit = (caches: Caches, org: string, agentKey: string) =>
      Effect.flatMap(
        memo(
          caches.units,
          `${org}/${agentKey}`,
          findOne(
            UnitRow,
            sql`SELECT id, name FROM units WHERE organization_id = ${org} AND agent_key = ${agentKey} AND is_active`
          )
        ),
        Option.match({ onNone: () => Effect.fail(notInWorkspace("unit", agentKey)), onSome: Effect.succeed })
      )

    const compositeOfTag = (caches: Caches, org: string, signal: SignalRecord) =>
      signal.compositeRef === null || signal.compositeValue === null
        ? Effect.succeedNone
        : memo(caches.composites, `${org}/${signal.compositeRef}`, liveComposite(sql, org, signal.compositeRef))

    /** The coverage of a target, and whether this signal is billed by its (sold, covering) composite tag. */
    const coverage = (
      purchase: CurrentPurchase,
      kind: "CREDIT" | "OUTCOME" | "UNIT",
      targetId: string,
      agentKey: string,
      tag: Option.Option<LiveComposite>
    ) =>
      Effect.gen(function*() {
        const covered = planCoverage(purchase.snapshot, kind, targetId)
        if (covered === "NONE") return yield* notSold(agentKey)
        const billedByTag = Option.isSome(tag) && purchase.snapshot.components.some((c) =>
          c.type === "PRICING_METRIC" && c.targetId === tag.value.id &&
          (kind === "CREDIT" ? c.covers.credits : kind === "OUTCOME" ? c.covers.outcomes : c.covers.units)
            .includes(targetId)
        )
        return covered === "COMPOSITE" || billedByTag ? "COMPOSITE" as const : "DIRECT" as const
      })

    const decodeBody = <R extends keyof typeof schemaOfRoute>(route: R, body: unknown) =>
      Effect.orDie(Schema.decodeUnknown(schemaOfRoute[route] as unknown as Schema.Schema<Schema.Schema.Type<(typeof schemaOfRoute)[R]>, unknown>)(body))

    const tagColumns = (signal: SignalRecord, tag: Option.Option<LiveComposite>) =>
      Option.isSome(tag) ? { id: tag.value.id, refId: tag.value.refId, value: signal.compositeValue! } : null

    /** Prices one signal and moves the balances; the usage-log row it writes, or why it waits. */
    const price = (caches: Caches, signal: SignalRecord, customer: Customer, usageLogId: string) =>
      Effect.gen(function*() {
        const org = signal.organizationId
        const tag = yield* compositeOfTag(caches, org, signal)
        const base = {
          agentKey: signal.agentKey,
          usage: null,
          runId: signal.runId,
          composite: tagColumns(signal, tag),
          custom: null
        }
        switch (signal.route) {
          case "CREDIT": {
            const body = yield* decodeBody("CREDIT", signal.body)
            const target = yield* credit(caches, org, body.agentKey)
            const purchase = yield* purchaseOf(caches, org, customer.id)
            const billedBy = yield* coverage(purchase, "CREDIT", target.id, body.agentKey, tag)
            const model = yield* rates(caches, org, body.usage.model)
            const charge = chargeCredit(tokensOf(body.usage), model, target)
            const metered = billedBy === "DIRECT" && BigDecimal.isPositive(charge.creditsUsed)
              ? yield* metering.meter({
                organizationId: org,
                customerId: customer.id,
                kind: "CREDIT",
                targetId: target.id,
                quantity: charge.creditsUsed,
                customerCost: charge.customerCost,
                usageLogId
              })
              : null
            return {
              ...base,
              meter: "CREDIT",
              entitlementId: target.id,
              entitlementName: target.name,
              usage: body.usage,
              quantity: charge.creditsUsed,
              providerCost: charge.providerCost,
              customerCost: metered?.customerCost ?? ZERO,
              billingMode: metered?.billingMode ?? (billedBy === "COMPOSITE" ? "COMPOSITE" : null),
              balanceRemaining: metered?.remaining ?? null,
              purchaseId: purchase.id
            } satisfies UsageRow
          }
          case "OUTCOME": {
            const body = yield* decodeBody("OUTCOME", signal.body)
            const target = yield* step(caches, org, body.agentKey)
            const purchase = yield* purchaseOf(caches, org, customer.id)
            yield* coverage(purchase, "OUTCOME", target.outcomeId, body.agentKey, tag)
            const cost = body.usage
              ? providerCost(tokensOf(body.usage), yield* rates(caches, org, body.usage.model))
              : ZERO
            return {
              ...base,
              meter: "OUTCOME_STEP",
              entitlementId: target.outcomeId,
              entitlementName: `${target.outcomeName} / ${target.stepName}`,
              usage: body.usage ?? null,
              quantity: ONE,
              providerCost: cost,
              customerCost: ZERO,
              billingMode: null,
              balanceRemaining: null,
              purchaseId: purchase.id
            } satisfies UsageRow
          }
          case "OUTCOME_COMPLETE": {
            const target = yield* outcomeOfRun(org, signal.runId ?? "")
            const purchase = yield* purchaseOf(caches, org, customer.id)
            const billedBy = yield* coverage(purchase, "OUTCOME", target.outcomeId, target.agentKey, Option.none())
            const metered = billedBy === "DIRECT"
              ? yield* metering.meter({
                organizationId: org,
                customerId: customer.id,
                kind: "OUTCOME",
                targetId: target.outcomeId,
                quantity: ONE,
                usageLogId
              })
              : null
            const steps = yield* findAll(
              Schema.Struct({ cost: Schema.NullOr(Money) }),
              sql`SELECT sum(provider_cost) AS cost FROM usage_log
                  WHERE organization_id = ${org} AND customer_id = ${customer.id} AND run_id = ${signal.runId}
                    AND meter = 'OUTCOME_STEP'`
            )
            return {
              ...base,
              meter: "OUTCOME",
              entitlementId: target.outcomeId,
              entitlementName: target.outcomeName,
              agentKey: target.agentKey,
              quantity: ONE,
              providerCost: steps[0]?.cost ?? ZERO,
              customerCost: metered?.customerCost ?? ZERO,
              billingMode: metered?.billingMode ?? "COMPOSITE",
              balanceRemaining: metered?.remaining ?? null,
              purchaseId: purchase.id
            } satisfies UsageRow
          }
          case "UNIT": {
            const body = yield* decodeBody("UNIT", signal.body)
            const target = yield* unit(caches, org, body.agentKey)
            const purchase = yield* purchaseOf(caches, org, customer.id)
            const billedBy = yield* coverage(purchase, "UNIT", target.id, body.agentKey, tag)
            const quantity = body.quantity ?? ONE
            const metered = billedBy === "DIRECT"
              ? yield* metering.meter({
                organizationId: org,
                customerId: customer.id,
                kind: "UNIT",
                targetId: target.id,
                quantity,
                usageLogId
              })
              : null
            return {
              ...base,
              meter: "UNIT",
              entitlementId: target.id,
              entitlementName: target.name,
              quantity,
              providerCost: ZERO,
              customerCost: metered?.customerCost ?? ZERO,
              billingMode: metered?.billingMode ?? "COMPOSITE",
              balanceRemaining: metered?.remaining ?? null,
              purchaseId: purchase.id
            } satisfies UsageRow
          }
          case "WALLET": {
            const body = yield* decodeBody("WALLET", signal.body)
            const purchase = yield* purchaseOf(caches, org, customer.id)
            const cost = providerCost(tokensOf(body.usage), yield* rates(caches, org, body.usage.model))
            const debited = yield* metering.debitWallet(org, customer.id, cost, { usageLogId })
            return {
              ...base,
              meter: "WALLET",
              entitlementId: null,
              entitlementName: "Wallet",
              usage: body.usage,
              quantity: cost,
              providerCost: cost,
              customerCost: cost,
              billingMode: "WALLET",
              balanceRemaining: debited.balance,
              purchaseId: purchase.id
            } satisfies UsageRow
          }
          case "COMPOSITE_COMPLETE": {
            const occurrence = yield* findOne(
              OccurrenceBilling,
              sql`SELECT o.composite_id, c.name AS composite_name, c.ref_id, o.value, o.custom
                  FROM composite_occurrences o
                  JOIN composites c ON c.organization_id = o.organization_id AND c.id = o.composite_id
                  WHERE o.organization_id = ${org} AND o.signal_id = ${signal.id}`
            ).pipe(Effect.flatMap(Effect.orDie))
            const metered = yield* metering.meter({
              organizationId: org,
              customerId: customer.id,
              kind: "COMPOSITE",
              targetId: occurrence.compositeId,
              quantity: ONE,
              usageLogId
            })
            return {
              ...base,
              meter: "COMPOSITE",
              entitlementId: occurrence.compositeId,
              entitlementName: occurrence.compositeName,
              agentKey: occurrence.refId,
              quantity: ONE,
              providerCost: ZERO,
              customerCost: metered.customerCost,
              billingMode: metered.billingMode,
              balanceRemaining: metered.remaining,
              purchaseId: metered.purchaseId,
              composite: { id: occurrence.compositeId, refId: occurrence.refId, value: occurrence.value },
              custom: occurrence.custom
            } satisfies UsageRow
          }
        }
      })

    /** The outcome a run's steps belong to: its first step signal names it. */
    const outcomeOfRun = (org: string, runId: string) =>
      Effect.flatMap(
        findOne(
          Schema.Struct({ outcomeId: Schema.String, outcomeName: Schema.String, agentKey: Schema.String }),
          sql`SELECT o.id AS outcome_id, o.name AS outcome_name, o.agent_key
              FROM signals s
              JOIN outcome_steps st ON st.organization_id = s.organization_id AND st.agent_key = s.agent_key
              JOIN outcomes o ON o.organization_id = st.organization_id AND o.id = st.outcome_id
              WHERE s.organization_id = ${org} AND s.run_id = ${runId} AND s.route = 'OUTCOME'
              ORDER BY s.id LIMIT 1`
        ),
        Option.match({
          onNone: () => Effect.fail(new Unprocessable({ message: `Outcome run ${runId} has no step of a live outcome` })),
          onSome: Effect.succeed
        })
      )

    const writeUsage = (org: string, id: string, signal: SignalRecord, customer: Customer, row: UsageRow) =>
      orDie(sql`INSERT INTO usage_log ${
        sql.insert({
          organizationId: org,
          id,
          customerId: customer.id,
          meter: row.meter,
          entitlementId: row.entitlementId,
          entitlementName: row.entitlementName,
          agentKey: row.agentKey,
          model: row.usage?.model ?? null,
          inputTokens: row.usage ? row.usage.inputTokens ?? 0 : null,
          outputTokens: row.usage ? row.usage.outputTokens ?? 0 : null,
          cacheTokens: row.usage ? row.usage.cacheTokens ?? 0 : null,
          cacheWriteTokens: row.usage ? row.usage.cacheWriteTokens ?? 0 : null,
          quantity: toSql(row.quantity),
          providerCost: toSql(row.providerCost),
          customerCost: toSql(row.customerCost),
          billingMode: row.billingMode,
          balanceRemaining: row.balanceRemaining === null ? null : toSql(row.balanceRemaining),
          purchaseId: row.purchaseId,
          signalId: signal.id,
          messageId: signal.messageId,
          runId: row.runId,
          compositeId: row.composite?.id ?? null,
          compositeRef: row.composite?.refId ?? null,
          compositeValue: row.composite?.value ?? null,
          member: signal.member,
          custom: row.custom === null || row.custom === undefined ? null : JSON.stringify(row.custom)
        })
      }`)

    /**
     * A tagged signal joins its occurrence; when that occurrence was parked and
     * this was its last missing signal, it completes now and its billing is
     * queued like any completion.
     */
    const joinOccurrence = (caches: Caches, signal: SignalRecord, customer: Customer) =>
      Effect.gen(function*() {
        const org = signal.organizationId
        const tag = yield* compositeOfTag(caches, org, signal)
        if (Option.isNone(tag)) return
        const value = signal.compositeValue!
        const occurrence = yield* lockOccurrence(sql, org, tag.value.id, value)
        if (occurrence.status !== "PARKED" || occurrence.customerId !== customer.id) return
        const missing = yield* missingSignals(sql, org, tag.value, value, customer)
        if (missing.length > 0) return
        const rawId = makeId("sig")
        const body = {
          customerId: customer.id,
          composite: { [tag.value.refId]: value },
          ...(occurrence.member === null ? {} : { member: occurrence.member }),
          ...(occurrence.custom === null ? {} : { custom: occurrence.custom })
        }
        yield* orDie(sql`INSERT INTO signals ${
          sql.insert({
            organizationId: org,
            id: rawId,
            messageId: makeId("msg"),
            route: "COMPOSITE_COMPLETE",
            customerId: customer.id,
            compositeRef: tag.value.refId,
            compositeValue: value,
            member: occurrence.member,
            body: JSON.stringify(body)
          })
        }`)
        yield* orDie(sql`UPDATE composite_occurrences SET status = 'COMPLETED', signal_id = ${rawId},
                           completed_at = now(), updated_at = now()
                         WHERE organization_id = ${org} AND composite_id = ${tag.value.id} AND value = ${value}`)
      })

    const memberOf = (org: string, customerId: string, email: string) =>
      Effect.flatMap(
        members.findByEmail(org, customerId, email),
        Option.match({
          onNone: () => Effect.fail(new Unprocessable({ message: `member ${email} does not belong to customer ${customerId}` })),
          onSome: Effect.succeed
        })
      )

    /** One signal in its own savepoint: a refusal undoes its writes, not the batch's. */
    const processOne = (caches: Caches, signal: SignalRecord, customers: Map<string, Option.Option<Customer>>) =>
      Effect.gen(function*() {
        const org = signal.organizationId
        const customer = yield* memo(
          customers,
          `${org}/${signal.customerId ?? `ext:${signal.externalId}`}`,
          customerOf(signal)
        )
        if (Option.isNone(customer)) {
          return { _tag: "Pending", message: `No active customer has externalId ${signal.externalId}` } as Processed
        }
        if (customer.value.archivedAt !== null) {
          return yield* new Conflict({ message: `Customer ${customer.value.id} is archived and cannot receive signals` })
        }
        if (signal.member !== null) yield* memberOf(org, customer.value.id, signal.member)
        const usageLogId = makeId("usg")
        const row = yield* price(caches, signal, customer.value, usageLogId)
        yield* writeUsage(org, usageLogId, signal, customer.value, row)
        yield* joinOccurrence(caches, signal, customer.value)
        return { _tag: "Processed", customerId: customer.value.id, usageLogId } as Processed
      }).pipe(sql.withTransaction)

    /** The end state of each signal of the batch, written in one statement. */
    const finish = (results: ReadonlyArray<readonly [SignalRecord, Ended]>) => {
      if (results.length === 0) return Effect.void
      const column = <A>(pick: (signal: SignalRecord, outcome: Ended) => A) =>
        results.map(([signal, outcome]) => pick(signal, outcome))
      return orDie(sql`UPDATE signals AS s SET
            status = v.status, error_status = v.error_status, error_message = v.error_message,
            customer_id = coalesce(v.customer_id, s.customer_id), usage_log_id = v.usage_log_id,
            attempts = s.attempts + 1, processed_at = now()
          FROM unnest(
            ${column((signal) => signal.organizationId)}::text[], ${column((signal) => signal.id)}::text[],
            ${column((_, o) => (o._tag === "Failed" ? "FAILED" : o._tag === "Pending" ? "PENDING" : "PROCESSED"))}::text[],
            ${column((_, o) => (o._tag === "Failed" ? o.status : o._tag === "Pending" ? 404 : null))}::int[],
            ${column((_, o) => (o._tag === "Processed" ? null : o.message))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? o.customerId : null))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? o.usageLogId : null))}::text[]
          ) AS v(organization_id, id, status, error_status, error_message, customer_id, usage_log_id)
          WHERE s.organization_id = v.organization_id AND s.id = v.id`)
    }

    /**
     * Claims the oldest queued signals whose customer no other worker holds
     * right now: the transaction-scoped advisory lock per customer partitions
     * the queue between workers, so they never wait on each other's balances.
     */
    const claim = findAll(
      SignalRecord,
      sql`SELECT * FROM signals
          WHERE status = 'QUEUED'
            AND pg_try_advisory_xact_lock(hashtext(organization_id), hashtext(coalesce(customer_id, 'ext:' || external_id)))
          ORDER BY id LIMIT ${BATCH_SIZE}
          FOR UPDATE SKIP LOCKED`
    )

    const batch = Effect.gen(function*() {
      const signals = yield* claim
      const caches = batchCaches()
      const customers = new Map<string, Option.Option<Customer>>()
      const results: Array<readonly [SignalRecord, Ended]> = []
      for (const signal of signals) {
        const outcome = yield* processOne(caches, signal, customers).pipe(
          Effect.catchAllCause((cause): Effect.Effect<Ended, RetryableBatch> => {
            if (isRetryable(cause)) return Effect.fail(new RetryableBatch())
            const failure = Cause.failureOption(cause)
            if (Option.isSome(failure) && isApiError(failure.value)) {
              const error: ApiError = failure.value
              return Effect.succeed({ _tag: "Failed", status: errorStatus[error._tag], message: error.message })
            }
            return Effect.as(Effect.logError(`signal ${signal.id} failed`, cause), {
              _tag: "Failed",
              status: 500,
              message: "Internal error while pricing this signal; replay it once fixed"
            } as const)
          })
        )
        results.push([signal, outcome])
      }
      yield* finish(results)
      return signals.length
    }).pipe(sql.withTransaction)

    /**
     * The usage log's partitions of this month and the next exist before a row
     * is written (migrations/0007): checked once per process and month, outside
     * the batch, because creating a partition locks the whole table briefly.
     */
    let partitionsReadyFor: string | undefined
    const ensurePartitions = Effect.suspend(() => {
      const month = new Date().toISOString().slice(0, 7)
      if (partitionsReadyFor === month) return Effect.void
      return orDie(sql`SELECT ensure_usage_log_month(now()), ensure_usage_log_month(now() + interval '1 month')`).pipe(
        Effect.tap(() => {
          partitionsReadyFor = month
        })
      )
    })

    /** One batch, retried from scratch when the database rolled it back for a deadlock. */
    const oneBatch = Effect.zipRight(ensurePartitions, batch).pipe(
      Effect.catchAllCause((cause) =>
        isRetryable(cause) || [...Cause.failures(cause)].some((e) => e instanceof RetryableBatch)
          ? Effect.fail(new RetryableBatch())
          : Effect.failCause(cause)
      ),
      Effect.retry({ while: (e) => e instanceof RetryableBatch, schedule: Schedule.spaced("20 millis"), times: 10 }),
      Effect.orDie
    )

    const queueIsEmpty = Effect.map(
      orDie(sql`SELECT 1 FROM signals WHERE status = 'QUEUED' LIMIT 1`),
      (rows) => rows.length === 0
    )

    /**
     * One batch. When every queued signal belongs to customers other workers
     * hold right now, it waits for them rather than reporting idle, so that
     * `worker --once` never stops while signals remain.
     */
    const runOnce: Effect.Effect<number> = Effect.flatMap(oneBatch, (handled) =>
      handled > 0
        ? Effect.succeed(handled)
        : Effect.flatMap(queueIsEmpty, (empty) =>
          empty ? Effect.succeed(0) : Effect.zipRight(Effect.sleep("20 millis"), Effect.suspend(() => runOnce))))

    return { runOnce } as const
  })
}) {}

/** The worker job: one batch of queued signals per call. */
export const signalsJob: WorkerJob = {
  name: "signals",
  runOnce: () => Effect.flatMap(SignalProcessor, (processor) => processor.runOnce)
}
