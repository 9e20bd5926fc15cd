/**
 * The keyed write's first step (src/idempotency/Idempotency.ts `claimKey`), alone: what a new key,
 * a repeat and a reused key answer, and that the stored record is read only for a taken key. No database:
 * the record's insert and the stored read are given as effects.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { IdempotencyKeyReused } from "../src/errors.ts"
import { claimKey, claimKeyIfAny, fingerprintOf } from "../src/idempotency/Idempotency.ts"

const first = { fingerprint: fingerprintOf(["cus_1", "10.00"]), answer: "the first answer" }

describe("claimKey", () => {
  it.effect("a new key: None, and the stored record is never read", () =>
    Effect.gen(function*() {
      let reads = 0
      const claimed = yield* claimKey("k1", first.fingerprint, Effect.succeed([{ id: "adj_1" }]), Effect.sync(() => (reads++, first)))
      expect(Option.isNone(claimed)).toBe(true)
      expect(reads).toBe(0)
    }))

  it.effect("a repeat of the same request: the first request's record", () =>
    Effect.gen(function*() {
      const claimed = yield* claimKey("k1", fingerprintOf(["cus_1", "10.00"]), Effect.succeed([]), Effect.succeed(first))
      expect(claimed).toEqual(Option.some(first))
    }))

  it.effect("the key again with another request: IdempotencyKeyReused, naming the key", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(claimKey("k1", fingerprintOf(["cus_1", "11.00"]), Effect.succeed([]), Effect.succeed(first)))
      expect(error).toBeInstanceOf(IdempotencyKeyReused)
      expect((error as IdempotencyKeyReused).message).toBe("idempotencyKey k1 was already used with a different request")
    }))

  it.effect("a failed insert fails the claim and reads nothing", () =>
    Effect.gen(function*() {
      let reads = 0
      const exit = yield* Effect.exit(
        claimKey("k1", first.fingerprint, Effect.fail("insert failed" as const), Effect.sync(() => (reads++, first)))
      )
      expect(exit).toEqual(Exit.fail("insert failed"))
      expect(reads).toBe(0)
    }))

  it.effect("without a key (claimKeyIfAny): the record is inserted, None, and nothing is read", () =>
    Effect.gen(function*() {
      let inserts = 0
      let reads = 0
      const claimed = yield* claimKeyIfAny(
        undefined,
        first.fingerprint,
        Effect.sync(() => (inserts++, [])),
        Effect.sync(() => (reads++, first))
      )
      expect(Option.isNone(claimed)).toBe(true)
      expect([inserts, reads]).toEqual([1, 0])
      // With a key it is claimKey: a taken key answers the first record.
      expect(yield* claimKeyIfAny("k1", first.fingerprint, Effect.succeed([]), Effect.succeed(first))).toEqual(Option.some(first))
    }))
})
