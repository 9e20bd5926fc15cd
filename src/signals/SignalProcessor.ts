/**
 * The worker job that prices queued signals, as sets (docs/signals.md "The worker").
 *
 * A batch is one transaction, each step a room of its own:
 * 1. claim (Claim.ts): the oldest queued signals of customers no other worker
 *    holds (a transaction-scoped advisory lock per customer, then the
 *    customer's signals `FOR UPDATE SKIP LOCKED`), so workers take disjoint
 *    customers and never wait on each other's balances; late signals (a
 *    backfill) are claimed in batches of their own, alternating with today's,
 *    so a backfill never holds today's signals back; customers whose signals
 *    wait for their renewal sit out (Deferrals.ts);
 * 2. load each customer's context once (BatchContext.ts: purchase, balances
 *    and wallets locked, the catalogue the signals name) and each signal's
 *    cycle, by its moment (the current one, an ended one: its cycle_balances,
 *    or it waits QUEUED for the renewal);
 * 3. price (PriceSignal.ts) every signal in order with the pure meters,
 *    applying each one's moves in memory before the next, so allowance
 *    refusals are exact and ordered; a refusal or an unexpected error fails
 *    only that signal;
 * 4. write, through the ledger (Ledger.recordUsage): balance moves aggregated
 *    per row, spent-this-cycle, usage rows and the holds they settle in one
 *    statement, with every signal's end state (BatchWrites.ts); then wallet
 *    postings, and a `signal.refused` event for each refused one when an
 *    endpoint subscribes.
 * A crash before the commit leaves every claimed signal QUEUED with nothing
 * billed; the commit makes billing and the status change visible together.
 * A batch that fails is tried again, or isolated by halving (Isolation.ts).
 * This module runs the batch and schedules its rounds.
 *
 * Statements per batch do not grow with its size (tagged signals aside, which
 * join their composite occurrence one by one), so a batch of
 * `SignalBatchSize` costs a few hundredths of a statement per signal.
 */
import { SqlClient } from "@effect/sql"
import { Config, Effect, Option } from "effect"
import { PgClient } from "@effect/sql-pg"
import { DatabaseConfig } from "../config.ts"
import { orDie } from "../db/Sql.ts"
import { Ledger } from "../ledger/Ledger.ts"
import type { WorkerJob } from "../worker/Worker.ts"
import { faultPoint } from "../Fault.ts"
import { periodicCollection } from "../Memory.ts"
import { QUEUE_DEPTH_CAP, reportQueue, tally } from "../worker/Stats.ts"
import { waitForHeldWork } from "../worker/HeldWork.ts"
import { refreshDrafts } from "../billing/DraftInvoices.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import type { CustomerContext } from "../pricing/meters/Context.ts"
import { decodeSignal, type DecodedSignal, loadBatchContext, type SignalRecord } from "./BatchContext.ts"
import type { RunCosts } from "./MeterSignal.ts"
import { makeClaims, makeRoundHead, type Share } from "./Claim.ts"
import { makeDeferrals } from "./Deferrals.ts"
import { noWrites, priceOne } from "./PriceSignal.ts"
import { makeBatchWrites } from "./BatchWrites.ts"
import { joinOccurrence } from "./JoinOccurrence.ts"
import { type BatchTry, makeAttempt } from "./Isolation.ts"
import { counterOf, type Ended, internalError } from "./SignalEnd.ts"
import { makeQueueWake } from "./QueueWake.ts"
import { announceEnded } from "./PricedWaits.ts"

/**
 * Signals claimed per transaction. Large enough that the batch's fixed
 * statements cost little a signal, small enough that a batch is short (an
 * adjustment of a customer in the batch waits for it) and the heap stays
 * small; smaller batches were slower and no flatter in memory
 * (docs/benchmarks.md, and docs/signals.md for the figures). `BILLING_SIGNAL_BATCH` overrides it.
 */
const DEFAULT_BATCH_SIZE = 1000

export const SignalBatchSize = Effect.map(
  Config.option(
    Config.integer("BILLING_SIGNAL_BATCH").pipe(
      Config.validate({ message: "BILLING_SIGNAL_BATCH must be a whole number of at least 1", validation: (size) => size >= 1 })
    )
  ),
  (size) => Option.getOrElse(size, () => DEFAULT_BATCH_SIZE)
).pipe(Effect.orDie)

/**
 * A process's first batch: code not yet optimised prices a batch of 1,000 in
 * about half a second, so a worker that starts on a full queue would show
 * nothing for that long. Each batch that commits doubles the next, up to
 * the batch size (100, 200, 400, 800, 1,000): four batches more per process.
 */
const firstBatchSizeOf = (batchSize: number) => Math.min(batchSize, 100)

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

export class SignalProcessor extends Effect.Service<SignalProcessor>()("SignalProcessor", {
  dependencies: [Ledger.Default, WebhookOutbox.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const batchWrites = makeBatchWrites(sql, yield* WebhookOutbox)
    // Announcements still in flight when the service closes are interrupted with it, not left to a closed pool.
    const serviceScope = yield* Effect.scope
    const batchSize = yield* SignalBatchSize

    const deferrals = makeDeferrals(sql)
    const claims = makeClaims(sql, deferrals)

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
        const writes = noWrites()
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
        // The batch's money (moves, spent, usage rows, holds settled) is one statement of the ledger's: a short
        // queue's batch is bound by its round trips, one after the other (docs/benchmarks.md). The signals'
        // end goes in it too, before the composite occurrences' joins: a signal this batch refused is FAILED
        // when a join asks what reported, as it is when an earlier batch refused it.
        yield* ledger.recordUsage(writes, [batchWrites.finishStatement(results)])
        yield* ledger.postToWallets(context.wallets, writes.postings)
        // Late usage of a cycle still inside its grace period changes that cycle's DRAFT invoice.
        if (writes.endedCycles.size > 0) yield* refreshDrafts(sql, [...writes.endedCycles.values()])
        for (const [record, customerId] of joins) yield* joinOccurrence(sql, record, customerId, context)
        const failed = results.filter(([, ended]) => ended._tag === "Failed").map(([record]) => record)
        if (failed.length > 0) {
          yield* batchWrites.tellRefused(failed.map((record) => record.organizationId), failed.map((record) => record.id))
        }
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

    /** A batch tried again while it fails for a reason that passes, isolated by halving when its data is refused. */
    const attempt = makeAttempt({
      prepare: ensurePartitions,
      batch,
      // Once a try commits, what it did is counted and its waiting customers sit out the claims.
      committed: (tried) =>
        tally(tried.results.map(([signal, ended]) => [signal.organizationId, counterOf[ended._tag]])).pipe(
          // Not waited for: the next batch need not wait for the announcement's round trip.
          Effect.zipRight(Effect.forkIn(announceEnded(sql, tried.results.map(([signal]) => signal.id)), serviceScope)),
          Effect.zipRight(deferrals.defer(tried.waiting))
        ),
      failAlone: batchWrites.failAlone
    })

    /** The next batch's size while the process warms up (`firstBatchSizeOf`). */
    let rampedSize = firstBatchSizeOf(batchSize)

    /** One batch of a round (its `share` of the head's customers), its size ramped up after each that commits. */
    const oneBatch = (share: Share) => Effect.suspend(() =>
      attempt(rampedSize, undefined, share).pipe(
        Effect.tap((handled) =>
          Effect.sync(() => {
            if (handled > 0) rampedSize = Math.min(batchSize, rampedSize * 2)
          })
        ),
        Effect.orDie
      )
    )

    /** Between batches, so a batch's rows never linger (src/Memory.ts). */
    const collect = periodicCollection(20 * batchSize)

    /** No queued signal left but those waiting for their purchase's renewal (Deferrals.ts). */
    const queueIsEmpty = Effect.suspend(() =>
      Effect.map(
        orDie(sql`SELECT 1 FROM signals WHERE status = 'QUEUED' ${deferrals.notDeferred(deferrals.keys())} LIMIT 1`),
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
     * batch (of `firstBatchSizeOf` at start) with the process's CPU to itself,
     * not by several that finish together later, and an idle poll costs one
     * claim, not `concurrency`.
     */
    let lastRoundBusy = false

    /** One round of batches side by side, each its own transaction; what they handled together. */
    const round = Effect.suspend(() => {
      const batches = lastRoundBusy ? claims.roundSize(concurrency) : 1
      const head = batches > 1 ? makeRoundHead() : undefined
      return Effect.all(Array.from({ length: batches }, (_, index) => oneBatch({ index, of: batches, head })), {
        concurrency: "unbounded"
      })
    }).pipe(
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
