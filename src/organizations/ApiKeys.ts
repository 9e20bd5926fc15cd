/**
 * API keys: `sk_` + 192 random bits, shown once at creation and stored only as
 * a SHA-256 hash. A key may expire or be revoked; either makes it a 401.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { findAll, findOne, orDie } from "../db/Sql.ts"
import { NotFound, Unauthorized } from "../errors.ts"
import { makeId, randomToken } from "../ids.ts"

export const hashKey = (key: string) => createHash("sha256").update(key).digest("hex")

export class ApiKey extends Schema.Class<ApiKey>("ApiKey")({
  id: Schema.String,
  organizationId: Schema.String,
  name: Schema.String,
  keyPrefix: Schema.String,
  createdAt: Schema.DateFromSelf,
  expiresAt: Schema.NullOr(Schema.DateFromSelf),
  revokedAt: Schema.NullOr(Schema.DateFromSelf),
  lastUsedAt: Schema.NullOr(Schema.DateFromSelf)
}) {}

export interface Caller {
  readonly organizationId: string
  readonly apiKeyId: string
}

export class ApiKeys extends Effect.Service<ApiKeys>()("ApiKeys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const create = (organizationId: string, options: { readonly name?: string; readonly expiresAt?: Date | undefined }) =>
      Effect.gen(function*() {
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

    const list = (organizationId: string) =>
      findAll(ApiKey, sql`SELECT * FROM api_keys WHERE organization_id = ${organizationId} ORDER BY id`)

    const revoke = (organizationId: string, id: string) =>
      Effect.flatMap(
        findOne(
          ApiKey,
          sql`UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
              WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`
        ),
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: `API key ${id} not found` })),
          onSome: Effect.succeed
        })
      )

    /** The organisation a presented key belongs to, or 401. */
    const authenticate = (secret: string): Effect.Effect<Caller, Unauthorized> =>
      Effect.gen(function*() {
        const rows = yield* orDie(
          sql<{ id: string; organizationId: string }>`
            SELECT id, organization_id FROM api_keys
            WHERE key_hash = ${hashKey(secret)}
              AND revoked_at IS NULL
              AND (expires_at IS NULL OR expires_at > now())`
        )
        const row = rows[0]
        if (!row) return yield* new Unauthorized({ message: "The API key is missing, unknown, revoked or expired" })
        return { organizationId: row.organizationId, apiKeyId: row.id }
      })

    return { create, list, revoke, authenticate } as const
  })
}) {}
