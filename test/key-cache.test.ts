/**
 * The API key cache (src/organizations/KeyCache.ts) on a running server: a
 * known key costs no round trip, and revocation, expiry and creation still
 * take effect within their bounds, whichever process changes the key.
 *
 * On PostgreSQL the server hears revocations through LISTEN/NOTIFY; on the
 * embedded database notifications cannot reach it (the socket serves one PGlite
 * session to every client, and a notification goes to the client whose
 * statement committed it), so there the cache's TTL is the bound.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fromUrl } from "../src/db/Database.ts"
import { makeId, randomToken } from "../src/ids.ts"
import { ApiKeys, hashKey } from "../src/organizations/ApiKeys.ts"
import { defaultKeyCacheOptions, isUsable, KeyCache, type KeyRecord } from "../src/organizations/KeyCache.ts"
import { eventually } from "./support/Eventually.ts"
import { expectError } from "./support/Http.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

const ttlMs = defaultKeyCacheOptions.ttlMs

let app: TestApp
let acme: Tenant
/** ApiKeys in a runtime of its own, on its own pool: another process, as far as the server can tell. */
let other: ManagedRuntime.ManagedRuntime<ApiKeys, unknown>

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  other = ManagedRuntime.make(ApiKeys.Default.pipe(Layer.provide(fromUrl(Redacted.make(app.databaseUrl), 2))))
  // The first authentication starts the change listener, which clears the
  // cache once it knows whether notifications arrive: let that settle first,
  // so that the counts below are the cache's alone.
  expect(await statusWith(acme.apiKey)).toBe(200)
  await eventually(async () => expect(["listening", "unavailable"]).toContain((await stats()).listener), {
    timeoutMs: 8000,
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

/** Polls until `key` is refused; the milliseconds from `since` to the first 401. */
const refusedWithin = async (key: string, since: number, timeoutMs = 1000) => {
  await eventually(async () => expect(await statusWith(key)).toBe(401), { timeoutMs, intervalMs: 10 })
  return Date.now() - since
}

describe("the key cache saves the round trip", () => {
  it("looks a key up about once per TTL, not once per request", async () => {
    const { secret } = await newKey()
    const before = await stats()
    const started = Date.now()
    const n = 30
    for (let i = 0; i < n; i++) expect(await statusWith(secret)).toBe(200)
    const elapsed = Date.now() - started
    const after = await stats()
    const lookups = after.lookups - before.lookups
    // One lookup, plus one more for each TTL that ran out during the loop.
    expect(lookups).toBeGreaterThanOrEqual(1)
    expect(lookups).toBeLessThanOrEqual(1 + Math.floor(elapsed / ttlMs))
    expect(lookups).toBeLessThan(n / 3)
    expect(after.hits - before.hits).toBe(n - lookups)
  })

  it("makes one lookup for concurrent first requests with the same key", async () => {
    const { secret } = await newKey()
    const before = await stats()
    const started = Date.now()
    const statuses = await Promise.all(Array.from({ length: 16 }, () => statusWith(secret)))
    const elapsed = Date.now() - started
    expect(statuses.every((status) => status === 200)).toBe(true)
    const lookups = (await stats()).lookups - before.lookups
    expect(lookups).toBeGreaterThanOrEqual(1)
    expect(lookups).toBeLessThanOrEqual(1 + Math.floor(elapsed / ttlMs))
  })
})

describe("revocation reaches a running server within a second", () => {
  it("refuses a key revoked by `billing key revoke` in another process within a second", async () => {
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200) // from the cache
    const revoked = await app.spawnCli(["key", "revoke", created.apiKey.id, "--org", acme.organizationId, "--json"])
    expect(revoked.code, revoked.stderr).toBe(0)
    expect(revoked.json.key.revokedAt).not.toBeNull()
    const returned = Date.now()
    expect(await refusedWithin(created.secret, returned)).toBeLessThan(1000)
    // And it stays refused (nothing re-caches the key as it was).
    for (let i = 0; i < 3; i++) expectError(await app.request("GET", "/customers", { key: created.secret }), 401)
  })

  it.runIf(usesRealPostgres)("hears a revocation committed on another connection through NOTIFY (PostgreSQL)", async () => {
    expect((await stats()).listener).toBe("listening")
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200)
    const before = await stats()
    const started = Date.now()
    await other.runPromise(Effect.flatMap(ApiKeys, (keys) => keys.revoke(acme.organizationId, created.apiKey.id)))
    expect(await refusedWithin(created.secret, started)).toBeLessThan(1000)
    // The server dropped the entry because it was told, not because it aged out.
    await eventually(async () => expect((await stats()).invalidations).toBeGreaterThan(before.invalidations), { timeoutMs: 1000 })
  })

  it.runIf(!usesRealPostgres)("finds that notifications do not reach it on the embedded database, and relies on the TTL", async () => {
    // The listener's echo (a pg_notify through the pool) never came back: see docs/api.md.
    expect((await stats()).listener).toBe("unavailable")
    const created = await newKey()
    expect(await statusWith(created.secret)).toBe(200)
    expect(await statusWith(created.secret)).toBe(200)
    const started = Date.now()
    await other.runPromise(Effect.flatMap(ApiKeys, (keys) => keys.revoke(acme.organizationId, created.apiKey.id)))
    expect(await refusedWithin(created.secret, started)).toBeLessThan(1000)
  })
})

describe("expiry", () => {
  it("accepts a cached key until its expiry instant and refuses it from then on", async () => {
    const expiresAt = new Date(Date.now() + 1500)
    const { secret } = await newKey({ expiresAt })
    const before = await stats()
    const seen: Array<{ sent: number; received: number; status: number }> = []
    while (Date.now() < expiresAt.getTime() + 300) {
      const sent = Date.now()
      const status = await statusWith(secret)
      seen.push({ sent, received: Date.now(), status })
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const deadline = expiresAt.getTime()
    // Answered before the expiry instant: accepted. Sent at or after it: refused.
    const early = seen.filter((r) => r.received < deadline)
    const late = seen.filter((r) => r.sent >= deadline)
    expect(early.length).toBeGreaterThan(5)
    expect(late.length).toBeGreaterThan(0)
    expect(early.map((r) => r.status)).toEqual(early.map(() => 200))
    expect(late.map((r) => r.status)).toEqual(late.map(() => 401))
    // Most answers came from the cache, including the refusals.
    const after = await stats()
    expect(after.lookups - before.lookups).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - seen[0]!.sent) / ttlMs))
    expect(after.hits - before.hits).toBeGreaterThan(seen.length / 2)
  })

  it("refuses a cached entry whose expiry has passed, without a lookup (the cache itself)", () => {
    const cache = new KeyCache({ ttlMs: 60_000, maxEntries: 10 })
    const now = Date.now()
    const key: KeyRecord = { organizationId: "org_x", apiKeyId: "key_x", expiresAt: new Date(now + 100), revokedAt: null }
    cache.put("h", key, cache.begin(), now)
    expect(isUsable(cache.get("h", now + 99)!, now + 99)).toBe(true)
    expect(isUsable(cache.get("h", now + 100)!, now + 100)).toBe(false)
    expect(cache.stats().lookups).toBe(1)
  })
})

describe("creation and unknown keys", () => {
  it("accepts a key created right after the same key was refused as unknown", async () => {
    const secret = `sk_${randomToken(24)}`
    expectError(await app.request("GET", "/customers", { key: secret }), 401)
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

describe("the cache's own rules", () => {
  const key: KeyRecord = { organizationId: "org_x", apiKeyId: "key_x", expiresAt: null, revokedAt: null }

  it("forgets an entry after its TTL", () => {
    const cache = new KeyCache({ ttlMs: 500, maxEntries: 10 })
    cache.put("h", key, cache.begin(), 1_000)
    expect(cache.get("h", 1_499)).toEqual(key)
    expect(cache.get("h", 1_500)).toBeUndefined()
  })

  it("does not store a lookup that began before an invalidation", () => {
    const cache = new KeyCache({ ttlMs: 500, maxEntries: 10 })
    const token = cache.begin()
    cache.invalidateKey("key_x") // a revocation heard while the lookup ran
    cache.put("h", key, token, Date.now())
    expect(cache.get("h", Date.now())).toBeUndefined()
  })

  it("drops an entry by its key id, and everything on clear", () => {
    const cache = new KeyCache({ ttlMs: 60_000, maxEntries: 10 })
    const now = Date.now()
    cache.put("h1", key, cache.begin(), now)
    cache.put("h2", { ...key, apiKeyId: "key_y" }, cache.begin(), now)
    cache.invalidateKey("key_x")
    expect(cache.get("h1", now)).toBeUndefined()
    expect(cache.get("h2", now)).toBeDefined()
    cache.clear()
    expect(cache.get("h2", now)).toBeUndefined()
  })

  it("keeps at most maxEntries, dropping the oldest", () => {
    const cache = new KeyCache({ ttlMs: 60_000, maxEntries: 2 })
    const now = Date.now()
    for (const id of ["a", "b", "c"]) cache.put(id, { ...key, apiKeyId: id }, cache.begin(), now)
    expect(cache.get("a", now)).toBeUndefined()
    expect(cache.get("c", now)).toBeDefined()
    expect(cache.stats().entries).toBe(2)
  })
})
