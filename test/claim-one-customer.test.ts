/**
 * The worker claims a customer's queued signals as one group whether they name
 * the customer by customerId or by the externalId it holds (docs/signals.md,
 * "The worker"). Two groups for one customer would let a full batch take one
 * group's later signals before the other's earlier ones, pricing them out of
 * send order. Shown here through the claim's lock: while another session
 * holds the customer's lock, a signal sent by externalId is not claimed either.
 * And a claim reads a short head of the queue first: when every customer
 * there is held, it reads a longer one, so a held customer at the head never
 * stops the others behind it.
 * A claim locks no more customers than fill its batch: what it does not need
 * is left to the other workers; and it takes whole customers' queues, so a
 * customer's rows are locked and written by one batch, not by several.
 * It needs two sessions at once, so real PostgreSQL.
 */
import { SqlClient } from "@effect/sql"
import { Deferred, type Duration, Effect, Fiber, Option } from "effect"
import { makeClaims, wholeHead } from "../src/signals/Claim.ts"
import { insertSignals } from "../src/signals/InboxInsert.ts"
import { SignalProcessor } from "../src/signals/SignalProcessor.ts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, customerWithChatCredits, drain, insertCustomers, query, queuedCredit } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"

let app: TestApp
let acme: Tenant
let customerId: string

const statusOf = async (id: string) =>
  (await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [
    acme.organizationId,
    id
  ]))[0]!.status

/**
 * One run of this worker's drain (None when it found nothing it could claim before `timeout`), while
 * another worker's claim holds this customer: the same advisory lock, held in an open transaction on a
 * connection of its own.
 */
const runOnceWhileHeld = (timeout: Duration.DurationInput) =>
  app.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext(${acme.organizationId}), hashtext(${customerId}))`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(release)
    })))
    yield* Deferred.await(locked)
    const processor = yield* SignalProcessor
    const attempt = yield* Effect.timeoutOption(processor.runOnce, timeout)
    yield* Deferred.succeed(release, undefined)
    yield* Fiber.join(holder)
    return attempt
  }))

/** The advisory locks this session holds: the customers its claim locked. */
const advisoryLocksHeld = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ count: number }>`SELECT count(*)::int AS count FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`,
    ([row]) => row!.count
  )

/** The claims of a worker with no deferred customers. */
const claimsOn = (sql: SqlClient.SqlClient) =>
  makeClaims(sql, { lapse: Effect.void, keys: () => [], notDeferred: () => sql.literal("") })

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("One key")
  customerId = await customerWithChatCredits(app, acme, { externalId: "jo-1" })
})
afterAll(() => app.close())

// The embedded database serves one session at a time: a transaction held open would stop the worker itself.
describe.skipIf(!usesRealPostgres)("the worker's claim (needs real PostgreSQL)", () => {
  it("treats signals sent by externalId as the customer's own: locked together, priced in send order", async () => {
    const usage = { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    const byId = await client(app, acme).post("/signal/credit", { customerId, agentKey: "chat", usage })
    const byExternalId = await client(app, acme).post("/signal/credit", { externalId: "jo-1", agentKey: "chat", usage })
    expect([byId.status, byExternalId.status]).toEqual([202, 202])

    // A worker finding only locked customers waits for them: a batch would end this wait with its count.
    const batch = await runOnceWhileHeld("1 second")
    expect(Option.isNone(batch)).toBe(true)
    expect(await statusOf(byId.body.result.rawId)).toBe("QUEUED")
    expect(await statusOf(byExternalId.body.result.rawId)).toBe("QUEUED")

    await drain(app)
    expect(await statusOf(byId.body.result.rawId)).toBe("PROCESSED")
    expect(await statusOf(byExternalId.body.result.rawId)).toBe("PROCESSED")
  })

  it("looks past a head of the queue whose customers are all held, to the customers behind it", async () => {
    // 300 signals of this customer at the head of the queue (more than the short head a claim reads first,
    // whatever the batch size has grown to), then one of a customer of another workspace.
    const usage = { model: "gpt-4o", inputTokens: 10, outputTokens: 5 }
    for (let request = 0; request < 3; request++) {
      const signals = Array.from({ length: 100 }, () => ({ type: "credit", customerId, agentKey: "chat", usage }))
      expect((await client(app, acme).post("/signal/batch", { signals })).status).toBe(202)
    }
    const other = await app.tenant("Behind the head")
    const behindId = await customerWithChatCredits(app, other)
    const behind = await client(app, other).post("/signal/credit", { customerId: behindId, agentKey: "chat", usage })
    expect(behind.status).toBe(202)

    // Another worker holds the first customer, as above.
    const priced = await runOnceWhileHeld("5 seconds")
    expect(Option.getOrElse(priced, () => 0)).toBeGreaterThanOrEqual(1)
    const [behindRow] = await query<{ status: string }>(app, "SELECT status FROM signals WHERE organization_id = $1 AND id = $2", [
      other.organizationId,
      behind.body.result.rawId
    ])
    expect(behindRow!.status).toBe("PROCESSED")
    const [queued] = await query<{ count: string }>(
      app,
      "SELECT count(*) AS count FROM signals WHERE organization_id = $1 AND customer_id = $2 AND status = 'QUEUED'",
      [acme.organizationId, customerId]
    )
    expect(Number(queued!.count)).toBe(300)
  })
})

describe.skipIf(!usesRealPostgres)("a claim locks no more customers than fill its batch (needs real PostgreSQL)", () => {
  it("takes a busy customer alone when its signals fill the batch, leaving the 15 others unlocked", async () => {
    const outcome = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const claims = claimsOn(sql)
      const others = Array.from({ length: 15 }, (_, index) => `cus_fill${String(index).padStart(2, "0")}`)
      const signal = (customer: string, index: number) => queuedCredit(acme.organizationId, customer, `fill-${customer}-${index}`)
      // Everything in one transaction, rolled back: the other tests' drains never see these signals.
      return yield* sql.withTransaction(Effect.gen(function*() {
        yield* insertCustomers(sql, acme.organizationId, others)
        // The busy customer's oldest first, then one of its own between each of the others' 150 (so the
        // queue's head lists all 16 customers), then 150 more of its own: 300 of its own fill a batch of 100.
        // Made in queue order: an id's time part orders the queue.
        const queue = others.flatMap((customer, c) =>
          Array.from({ length: 10 }, (_, index) => [signal(customerId, c * 10 + index), signal(customer, index)]).flat())
        queue.push(...Array.from({ length: 150 }, (_, index) => signal(customerId, 150 + index)))
        yield* insertSignals(sql, queue)
        // Only these signals: the other tests of the file leave some of their own queued.
        const claimed = yield* claims.claim(100, queue.map((row) => row.id), wholeHead)
        return yield* Effect.fail({
          signals: claimed.signals.length,
          customers: [...new Set(claimed.signals.map((record) => record.customerId))],
          customerLocks: yield* advisoryLocksHeld(sql)
        })
      })).pipe(Effect.flip)
    }))
    expect(outcome).toEqual({ signals: 100, customers: [customerId], customerLocks: 1 })
  })

  it("takes whole queues of customers, not one signal each of many, when its last group has more than it wants", async () => {
    const outcome = await app.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const claims = claimsOn(sql)
      const customers = Array.from({ length: 40 }, (_, index) => `cus_whole${String(index).padStart(2, "0")}`)
      return yield* sql.withTransaction(Effect.gen(function*() {
        yield* insertCustomers(sql, acme.organizationId, customers)
        // Seven each, sent in turn (as many customers' agents send): the head of 100 shows each customer's
        // first two or three, so the claim cannot know a customer's whole queue before it takes it.
        const queue = Array.from({ length: 7 }, (_, round) =>
          customers.map((customer) => queuedCredit(acme.organizationId, customer, `whole-${customer}-${round}`))).flat()
        yield* insertSignals(sql, queue)
        const claimed = yield* claims.claim(100, queue.map((row) => row.id), wholeHead)
        const customerLocks = yield* advisoryLocksHeld(sql)
        const perCustomer = new Map<string, number>()
        for (const record of claimed.signals) perCustomer.set(record.customerId!, (perCustomer.get(record.customerId!) ?? 0) + 1)
        // Each customer's claimed signals are its oldest, in send order.
        const inOrder = [...perCustomer.keys()].every((customer) => {
          const mine = claimed.signals.filter((record) => record.customerId === customer).map((record) => record.id)
          const sent = queue.filter((row) => row.customerId === customer).map((row) => row.id)
          return mine.join() === sent.slice(0, mine.length).join()
        })
        return yield* Effect.fail({
          signals: claimed.signals.length,
          whole: [...perCustomer.values()].filter((count) => count === 7).length,
          partial: [...perCustomer.values()].filter((count) => count < 7),
          customerLocks,
          inOrder
        })
      })).pipe(Effect.flip)
    }))
    // 14 customers' whole queues and the oldest 2 of a 15th; no other customer locked.
    expect(outcome).toEqual({ signals: 100, whole: 14, partial: [2], customerLocks: 15, inOrder: true })
  })
})
