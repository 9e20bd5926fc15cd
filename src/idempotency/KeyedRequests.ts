/**
 * The records of the `Idempotency-Key` header (docs/api.md "Idempotency-Key
 * on every POST"; the door is src/http/IdempotencyKeyHeader.ts): per
 * organisation and key, the request a key was first used with (its
 * fingerprint) and, once that request ended, its answer.
 *
 * A key is claimed before its request runs: an `INSERT ... ON CONFLICT DO
 * NOTHING` that commits on its own, so that a concurrent repeat, in this
 * process or another, finds the claim and waits for its answer instead of
 * running the request a second time (the primary key decides the race). The
 * holder then completes the record with the answer, or releases it (deletes
 * it) when the answer is one a retry should not get again; both only under
 * its own `claim_token`, so a claim taken over is never completed by the
 * process that lost it.
 *
 * Times are the fiber's Clock (src/time.ts): a key is free again
 * `KEY_LIFETIME_MS` after its first use (expired on read here; the worker's
 * history job deletes the rows, `purgeExpiredKeys`), and a claim still
 * running after `CLAIM_LEASE_MS` is taken to be abandoned (its process died)
 * and may be taken over.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { findOne, orDie } from "../db/Sql.ts"
import { randomToken } from "../ids.ts"
import type { OrganizationId } from "../ids.ts"
import { currentTime } from "../time.ts"

/** How long a key answers with its first request's answer: 24 hours from its first use. */
export const KEY_LIFETIME_MS = 24 * 60 * 60_000

/**
 * How long a claim may run before a repeat takes it to be abandoned (the
 * process that held it died between its claim and its answer). Far above any
 * request's time: the longest one holds for `Prefer: wait=10`.
 */
export const CLAIM_LEASE_MS = 60_000

/** An answer as it is stored and replayed: its status, its headers worth replaying and its body. */
export interface StoredAnswer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** The request a key is claimed for. */
export interface KeyedRequest {
  readonly fingerprint: string
  readonly method: string
  readonly path: string
}

/** What a claim of a key found. */
export type ClaimOutcome =
  /** The key is the caller's: it runs the request, then `complete`s or `release`s under `token`. */
  | { readonly _tag: "Claimed"; readonly token: string }
  /** The key's first request ended with `answer`, which the repeat gets. */
  | { readonly _tag: "Answered"; readonly answer: StoredAnswer }
  /** The key's first request is still running. */
  | { readonly _tag: "InFlight" }
  /** The key was first used for another request (`first`). */
  | { readonly _tag: "Reused"; readonly first: { readonly method: string; readonly path: string; readonly createdAt: Date } }

const KeyRow = Schema.Struct({
  fingerprint: Schema.String,
  method: Schema.String,
  path: Schema.String,
  claimToken: Schema.String,
  createdAt: Schema.DateFromSelf,
  claimedAt: Schema.DateFromSelf,
  responseStatus: Schema.NullOr(Schema.Number),
  responseHeaders: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  responseBody: Schema.NullOr(Schema.String)
})

/** Attempts of one claim before it gives up on a key that keeps changing hands (never seen: a safety bound). */
const MAX_CLAIM_ATTEMPTS = 10

/** Rows deleted by one statement of the purge. */
export const PURGE_BATCH = 5_000

/**
 * Deletes the records of keys first used `KEY_LIFETIME_MS` or longer before
 * `now`, in statements of `PURGE_BATCH` rows; the number deleted. The
 * worker's history job runs it at each pass (src/history/HistoryJob.ts).
 */
export const purgeExpiredKeys = (sql: SqlClient.SqlClient, now: Date): Effect.Effect<number> =>
  Effect.gen(function*() {
    const cutoff = new Date(now.getTime() - KEY_LIFETIME_MS)
    let total = 0
    while (true) {
      const deleted = yield* orDie(sql<{ readonly n: number }>`
        WITH gone AS (
          DELETE FROM idempotent_requests
          WHERE (organization_id, idempotency_key) IN (
            SELECT organization_id, idempotency_key FROM idempotent_requests
            WHERE created_at <= ${cutoff} LIMIT ${PURGE_BATCH})
          RETURNING 1)
        SELECT count(*)::int AS n FROM gone`)
      const n = deleted[0]?.n ?? 0
      total += n
      if (n < PURGE_BATCH) return total
    }
  })

export class KeyedRequests extends Effect.Service<KeyedRequests>()("KeyedRequests", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const find = (organizationId: OrganizationId, key: string) =>
      findOne(
        KeyRow,
        sql`SELECT fingerprint, method, path, claim_token, created_at, claimed_at, response_status, response_headers, response_body
            FROM idempotent_requests WHERE organization_id = ${organizationId} AND idempotency_key = ${key}`
      )

    /** One attempt: the claim, or what holds the key; None when the key changed hands meanwhile (try again). */
    const attempt = (organizationId: OrganizationId, key: string, request: KeyedRequest) =>
      Effect.gen(function*() {
        const now = yield* currentTime
        const token = randomToken(16)
        const inserted = yield* orDie(sql`
          INSERT INTO idempotent_requests
            (organization_id, idempotency_key, fingerprint, method, path, claim_token, created_at, claimed_at)
          VALUES (${organizationId}, ${key}, ${request.fingerprint}, ${request.method}, ${request.path}, ${token}, ${now}, ${now})
          ON CONFLICT DO NOTHING RETURNING 1`)
        if (inserted.length > 0) return Option.some<ClaimOutcome>({ _tag: "Claimed", token })
        const found = yield* find(organizationId, key)
        // Released or purged between the insert and the read: claim again.
        if (Option.isNone(found)) return Option.none<ClaimOutcome>()
        const row = found.value
        if (now.getTime() - row.createdAt.getTime() >= KEY_LIFETIME_MS) {
          // An expired key is a new key: the request it is sent with now takes it, whatever the first one was.
          const renewed = yield* orDie(sql`
            UPDATE idempotent_requests
            SET fingerprint = ${request.fingerprint}, method = ${request.method}, path = ${request.path},
                claim_token = ${token}, created_at = ${now}, claimed_at = ${now},
                response_status = NULL, response_headers = NULL, response_body = NULL, completed_at = NULL
            WHERE organization_id = ${organizationId} AND idempotency_key = ${key} AND claim_token = ${row.claimToken}
            RETURNING 1`)
          return renewed.length > 0 ? Option.some<ClaimOutcome>({ _tag: "Claimed", token }) : Option.none<ClaimOutcome>()
        }
        if (row.fingerprint !== request.fingerprint) {
          return Option.some<ClaimOutcome>({ _tag: "Reused", first: { method: row.method, path: row.path, createdAt: row.createdAt } })
        }
        if (row.responseStatus !== null && row.responseBody !== null) {
          return Option.some<ClaimOutcome>({
            _tag: "Answered",
            answer: { status: row.responseStatus, headers: row.responseHeaders ?? {}, body: row.responseBody }
          })
        }
        if (now.getTime() - row.claimedAt.getTime() < CLAIM_LEASE_MS) return Option.some<ClaimOutcome>({ _tag: "InFlight" })
        // Abandoned: its holder never answered within the lease. The repeat takes it over and runs the request.
        const taken = yield* orDie(sql`
          UPDATE idempotent_requests SET claim_token = ${token}, claimed_at = ${now}
          WHERE organization_id = ${organizationId} AND idempotency_key = ${key}
            AND claim_token = ${row.claimToken} AND response_status IS NULL
          RETURNING 1`)
        return taken.length > 0 ? Option.some<ClaimOutcome>({ _tag: "Claimed", token }) : Option.none<ClaimOutcome>()
      })

    /** Claims `key` for `request`, or says what holds it. */
    const claim = Effect.fn("KeyedRequests.claim")(function*(organizationId: OrganizationId, key: string, request: KeyedRequest) {
      for (let i = 0; i < MAX_CLAIM_ATTEMPTS; i++) {
        const outcome = yield* attempt(organizationId, key, request)
        if (Option.isSome(outcome)) return outcome.value
      }
      return { _tag: "InFlight" } as ClaimOutcome
    })

    /** Records the answer of the claim `token`; false when the claim is no longer its own (taken over). */
    const complete = Effect.fn("KeyedRequests.complete")(function*(
      organizationId: OrganizationId,
      key: string,
      token: string,
      answer: StoredAnswer
    ) {
      const now = yield* currentTime
      const rows = yield* orDie(sql`
        UPDATE idempotent_requests
        SET response_status = ${answer.status}, response_headers = ${JSON.stringify(answer.headers)}::jsonb,
            response_body = ${answer.body}, completed_at = ${now}
        WHERE organization_id = ${organizationId} AND idempotency_key = ${key}
          AND claim_token = ${token} AND response_status IS NULL
        RETURNING 1`)
      return rows.length > 0
    })

    /** Gives the key up: the claim `token`'s request left nothing a retry should get again. */
    const release = Effect.fn("KeyedRequests.release")(function*(organizationId: OrganizationId, key: string, token: string) {
      yield* orDie(sql`
        DELETE FROM idempotent_requests
        WHERE organization_id = ${organizationId} AND idempotency_key = ${key}
          AND claim_token = ${token} AND response_status IS NULL`)
    })

    return { claim, complete, release } as const
  })
}) {}
