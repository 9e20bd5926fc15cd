/**
 * The rate limiter's token bucket alone (src/http/TokenBucket.ts): refill,
 * take, and the seconds a refused client is told to wait. Time is an argument
 * (epoch milliseconds); no clock, no server.
 */
import { describe, expect, it } from "vitest"
import { type Bucket, fillSeconds, freshBucket, isFull, refill, takeTokens } from "../../src/http/TokenBucket.ts"

const T0 = 1_000_000
const limit = { perSecond: 1, burst: 3 }

/** A bucket holding `tokens` at `at`, full again at `fullAt`. */
const bucket = (tokens: number, at = T0, fullAt = at + ((limit.burst - tokens) * 1000) / limit.perSecond): Bucket => ({
  tokens,
  at,
  fullAt
})

describe("a fresh bucket", () => {
  it("is full at the instant it is made", () => {
    expect(freshBucket(limit, T0)).toEqual({ tokens: 3, at: T0, fullAt: T0 })
  })
})

describe("refill", () => {
  it("adds perSecond tokens a second, pro rata, and moves the count to now", () => {
    expect(refill(bucket(0), limit, T0 + 1_500)).toEqual({ tokens: 1.5, at: T0 + 1_500, fullAt: T0 + 3_000 })
    expect(refill(bucket(1), { perSecond: 4, burst: 10 }, T0 + 250)).toMatchObject({ tokens: 2, at: T0 + 250 })
  })

  it("never fills past the bucket's size", () => {
    expect(refill(bucket(2), limit, T0 + 60_000)).toEqual({ tokens: 3, at: T0 + 60_000, fullAt: T0 + 1_000 })
  })

  it("refills nothing while the clock is set back, and counts on from the instant it was set to", () => {
    const back = refill(bucket(1), limit, T0 - 30 * 86_400_000)
    expect(back.tokens).toBe(1)
    expect(back.at).toBe(T0 - 30 * 86_400_000)
    // Counted from the earlier instant: one second after it, one token more.
    expect(refill(back, limit, T0 - 30 * 86_400_000 + 1_000).tokens).toBe(2)
  })

  it("keeps the instant it is full at its rate when last used, when the rate has dropped since", () => {
    // Used at 1 a second, 2 tokens short: full at T0 + 2 s; at 0.5 a second it would be T0 + 4 s.
    expect(refill(bucket(1), { perSecond: 0.5, burst: 3 }, T0).fullAt).toBe(T0 + 2_000)
    // A rate risen since brings it forward.
    expect(refill(bucket(1), { perSecond: 2, burst: 3 }, T0).fullAt).toBe(T0 + 1_000)
  })
})

describe("take", () => {
  it("takes the cost from a bucket that holds it and tells what is left and when it is full", () => {
    const taken = takeTokens(freshBucket(limit, T0), limit, T0, 1)
    expect(taken).toEqual({
      bucket: { tokens: 2, at: T0, fullAt: T0 + 1_000 },
      allowed: true,
      remaining: 2,
      resetSeconds: 1,
      retryAfter: 0
    })
  })

  it("lets exactly the tokens there are through: the last token is taken, the next refused", () => {
    const last = takeTokens(bucket(1), limit, T0, 1)
    expect(last).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 3, bucket: { tokens: 0, fullAt: T0 + 3_000 } })
    expect(takeTokens(last.bucket, limit, T0, 1)).toMatchObject({ allowed: false, remaining: 0, retryAfter: 1, resetSeconds: 1 })
  })

  it("refills before it takes", () => {
    // 0.5 left, half a second later: 1 token, enough for one.
    expect(takeTokens(bucket(0.5), limit, T0 + 500, 1)).toMatchObject({ allowed: true, bucket: { tokens: 0, at: T0 + 500 } })
  })

  it("counts whole tokens left, rounded down, and whole seconds to full, rounded up", () => {
    // 4.5 of 10 after the take, refilling 2 a second: 4 whole tokens left, (10 - 4.5) / 2 = 2.75 s to full: 3.
    const taken = takeTokens(bucket(5.5, T0, T0), { perSecond: 2, burst: 10 }, T0, 1)
    expect(taken).toMatchObject({ allowed: true, remaining: 4, resetSeconds: 3, retryAfter: 0 })
    expect(taken.bucket).toEqual({ tokens: 4.5, at: T0, fullAt: T0 + 2_750 })
  })

  it("refuses a cost the bucket does not hold, takes nothing, and keeps the refill", () => {
    const refused = takeTokens(bucket(0.25), limit, T0 + 250, 2)
    expect(refused.allowed).toBe(false)
    expect(refused.bucket).toEqual({ tokens: 0.5, at: T0 + 250, fullAt: T0 + 2_750 })
    expect(refused.remaining).toBe(0)
  })

  it("tells a refused client the whole seconds until its tokens are there, rounded up", () => {
    // 0.5 held, 2 needed at 1 a second: 1.5 s, told 2 (1 would be too early).
    expect(takeTokens(bucket(0.5), limit, T0, 2)).toMatchObject({ allowed: false, retryAfter: 2, resetSeconds: 2 })
    // 0 held, 3 needed at 0.4 a second: 7.5 s, told 8.
    expect(takeTokens(bucket(0, T0, T0), { perSecond: 0.4, burst: 5 }, T0, 3)).toMatchObject({ retryAfter: 8, resetSeconds: 8 })
    // A fraction of a second short: told 1, never 0.
    expect(takeTokens(bucket(0.999), limit, T0, 1)).toMatchObject({ allowed: false, retryAfter: 1 })
  })

  it("lets a refused client through once it has waited Retry-After, and not a whole second before, at any rate", () => {
    const rates = [0.001, 0.003, 0.1, 0.3, 0.7, 1, 1 / 3, 2.5, 3, 7, 13, 1_000, 50_000]
    const offsets = [0, 1, 7, 333, 999, 1_234, 98_765]
    for (const perSecond of rates) {
      for (const since of offsets) {
        for (const cost of [1, 2, 5]) {
          const limit = { perSecond, burst: 5 }
          // Emptied at T0, then `since` milliseconds of refill before the request that is refused.
          const emptied = takeTokens(freshBucket(limit, T0), limit, T0, 5).bucket
          const refused = takeTokens(emptied, limit, T0 + since, cost)
          if (refused.allowed) continue
          const waited = T0 + since + refused.retryAfter * 1000
          const label = `${perSecond}/s, ${since} ms after emptying, cost ${cost}: Retry-After ${refused.retryAfter}`
          expect(takeTokens(refused.bucket, limit, waited, cost).allowed, label).toBe(true)
          // Retry-After is the least whole number of seconds that does it.
          if (refused.retryAfter > 1) {
            expect(takeTokens(refused.bucket, limit, waited - 1000, cost).allowed, label).toBe(false)
          }
        }
      }
    }
  })

  it("lets a cost above the size through from a full bucket only, leaving a debt the next request waits out", () => {
    const big = takeTokens(freshBucket(limit, T0), limit, T0, 5)
    expect(big).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 5, bucket: { tokens: -2, fullAt: T0 + 5_000 } })
    // In debt by 2: one token is there 3 seconds on.
    expect(takeTokens(big.bucket, limit, T0, 1)).toMatchObject({ allowed: false, retryAfter: 3 })
    expect(takeTokens(big.bucket, limit, T0 + 2_999, 1).allowed).toBe(false)
    expect(takeTokens(big.bucket, limit, T0 + 3_000, 1).allowed).toBe(true)
    // A cost above the size waits for a full bucket, not for its own cost: 2.5 s from 0.5 tokens.
    expect(takeTokens(bucket(0.5), limit, T0, 5)).toMatchObject({ allowed: false, retryAfter: 3 })
    expect(takeTokens(bucket(0.5), limit, T0 + 2_500, 5)).toMatchObject({ allowed: true, bucket: { tokens: -2 } })
  })
})

describe("a bucket as good as new", () => {
  it("is full from the instant it has refilled", () => {
    const used = takeTokens(freshBucket(limit, T0), limit, T0, 2).bucket
    expect(isFull(used, T0 + 1_999)).toBe(false)
    expect(isFull(used, T0 + 2_000)).toBe(true)
    expect(isFull(used, T0 + 60_000)).toBe(true)
  })
})

describe("the seconds to fill a bucket from empty (the policy's w)", () => {
  it("is burst / perSecond, rounded up, and at least 1", () => {
    expect(fillSeconds({ perSecond: 2, burst: 10 })).toBe(5)
    expect(fillSeconds({ perSecond: 2, burst: 3 })).toBe(2)
    expect(fillSeconds({ perSecond: 0.001, burst: 3 })).toBe(3_000)
    expect(fillSeconds({ perSecond: 50_000, burst: 100 })).toBe(1)
  })
})
