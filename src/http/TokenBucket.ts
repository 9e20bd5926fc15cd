/**
 * The token bucket's arithmetic, alone: refill, take, and the seconds a client
 * is told to wait (docs/api.md "Rate limits"). Pure: the time is an argument
 * (epoch milliseconds), so the rule is tested without a clock; the per-key maps
 * and the headers are src/http/RateLimit.ts's.
 */
import type { RateLimit } from "../organizations/RateLimits.ts"

/** One bucket's state. */
export interface Bucket {
  readonly tokens: number
  /** When `tokens` was last counted. */
  readonly at: number
  /** When it will be full again, at its rate when last used: from then on it is as good as new. */
  readonly fullAt: number
}

/** What taking tokens came to, and the bucket it leaves (refilled up to `now`, taken from when allowed). */
export interface Taken {
  readonly bucket: Bucket
  readonly allowed: boolean
  /** Whole tokens left after this request (0 when refused). */
  readonly remaining: number
  /** Seconds until the bucket is full again; on a refusal, the same as `retryAfter`. */
  readonly resetSeconds: number
  /** On a refusal: whole seconds until the request's tokens are there (at least 1); 0 when allowed. */
  readonly retryAfter: number
}

/** A bucket never used before: full at `now`. */
export const freshBucket = (limit: RateLimit, now: number): Bucket => ({ tokens: limit.burst, at: now, fullAt: now })

/**
 * The bucket counted on to `now`: `perSecond` tokens a second, never above
 * `burst`. A clock set back (NTP, a test's instant) refills nothing, and counts
 * on from where it now is.
 */
export const refill = (bucket: Bucket, limit: RateLimit, now: number): Bucket => {
  const tokens = Math.min(limit.burst, bucket.tokens + (Math.max(0, now - bucket.at) * limit.perSecond) / 1000)
  return { tokens, at: now, fullAt: Math.min(bucket.fullAt, now + ((limit.burst - tokens) * 1000) / limit.perSecond) }
}

/**
 * Takes `cost` tokens at `now`, or refuses and takes none. A cost above the
 * bucket's size (a batch larger than the burst) is allowed from a full bucket,
 * which it leaves in debt: the following requests wait until the debt is
 * refilled. Refused, the client is told the whole seconds until the tokens are
 * there, rounded up: a client that waits that long is let through.
 */
export const takeTokens = (bucket: Bucket, limit: RateLimit, now: number, cost: number): Taken => {
  const refilled = refill(bucket, limit, now)
  const needed = Math.min(cost, limit.burst)
  if (refilled.tokens >= needed) {
    const tokens = refilled.tokens - cost
    return {
      bucket: { tokens, at: now, fullAt: now + ((limit.burst - tokens) * 1000) / limit.perSecond },
      allowed: true,
      remaining: Math.max(0, Math.floor(tokens)),
      resetSeconds: Math.ceil((limit.burst - tokens) / limit.perSecond),
      retryAfter: 0
    }
  }
  const retryAfter = Math.max(1, Math.ceil((needed - refilled.tokens) / limit.perSecond))
  return { bucket: refilled, allowed: false, remaining: 0, resetSeconds: retryAfter, retryAfter }
}

/** The bucket has refilled by `now`: it holds no state a fresh one would not. */
export const isFull = (bucket: Bucket, now: number) => now >= bucket.fullAt

/** The seconds to fill a bucket from empty, whole and at least 1 (the policy's `w`). */
export const fillSeconds = (limit: RateLimit) => Math.max(1, Math.ceil(limit.burst / limit.perSecond))
