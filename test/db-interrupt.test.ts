/**
 * An interrupted statement is never cancelled on the server (src/db/Pool.ts):
 * `@effect/sql-pg` would send `pg_cancel_backend` for the connection, and when
 * the statement had already finished that cancel hit the next statement on the
 * reused connection (seen as a 500 on an unrelated `POST /units`).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import { TestDatabaseLive } from "./support/TestDatabase.ts"

layer(TestDatabaseLive, { excludeTestServices: true })("an interrupted statement", (it) => {
  it.scoped("runs to its end, and the connection serves the next statement", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A table of the test's own, gone after it: the file's database is shared by the next file.
      yield* Effect.acquireRelease(sql`CREATE TABLE interrupt_probe (n int)`, () => Effect.orDie(sql`DROP TABLE interrupt_probe`))
      const slowInsert = yield* Effect.fork(sql`INSERT INTO interrupt_probe SELECT 1 FROM pg_sleep(0.4)`)
      yield* Effect.sleep("100 millis")
      yield* Fiber.interrupt(slowInsert)
      // A cancel sent now would abort the INSERT; dropped, the INSERT commits.
      const count = yield* sql<{ count: string }>`SELECT count(*)::text AS count FROM interrupt_probe`.pipe(
        Effect.map((rows) => rows[0]?.count),
        Effect.filterOrFail((count) => count === "1"),
        Effect.retry({ schedule: Schedule.spaced("25 millis"), times: 120 }),
        Effect.orElseSucceed(() => "no row after 3 s")
      )
      expect(count).toBe("1")
      const followers = yield* Effect.all(Array.from({ length: 8 }, (_, n) => sql<{ n: number }>`SELECT ${n}::int AS n`), {
        concurrency: "unbounded"
      })
      expect(followers.map((r) => r[0]?.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    }))
})
