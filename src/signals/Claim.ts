/**
 * The claim: which queued signals a batch takes (docs/signals.md "Claim whole
 * customers"). A batch reads the customers at the head of one lane (no
 * locks), tries the transaction-scoped advisory locks of its share of them
 * and takes the queued signals of those it got, oldest first: two statements
 * whatever the number of customers. Two batches, of one worker or of two,
 * therefore take disjoint customers, never wait on each other's balance rows,
 * and one customer's signals are priced by one batch at a time, in order.
 */
import type { SqlClient } from "@effect/sql"
import type { Statement } from "@effect/sql"
import { Deferred, Effect, FiberId, Schema } from "effect"
import { findAll, withoutBitmapScans } from "../db/Sql.ts"
import { idOrder } from "../ids.ts"
import { Timestamp } from "../schema.ts"
import { ClaimedSignal, type Customer, customColumn, momentColumns, scoped, type SignalRecord } from "./BatchContext.ts"
import { prepared } from "../db/Prepared.ts"

/** The queue's two lanes: today's signals, and late ones (a backfill: `signals.late`). */
export type Lane = "ON_TIME" | "LATE"

/** Which of a round's batches claims: the `index`-th of `of` (`shareOf`), of the head they share (`RoundHead`). */
export interface Share {
  readonly index: number
  readonly of: number
  readonly head?: RoundHead | undefined
}

/** The customers at a lane's head, as `candidatesOf` reads them. */
type Candidates = ReadonlyArray<typeof Candidate.Type>

/**
 * The head a round's batches read once between them. The batches of a round
 * start together and each claims its share of the same customers
 * (`shareOf`); read by each, the head (the whole queue, when the worker keeps
 * up) was read and decoded as many times as the round has batches. Now the
 * first batch to ask reads it, in its own transaction, and the others wait for
 * that read. A sibling whose shared read failed reads its own. No lock is taken
 * by the read, so a batch that claims from it a moment later meets the same
 * guarantees as one that read it itself: each customer's advisory lock, then
 * its queued signals as they are then.
 */
export interface RoundHead {
  readonly of: (lane: Lane, read: Effect.Effect<Candidates>) => Effect.Effect<Candidates>
}

export const makeRoundHead = (): RoundHead => {
  const reads = new Map<Lane, Deferred.Deferred<Candidates>>()
  return {
    of: (lane, read) =>
      Effect.suspend(() => {
        const shared = reads.get(lane)
        if (shared !== undefined) return Deferred.await(shared).pipe(Effect.catchAllCause(() => read))
        // Made and kept in one synchronous step: a sibling that asks next finds it.
        const reading = Deferred.unsafeMake<Candidates>(FiberId.none)
        reads.set(lane, reading)
        return Effect.onExit(read, (exit) => Deferred.done(reading, exit))
      })
  }
}

/** A batch alone in its round, or the half of a failed batch: every customer of the head is its to try. */
export const wholeHead: Share = { index: 0, of: 1 }

/** The fewest queued signals a head reads (a small first batch still sees many customers). */
const MIN_HEAD = 64

/**
 * Customers a head lists: the first HEAD_CUSTOMERS by their oldest queued
 * signal. A round's batches share them out (`shareOf`).
 */
export const HEAD_CUSTOMERS = 1024

/**
 * Advisory locks one claim tries, at most. They are held until the batch
 * commits, in PostgreSQL's shared lock table (max_locks_per_transaction, 64 by
 * default, × max_connections: 6,400 slots on a default server); four batches
 * side by side take at most 1,024, two workers 2,048.
 */
export const CUSTOMERS_PER_CLAIM = 256

/** Customers of a short queue's head per batch of its round (`roundSize`). */
export const CUSTOMERS_PER_SHORT_BATCH = 64

/** Queued signals read at the head of a lane to find its customers: a batch's worth. */
export const headOf = (limit: number) => Math.max(MIN_HEAD, limit)

/**
 * Below this many queued signals (a quarter of a batch) a lane is short: the
 * next round is one batch, which takes it all (`isShortLane`).
 */
export const shortHeadOf = (limit: number) => Math.max(MIN_HEAD, Math.ceil(limit / 4))

export const Candidate = Schema.Struct({
  organizationId: Schema.NullOr(Schema.String),
  customerKey: Schema.NullOr(Schema.String),
  /** The externalId the customer (when the key is its id) holds. */
  heldExternalId: Schema.NullOr(Schema.String),
  /** Whether the other lane has queued signals (asked in the same statement). */
  otherLane: Schema.Boolean,
  /** The customer's signals among the head's (whether the head is the whole lane, `isWholeLane`). */
  queued: Schema.NullOr(Schema.NumberFromString),
  /**
   * The customer the key names, as the batch's context reads it (any state),
   * when the key is a customer's id: the claim's signals are resolved from
   * these, without a statement of their own.
   */
  customerId: Schema.NullOr(Schema.String),
  customerExternalId: Schema.NullOr(Schema.String),
  customerArchivedAt: Schema.NullOr(Timestamp)
})

/** A batch's claimed signals, and the customers their claim read (`Candidate.customerId`) that those signals name. */
interface Claimed {
  readonly signals: ReadonlyArray<SignalRecord>
  readonly customers: ReadonlyArray<Customer>
}

/**
 * The candidates' customers that `signals` name, by id or by the externalId
 * they hold, for the batch's context. Only those: the context locks each
 * customer's purchase and balance rows until the commit, and a candidate
 * whose advisory lock went to another batch is that batch's to lock. Given
 * every candidate, side-by-side batches waited on each other's rows (the
 * drain's batches ran one after the other; docs/benchmarks.md, "Side-by-side
 * batches that waited on each other").
 */
export const customersOf = (
  candidates: ReadonlyArray<typeof Candidate.Type>,
  signals: ReadonlyArray<SignalRecord>
): Array<Customer> => {
  // Each signal under its queue key, as the claim reads it: coalesce(customer_id, 'ext:' || external_id).
  const claimedKeys = new Set(signals.map((signal) =>
    scoped(signal.organizationId, signal.customerId ?? `ext:${signal.externalId}`)
  ))
  return candidates.flatMap(({ customerArchivedAt, customerExternalId, customerId, organizationId }) =>
    organizationId !== null && customerId !== null && (
        claimedKeys.has(scoped(organizationId, customerId)) ||
        (customerExternalId !== null && claimedKeys.has(scoped(organizationId, `ext:${customerExternalId}`)))
      )
      ? [{ organizationId, id: customerId, externalId: customerExternalId, archivedAt: customerArchivedAt }]
      : []
  )
}

/**
 * Whether a head of `head` rows held the whole lane (fewer rows than it
 * read, of fewer customers than a head lists) and fits in a batch of
 * `limit`: a short queue, the queue of a worker keeping up with its arrivals.
 */
export const isWholeLane = (candidates: ReadonlyArray<typeof Candidate.Type>, head: number, limit: number) => {
  if (candidates.length === 0 || candidates.length >= HEAD_CUSTOMERS || candidates[0]!.customerKey === null) return false
  const rows = candidates.reduce((sum, candidate) => sum + (candidate.queued ?? 0), 0)
  return rows < head && rows <= limit
}

/** Whether the head found the lane empty (its one row names no customer). */
export const isEmptyLane = (candidates: ReadonlyArray<typeof Candidate.Type>) =>
  candidates.every((candidate) => candidate.customerKey === null)

/**
 * Whether the next round should be one batch: the head held the whole lane,
 * or found it empty. An empty lane counts as short: else, in a round of
 * several batches, one that came after its siblings had claimed everything
 * kept the next round at several batches, which only found each other's
 * customers held (and read the lane again, wider) while a short queue waited.
 */
export const isShortLane = (candidates: ReadonlyArray<typeof Candidate.Type>, head: number, limit: number) =>
  isWholeLane(candidates, head, limit) || isEmptyLane(candidates)

/**
 * A batch's share of a head's customers: every `of`-th named one from
 * `index`, at most CUSTOMERS_PER_CLAIM. The batches of one round read the
 * same head at the same moment; each tries the advisory locks of its own
 * share only, so they take disjoint customers instead of the first batch
 * locking the whole head and the others finding it held.
 */
export const shareOf = (candidates: ReadonlyArray<typeof Candidate.Type>, share: Share) =>
  candidates
    .filter((candidate) => candidate.organizationId !== null && candidate.customerKey !== null)
    .filter((_, position) => position % share.of === share.index)
    .slice(0, CUSTOMERS_PER_CLAIM)

/**
 * How many batches a round runs, at most `concurrency`: all of them for a
 * long queue; for a short one, one batch per CUSTOMERS_PER_SHORT_BATCH
 * customers of its head. A batch's time grows with its customers (each one's
 * purchase and balance rows are locked and written), not only with its
 * signals: one batch for a short queue over 250 customers held the signals
 * queued meanwhile longer than side-by-side batches on disjoint shares
 * (`shareOf`), which use the second core. A short queue of a few customers
 * stays one batch: its siblings would have nobody to claim.
 */
export const roundSizeOf = (concurrency: number, queueIsShort: boolean, headCustomers: number) =>
  queueIsShort ? Math.min(concurrency, Math.max(1, Math.ceil(headCustomers / CUSTOMERS_PER_SHORT_BATCH))) : concurrency

/** How many times the customers tried so far the claim's next group may be, at most (`claimStep`). */
export const CLAIM_GROWTH = 8

/**
 * How many customers, from the `next`-th, the claim's next statement tries
 * (`claimInSteps`), to get `wanted` signals. When the head held the whole
 * lane its counts are each customer's whole queue: as many customers as
 * those counts say fill the batch, so usually one statement. Otherwise a
 * customer may have far more queued than the head shows: one customer first,
 * so a busy customer fills the batch alone, then as many as the signals the
 * customers tried so far (`next`, which gave `claimed`) gave each on average
 * say fill the rest, at most CLAIM_GROWTH times as many as were tried so far
 * (a quiet first customer must not lock a whole share of busy ones). Doubling
 * instead (1, 2, 4, ...), 1,000 signals over customers of seven each took eight
 * statements (a drain of 30,000 over 4,096 customers, 272 for 41 batches;
 * now 146), and the last group of 128 customers gave the batch one signal
 * of each of 73: their other signals were claimed, locked and written by
 * later batches again (docs/benchmarks.md "The drain's own work at 4,096 customers").
 */
export const claimStep = (
  customers: ReadonlyArray<typeof Candidate.Type>,
  next: number,
  wanted: number,
  countsAreWhole: boolean,
  claimed: number
) => {
  if (!countsAreWhole) {
    if (next === 0) return 1
    if (claimed === 0) return Math.min(next * 2, 2 ** 16)
    return Math.max(1, Math.min(Math.ceil(wanted / (claimed / next)), next * CLAIM_GROWTH))
  }
  let count = 0
  let signals = 0
  while (next + count < customers.length && signals < wanted) {
    signals += customers[next + count]!.queued ?? 1
    count++
  }
  return Math.max(1, count)
}

/** What the claim needs of the processor's deferrals (customers whose signals wait for their renewal). */
export interface Deferrals {
  /** Lets back in the customers whose purchase renewed: one statement, only while some wait. */
  readonly lapse: Effect.Effect<void>
  /** The keys left out: `org/customerId` and `org/ext:externalId`. */
  readonly keys: () => ReadonlyArray<string>
  /** A filter on `signals` rows leaving `keys` out; empty when there are none. */
  readonly notDeferred: (keys: ReadonlyArray<string>) => Statement.Fragment
}

/**
 * A worker's claims. It keeps, between claims, which lane goes next and
 * whether the last claim found the queue short, which sizes the next round
 * (`roundSize`).
 */
export const makeClaims = (sql: SqlClient.SqlClient, deferrals: Deferrals) => {
  const notDeferred = deferrals.notDeferred

  /** A filter on `signals` rows keeping only `only` (a failed batch's half, see `isolateOnDataFault`); empty when unset. */
  const onlyIds = (only: ReadonlyArray<string> | undefined) =>
    only === undefined ? sql.literal("") : sql`AND id = ANY(${only}::text[])`

  /**
   * The lane the next claim tries first. Late signals (a backfill) are
   * claimed in batches of their own, alternating with today's when both
   * lanes have work, so a backfill of any size holds today's signals for
   * at most about one batch. Whether the other lane has work is asked in
   * the claim's own statement (its partial index), so a queue with no late
   * signal costs no statement more.
   */
  let nextLane: Lane = "ON_TIME"

  /**
   * Whether the last claim saw work in both lanes. Then a claim passes the
   * turn on as it starts, so the batches of one round (claimed side by
   * side, `SignalConcurrency`) alternate between the lanes too.
   */
  let bothLanesBusy = false

  /**
   * The customers at the head of one lane (its first `head` queued
   * signals), and whether the other lane has queued signals. A customer
   * named by its id comes with the externalId it holds, so that its
   * signals sent by that externalId are claimed with it.
   */
  const candidatesOf = (
    lane: Lane,
    head: number,
    keys: ReadonlyArray<string>,
    only: ReadonlyArray<string> | undefined
  ) =>
    findAll(
      Candidate,
      prepared(sql)`SELECT c.organization_id, c.customer_key,
                 CASE WHEN named.archived_at IS NULL THEN named.external_id END AS held_external_id, f.other_lane, c.queued,
                 named.id AS customer_id, named.external_id AS customer_external_id, named.archived_at AS customer_archived_at
          FROM (
            SELECT EXISTS (SELECT 1 FROM signals WHERE status = 'QUEUED' AND ${
        sql.literal(lane === "LATE" ? "NOT late" : "late")
      } ${notDeferred(keys)} ${onlyIds(only)}) AS other_lane) f
          LEFT JOIN LATERAL (
            SELECT organization_id, customer_key, first, queued FROM (
              SELECT head.organization_id, coalesce(head.customer_id, held.id, 'ext:' || head.external_id) AS customer_key,
                     min(head.id) AS first, count(*) AS queued
              FROM (SELECT organization_id, customer_id, external_id, id FROM signals
                    WHERE status = 'QUEUED' AND ${sql.literal(lane === "LATE" ? "late" : "NOT late")} ${notDeferred(keys)}
                      ${onlyIds(only)}
                    ORDER BY id LIMIT ${head}) head
              LEFT JOIN customers held
                ON head.customer_id IS NULL AND held.organization_id = head.organization_id
               AND held.external_id = head.external_id AND held.archived_at IS NULL
              GROUP BY 1, 2) grouped
            ORDER BY first LIMIT ${HEAD_CUSTOMERS}) c ON true
          LEFT JOIN customers named ON named.organization_id = c.organization_id AND named.id = c.customer_key
          ORDER BY c.first`
    )

  /**
   * Whether the last claim found the whole lane in a short head, or found
   * it empty (`isShortLane`): then the next round is one batch, which takes it
   * all at once, rather than `SignalConcurrency` batches whose others would
   * only find its customers held (a short queue is priced by one small
   * batch at once; a long one still by several big ones side by side).
   */
  let queueIsShort = false

  /** The customers the last claim's head named (a whole claim's, not a failed batch's half). */
  let headCustomers = 0

  /** How many batches the next round runs (`roundSizeOf`). */
  const roundSize = (concurrency: number) => roundSizeOf(concurrency, queueIsShort, headCustomers)

  /**
   * The queued signals of one lane of `customers`, in one statement
   * whatever their number: the advisory locks of those customers (each
   * tried, none waited for), and the queued signals of those it got, whole
   * customers in the head's order (each one's oldest first), up to `limit`.
   * A signal comes back only under a key whose lock this statement took (a
   * key's row of `held` exists only once its lock was taken), whichever of
   * the two the planner reads first. Claimed customer
   * by customer instead, two statements each, one after the other, a long
   * queue over many customers kept a batch claiming for most of its time
   * (docs/benchmarks.md "Many customers at once").
   */
  const claimCustomers = (
    lane: Lane,
    limit: number,
    named: ReadonlyArray<typeof Candidate.Type>,
    only: ReadonlyArray<string> | undefined
  ) => {
    if (named.length === 0) return Effect.succeed([])
    return findAll(
      ClaimedSignal,
      prepared(sql)`WITH held AS MATERIALIZED (
            SELECT k.org, k.key, k.held_external_id, k.position
            FROM unnest(${named.map((c) => c.organizationId)}::text[], ${named.map((c) => c.customerKey)}::text[],
                        ${named.map((c) => c.heldExternalId)}::text[]) WITH ORDINALITY AS k(org, key, held_external_id, position)
            WHERE pg_try_advisory_xact_lock(hashtext(k.org), hashtext(k.key))),
          claimable AS (
            SELECT org, key, position FROM held
            -- Its signals sent by externalId before they were resolved, with it, in send order.
            UNION ALL SELECT org, 'ext:' || held_external_id, position FROM held WHERE held_external_id IS NOT NULL)
          SELECT queued.* FROM claimable
          -- Each key's queue read by its own probe of signals_queued_by_customer, whatever the statistics say.
          -- As a semi-join of the lane against the keys, a table analysed while its queue was empty (as
          -- autovacuum finds it between bursts) was planned as a nested loop over the whole lane that
          -- compared every queued row with every key: 30-35 ms a claim of 120 customers from a lane of 500,
          -- against 1 ms (docs/benchmarks.md "Many customers at once").
          CROSS JOIN LATERAL (
            SELECT organization_id, id, message_id, route, customer_id, external_id, run_id, composite_ref,
                   composite_value, member, body, ${sql.literal(momentColumns)}, ${sql.literal(customColumn)}
            FROM signals
            WHERE status = 'QUEUED' AND ${sql.literal(lane === "LATE" ? "late" : "NOT late")} ${onlyIds(only)}
              AND organization_id = claimable.org AND coalesce(customer_id, 'ext:' || external_id) = claimable.key
            ORDER BY id LIMIT ${limit}
            FOR UPDATE SKIP LOCKED) queued
          -- Whole customers, in the head's order: a batch that cannot take every signal of its group takes
          -- the whole queues of its first customers (and the oldest of the one it stops in), not one signal
          -- of each, which left the others' rows to be locked and written again by the batches after it.
          ORDER BY claimable.position, queued.id LIMIT ${limit}`
    )
  }

  const other = (lane: Lane): Lane => (lane === "ON_TIME" ? "LATE" : "ON_TIME")

  /**
   * One lane's batch: the preferred lane, or the other one when the
   * preferred has nothing to claim. With `only`, just those signals (the
   * half of a failed batch), leaving the lanes' turns as they were.
   */
  const claim = (limit: number, only: ReadonlyArray<string> | undefined, share: Share) =>
    withoutBitmapScans(sql, Effect.gen(function*() {
      yield* deferrals.lapse
      const keys = deferrals.keys()
      const lane = nextLane
      if (only === undefined && bothLanesBusy) nextLane = other(lane)
      const read = candidatesOf(lane, headOf(limit), keys, only)
      const candidates = yield* (share.head !== undefined && only === undefined ? share.head.of(lane, read) : read)
      const otherHasWork = candidates[0]?.otherLane ?? false
      const claimed = yield* claimWidening(lane, limit, candidates, keys, only, share)
      if (claimed.signals.length > 0 || !otherHasWork) {
        if (only === undefined) {
          nextLane = otherHasWork ? other(lane) : lane
          bothLanesBusy = otherHasWork
        }
        return claimed
      }
      // This lane had nothing this worker could take: the other lane's batch now.
      const fallback = yield* candidatesOf(other(lane), headOf(limit), keys, only)
      if (only === undefined) {
        bothLanesBusy = fallback[0]?.otherLane ?? false
        nextLane = bothLanesBusy ? lane : other(lane)
      }
      return yield* claimWidening(other(lane), limit, fallback, keys, only, share)
    }))

  /**
   * The batch's share of the head's customers (`shareOf`); when every one
   * of them is held by another worker's batch and the lane goes on past
   * the head, its share of a head four batches long. Reading the long head
   * every time was a large share of the drain's statement time
   * (docs/benchmarks.md, "The drain's claim").
   */
  const claimWidening = (
    lane: Lane,
    limit: number,
    candidates: ReadonlyArray<typeof Candidate.Type>,
    keys: ReadonlyArray<string>,
    only: ReadonlyArray<string> | undefined,
    share: Share
  ): Effect.Effect<Claimed> =>
    Effect.gen(function*() {
      if (only === undefined) {
        queueIsShort = isShortLane(candidates, shortHeadOf(limit), limit)
        headCustomers = candidates.filter((candidate) => candidate.customerKey !== null).length
      }
      const whole = isWholeLane(candidates, headOf(limit), limit)
      const mine = shareOf(candidates, share)
      const claimed = yield* claimInSteps(lane, limit, mine, only, whole)
      if (claimed.length > 0 || mine.length === 0 || whole) {
        return { signals: claimed, customers: customersOf(candidates, claimed) }
      }
      const wider = yield* candidatesOf(lane, limit * 4, keys, only)
      const widened = yield* claimInSteps(lane, limit, shareOf(wider, share), only, false)
      return { signals: widened, customers: customersOf(wider, widened) }
    })

  /**
   * `customers` claimed a group at a time, until the batch is full: no more
   * customers locked than fill it, so that what a batch does not need is left
   * to the other workers (a batch that locks its whole share of busy
   * customers to fill itself from one of them leaves a second worker
   * nothing to claim; docs/benchmarks.md "Many customers at once"). Each
   * group is one statement (`claimCustomers`), sized by `claimStep`.
   */
  const claimInSteps = (
    lane: Lane,
    limit: number,
    customers: ReadonlyArray<typeof Candidate.Type>,
    only: ReadonlyArray<string> | undefined,
    countsAreWhole: boolean
  ) =>
    Effect.gen(function*() {
      const claimed: Array<SignalRecord> = []
      let next = 0
      while (next < customers.length && claimed.length < limit) {
        const wanted = limit - claimed.length
        const group = customers.slice(next, next + claimStep(customers, next, wanted, countsAreWhole, claimed.length))
        claimed.push(...(yield* claimCustomers(lane, wanted, group, only)))
        next += group.length
      }
      return claimed.sort(idOrder)
    })

  return { claim, roundSize } as const
}
