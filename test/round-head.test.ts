/**
 * A round's batches read the head of a lane once between them (Claim.ts
 * `makeRoundHead`): the first batch to ask reads it, the others wait for that
 * read and get the same customers; a batch of another lane, or one whose
 * shared read failed, reads its own. The mechanism alone (pure: the read is an
 * effect that counts), then the worker's round on real PostgreSQL, its head
 * statements counted as node-postgres sends them.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import pg from "pg"
import { afterAll, beforeAll } from "vitest"
import { type Candidate, makeRoundHead } from "../src/signals/Claim.ts"
import { insertSignals } from "../src/signals/InboxInsert.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { insertCustomers, query, queuedCredit } from "./signals-fixtures.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

const head = (customerKey: string): ReadonlyArray<typeof Candidate.Type> => [{
  organizationId: "org_a",
  customerKey,
  heldExternalId: null,
  otherLane: false,
  queued: 1,
  customerId: customerKey,
  customerExternalId: null,
  customerArchivedAt: null
}]

describe("a round's head (Claim.ts makeRoundHead)", () => {
  it.effect("is read once: the batches that ask while it is being read wait for it and get the same customers", () =>
    Effect.gen(function*() {
      const roundHead = makeRoundHead()
      const release = yield* Deferred.make<void>()
      let reads = 0
      const read = Effect.sync(() => reads++).pipe(Effect.zipRight(Deferred.await(release)), Effect.as(head("cus_1")))
      const first = yield* Effect.fork(roundHead.of("ON_TIME", read))
      const siblings = yield* Effect.fork(Effect.all([roundHead.of("ON_TIME", read), roundHead.of("ON_TIME", read)], { concurrency: "unbounded" }))
      yield* Effect.yieldNow()
      expect(reads).toBe(1)
      yield* Deferred.succeed(release, undefined)
      const [mine, theirs] = yield* Effect.all([Fiber.join(first), Fiber.join(siblings)])
      expect(reads).toBe(1)
      expect(theirs).toEqual([mine, mine])
      expect(mine.map((candidate) => candidate.customerKey)).toEqual(["cus_1"])
    }))

  it.effect("is read again for the other lane: a round whose batches alternate lanes shares nothing between them", () =>
    Effect.gen(function*() {
      const roundHead = makeRoundHead()
      const onTime = yield* roundHead.of("ON_TIME", Effect.succeed(head("cus_1")))
      const late = yield* roundHead.of("LATE", Effect.succeed(head("cus_2")))
      expect(onTime[0]!.customerKey).toBe("cus_1")
      expect(late[0]!.customerKey).toBe("cus_2")
    }))

  it.effect("read by a sibling itself when the shared read failed", () =>
    Effect.gen(function*() {
      const roundHead = makeRoundHead()
      const failed = yield* Effect.exit(roundHead.of("ON_TIME", Effect.die("the connection went away")))
      expect(failed._tag).toBe("Failure")
      const own = yield* roundHead.of("ON_TIME", Effect.succeed(head("cus_3")))
      expect(own[0]!.customerKey).toBe("cus_3")
    }))
})

describe.skipIf(!usesRealPostgres)("the worker's round (needs real PostgreSQL: batches side by side)", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ ownDatabase: true })
  })
  afterAll(() => app.close())

  it("runs several batches on a long queue and reads its head once", async () => {
    const tenant = await app.tenant("Round head")
    const customers = Array.from({ length: 200 }, (_, index) => `cus_round${String(index).padStart(3, "0")}`)
    // 1,000 signals over 200 customers, in turn: a queue longer than the head a batch reads, so after the
    // first round (one batch) the next runs the worker's whole concurrency.
    await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* insertCustomers(sql, tenant.organizationId, customers)
      yield* insertSignals(sql, Array.from({ length: 1000 }, (_, index) => queuedCredit(tenant.organizationId, customers[index % customers.length]!, null)))
    }))
    const runOnce = () => app.run(Effect.flatMap(SignalProcessor, (processor) => processor.runOnce))
    expect(await runOnce()).toBeGreaterThan(0)

    // The head's statement, as the claim sends it (its select list names the other lane's flag).
    const headReads = { count: 0 }
    const original = pg.Client.prototype.query
    pg.Client.prototype.query = function(this: pg.Client, ...args: Array<any>) {
      const text = typeof args[0] === "string" ? args[0] : args[0]?.text
      if (typeof text === "string" && text.includes("f.other_lane, c.queued")) headReads.count++
      return (original as any).apply(this, args)
    } as typeof original
    const startedAt = (await query<{ now: Date }>(app, "SELECT clock_timestamp() AS now"))[0]!.now
    try {
      expect(await runOnce()).toBeGreaterThan(0)
    } finally {
      pg.Client.prototype.query = original
    }
    // Each batch is one transaction: one processed_at (its now()) a batch.
    const [round] = await query<{ batches: number }>(
      app,
      "SELECT count(DISTINCT processed_at)::int AS batches FROM signals WHERE organization_id = $1 AND processed_at >= $2",
      [tenant.organizationId, startedAt]
    )
    expect(round!.batches).toBeGreaterThan(1)
    expect(headReads.count).toBe(1)
  })
})
