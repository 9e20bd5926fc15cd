/**
 * The grouping writer: intake's rows reach the inbox through it, several
 * requests' rows in one `insertSignals` statement (InboxInsert.ts).
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
 * Each row's answer is the insert's: written, replayed or refused, that row's
 * alone (InboxInsert.ts).
 */
import { SqlClient } from "@effect/sql"
import { Chunk, Effect, Exit, FiberId, FiberSet, Queue } from "effect"
import { constVoid } from "effect/Function"
import { insertSignals, type Refusal, type StatementCounter, type Written } from "./InboxInsert.ts"
import type { InboxRow } from "./InboxRow.ts"
import { maxBatchSize } from "./Signal.ts"

export type { Refusal, Written } from "./InboxInsert.ts"

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
 * Effect prototype (a sizeable share of the bytes the intake lane had promoted
 * to the old generation, docs/benchmarks.md, "The intake lane"). `answer`
 * ignores all calls after the first.
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
