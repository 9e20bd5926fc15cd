/**
 * An organisation's API rate limits (issue 27, docs/api.md "Rate limits"): one
 * token bucket per API key and route family, each family with a refill rate
 * (`perSecond`) and a size (`burst`). An organisation stores only the families
 * it changed (`organizations.rate_limits`, migrations/0018); the others take the
 * defaults below. The buckets themselves are counted in each API process
 * (src/http/RateLimit.ts).
 */
import { Schema } from "effect"

/**
 * What a request counts against: `signals` (usage intake, one token a signal,
 * a batch its number of signals; and the spend check before each), `reads`
 * (GET, and the usage-log lookup), `writes` (every other change).
 */
export const ROUTE_FAMILIES = ["signals", "reads", "writes"] as const
export type RouteFamily = (typeof ROUTE_FAMILIES)[number]

export interface RateLimit {
  /** Tokens added a second. */
  readonly perSecond: number
  /** The most tokens the bucket holds: how many may be spent at once after a pause. */
  readonly burst: number
}

export type RateLimits = { readonly [F in RouteFamily]: RateLimit }

/**
 * Far above what one key sends in the benchmarks (about 10,000-25,000 signals a
 * second through batches, a few thousand reads a second, purchases in the
 * hundreds a second: docs/benchmarks.md), so the limits stop a runaway client,
 * never a healthy one. Per API process: see docs/api.md for sizing.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = {
  signals: { perSecond: 50_000, burst: 100_000 },
  reads: { perSecond: 10_000, burst: 20_000 },
  writes: { perSecond: 5_000, burst: 10_000 }
}

/** The bounds of a family's `perSecond` (fractions allowed: 0.5 is a token every 2 seconds) and `burst` (whole). */
export const RATE_LIMIT_BOUNDS = { perSecond: { min: 0.001, max: 1_000_000 }, burst: { min: 1, max: 10_000_000 } } as const

const bounded = (name: "perSecond" | "burst") =>
  Schema.Number.pipe(
    Schema.filter((value) => Number.isFinite(value) || `${name} must be a number`),
    Schema.between(RATE_LIMIT_BOUNDS[name].min, RATE_LIMIT_BOUNDS[name].max, {
      message: () => `${name} must be from ${RATE_LIMIT_BOUNDS[name].min} to ${RATE_LIMIT_BOUNDS[name].max}`
    })
  )

export const RateLimitSchema = Schema.Struct({
  perSecond: bounded("perSecond").annotations({
    description: `Tokens added a second, from ${RATE_LIMIT_BOUNDS.perSecond.min} to ` +
      `${RATE_LIMIT_BOUNDS.perSecond.max.toLocaleString("en")} (fractions allowed: 0.5 is one token every 2 seconds).`
  }),
  burst: bounded("burst").pipe(Schema.int({ message: () => "burst must be a whole number" })).annotations({
    description: "The most tokens the bucket holds (what may be spent at once after a pause), a whole number from 1 " +
      `to ${RATE_LIMIT_BOUNDS.burst.max.toLocaleString("en")}.`
  })
})

/** What an organisation stores: the families it set; the others are the defaults. */
export const StoredRateLimits = Schema.Struct({
  signals: Schema.optional(RateLimitSchema),
  reads: Schema.optional(RateLimitSchema),
  writes: Schema.optional(RateLimitSchema)
})
export type StoredRateLimits = typeof StoredRateLimits.Type

/** A change of the limits: a family sent changes, `null` puts it back to the default, one left out stays. */
const familyChange = (family: RouteFamily, what: string) =>
  Schema.optional(Schema.NullOr(RateLimitSchema).annotations({
    description: `The \`${family}\` family (${what}): \`{perSecond, burst}\`, or null for the default ` +
      `(${DEFAULT_RATE_LIMITS[family].perSecond.toLocaleString("en")} a second, bursts of ` +
      `${DEFAULT_RATE_LIMITS[family].burst.toLocaleString("en")}).`
  }))

export const RateLimitsChange = Schema.Struct({
  signals: familyChange("signals", "usage intake, a token a signal, and the check before spending"),
  reads: familyChange("reads", "GET requests and the usage-log lookup"),
  writes: familyChange("writes", "every other change")
})
export type RateLimitsChange = typeof RateLimitsChange.Type

/** The limits in force: the organisation's own families, the defaults for the rest. */
export const effectiveRateLimits = (stored: StoredRateLimits | null | undefined): RateLimits => ({
  signals: stored?.signals ?? DEFAULT_RATE_LIMITS.signals,
  reads: stored?.reads ?? DEFAULT_RATE_LIMITS.reads,
  writes: stored?.writes ?? DEFAULT_RATE_LIMITS.writes
})

/** The limits in force with where each comes from: the workspace's own (`ORGANIZATION`) or the built-in `DEFAULT`. */
export const rateLimitsInForce = (stored: StoredRateLimits | null | undefined) => {
  const inForce = effectiveRateLimits(stored)
  const one = (family: RouteFamily) => ({
    ...inForce[family],
    source: stored?.[family] === undefined ? "DEFAULT" as const : "ORGANIZATION" as const
  })
  return { signals: one("signals"), reads: one("reads"), writes: one("writes") }
}

/** `stored` with `change` applied; null when nothing of its own is left. */
export const changedRateLimits = (stored: StoredRateLimits | null, change: RateLimitsChange): StoredRateLimits | null => {
  const next: Record<string, RateLimit> = {}
  for (const family of ROUTE_FAMILIES) {
    const value = change[family] === undefined ? stored?.[family] : change[family]
    if (value != null) next[family] = { perSecond: value.perSecond, burst: value.burst }
  }
  return Object.keys(next).length === 0 ? null : next
}
