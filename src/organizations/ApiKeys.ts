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
import { Deferred, Duration, Effect, Either, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { dieOnSqlError, findAll, findByIdOr, findOne, knownCursor, orDie, pageClause } from "../db/Sql.ts"
import { ApiKeyExpiryInPast, ApiKeyInUse, ApiKeyNotFound, ApiKeyRefused } from "../errors.ts"
import { makeId, OrganizationId, randomToken } from "../ids.ts"
import type { Page } from "../Page.ts"
import { currentTime } from "../time.ts"
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
  lastUsedAt: Schema.NullOr(Schema.DateFromSelf),
  /** The key whose request created this one (`POST /api-keys`); null: created from the CLI. */
  createdBy: Schema.NullOr(Schema.String)
}) {}

export const ApiKeyStatus = Schema.Literal("ACTIVE", "EXPIRED", "REVOKED")
export type ApiKeyStatus = typeof ApiKeyStatus.Type

/** A key's state at `now`: REVOKED once revoked (whatever its expiry), EXPIRED from its expiry instant, else ACTIVE. */
export const keyStatusAt = (key: ApiKey, now: Date): ApiKeyStatus =>
  key.revokedAt !== null
    ? "REVOKED"
    : key.expiresAt !== null && key.expiresAt.getTime() <= now.getTime()
    ? "EXPIRED"
    : "ACTIVE"

/** A key's label: 1 to 100 characters once trimmed. */
export const ApiKeyName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(100, { message: () => "must be at most 100 characters" })
).annotations({ description: "A label for people (which integration holds it), 1 to 100 characters; `default` when left out." })

/** What a new key is made with, by `billing key create` and `POST /api-keys`. */
export interface ApiKeyRequest {
  readonly name?: string | undefined
  readonly expiresAt?: Date | undefined
}

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

    const create = Effect.fn("ApiKeys.create")(function*(
      organizationId: OrganizationId,
      options: ApiKeyRequest & { readonly createdBy?: string | undefined }
    ) {
        const secret = `sk_${randomToken(24)}`
        const id = makeId("key")
        const rows = yield* findAll(
          ApiKey,
          sql`INSERT INTO api_keys (organization_id, id, name, key_hash, key_prefix, expires_at, created_by)
              VALUES (${organizationId}, ${id}, ${options.name ?? "default"}, ${hashKey(secret)},
                      ${secret.slice(0, 10)}, ${options.expiresAt ?? null}, ${options.createdBy ?? null})
              RETURNING *`
        )
        return { apiKey: rows[0]!, secret }
      })

    /**
     * A new key as the doors make one (`billing key create`, `POST /api-keys`):
     * an expiry must be in the future, since a key born expired is refused from
     * its first request. `createdBy` is the key of the request that makes it.
     */
    const issue = Effect.fn("ApiKeys.issue")(function*(
      organizationId: OrganizationId,
      request: ApiKeyRequest,
      options: { readonly createdBy?: string | undefined } = {}
    ) {
      const now = yield* currentTime
      if (request.expiresAt !== undefined && request.expiresAt.getTime() <= now.getTime()) {
        return yield* new ApiKeyExpiryInPast({
          message: `expiresAt ${request.expiresAt.toISOString()} is not in the future (now ${now.toISOString()}): ` +
            "the key would be refused from its first request"
        })
      }
      return yield* create(organizationId, { ...request, createdBy: options.createdBy })
    })

    /** The organisation's keys in creation order; every one without a page (the CLI), else a page of them. */
    const list = Effect.fn("ApiKeys.list")((organizationId: OrganizationId, page?: Page) =>
      page === undefined
        ? findAll(ApiKey, sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ORDER BY id`)
        : Effect.zipRight(
          knownCursor(sql, "api_keys", organizationId, page),
          findAll(ApiKey, sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ${pageClause(sql, page)}`)
        ))

    const findKey = findByIdOr(sql, ApiKey, "api_keys", (id) => new ApiKeyNotFound({ message: `API key ${id} not found` }))
    const get = Effect.fn("ApiKeys.get")((organizationId: OrganizationId, id: string) => findKey(organizationId, id))

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

    /**
     * Revokes a key as the doors do (`billing key revoke`, `POST
     * /api-keys/{id}/revoke`), returning once every API process refuses it:
     * a process that heard the revocation's notification dropped the key at
     * once, one that missed it (or runs on the embedded database, which cannot
     * deliver it) trusts its cached copy for at most the cache's TTL after the
     * commit, so this waits that long. `by` is the key of the request that
     * revokes: a key does not revoke itself (`ApiKeyInUse`), so a request can
     * never lock out the caller that sent it. Revoking a revoked key changes
     * nothing and answers it as it is.
     */
    const revokeEverywhere = Effect.fn("ApiKeys.revokeEverywhere")(function*(
      organizationId: OrganizationId,
      id: string,
      options: { readonly by?: string | undefined } = {}
    ) {
      if (options.by === id) {
        return yield* new ApiKeyInUse({
          message: `API key ${id} is the key this request is made with: revoke it with another key of the organisation, ` +
            "or with `billing key revoke`"
        })
      }
      const revoked = yield* revoke(organizationId, id)
      yield* Effect.sleep(Duration.millis(defaultKeyCacheOptions.ttlMs))
      return revoked
    })

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

    return { create, issue, list, get, revoke, revokeEverywhere, authenticate, authenticateCached, cacheStats, organizationChanged } as const
  })
}) {}
