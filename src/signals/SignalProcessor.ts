/**
 * The worker job that prices queued signals, as sets (docs/signals.md "The worker").
 *
 * A batch is one transaction:
 * 1. claim: the oldest queued signals of customers no other worker holds
 *    (a transaction-scoped advisory lock per customer, then the customer's
 *    signals `FOR UPDATE SKIP LOCKED`), so workers take disjoint customers and
 *    never wait on each other's balances;
 *    Late signals (a backfill) are claimed in batches of their own, alternating
 *    with today's, so a backfill never holds today's signals back;
 * 2. load each customer's context once (BatchContext: purchase, balances and
 *    wallets locked, the catalogue the signals name) and each signal's cycle,
 *    by its moment (the current one, an ended one: its cycle_balances, or it
 *    waits QUEUED for the renewal);
 * 3. price every signal in order with the pure meters, applying each one's
 *    moves in memory before the next, so allowance refusals are exact and
 *    ordered; a refusal or an unexpected error fails only that signal;
 * 4. write: balance moves aggregated per row, wallet postings, usage rows in
 *    one statement, every signal's end state in one statement, and a
 *    `signal.refused` event for each refused one when an endpoint subscribes.
 * A crash before the commit leaves every claimed signal QUEUED with nothing
 * billed; the commit makes billing and the status change visible together.
 *
 * Statements per batch do not grow with its size (tagged signals aside, which
 * join their composite occurrence one by one), so a batch of BATCH_SIZE costs
 * a few hundredths of a statement per signal.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Cause, Config, Data, Effect, Either, Option, Schema } from "effect"
import { DatabaseConfig } from "../config.ts"
import { faultOf, transientBackoff } from "../db/Faults.ts"
import { findAll, insertRowsStatement, orDie } from "../db/Sql.ts"
import { makeId } from "../ids.ts"
import { currentTime, currentTimeMillis } from "../time.ts"
import { addSpentStatement, customerKey, Ledger, type SpentMove, type WalletPosting } from "../ledger/Ledger.ts"
import { toSql, ZERO } from "../money.ts"
import { Timestamp } from "../schema.ts"
import type { WorkerJob } from "../worker/Worker.ts"
import { faultPoint } from "../Fault.ts"
import { periodicCollection } from "../Memory.ts"
import { QUEUE_DEPTH_CAP, reportQueue, tally } from "../worker/Stats.ts"
import { waitForHeldWork } from "../worker/HeldWork.ts"
import {
  type BatchContext,
  type Customer,
  decodeSignal,
  type DecodedSignal,
  loadBatchContext,
  type SignalRecord
} from "./BatchContext.ts"
import { refusalMessage } from "./RefusalMoment.ts"
import { applyMoves, type BalanceMove, type CustomerContext } from "../pricing/meters/Context.ts"
import type { Priced } from "../pricing/meters/Meters.ts"
import { meterSignal, type RunCosts, tagOf } from "./MeterSignal.ts"
import { codeOf, CustomerArchived, CustomerNotFound, errorStatus, type Refusal, UnknownMember } from "../errors.ts"
import { lockOccurrence, missingSignals } from "./Occurrences.ts"
import { ensureActive } from "../customers/Customer.ts"
import { type CycleKey, refreshDrafts } from "../billing/DraftInvoices.ts"
import type { AllowanceDraw } from "../pricing/meters/Allowance.ts"
import { inboxRowOf, momentAt } from "./InboxRow.ts"
import type { SignalInput } from "./Signal.ts"
import { insertSignals } from "./InboxWriter.ts"
import { type Settlement, settleReservationsStatement } from "./Settlements.ts"
import { makeClaims, type Share, wholeHead } from "./Claim.ts"
import { makeQueueWake } from "./QueueWake.ts"
import { announceEnded } from "./PricedWaits.ts"
import { PgClient } from "@effect/sql-pg"
import { type RefusedSignal, WebhookOutbox } from "../webhooks/Outbox.ts"

/**
 * Signals claimed per transaction. Large enough that the batch's fixed
 * statements cost ~0.014 a signal, small enough that a batch takes about
 * 0.1 s (an adjustment of a customer in the batch waits that long) and the
 * heap stays small; batches of 500 were slower and no flatter in memory
 * (docs/benchmarks.md). `BILLING_SIGNAL_BATCH` overrides it.
 */
const BATCH_SIZE = Math.max(1, Number(process.env.BILLING_SIGNAL_BATCH ?? 1000))

/**
 * A process's first batch: code not yet optimised prices a batch of 1,000 in
 * about half a second, so a worker that starts on a full queue would show
 * nothing for that long. Each batch that commits doubles the next, up to
 * BATCH_SIZE (100, 200, 400, 800, 1,000): four batches more per process.
 */
const FIRST_BATCH_SIZE = Math.min(BATCH_SIZE, 100)

type Ended =
  | { readonly _tag: "Processed"; readonly customerId: string; readonly usageLogId: string }
  | { readonly _tag: "Pending"; readonly message: string }
  | {
    readonly _tag: "Failed"
    readonly status: number
    /** The refusal's code (`statusDetail.code` of the same refusal answered by the API). */
    readonly code: string
    readonly message: string
    /** The customer the signal was found to be for, when it was resolved before the refusal. */
    readonly customerId: string | null
  }

/**
 * A signal whose moment is at or after its customer's ACTIVE purchase's
 * period_end: the renewal has not run yet. It stays QUEUED (nothing written)
 * and its customer is left out of this process's claims until the purchase
 * renews (see `Deferral`).
 */
interface Waiting {
  readonly _tag: "Waiting"
  readonly organizationId: string
  readonly customerId: string
  readonly externalId: string | null
  readonly purchaseId: string
  readonly periodEnd: Date
}

/** A batch that failed for a reason that passes (src/db/Faults.ts): tried again whole. */
class TransientBatchFailure extends Data.TaggedError("TransientBatchFailure")<{ readonly cause: Cause.Cause<unknown> }> {}

const PurchaseEnd = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  status: Schema.String,
  periodEnd: Schema.NullOr(Timestamp)
})

/** A refused signal ends FAILED with the status and code the API answers the same refusal with. */
const refused = (refusal: Refusal, customerId: string | null = null, message: string = refusal.message): Ended => ({
  _tag: "Failed",
  status: errorStatus[refusal._tag],
  code: codeOf(refusal._tag),
  message,
  customerId
})

const internalError = {
  _tag: "Failed",
  status: 500,
  code: "internal_error",
  message: "Internal error while pricing this signal; replay it once fixed",
  customerId: null
} as const

/** A held signal's reason, as the API would answer it: no active customer holds its externalId (404). */
const pendingCode = codeOf("CustomerNotFound")

/** What a priced signal writes, gathered over the batch. */
interface Writes {
  readonly usageRows: Array<Record<string, unknown>>
  readonly moves: Array<BalanceMove>
  readonly spent: Array<SpentMove>
  readonly postings: Array<WalletPosting>
  /** The ended cycles late signals moved, for refreshDrafts. */
  readonly endedCycles: Map<string, CycleKey>
  /** The spend holds priced signals settle (src/signals/Settlements.ts). */
  readonly settlements: Array<Settlement>
}

const usageRow = (
  signal: SignalRecord,
  customer: Customer,
  id: string,
  priced: Priced,
  cycleIndex: number | null
): Record<string, unknown> => {
  const { entry } = priced
  const draw: AllowanceDraw | null = priced.draw
  return {
    organizationId: signal.organizationId,
    id,
    customerId: customer.id,
    meter: entry.meter,
    entitlementId: entry.entitlementId,
    entitlementName: entry.entitlementName,
    agentKey: entry.agentKey,
    model: entry.usage?.model ?? null,
    inputTokens: entry.usage ? entry.usage.inputTokens ?? 0 : null,
    outputTokens: entry.usage ? entry.usage.outputTokens ?? 0 : null,
    cacheTokens: entry.usage ? entry.usage.cacheTokens ?? 0 : null,
    cacheWriteTokens: entry.usage ? entry.usage.cacheWriteTokens ?? 0 : null,
    quantity: toSql(entry.quantity),
    providerCost: toSql(entry.providerCost),
    customerCost: toSql(entry.customerCost),
    billingMode: entry.billingMode,
    balanceRemaining: entry.balanceRemaining === null ? null : toSql(entry.balanceRemaining),
    purchaseId: entry.purchaseId,
    signalId: signal.id,
    messageId: signal.messageId,
    runId: signal.runId,
    compositeId: entry.composite?.id ?? null,
    compositeRef: entry.composite?.refId ?? null,
    compositeValue: entry.composite?.value ?? null,
    member: signal.member,
    custom: entry.custom ?? null,
    occurredAt: signal.moment.toISOString(),
    cycleIndex,
    // How the row split between allowance and arrears: what a reversal gives back (null: nothing drawn).
    advanceQuantity: draw === null ? null : toSql(draw.advanceQuantity),
    arrearQuantity: draw === null ? null : toSql(draw.arrearQuantity),
    arrearCharge: draw === null ? null : toSql(draw.arrearCharge)
  }
}

/**
 * What one try of a batch claimed and how its signals ended, kept by that try
 * alone: batches run side by side (`SignalConcurrency`), so none may read
 * another's. When the try fails, `claimed` are the signals to isolate; once it
 * commits, `results` are counted and `waiting` customers sit out the claims.
 */
interface BatchTry {
  claimed: ReadonlyArray<SignalRecord>
  results: ReadonlyArray<readonly [SignalRecord, Ended]>
  readonly waiting: Array<Waiting>
}

const newTry = (): BatchTry => ({ claimed: [], results: [], waiting: [] })

/**
 * How many batches one worker prices at once, each its own transaction on its
 * own connection. One batch at a time left both the worker's CPU and
 * PostgreSQL idle most of the drain (it waits on each statement in turn);
 * claims take disjoint customers (the advisory lock), so side by side batches
 * never price the same customer and never wait on each other's rows.
 * `BILLING_SIGNAL_CONCURRENCY` sets it; the default is DEFAULT_CONCURRENCY on
 * PostgreSQL, 1 on the embedded database (one session: batches would only
 * queue behind each other).
 */
const DEFAULT_CONCURRENCY = 4

export const SignalConcurrency = Effect.map(
  Config.all({
    database: DatabaseConfig,
    concurrency: Config.option(Config.integer("BILLING_SIGNAL_CONCURRENCY"))
  }),
  ({ concurrency, database }) =>
    Math.max(1, Option.getOrElse(concurrency, () => Option.isSome(database.url) ? DEFAULT_CONCURRENCY : 1))
).pipe(Effect.orDie)

/** The signal processor's worker job, by name (the worker's view lists it before the services are built). */
export const signalsJobName = "signals"

/** A refused signal's row, as `signal.refused` tells it. */
const RefusedRow = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  messageId: Schema.String,
  route: Schema.String,
  customerId: Schema.NullOr(Schema.String),
  externalId: Schema.NullOr(Schema.String),
  agentKey: Schema.NullOr(Schema.String),
  idempotencyKey: Schema.NullOr(Schema.String),
  receivedAt: Timestamp,
  occurredAt: Schema.NullOr(Timestamp),
  errorStatus: Schema.NullOr(Schema.Number),
  errorCode: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String)
})

const refusedSignalOf = (row: typeof RefusedRow.Type): RefusedSignal => ({
  organizationId: row.organizationId,
  rawId: row.id,
  messageId: row.messageId,
  route: row.route,
  customerId: row.customerId,
  externalId: row.externalId,
  agentKey: row.agentKey,
  idempotencyKey: row.idempotencyKey,
  receivedAt: row.receivedAt,
  occurredAt: row.occurredAt,
  error: {
    status: row.errorStatus ?? internalError.status,
    code: row.errorCode ?? internalError.code,
    message: row.errorMessage ?? internalError.message
  }
})

export class SignalProcessor extends Effect.Service<SignalProcessor>()("SignalProcessor", {
  dependencies: [Ledger.Default, WebhookOutbox.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const outbox = yield* WebhookOutbox
    // Announcements still in flight when the service closes are interrupted with it, not left to a closed pool.
    const serviceScope = yield* Effect.scope

    /**
     * Customers left out of this process's claims because a signal of theirs
     * waits for its purchase's renewal (its moment is at or after the ACTIVE
     * purchase's period_end), by `org/customerId`. Held in memory: a claim
     * looks, in one statement and only while some wait, whether those
     * purchases renewed (period_end moved, or no longer ACTIVE) and lets
     * their customers back in. So waiting signals stay QUEUED without being
     * claimed over and over, `worker --once` ends with them queued, and the
     * next worker (or the same one after the cycle job ran) prices them. A
     * new process claims them once more, and defers them again.
     */
    const deferred = new Map<string, Waiting>()

    /** The keys the claim leaves out: `org/customerId` and `org/ext:externalId` of each deferred customer. */
    const deferredKeys = () => {
      const keys: Array<string> = []
      for (const waiting of deferred.values()) {
        keys.push(`${waiting.organizationId}/${waiting.customerId}`)
        if (waiting.externalId !== null) keys.push(`${waiting.organizationId}/ext:${waiting.externalId}`)
      }
      return keys
    }

    /** A filter on `signals` rows leaving deferred customers out; empty (nothing to plan) when none wait. */
    const notDeferred = (keys: ReadonlyArray<string>) =>
      keys.length === 0
        ? sql.literal("")
        : sql`AND NOT (organization_id || '/' || coalesce(customer_id, 'ext:' || external_id) = ANY(${keys}::text[]))`

    /** Lets back in the customers whose purchase renewed (or ended): one statement, only while some wait. */
    const lapseDeferrals = Effect.suspend(() => {
      if (deferred.size === 0) return Effect.void
      const waiting = [...deferred.values()]
      return Effect.map(
        findAll(
          PurchaseEnd,
          sql`SELECT organization_id, id, status, period_end FROM purchases WHERE (organization_id, id) IN (
                SELECT * FROM unnest(${waiting.map((w) => w.organizationId)}::text[], ${waiting.map((w) => w.purchaseId)}::text[]))`
        ),
        (rows) => {
          const now = new Map(rows.map((row) => [`${row.organizationId}/${row.id}`, row]))
          for (const [key, wait] of deferred) {
            const row = now.get(`${wait.organizationId}/${wait.purchaseId}`)
            if (
              row === undefined || row.status !== "ACTIVE" || row.periodEnd === null ||
              row.periodEnd.getTime() !== wait.periodEnd.getTime()
            ) deferred.delete(key)
          }
        }
      )
    })

    const claims = makeClaims(sql, { lapse: lapseDeferrals, keys: deferredKeys, notDeferred })

    /** The signal's customer: missing (404), archived (409), or None when its externalId is not held yet. */
    const customerOf = (signal: SignalRecord, context: BatchContext): Either.Either<Customer | null, CustomerNotFound | CustomerArchived> => {
      if (signal.customerId !== null) {
        const customer = context.customerById(signal.organizationId, signal.customerId)
        if (customer === undefined) return Either.left(new CustomerNotFound({ message: `Customer ${signal.customerId} not found` }))
        return ensureActive(customer, "cannot receive signals")
      }
      return Either.right(context.customerByExternalId(signal.organizationId, signal.externalId ?? "") ?? null)
    }

    /**
     * Prices one signal against the in-memory state and records what it
     * writes; the state moves only when the signal is billed.
     */
    const priceOne = (
      signal: DecodedSignal,
      context: BatchContext,
      customers: Map<string, CustomerContext>,
      runCosts: RunCosts,
      writes: Writes
    ): Ended | Waiting => {
      const record = signal.record
      const resolved = customerOf(record, context)
      if (Either.isLeft(resolved)) {
        return refused(resolved.left)
      }
      const customer = resolved.right
      if (customer === null) return { _tag: "Pending", message: `No active customer has externalId ${record.externalId}` }
      if (record.member !== null && !context.isMember(record.organizationId, customer.id, record.member)) {
        return refused(new UnknownMember({ message: `member ${record.member} does not belong to customer ${customer.id}` }), customer.id)
      }
      const key = customerKey({ organizationId: customer.organizationId, customerId: customer.id })
      let state = customers.get(key)
      if (state === undefined) {
        state = context.customerContext(customer)
        customers.set(key, state)
      }
      // Billed in the cycle containing the signal's moment: the current one (today's path), an ended one
      // (late: its cycle_balances, shared by the batch's late signals of that cycle), or none (no active plan).
      const cycle = context.cycleOf(record, customer)
      if (cycle._tag === "Waiting") {
        return {
          _tag: "Waiting",
          organizationId: customer.organizationId,
          customerId: customer.id,
          externalId: customer.externalId,
          purchaseId: cycle.purchaseId,
          periodEnd: cycle.periodEnd
        }
      }
      const purchase = cycle.purchase
      const signalState: CustomerContext = purchase === state.purchase ? state : { ...state, purchase }
      const metered = meterSignal(signal, signalState, context, runCosts)
      if (Either.isLeft(metered)) {
        return refused(metered.left, customer.id, refusalMessage(metered.left, {
          moment: record.moment,
          source: record.momentSource,
          period: cycle.period,
          activeCycle: cycle.activeCycle
        }))
      }
      const priced = metered.right
      const usageLogId = makeId("usg")
      const ended = purchase !== null && purchase.closedCycle
      writes.usageRows.push(usageRow(record, customer, usageLogId, priced, purchase?.cycleIndex ?? null))
      if (priced.draw !== null && purchase !== null) {
        applyMoves(purchase, priced.draw.moves)
        for (const move of priced.draw.moves) writes.moves.push({ ...move, usageLogId })
        if (ended && priced.draw.moves.length > 0) {
          const key = { organizationId: record.organizationId, purchaseId: purchase.id, cycleIndex: purchase.cycleIndex }
          writes.endedCycles.set(`${key.organizationId}/${key.purchaseId}/${key.cycleIndex}`, key)
        }
      }
      // An ended cycle's usage never counts in the purchase's (current) spent_this_cycle.
      if (!ended && !BigDecimal.isZero(priced.spent) && priced.entry.purchaseId !== null) {
        writes.spent.push({ organizationId: record.organizationId, purchaseId: priced.entry.purchaseId, amount: priced.spent })
      }
      if (!BigDecimal.isZero(priced.walletDebit) && state.wallet !== null) {
        state.wallet.balance = BigDecimal.normalize(BigDecimal.subtract(state.wallet.balance, priced.walletDebit))
        writes.postings.push({
          organizationId: record.organizationId,
          customerId: customer.id,
          delta: BigDecimal.negate(priced.walletDebit),
          type: "USAGE_LOG",
          usageLogId,
          purchaseId: priced.entry.purchaseId
        })
      }
      if (priced.entry.meter === "OUTCOME_STEP" && record.runId !== null) {
        const runKey = `${record.organizationId}/${customer.id}/${record.runId}`
        runCosts.set(runKey, BigDecimal.sum(runCosts.get(runKey) ?? ZERO, priced.entry.providerCost))
      }
      if (signal.body.reservationId !== undefined) {
        writes.settlements.push({
          organizationId: record.organizationId,
          reservationId: signal.body.reservationId,
          customerId: customer.id,
          signalId: record.id,
          usageLogId
        })
      }
      return { _tag: "Processed", customerId: customer.id, usageLogId }
    }

    /**
     * A tagged signal joins its occurrence; when that occurrence was parked and
     * this was its last missing signal, it completes now and its billing is
     * queued like any completion. One occurrence at a time: tags are rare, and
     * the occurrence row lock is what keeps completion exact.
     */
    const joinOccurrence = (signal: SignalRecord, customerId: string, context: BatchContext) =>
      Effect.gen(function*() {
        const org = signal.organizationId
        const tag = tagOf(signal, context)
        if (tag === undefined) return
        const value = tag.value
        const occurrence = yield* lockOccurrence(sql, org, tag.composite.id, value)
        if (occurrence.status !== "PARKED" || occurrence.customerId !== customerId) return
        const customer = context.customerById(org, customerId)
        const missing = yield* missingSignals(sql, org, tag.composite, value, {
          id: customerId,
          externalId: customer?.externalId ?? null
        })
        if (missing.length > 0) return
        const rawId = makeId("sig")
        const body = {
          customerId,
          composite: { [tag.composite.refId]: value },
          ...(occurrence.member === null ? {} : { member: occurrence.member }),
          ...(occurrence.custom === null ? {} : { custom: occurrence.custom as SignalInput["custom"] })
        }
        // The occurrence completes when its last missing signal happened: billed in that cycle.
        const row = yield* inboxRowOf(org, "COMPOSITE_COMPLETE", body, body, momentAt(signal.moment, yield* currentTimeMillis), { id: rawId })
        const [written] = yield* insertSignals(sql, [row])
        yield* written!
        yield* sql`UPDATE composite_occurrences SET status = 'COMPLETED', signal_id = ${rawId},
                     completed_at = now(), updated_at = now()
                   WHERE organization_id = ${org} AND composite_id = ${tag.composite.id} AND value = ${value}`
      }).pipe(Effect.orDie)

    /** The end state of each signal of the batch, written in one statement (undefined for none). */
    const finishStatement = (results: ReadonlyArray<readonly [SignalRecord, Ended]>) => {
      if (results.length === 0) return undefined
      const column = <A>(pick: (signal: SignalRecord, outcome: Ended) => A) =>
        results.map(([signal, outcome]) => pick(signal, outcome))
      return sql`/* prepared */ UPDATE signals AS s SET
            status = v.status, error_status = v.error_status, error_code = v.error_code, error_message = v.error_message,
            customer_id = coalesce(v.customer_id, s.customer_id), usage_log_id = v.usage_log_id,
            attempts = s.attempts + 1, processed_at = now()
          FROM unnest(
            ${column((signal) => signal.organizationId)}::text[], ${column((signal) => signal.id)}::text[],
            ${column((_, o) => (o._tag === "Failed" ? "FAILED" : o._tag === "Pending" ? "PENDING" : "PROCESSED"))}::text[],
            ${column((_, o) => (o._tag === "Failed" ? o.status : o._tag === "Pending" ? 404 : null))}::int[],
            ${column((_, o) => (o._tag === "Failed" ? o.code : o._tag === "Pending" ? pendingCode : null))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? null : o.message))}::text[],
            ${column((_, o) => (o._tag === "Processed" || o._tag === "Failed" ? o.customerId : null))}::text[],
            ${column((_, o) => (o._tag === "Processed" ? o.usageLogId : null))}::text[]
          ) AS v(organization_id, id, status, error_status, error_code, error_message, customer_id, usage_log_id)
          -- Each row found by its primary key (a LATERAL probe of its own), then updated by its ctid: joined to v
          -- by key, an inbox of some tens of thousands of rows was read whole and hashed for every batch, as the
          -- planner guesses 100 rows for any unnest (docs/benchmarks.md "Many customers at once"). The ctid
          -- is stable: the claim locked these rows (FOR UPDATE) for this transaction.
          CROSS JOIN LATERAL (SELECT r.ctid AS row_ctid FROM signals r
                              WHERE r.organization_id = v.organization_id AND r.id = v.id OFFSET 0) found
          WHERE s.ctid = found.row_ctid`
    }

    /**
     * `signal.refused` for the signals `ids` of `organizationIds` just ended
     * FAILED, in the transaction that ended them: read back from their rows
     * (what the claim does not carry: received_at, the idempotency key) only
     * when an endpoint subscribes. The customer is the row's when the
     * workspace has it.
     */
    const tellRefused = (organizationIds: ReadonlyArray<string>, ids: ReadonlyArray<string>) =>
      outbox.signalsRefused(
        organizationIds,
        findAll(
          RefusedRow,
          sql`SELECT s.organization_id, s.id, s.message_id, s.route, c.id AS customer_id, s.external_id, s.agent_key,
                     s.idempotency_key, s.received_at, s.occurred_at, s.error_status, s.error_code, s.error_message
              FROM signals s
              LEFT JOIN customers c ON c.organization_id = s.organization_id AND c.id = s.customer_id
              WHERE (s.organization_id, s.id) IN (
                SELECT * FROM unnest(${organizationIds}::text[], ${ids}::text[])) AND s.status = 'FAILED'
              ORDER BY s.id`
        ).pipe(Effect.map((rows) => rows.map(refusedSignalOf)))
      )

    const batch = Effect.fn("SignalProcessor.priceBatch")(function*(
        limit: number,
        only: ReadonlyArray<string> | undefined,
        share: Share,
        tried: BatchTry
      ) {
        const { customers: claimedCustomers, signals: records } = yield* claims.claim(limit, only, share)
        tried.claimed = records
        if (records.length === 0) return 0
        const results: Array<readonly [SignalRecord, Ended]> = []
        const decoded: Array<DecodedSignal> = []
        for (const record of records) {
          try {
            decoded.push(decodeSignal(record))
          } catch (error) {
            yield* Effect.logError(`signal ${record.id} no longer decodes`, error)
            results.push([record, internalError])
          }
        }
        const context = yield* loadBatchContext(sql, ledger, decoded, { lock: true, customers: claimedCustomers })
        const customers = new Map<string, CustomerContext>()
        const runCosts: RunCosts = new Map()
        const writes: Writes = { usageRows: [], moves: [], spent: [], postings: [], endedCycles: new Map(), settlements: [] }
        const joins: Array<readonly [SignalRecord, string]> = []
        let waiting = 0
        for (const signal of decoded) {
          let ended: Ended
          try {
            const outcome = priceOne(signal, context, customers, runCosts, writes)
            if (outcome._tag === "Waiting") {
              // Stays QUEUED, nothing written; once the batch commits, its customer sits out the claims
              // until the renewal (a batch rolled back and retried must not defer the customer's other signals).
              tried.waiting.push(outcome)
              waiting++
              continue
            }
            ended = outcome
          } catch (error) {
            yield* Effect.logError(`signal ${signal.record.id} failed`, error)
            ended = internalError
          }
          results.push([signal.record, ended])
          if (ended._tag === "Processed" && signal.record.route !== "COMPOSITE_COMPLETE" && signal.record.compositeRef !== null) {
            joins.push([signal.record, ended.customerId])
          }
        }
        // The batch's writes of other tables go in its balance moves' statement: a short queue's batch is
        // bound by its round trips, one after the other (docs/benchmarks.md). The signals' end is among
        // them, before the composite occurrences' joins: a signal this batch refused is FAILED when a join
        // asks what reported, as it is when an earlier batch refused it.
        yield* ledger.moveBalances(writes.moves, [
          addSpentStatement(sql, writes.spent),
          insertRowsStatement(sql, "usage_log", writes.usageRows),
          settleReservationsStatement(sql, writes.settlements, yield* currentTime),
          finishStatement(results)
        ])
        yield* ledger.postToWallets(context.wallets, writes.postings)
        // Late usage of a cycle still inside its grace period changes that cycle's DRAFT invoice.
        if (writes.endedCycles.size > 0) yield* refreshDrafts(sql, [...writes.endedCycles.values()])
        for (const [record, customerId] of joins) yield* joinOccurrence(record, customerId, context)
        const failed = results.filter(([, ended]) => ended._tag === "Failed").map(([record]) => record)
        if (failed.length > 0) yield* tellRefused(failed.map((record) => record.organizationId), failed.map((record) => record.id))
        tried.results = results
        yield* faultPoint("signals.before-commit")
        return records.length - waiting
      }, sql.withTransaction, orDie)

    /**
     * The usage log's partitions of this month and the next exist before a row
     * is written (migrations/0007): checked once per process and month, outside
     * the batch, because creating a partition locks the whole table briefly.
     */
    let partitionsReadyFor: string | undefined
    const ensurePartitions = Effect.suspend(() => {
      // The database's month (its now() makes the partitions), as near as this process's clock tells it.
      const month = new Date().toISOString().slice(0, 7)
      if (partitionsReadyFor === month) return Effect.void
      return orDie(sql`SELECT ensure_usage_log_month(now()), ensure_usage_log_month(now() + interval '1 month')`).pipe(
        Effect.tap(() => {
          partitionsReadyFor = month
        })
      )
    })

    /** Marks one signal FAILED in a transaction of its own: it could not be written with its batch. */
    const failAlone = (signal: SignalRecord) =>
      Effect.zipRight(
        orDie(sql`UPDATE signals SET status = 'FAILED', error_status = 500, error_code = ${internalError.code},
                    error_message = ${internalError.message}, attempts = attempts + 1, processed_at = now()
                  WHERE organization_id = ${signal.organizationId} AND id = ${signal.id} AND status = 'QUEUED'`),
        tellRefused([signal.organizationId], [signal.id])
      ).pipe(sql.withTransaction, orDie)

    /** The next batch's size while the process warms up (FIRST_BATCH_SIZE). */
    let rampedSize = FIRST_BATCH_SIZE

    /**
     * One batch (of `only`, when given), tried again whole while it fails for
     * a reason that passes: a lost or refused connection, the server shutting
     * down or starting, a deadlock (src/db/Faults.ts). Each try is one
     * transaction that wrote nothing when it failed, so trying again bills
     * nothing twice; the pause (50 ms doubling to 500 ms) notices a database
     * that answers again within half a second. Once it commits, what it did is
     * counted and its waiting customers sit out the claims.
     */
    const attempt = (limit: number, only?: ReadonlyArray<string>, share: Share = wholeHead) => {
      let failures = 0
      let tried = newTry()
      return Effect.zipRight(ensurePartitions, Effect.suspend(() => batch(limit, only, share, tried = newTry()))).pipe(
        Effect.catchAllCause((cause) =>
          !Cause.isInterruptedOnly(cause) && faultOf(cause) === "Transient"
            ? Effect.fail(new TransientBatchFailure({ cause }))
            : Effect.failCause(cause)
        ),
        Effect.tapError((failure) =>
          failures++ === 0
            ? Effect.logWarning("a batch of signals failed for a reason that passes; trying it again whole", failure.cause)
            : Effect.void
        ),
        Effect.retry({ while: (failure) => failure._tag === "TransientBatchFailure", schedule: transientBackoff }),
        Effect.catchTag("TransientBatchFailure", (failure) => Effect.failCause(failure.cause)),
        Effect.tap(() => tally(tried.results.map(([signal, ended]) => [signal.organizationId, counterOf[ended._tag]]))),
        // Not waited for: the next batch need not wait for the announcement's round trip.
        Effect.tap(() => Effect.forkIn(announceEnded(sql, tried.results.map(([signal]) => signal.id)), serviceScope)),
        Effect.tap(() =>
          Effect.sync(() => {
            for (const wait of tried.waiting) deferred.set(`${wait.organizationId}/${wait.customerId}`, wait)
          })
        ),
        Effect.catchAllCause((cause) => isolateOnDataFault(cause, tried.claimed))
      )
    }

    /**
     * After a batch failed: when the database refused it for a signal's data
     * (anything not transient), its claimed signals are priced again as two
     * batches of half each, in order, each its own transaction restricted to
     * those ids, and a half that fails is halved again. One refused signal
     * among n thus fails alone (FAILED, 500) in about 2·log2(n) transactions
     * while the others are priced. A transient failure that outlasted its
     * retries, or one before anything was claimed, goes to the worker's loop.
     */
    const isolateOnDataFault = (cause: Cause.Cause<unknown>, failed: ReadonlyArray<SignalRecord>): Effect.Effect<number, unknown> => {
      if (Cause.isInterruptedOnly(cause) || faultOf(cause) === "Transient" || failed.length === 0) {
        return Effect.failCause(cause)
      }
      if (failed.length === 1) {
        const signal = failed[0]!
        return Effect.zipRight(
          Effect.logError(`signal ${signal.id} could not be written; marked FAILED`, cause),
          Effect.as(Effect.zipRight(failAlone(signal), tally([[signal.organizationId, "failed"]])), 1)
        )
      }
      const middle = Math.ceil(failed.length / 2)
      return Effect.zipRight(
        Effect.logWarning(`a batch of ${failed.length} signals could not be written; trying it again in halves`, cause),
        Effect.zipWith(priceHalf(failed.slice(0, middle)), Effect.suspend(() => priceHalf(failed.slice(middle))), (a, b) => a + b)
      )
    }

    const priceHalf = (signals: ReadonlyArray<SignalRecord>): Effect.Effect<number, unknown> =>
      Effect.suspend(() => {
        const ids = signals.map((signal) => signal.id)
        return attempt(ids.length, ids)
      })

    /** One batch of a round (its `share` of the head's customers), its size ramped up after each that commits. */
    const oneBatch = (share: Share) => Effect.suspend(() =>
      attempt(rampedSize, undefined, share).pipe(
        Effect.tap((handled) =>
          Effect.sync(() => {
            if (handled > 0) rampedSize = Math.min(BATCH_SIZE, rampedSize * 2)
          })
        ),
        Effect.orDie
      )
    )

    /** Between batches, so a batch's rows never linger (src/Memory.ts). */
    const collect = periodicCollection(20 * BATCH_SIZE)

    /** No queued signal left but those waiting for their purchase's renewal (`deferred`). */
    const queueIsEmpty = Effect.suspend(() =>
      Effect.map(
        orDie(sql`SELECT 1 FROM signals WHERE status = 'QUEUED' ${notDeferred(deferredKeys())} LIMIT 1`),
        (rows) => rows.length === 0
      )
    )

    /** The queue left behind: signals waiting, and how long the oldest has waited. */
    const queueState = orDie(sql<{ depth: string; oldest: Date | string | null }>`
      SELECT (SELECT count(*) FROM (SELECT 1 FROM signals WHERE status = 'QUEUED' LIMIT ${QUEUE_DEPTH_CAP}) q) AS depth,
             -- the head of each lane (the queue's index is by lane, then id); a requeued signal has waited since its requeue
             least((SELECT coalesce(requeued_at, received_at) FROM signals WHERE status = 'QUEUED' AND NOT late ORDER BY id LIMIT 1),
                   (SELECT coalesce(requeued_at, received_at) FROM signals WHERE status = 'QUEUED' AND late ORDER BY id LIMIT 1)) AS oldest`).pipe(
      Effect.map(([row]) => ({
        depth: Number(row?.depth ?? 0),
        lagMs: row?.oldest == null ? 0 : Math.max(0, Date.now() - new Date(row.oldest).getTime())
      }))
    )

    const concurrency = yield* SignalConcurrency

    /**
     * Whether the last round priced anything. Only then does a round run
     * several batches (`roundSize`: `concurrency` for a long queue): the first round of a process or after an idle
     * spell is one batch, so the first signals of a backlog are priced by one
     * batch (of FIRST_BATCH_SIZE at start) with the process's CPU to itself,
     * not by several that finish together later, and an idle poll costs one
     * claim, not `concurrency`.
     */
    let lastRoundBusy = false

    /** One round of batches side by side, each its own transaction; what they handled together. */
    const round = Effect.suspend(() => {
      const batches = lastRoundBusy ? claims.roundSize(concurrency) : 1
      return Effect.all(Array.from({ length: batches }, (_, index) => oneBatch({ index, of: batches })), {
        concurrency: "unbounded"
      })
    }    ).pipe(
      Effect.map((handled) => handled.reduce((a, b) => a + b, 0)),
      Effect.tap((handled) =>
        Effect.sync(() => {
          lastRoundBusy = handled > 0
        })
      )
    )

    /**
     * A round; when it priced nothing while signals are still queued (other
     * workers hold their customers), it waits for them and runs again rather
     * than report idle, so that `worker --once` never stops while signals
     * remain. The whole round waits, not one of its batches: a
     * batch that found its round's siblings holding every customer must not
     * keep the round (and the signals queued meanwhile) waiting 20 ms.
     */
    const runOnce: Effect.Effect<number> = Effect.tap(
      waitForHeldWork(round, Effect.map(queueIsEmpty, (empty) => !empty), { stepMs: 20 }),
      (handled) => handled > 0 ? Effect.zipRight(reportQueue(queueState), Effect.sync(() => collect(handled))) : Effect.void
    ).pipe(Effect.withSpan("SignalProcessor.runOnce"))

    /** Between drains a looping worker sleeps until signals are queued (src/signals/QueueWake.ts). */
    const wake = yield* makeQueueWake(sql, yield* Effect.serviceOption(PgClient.PgClient))

    /** The worker job: one round of batches of queued signals per call. */
    const job: WorkerJob = { name: signalsJobName, runOnce: () => runOnce, awaitWork: wake.awaitWork }

    return { runOnce, job, wake } as const
  })
}) {}

/** What a signal's end is called in the worker's stats. */
const counterOf: Record<Ended["_tag"], string> = { Processed: "priced", Pending: "pending", Failed: "failed" }

