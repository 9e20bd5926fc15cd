/**
 * Customers left out of this process's claims because a signal of theirs
 * waits for its purchase's renewal (its moment is at or after the ACTIVE
 * purchase's period_end), by `org/customerId`. Held in memory: a claim
 * looks, in one statement and only while some wait, whether those
 * purchases renewed (period_end moved, or no longer ACTIVE) and lets
 * their customers back in. So waiting signals stay QUEUED without being
 * claimed over and over, `worker --once` ends with them queued, and the
 * next worker (or the same one after the cycle job ran) prices them. A
 * new process claims them once more, and defers them again.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { Timestamp } from "../schema.ts"
import type { Waiting } from "./SignalEnd.ts"

const PurchaseEnd = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  status: Schema.String,
  periodEnd: Schema.NullOr(Timestamp)
})

export const makeDeferrals = (sql: SqlClient.SqlClient) => {
  const deferred = new Map<string, Waiting>()

  /** Leaves out of the claims the customers of signals a committed batch found waiting. */
  const defer = (waiting: ReadonlyArray<Waiting>) =>
    Effect.sync(() => {
      for (const wait of waiting) deferred.set(`${wait.organizationId}/${wait.customerId}`, wait)
    })

  /** The keys the claim leaves out: `org/customerId` and `org/ext:externalId` of each deferred customer. */
  const keys = () => {
    const keys: Array<string> = []
    for (const waiting of deferred.values()) {
      keys.push(`${waiting.organizationId}/${waiting.customerId}`)
      if (waiting.externalId !== null) keys.push(`${waiting.organizationId}/ext:${waiting.externalId}`)
    }
    return keys
  }

  /** A filter on `signals` rows leaving deferred customers out; empty (nothing to plan) when none wait. */
  const notDeferred = (keys: ReadonlyArray<string>) =>
    keys.length === 0
      ? sql.literal("")
      : sql`AND NOT (organization_id || '/' || coalesce(customer_id, 'ext:' || external_id) = ANY(${keys}::text[]))`

  /** Lets back in the customers whose purchase renewed (or ended): one statement, only while some wait. */
  const lapse = Effect.suspend(() => {
    if (deferred.size === 0) return Effect.void
    const waiting = [...deferred.values()]
    return Effect.map(
      findAll(
        PurchaseEnd,
        sql`SELECT organization_id, id, status, period_end FROM purchases WHERE (organization_id, id) IN (
                SELECT * FROM unnest(${waiting.map((w) => w.organizationId)}::text[], ${waiting.map((w) => w.purchaseId)}::text[]))`
      ),
      (rows) => {
        const now = new Map(rows.map((row) => [`${row.organizationId}/${row.id}`, row]))
        for (const [key, wait] of deferred) {
          const row = now.get(`${wait.organizationId}/${wait.purchaseId}`)
          if (
            row === undefined || row.status !== "ACTIVE" || row.periodEnd === null ||
            row.periodEnd.getTime() !== wait.periodEnd.getTime()
          ) deferred.delete(key)
        }
      }
    )
  })

  return { defer, keys, notDeferred, lapse } as const
}
