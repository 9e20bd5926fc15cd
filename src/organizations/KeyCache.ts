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
import { Cause, Data, Deferred, Duration, Effect, Fiber, Option, Stream } from "effect"
import { type OrganizationId, randomToken } from "../ids.ts"

/** The channel that carries API key changes to every API process. */
export const keyChangesChannel = "billing_api_key_changes"

/** The payload that says "key `apiKeyId` changed: drop it". */
export const keyChangedPayload = (apiKeyId: string) => `key:${apiKeyId}`

/** What the cache keeps of a key: enough to authenticate and to refuse. */
export interface KeyRecord {
  readonly organizationId: OrganizationId
  readonly apiKeyId: string
  readonly expiresAt: Date | null
  readonly revokedAt: Date | null
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

export interface ListenerOptions {
  /** How often the listener proves that notifications still arrive. */
  readonly heartbeat: Duration.DurationInput
  /** How long an echo may take before the listener counts as lost. */
  readonly echoTimeout: Duration.DurationInput
  /** How often an echo is re-sent while waiting (the first may precede LISTEN). */
  readonly echoResend: Duration.DurationInput
  /** The wait before trying again after notifications did not come back at all. */
  readonly unavailableRetry: Duration.DurationInput
  /** The longest wait between connection attempts. */
  readonly maxBackoff: Duration.DurationInput
}

export const defaultListenerOptions: ListenerOptions = {
  heartbeat: "5 seconds",
  echoTimeout: "2 seconds",
  echoResend: "200 millis",
  unavailableRetry: "60 seconds",
  maxBackoff: "30 seconds"
}

class EchoTimeout extends Data.TaggedError("EchoTimeout")<{ readonly message: string }> {}

/**
 * Keeps `cache` in step with key changes committed by any process, for as
 * long as it runs (fork it; it never ends by itself).
 *
 * It uses `PgClient.listen` (a dedicated connection, not one of the pool's).
 * In @effect/sql-pg 0.53 that stream stays silent forever when its connection
 * drops (the connection's errors are swallowed), so the listener proves the
 * path works with an echo: a `pg_notify` through the pool that must come back
 * on the listening connection, first to confirm LISTEN took effect (then the
 * cache is cleared: entries loaded before it may have missed a change) and
 * then every `heartbeat`. An echo that does not come back within
 * `echoTimeout` ends the session: the cache is cleared, and the listener
 * reconnects. `PgClient.notify` is not used: it sends `NOTIFY chan, $1`, which
 * PostgreSQL rejects (a NOTIFY payload must be a literal).
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
  options: ListenerOptions = defaultListenerOptions
): Effect.Effect<never> =>
  Effect.gen(function*() {
    const echoPrefix = `echo:${randomToken(10)}:`
    let echoed = 0
    let sent = 0
    let waiting: { readonly after: number; readonly arrived: Deferred.Deferred<void> } | undefined

    const onPayload = (payload: string) => {
      if (payload.startsWith("key:")) {
        cache.invalidateKey(payload.slice(4))
      } else if (payload.startsWith(echoPrefix)) {
        const n = Number(payload.slice(echoPrefix.length))
        if (Number.isInteger(n)) echoed = Math.max(echoed, n)
        if (waiting !== undefined && echoed > waiting.after) Deferred.unsafeDone(waiting.arrived, Effect.void)
      } else if (!payload.startsWith("echo:")) {
        // A change this version does not know how to scope: drop everything.
        cache.clear()
      }
    }

    const sendEcho = Effect.suspend(() => {
      sent++
      return sql`SELECT pg_notify(${keyChangesChannel}, ${echoPrefix + sent})`
    })

    /** One of this round's echoes came back on the listening connection. */
    const echoRound = Effect.gen(function*() {
      const arrived = yield* Deferred.make<void>()
      waiting = { after: sent, arrived }
      yield* Effect.raceFirst(
        Deferred.await(arrived),
        Effect.zipRight(sendEcho, Effect.forever(Effect.zipRight(Effect.sleep(options.echoResend), sendEcho)))
      ).pipe(
        Effect.timeoutFail({
          duration: options.echoTimeout,
          onTimeout: () => new EchoTimeout({ message: "a notification sent through the pool did not come back on the listening connection" })
        }),
        Effect.ensuring(Effect.sync(() => {
          waiting = undefined
        }))
      )
    })

    let confirmed = false
    const session = Effect.scoped(Effect.gen(function*() {
      confirmed = false
      cache.listener = "connecting"
      const stream = yield* pg.listen(keyChangesChannel).pipe(
        Stream.runForEach((payload) => Effect.sync(() => onPayload(payload))),
        Effect.forkScoped
      )
      const streamEnded = Effect.flatMap(Fiber.join(stream), () => Effect.dieMessage("the notification stream ended"))
      const beats = Effect.gen(function*() {
        yield* echoRound
        confirmed = true
        cache.clear()
        cache.listener = "listening"
        yield* Effect.logInfo("API key cache: listening for key changes")
        for (;;) {
          yield* Effect.sleep(options.heartbeat)
          yield* echoRound
        }
      })
      return yield* Effect.raceFirst(beats, streamEnded)
    }))

    let failures = 0
    let toldUnavailable = false
    for (;;) {
      const exit = yield* Effect.exit(session)
      // Whatever ended the session, changes may have been missed since.
      cache.clear()
      const cause = exit._tag === "Failure" ? exit.cause : Cause.empty
      const echoLost = Option.exists(Cause.failureOption(cause), (error) => error instanceof EchoTimeout)
      let wait: Duration.DurationInput
      if (confirmed) {
        failures = 0
        cache.listener = "connecting"
        yield* Effect.logWarning("API key cache: lost the key-change listener; reconnecting (the TTL bounds the cache meanwhile)", cause)
        wait = "100 millis"
      } else if (echoLost) {
        cache.listener = "unavailable"
        if (!toldUnavailable) {
          toldUnavailable = true
          yield* Effect.logInfo(
            "API key cache: key-change notifications do not reach this process (the embedded database, or a pooler without LISTEN); revocations take effect within the cache's TTL"
          )
        }
        wait = options.unavailableRetry
      } else {
        failures++
        cache.listener = "connecting"
        if (failures === 1) yield* Effect.logWarning("API key cache: cannot listen for key changes; retrying", cause)
        wait = Duration.min(Duration.times(Duration.millis(250), 2 ** Math.min(failures, 10)), Duration.decode(options.maxBackoff))
      }
      yield* Effect.sleep(wait)
    }
  })
