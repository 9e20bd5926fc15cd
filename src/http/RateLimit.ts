/**
 * API rate limits (issue 27, docs/api.md "Rate limits"): a token bucket per API
 * key and route family (signals, reads, writes; src/organizations/RateLimits.ts),
 * counted in this API process's memory. A request takes its tokens before
 * anything of it is done: one, or a batch's number of signals. Refused, it is
 * answered 429 in the envelope with `Retry-After`, and every answer of an
 * authenticated request carries the `RateLimit-Policy` and `RateLimit` fields
 * of draft-ietf-httpapi-ratelimit-headers (revision 11):
 *
 *   RateLimit-Policy: "signals";q=100000;w=2     q: the bucket's size (burst), w: seconds to fill it from empty
 *   RateLimit: "signals";r=99999;t=1             r: tokens left, t: seconds until the bucket is full again
 *                                                 (on a 429: r=0, t = Retry-After)
 *
 * Why in memory and not in PostgreSQL: a database write per request would cost
 * more than the request itself on the intake path (docs/benchmarks.md), and a
 * limit only needs to stop a runaway client, not to be exact across processes.
 * So each API process keeps its own buckets: with N processes behind a
 * balancer a key may spend up to N times the limit in all; size it as the
 * per-process share (docs/api.md).
 *
 * Time: read from the synchronous `now` given at construction, which the
 * service takes from the Effect `Clock` its layer is built under (as the key
 * cache does, src/organizations/KeyCache.ts): the lanes ask outside any fiber,
 * and a test under `TestClock` refills a bucket with `TestClock.adjust`.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { RateLimited } from "../errors.ts"
import type { Caller } from "../organizations/ApiKeys.ts"
import type { RateLimit, RouteFamily } from "../organizations/RateLimits.ts"
import { apiPrefix } from "./ApiPrefix.ts"
import { type Bucket, fillSeconds, freshBucket, isFull, takeTokens } from "./TokenBucket.ts"

/** What a request's tokens came to. */
export interface RateVerdict {
  readonly allowed: boolean
  readonly family: RouteFamily
  readonly limit: RateLimit
  /** Whole tokens left after this request (0 when refused). */
  readonly remaining: number
  /** Seconds until the bucket is full again; on a refusal, the same as `retryAfter`. */
  readonly resetSeconds: number
  /** On a refusal: whole seconds until the request's tokens are there; 0 when allowed. */
  readonly retryAfter: number
}

type Buckets = { [F in RouteFamily]?: Bucket }

/** The most API keys whose buckets are kept; past it, full buckets are forgotten (a full bucket is no state). */
const MAX_KEYS = 10_000

/** The token buckets of one API process, by API key and route family. */
export class TokenBuckets {
  private readonly keys = new Map<string, Buckets>()

  constructor(readonly now: () => number) {}

  /**
   * Takes `cost` tokens of `apiKeyId`'s `family` bucket under `limit`, or
   * refuses and takes none. A cost above the bucket's size (a batch larger than
   * the burst) is allowed from a full bucket, which it leaves in debt: the
   * following requests wait until the debt is refilled.
   */
  take(apiKeyId: string, family: RouteFamily, limit: RateLimit, cost = 1): RateVerdict {
    const now = this.now()
    let buckets = this.keys.get(apiKeyId)
    if (buckets === undefined) {
      if (this.keys.size >= MAX_KEYS) this.sweep(now)
      buckets = {}
      this.keys.set(apiKeyId, buckets)
    }
    const taken = takeTokens(buckets[family] ?? freshBucket(limit, now), limit, now, cost)
    buckets[family] = taken.bucket
    const { allowed, remaining, resetSeconds, retryAfter } = taken
    return { allowed, family, limit, remaining, resetSeconds, retryAfter }
  }

  /** Forgets the buckets that have refilled (as good as new), then the oldest keys if still too many. */
  private sweep(now: number) {
    for (const [key, buckets] of this.keys) {
      if (Object.values(buckets).every((bucket) => bucket === undefined || isFull(bucket, now))) this.keys.delete(key)
    }
    for (const key of this.keys.keys()) {
      if (this.keys.size < MAX_KEYS) break
      this.keys.delete(key)
    }
  }
}

/** The route family of a request to the API: by method, and path for the signal routes. */
export const familyOf = (method: string | undefined, url: string | undefined): RouteFamily => {
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return "reads"
  const path = (url ?? "").split("?", 1)[0]!.replace(/\/+$/, "")
  if (method === "POST") {
    if (signalPaths.has(path)) return "signals"
    if (path === `${apiPrefix}/signal/usage-log/lookup`) return "reads"
  }
  return "writes"
}

/**
 * What authentication takes for a request: one token, but none for a batch, whose
 * handler takes one a signal once its body is decoded (src/signals/SignalsHttp.ts),
 * so that a batch is taken or refused whole, as in the intake lane.
 */
export const authenticationCost = (method: string | undefined, url: string | undefined): number =>
  method === "POST" && (url ?? "").split("?", 1)[0]!.replace(/\/+$/, "") === `${apiPrefix}/signal/batch` ? 0 : 1

/** Usage intake and the check before spending: the paths of the `signals` family. */
const signalPaths = new Set(
  ["signal/credit", "signal/outcome", "signal/outcome/complete", "signal/unit", "signal/wallet", "signal/batch",
    "signal/composite/complete", "entitlements/check"].map((path) => `${apiPrefix}/${path}`)
)

/** The policy's fields of draft-ietf-httpapi-ratelimit-headers: its name, size and the seconds to fill it. */
const policyField = (family: RouteFamily, limit: RateLimit) =>
  `"${family}";q=${limit.burst};w=${fillSeconds(limit)}`

/** The headers of an answer to a request whose tokens came to `verdict`. */
export const rateLimitHeaders = (verdict: RateVerdict): Record<string, string> => {
  const headers: Record<string, string> = {
    "ratelimit-policy": policyField(verdict.family, verdict.limit),
    ratelimit: `"${verdict.family}";r=${verdict.remaining};t=${verdict.resetSeconds}`
  }
  if (!verdict.allowed) headers["retry-after"] = String(verdict.retryAfter)
  return headers
}

/** The 429's message. */
export const rateLimitedMessage = (verdict: RateVerdict) =>
  `Rate limit exceeded for ${verdict.family}: ${verdict.limit.perSecond} a second, bursts of ${verdict.limit.burst}, ` +
  `per API key; retry after ${verdict.retryAfter} second(s)`

/** The process's token buckets, on the time of the `Clock` the layer is built under. */
export class RateLimiter extends Effect.Service<RateLimiter>()("RateLimiter", {
  effect: Effect.map(Effect.clock, (clock) => {
    const buckets = new TokenBuckets(() => clock.unsafeCurrentTimeMillis())
    /** Takes the caller's tokens for a request of `family` (no effect: the lanes call it outside any fiber). */
    const take = (caller: Caller, family: RouteFamily, cost = 1): RateVerdict =>
      buckets.take(caller.apiKeyId, family, caller.rateLimits[family], cost)

    /**
     * For the full server: takes the tokens, puts the rate-limit headers on
     * whatever answers the request, and fails with `RateLimited` when refused.
     */
    const limit = Effect.fn("RateLimiter.limit")(function*(caller: Caller, family: RouteFamily, cost = 1) {
      const verdict = take(caller, family, cost)
      const headers = rateLimitHeaders(verdict)
      yield* HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.setHeaders(response, headers))
      )
      if (!verdict.allowed) return yield* new RateLimited({ message: rateLimitedMessage(verdict) })
    })

    return { take, limit } as const
  })
}) {}
