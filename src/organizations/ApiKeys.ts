/**
 * API keys: `sk_` + 192 random bits, shown once at creation and stored only as
 * a SHA-256 hash. A key may expire or be revoked; either makes it a 401.
 *
 * Authentication is answered from the process's key cache (`KeyCache.ts`):
 * a known key costs at most one lookup per TTL (0.5 s) in each API process, a
 * revocation reaches every API process through `pg_notify` in the revoking
 * transaction, and an expiry is checked on every use. `last_used_at` is never
 * written (authentication makes no write); the column stays null.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Either, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { dieOnSqlError, findAll, findOne, orDie } from "../db/Sql.ts"
import { ApiKeyNotFound, ApiKeyRefused } from "../errors.ts"
import { makeId, OrganizationId, randomToken } from "../ids.ts"
import {
  defaultKeyCacheOptions,
  isUsable,
  KeyCache,
  keyChangedPayload,
  keyChangesChannel,
  organizationChangedPayload,
  type KeyCacheStats,
  type KeyRecord,
  listenForKeyChanges
} from "./KeyCache.ts"
import { DEFAULT_RATE_LIMITS, effectiveRateLimits, type RateLimits, StoredRateLimits } from "./RateLimits.ts"

export const hashKey = (key: string) => createHash("sha256").update(key).digest("hex")

export class ApiKey extends Schema.Class<ApiKey>("ApiKey")({
  id: Schema.String,
  organizationId: OrganizationId,
  name: Schema.String,
  keyPrefix: Schema.String,
  createdAt: Schema.DateFromSelf,
  expiresAt: Schema.NullOr(Schema.DateFromSelf),
  revokedAt: Schema.NullOr(Schema.DateFromSelf),
  lastUsedAt: Schema.NullOr(Schema.DateFromSelf)
}) {}

export interface Caller {
  readonly organizationId: OrganizationId
  readonly apiKeyId: string
  /** The organisation's API rate limits in force (src/http/RateLimit.ts counts them per key). */
  readonly rateLimits: RateLimits
}

/** What authentication reads of a key: the cache's record. */
const KeyRow = Schema.Struct({
  apiKeyId: Schema.String,
  organizationId: OrganizationId,
  expiresAt: Schema.NullOr(Schema.DateFromSelf),
  revokedAt: Schema.NullOr(Schema.DateFromSelf),
  rateLimits: Schema.NullOr(StoredRateLimits)
})

const refused = () => new ApiKeyRefused({ message: "The API key is missing, unknown, revoked or expired" })

export class ApiKeys extends Effect.Service<ApiKeys>()("ApiKeys", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    // The cache's time is this layer's Clock, read once here into a plain
    // function (KeyCache.ts, "Time"): the live clock in production, the
    // TestClock when a test builds the service under it.
    const clock = yield* Effect.clock
    const cache = new KeyCache(defaultKeyCacheOptions, () => clock.unsafeCurrentTimeMillis())

    // The change listener starts with the first authentication, so only a
    // process that serves the API holds a listening connection (the CLI and
    // the worker never authenticate). It is forked here, not from a request,
    // so it carries none of a request's annotations.
    const startListener = yield* Deferred.make<void>()
    let listenerRequested = false
    if (Option.isSome(pg)) {
      yield* Deferred.await(startListener).pipe(
        Effect.zipRight(listenForKeyChanges(pg.value, sql, cache)),
        Effect.forkScoped
      )
    }

    const create = Effect.fn("ApiKeys.create")(function*(organizationId: OrganizationId, options: { readonly name?: string; readonly expiresAt?: Date | undefined }) {
        const secret = `sk_${randomToken(24)}`
        const id = makeId("key")
        const rows = yield* findAll(
          ApiKey,
          sql`INSERT INTO api_keys (organization_id, id, name, key_hash, key_prefix, expires_at)
              VALUES (${organizationId}, ${id}, ${options.name ?? "default"}, ${hashKey(secret)},
                      ${secret.slice(0, 10)}, ${options.expiresAt ?? null})
              RETURNING *`
        )
        return { apiKey: rows[0]!, secret }
      })

    const list = Effect.fn("ApiKeys.list")((organizationId: OrganizationId) =>
      findAll(ApiKey, sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ORDER BY id`))

    /**
     * Revokes a key. The notification is sent in the same transaction, so
     * PostgreSQL delivers it exactly when the revocation commits (and not if
     * it rolls back); this process's own cache drops the key at once.
     */
    const revoke = Effect.fn("ApiKeys.revoke")((organizationId: OrganizationId, id: string) =>
      Effect.gen(function*() {
        const revoked = yield* findOne(
          ApiKey,
          sql`UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`
        )
        if (Option.isNone(revoked)) return yield* new ApiKeyNotFound({ message: `API key ${id} not found` })
        yield* orDie(sql`SELECT pg_notify(${keyChangesChannel}, ${keyChangedPayload(id)})`)
        return revoked.value
      }).pipe(
        sql.withTransaction,
        dieOnSqlError,
        Effect.tap(() => Effect.sync(() => cache.invalidateKey(id)))
      ))

    const lookup = (hash: string) =>
      findOne(
        KeyRow,
        sql`SELECT k.id AS api_key_id, k.organization_id, k.expires_at, k.revoked_at, o.rate_limits
            FROM api_keys k JOIN organizations o ON o.id = k.organization_id
            WHERE k.key_hash = ${hash}`
      ).pipe(Effect.map(Option.map((row): KeyRecord => ({ ...row, rateLimits: effectiveRateLimits(row.rateLimits) }))))

    /**
     * One lookup per key at a time: requests that miss while it runs wait for
     * its answer. It runs uninterruptibly (a request that goes away waits for
     * the one statement to end), so those waiting are always answered.
     */
    const inFlight = new Map<string, Deferred.Deferred<Option.Option<KeyRecord>>>()
    const load = (hash: string): Effect.Effect<Option.Option<KeyRecord>> =>
      Effect.suspend(() => {
        const pending = inFlight.get(hash)
        if (pending !== undefined) return Deferred.await(pending)
        return Effect.gen(function*() {
          const done = yield* Deferred.make<Option.Option<KeyRecord>>()
          inFlight.set(hash, done)
          const token = cache.begin()
          const startedAt = cache.now()
          const exit = yield* Effect.exit(lookup(hash))
          inFlight.delete(hash)
          if (exit._tag === "Success" && Option.isSome(exit.value)) cache.put(hash, exit.value.value, token, startedAt)
          yield* Deferred.done(done, exit)
          return yield* exit
        }).pipe(Effect.uninterruptible)
      })

    const decide = (key: KeyRecord | undefined): Either.Either<Caller, ApiKeyRefused> =>
      key !== undefined && isUsable(key, cache.now())
        ? Either.right({
          organizationId: key.organizationId,
          apiKeyId: key.apiKeyId,
          rateLimits: key.rateLimits ?? DEFAULT_RATE_LIMITS
        })
        : Either.left(refused())

    const cachedDecision = (hash: string) => {
      if (!listenerRequested) {
        listenerRequested = true
        Deferred.unsafeDone(startListener, Effect.void)
      }
      const cached = cache.get(hash)
      return cached === undefined ? undefined : decide(cached)
    }

    /**
     * The cache's answer for a presented key, without an effect: the caller,
     * or 401; undefined when the key must be looked up (`authenticate`).
     */
    const authenticateCached = (secret: string): Either.Either<Caller, ApiKeyRefused> | undefined =>
      cachedDecision(hashKey(secret))

    /** The organisation a presented key belongs to, or 401. */
    const authenticate = Effect.fn("ApiKeys.authenticate")((secret: string): Effect.Effect<Caller, ApiKeyRefused> =>
      Effect.suspend(() => {
        const hash = hashKey(secret)
        return cachedDecision(hash) ?? Effect.flatMap(load(hash), (row) => decide(Option.getOrUndefined(row)))
      }))

    /** The key cache's counters and listener state (tests, diagnostics). */
    const cacheStats: Effect.Effect<KeyCacheStats> = Effect.sync(() => cache.stats()).pipe(Effect.withSpan("ApiKeys.cacheStats"))

    /**
     * What the keys of an organisation carry (its rate limits) changed, in the caller's transaction:
     * every API process drops them when it commits (`pg_notify`), this one at once.
     */
    const organizationChanged = Effect.fn("ApiKeys.organizationChanged")((organizationId: OrganizationId) =>
      orDie(sql`SELECT pg_notify(${keyChangesChannel}, ${organizationChangedPayload(organizationId)})`).pipe(
        Effect.zipRight(Effect.sync(() => cache.invalidateOrganization(organizationId)))
      ))

    return { create, list, revoke, authenticate, authenticateCached, cacheStats, organizationChanged } as const
  })
}) {}
