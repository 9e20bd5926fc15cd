/**
 * An interrupted statement is never cancelled on the server (src/db/Pool.ts):
 * `@effect/sql-pg` would send `pg_cancel_backend` for the connection, and when
 * the statement had already finished that cancel hit the next statement on the
 * reused connection (seen as a 500 on an unrelated `POST /units`).
 *
 * Nothing here sleeps for a fixed time: each step waits for what it needs to
 * have happened (a lock held, the statement seen waiting in
 * `pg_stat_activity`, the statement handed to its connection), bounded by a
 * limit only a stuck test reaches.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Schedule } from "effect"
import Pg from "pg"
import { TestDatabaseLive, usesRealPostgres } from "./support/TestDatabase.ts"

/** Polls `check` until it is true; dies naming `what` after 20 s, which only a stuck test takes. */
const waitUntil = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  check.pipe(
    Effect.filterOrFail((ok) => ok, () => new Error(`not yet: ${what}`)),
    Effect.retry(Schedule.spaced("10 millis")),
    Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`not seen within 20 s: ${what}`) }),
    Effect.orDie
  )

/** A table of the test's own, gone after it: the file's database is shared by the next file. */
const probeTable = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.acquireRelease(sql`CREATE TABLE interrupt_probe (n int)`, () => Effect.orDie(sql`DROP TABLE interrupt_probe`)))

const rowsInProbe = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(sql<{ count: string }>`SELECT count(*)::text AS count FROM interrupt_probe`, (rows) => rows[0]?.count))

/** Eight statements at once: every connection of the pool, the interrupted statement's included, answers its own. */
const followersAnswer = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const followers = yield* Effect.all(Array.from({ length: 8 }, (_, n) => sql<{ n: number }>`SELECT ${n}::int AS n`), {
    concurrency: "unbounded"
  })
  expect(followers.map((r) => r[0]?.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
})

/**
 * Resolves when a pg client sends a statement whose text contains `marker`:
 * from then on `@effect/sql-pg` holds the connection's cancel, and the
 * statement is on its way to the server whatever happens to its fiber.
 */
const statementSent = (marker: string) =>
  Effect.gen(function*() {
    const sent = yield* Deferred.make<void>()
    const original = Pg.Client.prototype.query
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        Pg.Client.prototype.query = function(this: Pg.Client, ...args: Array<any>) {
          if (typeof args[0] === "string" && args[0].includes(marker)) Deferred.unsafeDone(sent, Effect.void)
          return (original as (...a: Array<any>) => any).apply(this, args)
        } as typeof original
      }),
      () => Effect.sync(() => (Pg.Client.prototype.query = original))
    )
    return Deferred.await(sent)
  })

layer(TestDatabaseLive, { excludeTestServices: true })("an interrupted statement", (it) => {
  it.scoped.runIf(usesRealPostgres)(
    "is not cancelled while it runs on the server: it commits, and the connection serves the next statement (PostgreSQL)",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* probeTable
        // Another connection holds a lock the INSERT needs, so the INSERT runs
        // on the server, waiting, until the test lets the lock go.
        const lockKey = 7_204_119
        const held = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* sql`SELECT pg_advisory_xact_lock(${lockKey})`.pipe(
          Effect.zipRight(Deferred.succeed(held, undefined)),
          Effect.zipRight(Deferred.await(release)),
          sql.withTransaction,
          Effect.forkScoped
        )
        yield* Deferred.await(held)
        const insert = yield* Effect.forkScoped(sql`INSERT INTO interrupt_probe SELECT 1 FROM pg_advisory_xact_lock(${lockKey})`)
        const insertWaiting = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'active' AND wait_event_type = 'Lock'
            AND query LIKE 'INSERT INTO interrupt_probe%'`
        yield* waitUntil("the INSERT waiting for the lock in pg_stat_activity", Effect.map(insertWaiting, (r) => r[0]?.n === 1))
        // Interruption returns once the fiber's interruption has run, so a
        // cancel, if one were sent, has been executed by now and has aborted
        // the waiting INSERT.
        yield* Fiber.interrupt(insert)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        const insertRunning = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'active' AND query LIKE 'INSERT INTO interrupt_probe%'`
        yield* waitUntil("the INSERT gone from pg_stat_activity", Effect.map(insertRunning, (r) => r[0]?.n === 0))
        // Not cancelled: the INSERT committed.
        expect(yield* rowsInProbe).toBe("1")
        yield* followersAnswer
      })
  )

  it.scoped("runs to its end once sent, and the connection serves the next statement", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* probeTable
      const sent = yield* statementSent("interrupt_probe SELECT 1 FROM pg_sleep")
      const slowInsert = yield* Effect.fork(sql`INSERT INTO interrupt_probe SELECT 1 FROM pg_sleep(0.2)`)
      yield* sent
      yield* Fiber.interrupt(slowInsert)
      // A cancel sent now would abort the INSERT (on PostgreSQL); dropped, the INSERT commits.
      yield* waitUntil("the interrupted INSERT's row", Effect.map(rowsInProbe, (count) => count === "1"))
      yield* followersAnswer
    }))
})
