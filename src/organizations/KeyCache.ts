/**
 * The API process's cache of API keys: a presented key's SHA-256 hash → the
 * key's organisation, id, expiry and revocation, so that a request with a
 * known key costs no database round trip.
 *
 * Bounds (see docs/api.md, "API keys and the key cache"):
 * - An entry is trusted for `ttlMs` (0.5 s) after the lookup that read it
 *   *began*; after that the next request looks the key up again. So a change
 *   that reaches this process by no other way (a missed notification, the
 *   embedded database) takes effect at most 0.5 s after it commits, which
 *   leaves room for the request itself within the promised second.
 * - Expiry is checked on every use against this process's clock, so an
 *   expired key is refused at its expiry instant whether cached or not.
 * - A revocation reaches every API process at once through PostgreSQL
 *   `LISTEN`/`NOTIFY` (`listenForKeyChanges`): `ApiKeys.revoke` calls
 *   `pg_notify` in the revoking transaction, so the notification is sent when
 *   the revocation commits.
 * - Unknown keys are never cached: a key created a moment ago works on its
 *   first request.
 *
 * Invalidation bumps a generation counter; a lookup that began before it does
 * not store its (possibly stale) row, so a revocation that commits while a
 * lookup of the same key is in flight cannot be undone by that lookup.
 *
 * Time: the cache reads it from the synchronous `now` it is given at
 * construction, never from `Date.now()` itself. `ApiKeys` passes the
 * `unsafeCurrentTimeMillis` of the Effect `Clock` it finds when its layer is
 * built (the live clock: `Date.now()`), so a test that builds the service
 * under `TestClock` moves the TTL and every expiry check with
 * `TestClock.adjust`. A function and not `Clock.currentTimeMillis` because
 * the intake lane asks the cache synchronously, outside any fiber
 * (docs/architecture.md, "The intake lane"): reading the time stays one
 * plain call.
 */
import type { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import type { Effect } from "effect"
import { type ChannelOptions, defaultChannelOptions, listenOn } from "../db/Listen.ts"
import type { OrganizationId } from "../ids.ts"
import type { RateLimits } from "./RateLimits.ts"

/** The channel that carries API key changes to every API process. */
export const keyChangesChannel = "billing_api_key_changes"

/** The payload that says "key `apiKeyId` changed: drop it". */
export const keyChangedPayload = (apiKeyId: string) => `key:${apiKeyId}`

/** The payload that says "what the keys of `organizationId` carry changed (its rate limits): drop them". */
export const organizationChangedPayload = (organizationId: string) => `org:${organizationId}`

/** What the cache keeps of a key: enough to authenticate and to refuse. */
export interface KeyRecord {
  readonly organizationId: OrganizationId
  readonly apiKeyId: string
  readonly expiresAt: Date | null
  readonly revokedAt: Date | null
  /**
   * The organisation's API rate limits in force (its own, else the defaults), read with
   * the key: a change of them reaches this process within the cache's TTL, like any other.
   */
  readonly rateLimits?: RateLimits | undefined
}

/** Whether `key` authenticates a request at `now` (milliseconds since the epoch). */
export const isUsable = (key: KeyRecord, now: number): boolean =>
  key.revokedAt === null && (key.expiresAt === null || key.expiresAt.getTime() > now)

export interface KeyCacheOptions {
  /** How long an entry is trusted after the lookup that read it began, in milliseconds. */
  readonly ttlMs: number
  /** The most entries kept; the oldest loaded is dropped first. */
  readonly maxEntries: number
}

export const defaultKeyCacheOptions: KeyCacheOptions = { ttlMs: 500, maxEntries: 10_000 }

/**
 * The state of the change listener: `off` until the first authentication,
 * `connecting` until a notification sent through the pool has come back on
 * the listening connection, `listening` while they do, `unavailable` when
 * they did not (the embedded database, a pooler without LISTEN): the TTL is
 * then the only bound, and the listener tries again later.
 */
export type ListenerState = "off" | "connecting" | "listening" | "unavailable"

export interface KeyCacheStats {
  /** Database lookups made to authenticate (one per miss or stale entry). */
  readonly lookups: number
  /** Authentications answered from the cache. */
  readonly hits: number
  /** Entries dropped by a notification, a local revocation or a clear. */
  readonly invalidations: number
  /** Whole-cache clears (listener connected, reconnected or lost). */
  readonly clears: number
  readonly entries: number
  readonly listener: ListenerState
}

interface Entry {
  readonly key: KeyRecord
  readonly loadedAt: number
}

export class KeyCache {
  private readonly entries = new Map<string, Entry>()
  /** apiKeyId -> hash, to drop an entry by the id a notification names. */
  private readonly byKeyId = new Map<string, string>()
  private generation = 0
  private lookups = 0
  private hits = 0
  private invalidations = 0
  private clears = 0
  listener: ListenerState = "off"

  constructor(
    readonly options: KeyCacheOptions = defaultKeyCacheOptions,
    /** The current time in milliseconds since the epoch: every TTL and expiry check reads it. */
    readonly now: () => number = Date.now
  ) {}

  /** The entry for `hash` if it is still within its TTL now; otherwise none (look it up). */
  get(hash: string): KeyRecord | undefined {
    const entry = this.entries.get(hash)
    if (entry === undefined) return undefined
    if (this.now() - entry.loadedAt >= this.options.ttlMs) {
      this.remove(hash, entry.key.apiKeyId)
      return undefined
    }
    this.hits++
    return entry.key
  }

  /** Call when a lookup begins; hand the result to `put` with it. */
  begin(): number {
    this.lookups++
    return this.generation
  }

  /**
   * Stores what a lookup that began at `loadedAt` (with `token` from `begin`)
   * read, unless something was invalidated since it began.
   */
  put(hash: string, key: KeyRecord, token: number, loadedAt: number): void {
    if (token !== this.generation) return
    const previous = this.entries.get(hash)
    if (previous !== undefined) this.remove(hash, previous.key.apiKeyId)
    this.entries.set(hash, { key, loadedAt })
    this.byKeyId.set(key.apiKeyId, hash)
    while (this.entries.size > this.options.maxEntries) {
      const [oldest, entry] = this.entries.entries().next().value as [string, Entry]
      this.remove(oldest, entry.key.apiKeyId)
    }
  }

  /** Key `apiKeyId` changed (revoked, say): drop it and fence lookups in flight. */
  invalidateKey(apiKeyId: string): void {
    this.generation++
    const hash = this.byKeyId.get(apiKeyId)
    if (hash === undefined) return
    this.remove(hash, apiKeyId)
    this.invalidations++
  }

  /** Every key of `organizationId` changed (its rate limits): drop them and fence lookups in flight. */
  invalidateOrganization(organizationId: string): void {
    this.generation++
    for (const [hash, entry] of this.entries) {
      if (entry.key.organizationId !== organizationId) continue
      this.remove(hash, entry.key.apiKeyId)
      this.invalidations++
    }
  }

  /** Drops everything and fences lookups in flight. */
  clear(): void {
    this.generation++
    this.invalidations += this.entries.size
    this.clears++
    this.entries.clear()
    this.byKeyId.clear()
  }

  stats(): KeyCacheStats {
    return {
      lookups: this.lookups,
      hits: this.hits,
      invalidations: this.invalidations,
      clears: this.clears,
      entries: this.entries.size,
      listener: this.listener
    }
  }

  private remove(hash: string, apiKeyId: string): void {
    this.entries.delete(hash)
    if (this.byKeyId.get(apiKeyId) === hash) this.byKeyId.delete(apiKeyId)
  }
}

/**
 * Keeps `cache` in step with key changes committed by any process, for as
 * long as it runs (fork it; it never ends by itself): a listener on
 * `keyChangesChannel` (src/db/Listen.ts `listenOn`, which proves with an echo
 * that notifications arrive, and reconnects). Whenever the listener starts
 * listening, or stops (lost, or not reaching this process), the cache is
 * cleared: entries loaded meanwhile may have missed a change.
 *
 * On the embedded database the echo never comes back (its socket serves one
 * PGlite session to every client, and a notification is written to whichever
 * client's statement committed it), so the state is `unavailable` and the
 * cache's TTL is the bound.
 */
export const listenForKeyChanges = (
  pg: PgClient.PgClient,
  sql: SqlClient.SqlClient,
  cache: KeyCache,
  options: ChannelOptions = defaultChannelOptions
): Effect.Effect<never> =>
  listenOn(
    pg,
    sql,
    keyChangesChannel,
    (payload) => {
      if (payload.startsWith("key:")) cache.invalidateKey(payload.slice(4))
      else if (payload.startsWith("org:")) cache.invalidateOrganization(payload.slice(4))
      // A change this version does not know how to scope: drop everything.
      else cache.clear()
    },
    (state) => {
      if (state === "listening" || cache.listener === "listening") cache.clear()
      cache.listener = state
    },
    options
  )
