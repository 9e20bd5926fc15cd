/**
 * The API key cache (src/organizations/KeyCache.ts): a known key costs no
 * round trip, and revocation, expiry and creation still take effect within
 * their bounds, whichever process changes the key.
 *
 * Time is driven, not waited for: the cache reads the Clock its `ApiKeys`
 * layer was built with, so the TTL and expiry tests build the service under
 * `TestClock` (`it.effect`) and move time with `TestClock.adjust`/`setTime`.
 * The tests on the running server wait only for observed state (a 401, a
 * counter), bounded by a limit that only a stuck test reaches.
 *
 * On PostgreSQL the server hears revocations through LISTEN/NOTIFY; on the
 * embedded database notifications cannot reach it (the socket serves one PGlite
 * session to every client, and a notification goes to the client whose
 * statement committed it), so there the cache's TTL is the bound.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, ManagedRuntime, Redacted, TestClock } from "effect"
import { fromUrl } from "../src/db/Database.ts"
import { ApiKeyRefused } from "../src/errors.ts"
import { makeId, randomToken } from "../src/ids.ts"
import { ApiKeys, hashKey } from "../src/organizations/ApiKeys.ts"
import { defaultKeyCacheOptions, isUsable, KeyCache, type KeyRecord } from "../src/organizations/KeyCache.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { expectError } from "./support/Http.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"
import { OrganizationId } from "../src/ids.ts"

const ttlMs = defaultKeyCacheOptions.ttlMs
/** Only a stuck test waits this long for what it observes. */
const stuckMs = HANG_GUARD_MS

let app: TestApp
let acme: Tenant
/** ApiKeys in a runtime of its own, on its own pool: another process, as far as the server can tell. */
let other: ManagedRuntime.ManagedRuntime<ApiKeys | SqlClient.SqlClient, unknown>

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = ManagedRuntime.make(ApiKeys.Default.pipe(Layer.provideMerge(fromUrl(Redacted.make(app.databaseUrl), 2))))
  // The first authentication starts the change listener, which clears the
  // cache once it knows whether notifications arrive: let that settle first,
  // so that the counts below are the cache's alone.
  expect(await statusWith(acme.apiKey)).toBe(200)
  await eventually(async () => expect(["listening", "unavailable"]).toContain((await stats()).listener), {
    timeoutMs: stuckMs,
    intervalMs: 50
  })
})
afterAll(async () => {
  await other?.dispose()
  await app?.close()
})

const stats = () => app.run(Effect.flatMap(ApiKeys, (keys) => keys.cacheStats))
const statusWith = async (key: string) => (await app.request("GET", "/customers", { key })).status
const newKey = (options: { readonly expiresAt?: Date } = {}) =>
  app.run(Effect.flatMap(ApiKeys, (keys) => keys.create(acme.organizationId, { name: "cache", ...options })))

/** Polls until `key` is refused, for as long as only a stuck test takes. */
const refused = (key: string) =>
  eventually(async () => expect(await statusWith(key)).toBe(401), { timeoutMs: stuckMs, intervalMs: 10 })

describe("the key cache saves the round trip (the running server)", () => {
  it("answers a known key from the cache: at most one lookup per TTL that passes", async () => {
    const { secret } = await newKey()
    const before = await stats()
    const started = Date.now()
    const n = 30
    for (let i = 0; i < n; i++) expect(await statusWith(secret)).toBe(200)
    const elapsed = Date.now() - started
    const after = await stats()
    const lookups = after.lookups - before.lookups
    // Every request was either looked up or answered from the cache.
    expect(after.hits - before.hits).toBe(n - lookups)
    // One lookup, plus one for each TTL that ran out during the loop and each
    // whole-cache clear (a listener reconnecting). An upper bound that holds
    // however slow the host: the exact counts are driven by TestClock below.
    expect(lookups).toBeGreaterThanOrEqual(1)
    expect(lookups).toBeLessThanOrEqual(1 + Math.floor(elapsed / ttlMs) + (after.clears - before.clears))
  })
})

/**
 * `ApiKeys` built inside the test, under its TestClock, on a SQL client
 * alone: without a PgClient it starts no change listener, so (as on the
 * embedded database) nothing but the TTL and the expiry move an entry, and
 * only `TestClock` moves time.
 */
const underTestClock = <A, E>(body: (keys: ApiKeys) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const sql = yield* Effect.promise(() => other.runPromise(SqlClient.SqlClient))
    return yield* Effect.flatMap(ApiKeys, body).pipe(
      Effect.provide(ApiKeys.Default.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))))
    )
  })

/** An instant for the TestClock to start from (it starts at the epoch otherwise). */
const t0 = Date.parse("2026-06-01T12:00:00.000Z")

const createKey = (keys: ApiKeys, options: { readonly expiresAt?: Date } = {}) =>
  Effect.map(keys.create(acme.organizationId, { name: "clock", ...options }), ({ apiKey, secret }) => ({ apiKey, secret }))

/** What the lane gets from the cache alone: "ok", "refused", or "lookup" (the key must be looked up). */
const cachedAnswer = (keys: ApiKeys, secret: string) => {
  const answer = keys.authenticateCached(secret)
  return answer === undefined ? "lookup" : Either.isRight(answer) ? "ok" : "refused"
}

/** What the full server's authentication answers: "ok" or "refused". */
const answer = (keys: ApiKeys, secret: string) =>
  keys.authenticate(secret).pipe(
    Effect.as("ok" as const),
    Effect.catchIf((error) => error instanceof ApiKeyRefused, () => Effect.succeed("refused" as const))
  )

describe("the TTL, driven by TestClock", () => {
  it.effect("looks a key up once per TTL, however many requests come within it, and again when it has passed", () =>
    underTestClock((keys) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(t0)
        const { secret } = yield* createKey(keys)
        const before = yield* keys.cacheStats
        for (let i = 0; i < 30; i++) expect(yield* answer(keys, secret)).toBe("ok")
        let now = yield* keys.cacheStats
        expect([now.lookups - before.lookups, now.hits - before.hits]).toEqual([1, 29])

        // Still within the TTL one millisecond before it runs out: from the cache, on both doors.
        yield* TestClock.adjust(ttlMs - 1)
        expect(cachedAnswer(keys, secret)).toBe("ok")
        expect(yield* answer(keys, secret)).toBe("ok")
        expect((yield* keys.cacheStats).lookups - before.lookups).toBe(1)

        // At the TTL the entry is stale: the lane hands the key to a lookup, which refreshes it.
        yield* TestClock.adjust(1)
        expect(cachedAnswer(keys, secret)).toBe("lookup")
        expect(yield* answer(keys, secret)).toBe("ok")
        expect(cachedAnswer(keys, secret)).toBe("ok")
        now = yield* keys.cacheStats
        expect(now.lookups - before.lookups).toBe(2)
      })
    ))

  it.effect("makes one lookup for concurrent first requests with the same key", () =>
    underTestClock((keys) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(t0)
        const { secret } = yield* createKey(keys)
        const before = yield* keys.cacheStats
        const answers = yield* Effect.all(Array.from({ length: 16 }, () => answer(keys, secret)), { concurrency: "unbounded" })
        expect(answers).toEqual(answers.map(() => "ok"))
        expect((yield* keys.cacheStats).lookups - before.lookups).toBe(1)
      })
    ))

  it.effect("refuses a key revoked elsewhere once the TTL has passed, with no notification at all", () =>
    underTestClock((keys) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(t0)
        const { apiKey, secret } = yield* createKey(keys)
        expect(yield* answer(keys, secret)).toBe("ok")
        // Revoked by another process: nothing tells this cache.
        yield* Effect.promise(() => other.runPromise(Effect.flatMap(ApiKeys, (o) => o.revoke(acme.organizationId, apiKey.id))))
        // The entry read before the revocation is trusted for the rest of its TTL, and no longer.
        yield* TestClock.adjust(ttlMs - 1)
        expect(cachedAnswer(keys, secret)).toBe("ok")
        yield* TestClock.adjust(1)
        expect(yield* answer(keys, secret)).toBe("refused")
        expect(cachedAnswer(keys, secret)).toBe("refused") // the revoked row, now from the cache
      })
    ))
})

describe("expiry, driven by TestClock", () => {
  it.effect("accepts a cached key until its expiry instant and refuses it from then on, from the cache", () =>
    underTestClock((keys) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(t0)
        const expiresAt = new Date(t0 + 3 * ttlMs)
        const { secret } = yield* createKey(keys, { expiresAt })
        const before = yield* keys.cacheStats
        expect(yield* answer(keys, secret)).toBe("ok")
        // A lookup shortly before the expiry instant: the entry it stores outlives the key.
        yield* TestClock.setTime(expiresAt.getTime() - ttlMs / 2)
        expect(yield* answer(keys, secret)).toBe("ok")
        expect((yield* keys.cacheStats).lookups - before.lookups).toBe(2)
        yield* TestClock.setTime(expiresAt.getTime() - 1)
        expect(cachedAnswer(keys, secret)).toBe("ok")
        expect(yield* answer(keys, secret)).toBe("ok")
        // At the expiry instant: refused by both doors from the cache, without a lookup.
        yield* TestClock.adjust(1)
        expect(cachedAnswer(keys, secret)).toBe("refused")
        expect(yield* answer(keys, secret)).toBe("refused")
        const after = yield* keys.cacheStats
        expect(after.lookups - before.lookups).toBe(2)
        expect(after.hits - before.hits).toBe(4)
      })
    ))

  it.effect("refuses a key looked up after its expiry instant", () =>
    underTestClock((keys) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(t0)
        const { secret } = yield* createKey(keys, { expiresAt: new Date(t0) })
        expect(yield* answer(keys, secret)).toBe("refused")
      })
    ))

  it("refuses an expired key and accepts one not yet expired (the running server)", async () => {
    const expired = await newKey({ expiresAt: new Date(Date.now() - 60_000) })
    expectError(await app.request("GET", "/customers", { key: expired.secret }), 401, "api_key_refused")
    const valid = await newKey({ expiresAt: new Date(Date.now() + 3_600_000) })
    expect(await statusWith(valid.secret)).toBe(200)
  })
})

describe("revocation reaches a running server within a second", () => {
  // The second: notifications on PostgreSQL (observed below), and everywhere
  // the TTL of 0.5 s (exact, under TestClock, above), leaving room for the request.
  it("bounds a revocation nobody is told of by the TTL: at most 0.5 s", () => {
    expect(ttlMs).toBeLessThanOrEqual(500)
  })

  it("refuses a key revoked by `billing key revoke` in another process", async () => {
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200)
    const revoked = await app.spawnCli(["key", "revoke", created.apiKey.id, "--org", acme.organizationId, "--json"])
    expect(revoked.code, revoked.stderr).toBe(0)
    expect(revoked.json.key.revokedAt).not.toBeNull()
    await refused(created.secret)
    // And it stays refused (nothing re-caches the key as it was).
    for (let i = 0; i < 3; i++) expectError(await app.request("GET", "/customers", { key: created.secret }), 401, "api_key_refused")
  })

  it.runIf(usesRealPostgres)("hears a revocation committed on another connection through NOTIFY (PostgreSQL)", async () => {
    expect((await stats()).listener).toBe("listening")
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200)
    const before = await stats()
    await other.runPromise(Effect.flatMap(ApiKeys, (keys) => keys.revoke(acme.organizationId, created.apiKey.id)))
    // The server drops the entry because it is told: the next request looks the key up and is refused.
    await eventually(async () => expect((await stats()).invalidations).toBeGreaterThan(before.invalidations), {
      timeoutMs: stuckMs
    })
    expect(await statusWith(created.secret)).toBe(401)
    expect((await stats()).clears).toBe(before.clears)
  })

  it.runIf(!usesRealPostgres)("finds that notifications do not reach it on the embedded database, and relies on the TTL", async () => {
    // The listener's echo (a pg_notify through the pool) never came back: see docs/api.md.
    expect((await stats()).listener).toBe("unavailable")
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200)
    await other.runPromise(Effect.flatMap(ApiKeys, (keys) => keys.revoke(acme.organizationId, created.apiKey.id)))
    await refused(created.secret)
  })
})

describe("creation and unknown keys", () => {
  it("accepts a key created right after the same key was refused as unknown", async () => {
    const secret = `sk_${randomToken(24)}`
    expectError(await app.request("GET", "/customers", { key: secret }), 401, "api_key_refused")
    // Created by another process (not through ApiKeys.create, which picks its own secret).
    await app.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`INSERT INTO api_keys (organization_id, id, name, key_hash, key_prefix)
          VALUES (${acme.organizationId}, ${makeId("key")}, 'late', ${hashKey(secret)}, ${secret.slice(0, 10)})`))
    expect(await statusWith(secret)).toBe(200)
  })

  it("accepts a key from `billing key create` at once", async () => {
    const created = await app.spawnCli(["key", "create", "--org", acme.organizationId, "--json"])
    expect(created.code, created.stderr).toBe(0)
    expect(await statusWith(created.json.apiKey)).toBe(200)
  })
})

describe("the cache's own rules (its clock injected)", () => {
  const key: KeyRecord = { organizationId: OrganizationId.make("org_x"), apiKeyId: "key_x", expiresAt: null, revokedAt: null }
  /** A cache on a clock the test sets. */
  const cacheAt = (start: number, options: { readonly ttlMs: number; readonly maxEntries: number }) => {
    const clock = { now: start }
    return { clock, cache: new KeyCache(options, () => clock.now) }
  }

  it("forgets an entry after its TTL", () => {
    const { cache, clock } = cacheAt(1_000, { ttlMs: 500, maxEntries: 10 })
    cache.put("h", key, cache.begin(), cache.now())
    clock.now = 1_499
    expect(cache.get("h")).toEqual(key)
    clock.now = 1_500
    expect(cache.get("h")).toBeUndefined()
  })

  it("refuses a cached entry whose expiry has passed, without a lookup", () => {
    const { cache, clock } = cacheAt(t0, { ttlMs: 60_000, maxEntries: 10 })
    const expiring: KeyRecord = { ...key, expiresAt: new Date(t0 + 100) }
    cache.put("h", expiring, cache.begin(), cache.now())
    clock.now = t0 + 99
    expect(isUsable(cache.get("h")!, cache.now())).toBe(true)
    clock.now = t0 + 100
    expect(isUsable(cache.get("h")!, cache.now())).toBe(false)
    expect(cache.stats().lookups).toBe(1)
  })

  it("does not store a lookup that began before an invalidation", () => {
    const { cache } = cacheAt(t0, { ttlMs: 500, maxEntries: 10 })
    const token = cache.begin()
    cache.invalidateKey("key_x") // a revocation heard while the lookup ran
    cache.put("h", key, token, cache.now())
    expect(cache.get("h")).toBeUndefined()
  })

  it("drops an entry by its key id, and everything on clear", () => {
    const { cache } = cacheAt(t0, { ttlMs: 60_000, maxEntries: 10 })
    cache.put("h1", key, cache.begin(), cache.now())
    cache.put("h2", { ...key, apiKeyId: "key_y" }, cache.begin(), cache.now())
    cache.invalidateKey("key_x")
    expect(cache.get("h1")).toBeUndefined()
    expect(cache.get("h2")).toBeDefined()
    cache.clear()
    expect(cache.get("h2")).toBeUndefined()
  })

  it("keeps at most maxEntries, dropping the oldest", () => {
    const { cache } = cacheAt(t0, { ttlMs: 60_000, maxEntries: 2 })
    for (const id of ["a", "b", "c"]) cache.put(id, { ...key, apiKeyId: id }, cache.begin(), cache.now())
    expect(cache.get("a")).toBeUndefined()
    expect(cache.get("c")).toBeDefined()
    expect(cache.stats().entries).toBe(2)
  })

  it("reads the time from the clock it is given, and from Date.now by default", () => {
    expect(new KeyCache().now).toBe(Date.now)
  })
})
