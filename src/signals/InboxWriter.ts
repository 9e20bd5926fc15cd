/**
 * The one way every signal row reaches the inbox: `insertSignals`, many rows
 * in ONE statement.
 *
 * `insertSignals(sql, rows)` is a multi-row `INSERT ... ON CONFLICT DO NOTHING`
 * that checks each row's customerId (and its timestamp against the
 * workspace's late-usage window) in the same statement, followed, only when
 * some idempotency keys were already taken, by one `SELECT` of the rows that
 * hold them. Two statements at most, whatever the row count. Intake writes
 * through the writer below; the completions (inside their transaction) and
 * the worker completing a parked composite (inside its batch) call it directly.
 *
 * The writer's one door, `enqueue(rows, answer)`, takes one request's rows:
 * - a single signal: concurrent requests share one insert, and each is
 *   answered once its row is committed. Two writer fibers take turns
 *   gathering: the gatherer takes every row waiting (up to `maxGroup`), and
 *   when requests have overlapped in the last `contentionMemoryMs` it lingers
 *   up to `lingerMs` for more, then writes the group while the other writer
 *   gathers the next. A request that finds no other in flight (an idle
 *   service, a client sending one at a time) is written at once, without the
 *   wait. See docs/signals.md "Grouped inbox writes".
 * - a batch (`POST /signal/batch`, `billing signal send`): already a group,
 *   written at once when one of `batchWriters` statements is free; batches
 *   that arrive while both are under way wait, and go together (in their
 *   order, up to `maxBatchGroup` rows, never split) in the next statement.
 *
 * A row's refusal (unknown or archived customer) is that row's answer only. If
 * a whole statement fails (a row the database refuses), nothing of it was
 * committed and each row is written again on its own, so only the row at
 * fault fails.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Chunk, Effect, Exit, FiberId, FiberSet, Queue, Schema } from "effect"
import { constVoid } from "effect/Function"
import { isUnavailableCause } from "../db/Faults.ts"
import { decodeRows } from "../db/Sql.ts"
import { CustomerArchived, CustomerNotFound, TimestampTooOld } from "../errors.ts"
import { archivedRefusal } from "../customers/Customer.ts"
import type { InboxRow } from "./InboxRow.ts"
import { tooOldRefusal } from "./LateWindow.ts"
import { maxBatchSize } from "./Signal.ts"
import { queuedPayload, signalsQueuedChannel } from "./QueueWake.ts"

/** A row in the inbox: this one (`replayed: false`), or the first one written under its idempotency key. */
export interface Written {
  readonly id: string
  readonly messageId: string
  readonly replayed: boolean
}

/**
 * Why a row was not written: its customerId names no customer of the workspace,
 * or an archived one; or its timestamp is older than the workspace's
 * late-usage window (422).
 */
export type Refusal = CustomerNotFound | CustomerArchived | TimestampTooOld

export interface InboxWriterStats {
  /** Statements sent (inserts and key look-ups). */
  readonly statements: number
  /** Multi-row inserts sent. */
  readonly inserts: number
  /** Rows offered to those inserts. */
  readonly rows: number
  /** Groups that waited for company (requests were concurrent lately). */
  readonly lingers: number
  /** Requests submitted and not answered yet. */
  readonly waiting: number
}

/** Rows one grouped statement takes at most. */
export const maxGroup = 200
/** Grouped statements in flight at once (each holds one pooled connection). */
export const writers = 2
/** The longest a request waits for others to join its group, in milliseconds. */
export const lingerMs = 2
/**
 * Statements of batches in flight at once; batches that arrive meanwhile wait and go together in
 * the next. One statement a batch (20 at once, the pool's size, at 64 connections) spent a commit, a
 * parse and a plan on every 100 rows and had 20 backends contend for the same index pages on 2 cores.
 */
export const batchWriters = 2
/** Rows one statement of batches takes at most: the largest batch (a batch is never split). */
export const maxBatchGroup = maxBatchSize
/** How long after two requests last overlapped the writer still expects company, in milliseconds. */
const contentionMemoryMs = 20

/** One turn of Node's event loop: I/O that is ready (other requests) runs before it resumes. */
const nextTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const Checked = Schema.Struct({
  ord: Schema.Int,
  customerFound: Schema.Boolean,
  customerArchived: Schema.Boolean,
  tooOld: Schema.Boolean,
  lateUsageDays: Schema.NullOr(Schema.Int)
})

const Holder = Schema.Struct({
  organizationId: Schema.String,
  route: Schema.String,
  idempotencyKey: Schema.String,
  id: Schema.String,
  messageId: Schema.String
})

const keyOf = (organizationId: string, route: string, key: string) => `${organizationId}\u0000${route}\u0000${key}`

/** Counts the statements `insertSignals` sends (the writer's stats). */
export interface StatementCounter {
  readonly insert: (rows: number) => void
  readonly lookup: () => void
}

const uncounted: StatementCounter = { insert: () => {}, lookup: () => {} }

/**
 * The insert: one row per input row that did NOT go in, saying what its customerId named.
 * A row absent from the answer went in (RETURNING named it): nearly every row of a
 * batch, so the answer is empty in the common case rather than a row to parse and
 * check per signal.
 */
const insert = (sql: SqlClient.SqlClient, rows: ReadonlyArray<InboxRow>) => {
  const payload = JSON.stringify(rows.map((row, ord) => ({
    ord,
    organization_id: row.organizationId,
    id: row.id,
    message_id: row.messageId,
    route: row.route,
    customer_id: row.customerId,
    external_id: row.externalId,
    idempotency_key: row.idempotencyKey,
    agent_key: row.agentKey,
    run_id: row.runId,
    composite_ref: row.compositeRef,
    composite_value: row.compositeValue,
    member: row.member,
    body: row.body,
    occurred_at: row.occurredAt ?? null,
    late: row.late ?? false,
    intake_at: row.intakeAt ?? null,
    response: row.response ?? null
  })))
  // The rows go in in the order given (ORDER BY ord), so of two rows with one key the first
  // written wins and the second conflicts, exactly as two requests one after the other would.
  // The late-usage window is the organisation's setting read by this same statement (only for
  // rows with a timestamp): no cache to keep coherent, a settings change applies to the next insert.
  // The worker's wake (QueueWake.ts) is this statement's too: an uncorrelated subquery is evaluated
  // once per statement (the plan makes it a one-time filter), so the statement notifies once, at its
  // commit, whatever its row count, and costs no round trip. A statement whose rows were all refused
  // notifies too: one idle claim, rarer than to be worth a second statement.
  // A key whose signal the history job moved to the archive (src/signals/Retention.ts) is taken as
  // well: the inbox's unique index no longer holds it, so the row is kept out here, one probe of the
  // archive's key index per keyed row, and answered by that signal like any other taken key.
  return Effect.flatMap(
    sql`WITH input AS (
          SELECT * FROM json_to_recordset(${payload}::json) AS r(
            ord int, organization_id text, id text, message_id text, route text, customer_id text,
            external_id text, idempotency_key text, agent_key text, run_id text, composite_ref text,
            composite_value text, member text, body jsonb, occurred_at timestamptz, late boolean,
            intake_at timestamptz, response jsonb)
        ),
        checked AS (
          SELECT input.*, c.id IS NOT NULL AS customer_found, c.archived_at IS NOT NULL AS customer_archived,
                 coalesce(input.occurred_at < input.intake_at - o.late_usage_days * interval '86400 seconds', false) AS too_old,
                 o.late_usage_days
          FROM input
          -- One primary-key probe a row, whatever the planner thinks of the input (it guesses 100 rows for
          -- any json_to_recordset): as plain joins, an organisation with 10,000 customers got a hash join
          -- that read and hashed all of them on every statement, 35 µs a signal of PostgreSQL's CPU
          -- (docs/benchmarks.md "History and the present"). OFFSET 0 keeps each a subquery of its own.
          LEFT JOIN LATERAL (
            SELECT c.id, c.archived_at FROM customers c
            WHERE c.organization_id = input.organization_id AND c.id = input.customer_id OFFSET 0
          ) c ON true
          LEFT JOIN LATERAL (
            SELECT o.late_usage_days FROM organizations o
            WHERE input.occurred_at IS NOT NULL AND o.id = input.organization_id OFFSET 0
          ) o ON true
        ),
        inserted AS (
          INSERT INTO signals (organization_id, id, message_id, route, customer_id, external_id, idempotency_key,
                               agent_key, run_id, composite_ref, composite_value, member, body, occurred_at, late,
                               response)
          SELECT organization_id, id, message_id, route, customer_id, external_id, idempotency_key,
                 agent_key, run_id, composite_ref, composite_value, member, body, occurred_at, late, response
          FROM checked
          WHERE (customer_id IS NULL OR (customer_found AND NOT customer_archived)) AND NOT too_old
            AND (idempotency_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM signals_archive a
              WHERE a.organization_id = checked.organization_id AND a.route = checked.route
                AND a.idempotency_key = checked.idempotency_key))
            AND (SELECT true FROM pg_notify(${signalsQueuedChannel}, ${queuedPayload}))
          ORDER BY ord
          ON CONFLICT (organization_id, route, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
          RETURNING id
        )
        SELECT checked.ord, checked.customer_found, checked.customer_archived, checked.too_old,
               checked.late_usage_days
        FROM checked LEFT JOIN inserted ON inserted.id = checked.id
        WHERE inserted.id IS NULL`,
    decodeRows(Checked)
  )
}

/**
 * The rows holding the keys that were taken: the first answer under each key,
 * in the inbox or in the archive (a signal the history job moved). The inbox's
 * row comes last and so wins (a row being moved is in both for a while); of
 * the archive's, the oldest.
 */
const holdersOf = (sql: SqlClient.SqlClient, rows: ReadonlyArray<InboxRow>) => {
  const keys = JSON.stringify(rows.map((row) => ({
    organization_id: row.organizationId,
    route: row.route,
    idempotency_key: row.idempotencyKey
  })))
  return Effect.flatMap(
    sql`WITH k AS (
          SELECT DISTINCT * FROM json_to_recordset(${keys}::json) AS k(organization_id text, route text, idempotency_key text)
        )
        SELECT organization_id, route, idempotency_key, id, message_id FROM (
          SELECT s.organization_id, s.route, s.idempotency_key, s.id, s.message_id, 0 AS place
          FROM k JOIN signals s ON s.organization_id = k.organization_id AND s.route = k.route
                               AND s.idempotency_key = k.idempotency_key
          UNION ALL
          SELECT a.organization_id, a.route, a.idempotency_key, a.id, a.message_id, 1 AS place
          FROM k JOIN signals_archive a ON a.organization_id = k.organization_id AND a.route = k.route
                                       AND a.idempotency_key = k.idempotency_key
        ) holders
        ORDER BY place DESC, id DESC`,
    decodeRows(Holder)
  ).pipe(
    Effect.map((found) => new Map(found.map((h) => [keyOf(h.organizationId, h.route, h.idempotencyKey), h])))
  )
}

/**
 * Each row's answer once the insert has committed, as if the rows had come
 * one after the other in their order. A row with an idempotency key that
 * was taken before it (by an earlier request, or an earlier row of this
 * set) answers the first signal, whatever its own body says, even a
 * customer that would be refused; a key is not used up by a refused row.
 */
const answers = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<InboxRow>,
  notInserted: ReadonlyArray<typeof Checked.Type>,
  count: StatementCounter
) =>
  Effect.gen(function*() {
    // The rows that did not go in, by position; every other row did.
    const byOrd = new Array<typeof Checked.Type | undefined>(rows.length)
    for (const result of notInserted) byOrd[result.ord] = result
    const keyOfRow = (row: InboxRow) =>
      row.idempotencyKey === null ? undefined : keyOf(row.organizationId, row.route, row.idempotencyKey)
    // The row of this set that went in under each key.
    const insertedUnder = new Map<string, number>()
    rows.forEach((row, ord) => {
      const key = keyOfRow(row)
      if (key !== undefined && byOrd[ord] === undefined) insertedUnder.set(key, ord)
    })
    // Keys taken before this set: one look-up for all of them, only when there are some.
    const taken = rows.filter((row, ord) => {
      const key = keyOfRow(row)
      return key !== undefined && byOrd[ord] !== undefined && !insertedUnder.has(key)
    })
    if (taken.length > 0) count.lookup()
    // The inserted rows are committed whatever happens to the look-up: only the others depend on it.
    const holders = taken.length === 0 ? Exit.succeed(new Map()) : yield* Effect.exit(holdersOf(sql, taken))
    return rows.map((row, ord): Exit.Exit<Written, Refusal> => {
      const result = byOrd[ord]
      if (result === undefined) return Exit.succeed({ id: row.id, messageId: row.messageId, replayed: false })
      const key = keyOfRow(row)
      const earlier = key === undefined ? undefined : insertedUnder.get(key)
      if (earlier !== undefined && earlier < ord) {
        return Exit.succeed({ id: rows[earlier]!.id, messageId: rows[earlier]!.messageId, replayed: true })
      }
      if (key !== undefined && earlier === undefined) {
        if (Exit.isFailure(holders)) return Exit.die(Cause.squash(holders.cause))
        const holder = holders.value.get(key)
        if (holder !== undefined) return Exit.succeed({ id: holder.id, messageId: holder.messageId, replayed: true })
      }
      if (row.customerId !== null && !result.customerFound) {
        return Exit.fail(new CustomerNotFound({ message: `Customer ${row.customerId} not found` }))
      }
      if (row.customerId !== null && result.customerArchived) {
        return Exit.fail(archivedRefusal(row.customerId, "cannot receive signals"))
      }
      if (result.tooOld) return Exit.fail(tooOldRefusal(result.lateUsageDays ?? 0))
      // A row neither refused nor written would have lost its signal: never answer it 202.
      return Exit.die(new Error(`signal ${row.id} was neither written nor refused`))
    })
  })

/**
 * Writes `rows` into the inbox in one statement (plus one look-up of taken
 * keys) and gives each row's answer in order: written, refused, or (a row the
 * database itself refuses) a defect of that row alone. `parts` (several
 * batches sharing the statement) are what a failed statement is written
 * again as, so only the batch at fault goes on to row by row. Inside a transaction
 * (a completion's, the worker's batch) a failed statement fails the
 * transaction too: those write one row, whose failure is then a defect.
 */
export const insertSignals = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<InboxRow>,
  count: StatementCounter = uncounted,
  parts?: ReadonlyArray<ReadonlyArray<InboxRow>>
): Effect.Effect<ReadonlyArray<Exit.Exit<Written, Refusal>>> => {
  if (rows.length === 0) return Effect.succeed([])
  count.insert(rows.length)
  return Effect.matchCauseEffect(insert(sql, rows), {
    onSuccess: (checked) => answers(sql, rows, checked, count),
    // A failed statement committed nothing: its parts again on their own (several batches sharing
    // the statement: each batch, then its rows), else each row, isolate the one at fault. A
    // database that is away has no row at fault: every row gets its failure at once (the request
    // answers 503, and the client's retry with the same keys writes each row once).
    onFailure: (cause) =>
      rows.length === 1 || isUnavailableCause(cause)
        ? Effect.succeed(rows.map(() => Exit.die(Cause.squash(cause))))
        : Effect.map(
          Effect.forEach(parts !== undefined && parts.length > 1 ? parts : rows.map((row) => [row]), (part) =>
            insertSignals(sql, part, count)),
          (exits) => exits.flat()
        )
  })
}

/** A request's answer: each of its rows' outcomes, in order. */
export type Answer = (exits: ReadonlyArray<Exit.Exit<Written, Refusal>>) => void

/**
 * A door that answers by callback, as an effect: `start` is given the resume
 * and returns how to withdraw, which interrupting the effect does.
 */
export const awaitAnswer = <A, E>(start: (answer: (exit: Exit.Exit<A, E>) => void) => () => void): Effect.Effect<A, E> =>
  Effect.async<A, E>((resume) => {
    const withdraw = start(resume)
    return Effect.sync(withdraw)
  })

/**
 * A single request's row and the callback that answers it. A callback rather
 * than a `Deferred`: one was made per request, and a Deferred copies the whole
 * Effect prototype (15 % of the bytes the intake lane had promoted to the old
 * generation, docs/benchmarks.md). `answer` ignores all calls after the first.
 */
interface Pending {
  readonly row: InboxRow
  readonly answer: (exit: Exit.Exit<Written, Refusal>) => void
}

/** A batch's rows and the callback that answers them (ignoring all calls after the first). */
interface PendingBatch {
  readonly rows: ReadonlyArray<InboxRow>
  readonly answer: Answer
}

export class InboxWriter extends Effect.Service<InboxWriter>()("InboxWriter", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    let statements = 0
    let inserts = 0
    let offered = 0
    let lingers = 0
    const count: StatementCounter = {
      insert: (rows) => {
        statements++
        inserts++
        offered += rows
      },
      lookup: () => {
        statements++
      }
    }
    // Every intake statement passes here: no stack trace captured for its span (an Error a call, in the profile
    // of single-signal intake the span's only cost).
    const write = (rows: ReadonlyArray<InboxRow>) =>
      insertSignals(sql, rows, count).pipe(Effect.withSpan("InboxWriter.write", { captureStackTrace: false }))

    const queue = yield* Queue.unbounded<Pending>()
    /** Single rows submitted and not answered yet: one arriving while another waits means requests overlap. */
    let unanswered = 0
    /** Batches submitted and not answered yet (they write alone, so they are no company for single rows). */
    let batchesWaiting = 0
    let contendedAt = Number.NEGATIVE_INFINITY
    // A batch's statement runs on this runtime: one still writing when the service stops is interrupted (503).
    const runFork = yield* FiberSet.makeRuntime<never, void, never>()

    /** Writes a group and answers each of its requests (run uninterruptibly: see `writeLoop`). */
    const flush = (group: Chunk.Chunk<Pending>) => {
      const pending = Chunk.toReadonlyArray(group)
      return write(pending.map((p) => p.row)).pipe(
        Effect.matchCause({
          onSuccess: (exits) => pending.forEach((p, i) => p.answer(exits[i]!)),
          onFailure: (cause) => pending.forEach((p) => p.answer(Exit.failCause(cause)))
        })
      )
    }
    // Runs last when the service stops: requests still waiting are answered (interrupted: 503), none hangs.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (left) =>
        Effect.zipRight(
          Effect.fiberIdWith((id) => Effect.sync(() => Chunk.forEach(left, (p) => p.answer(Exit.interrupt(id))))),
          Queue.shutdown(queue)
        ))
    )
    /**
     * More rows for a group, when requests have been concurrent lately: those
     * that arrive within `lingerMs`, up to `maxGroup`. Without recent
     * contention nobody else is coming, and the group is written at once.
     */
    const linger = (first: Chunk.Chunk<Pending>) =>
      Effect.gen(function*() {
        let group = first
        if (group.length >= maxGroup || performance.now() - contendedAt > contentionMemoryMs) return group
        lingers++
        const deadline = performance.now() + lingerMs
        let quiet = false
        while (group.length < maxGroup) {
          const left = deadline - performance.now()
          if (left <= 0) break
          // While rows keep coming, look again after the I/O that is ready; else sleep a little.
          yield* quiet ? Effect.sleep(Math.min(left, 1)) : nextTurn
          const more = yield* Queue.takeUpTo(queue, maxGroup - group.length)
          quiet = more.length === 0
          group = Chunk.appendAll(group, more)
        }
        return group
      })

    // One writer gathers at a time (two never split one burst) while the other writes. Only the
    // wait for the first row can be interrupted: rows once taken are always written and answered.
    const gathering = yield* Effect.makeSemaphore(1)
    const writeLoop = Effect.forever(
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(gathering.take(1)),
          Effect.flatMap(
            Effect.ensuring(Effect.flatMap(restore(Queue.takeBetween(queue, 1, maxGroup)), linger), gathering.release(1)),
            flush
          )
        )
      )
    )
    for (let i = 0; i < writers; i++) yield* Effect.forkScoped(writeLoop)

    /**
     * A request's one settlement, by its answer or by its withdrawal, whichever
     * comes first: true (and `onFirst` run) only the first time.
     */
    const settleOnce = (onFirst: () => void) => {
      let waiting = true
      return () => {
        const first = waiting
        if (first) onFirst()
        waiting = false
        return first
      }
    }

    /** A single row, written together with whatever else is waiting. */
    const enqueueRow = (row: InboxRow, answer: Answer): (() => void) => {
      if (unanswered > 0) contendedAt = performance.now()
      unanswered++
      const settle = settleOnce(() => unanswered--)
      const pending: Pending = {
        row,
        answer: (exit) => {
          if (settle()) answer([exit])
        }
      }
      // A stopped writer takes no more rows: the request is interrupted (503), as an offer to a shut queue would be.
      if (!queue.unsafeOffer(pending)) pending.answer(Exit.interrupt(FiberId.none))
      return () => {
        settle()
      }
    }

    /** Batches waiting for a batch writer, in the order they came. */
    const batchQueue: Array<PendingBatch> = []
    let batchStatements = 0
    let stopped = false
    // Runs before the runtime above is closed (which interrupts the statements under way): a batch still
    // waiting is answered at once (interrupted: 503), and none is started after.
    yield* Effect.addFinalizer(() =>
      Effect.fiberIdWith((id) =>
        Effect.sync(() => {
          stopped = true
          for (const batch of batchQueue.splice(0)) batch.answer(batch.rows.map(() => Exit.interrupt(id)))
        })
      )
    )

    /**
     * Starts a statement for the batches waiting while fewer than `batchWriters` are under way:
     * the oldest batch and those after it up to `maxBatchGroup` rows (a batch is never split).
     */
    const startBatchStatements = () => {
      while (batchStatements < batchWriters && batchQueue.length > 0 && !stopped) {
        let rows = batchQueue[0]!.rows.length
        let take = 1
        while (take < batchQueue.length && rows + batchQueue[take]!.rows.length <= maxBatchGroup) {
          rows += batchQueue[take]!.rows.length
          take++
        }
        const group = batchQueue.splice(0, take)
        batchStatements++
        const batches = group.map((batch) => batch.rows)
        const written = insertSignals(sql, batches.flat(), count, batches).pipe(
          Effect.withSpan("InboxWriter.writeBatches", { captureStackTrace: false })
        )
        runFork(Effect.onExit(written, (exit) =>
          Effect.sync(() => {
            batchStatements--
            let from = 0
            for (const batch of group) {
              const count = batch.rows.length
              batch.answer(Exit.isSuccess(exit)
                ? exit.value.slice(from, from + count)
                : batch.rows.map(() => Exit.failCause(exit.cause)))
              from += count
            }
            startBatchStatements()
          })))
      }
    }

    /**
     * A batch's rows, written at once when a batch writer is free; batches that arrive while
     * all are busy share the next statement, in their order, as if sent one after the other.
     */
    const enqueueBatch = (rows: ReadonlyArray<InboxRow>, answer: Answer): (() => void) => {
      batchesWaiting++
      const settle = settleOnce(() => batchesWaiting--)
      const pending: PendingBatch = {
        rows,
        answer: (exits) => {
          if (settle()) answer(exits)
        }
      }
      if (stopped) {
        pending.answer(rows.map(() => Exit.interrupt(FiberId.none)))
        return constVoid
      }
      batchQueue.push(pending)
      startBatchStatements()
      return () => {
        settle()
      }
    }

    /**
     * The writer's one door: writes one request's rows (one signal, or a
     * batch's) and calls `answer` with each row's outcome, in order, once
     * committed (or refused), at most once. The returned function withdraws
     * the request (its client went away): rows once taken are still written,
     * and nobody is answered.
     */
    const enqueue = (rows: ReadonlyArray<InboxRow>, answer: Answer): (() => void) => {
      if (rows.length === 0) {
        answer([])
        return constVoid
      }
      return rows.length === 1 ? enqueueRow(rows[0]!, answer) : enqueueBatch(rows, answer)
    }

    const stats: Effect.Effect<InboxWriterStats> = Effect.sync(() => ({
      statements,
      inserts,
      rows: offered,
      lingers,
      waiting: unanswered + batchesWaiting
    })).pipe(Effect.withSpan("InboxWriter.stats"))

    return { enqueue, stats } as const
  })
}) {}
