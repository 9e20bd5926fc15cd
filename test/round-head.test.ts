/**
 * A round's batches read the head of a lane once between them (Claim.ts
 * `makeRoundHead`): the first batch to ask reads it, the others wait for that
 * read and get the same customers; a batch of another lane, or one whose
 * shared read failed, reads its own. Pure: the read is an effect that counts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { type Candidate, makeRoundHead } from "../src/signals/Claim.ts"

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
