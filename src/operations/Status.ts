/**
 * What an operator watches: the signal queue (by state, with the age of the
 * oldest queued signal and the last minute's throughput), webhook deliveries
 * by state, and purchases with the next cycle due. One organisation at a time.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, orDie } from "../db/Sql.ts"
import { Timestamp } from "../schema.ts"
import type { OrganizationId } from "../ids.ts"

const CountRow = Schema.Struct({
  status: Schema.String,
  count: Schema.NumberFromString,
  oldest: Schema.NullOr(Timestamp)
})

export interface WorkStatus {
  readonly at: Date
  readonly signals: {
    readonly queued: number
    readonly pending: number
    readonly failed: number
    readonly processedLastMinute: number
    /** When the oldest queued signal was received; null when the queue is empty. */
    readonly oldestQueuedAt: Date | null
  }
  readonly deliveries: {
    readonly pending: number
    readonly failed: number
    readonly deliveredLastMinute: number
    readonly nextAttemptAt: Date | null
  }
  readonly purchases: {
    readonly active: number
    readonly scheduled: number
    /** The earliest end of an active purchase's cycle: when the cycle job next has work. */
    readonly nextCycleEnd: Date | null
  }
}

const countOf = (rows: ReadonlyArray<typeof CountRow.Type>, status: string) =>
  rows.find((row) => row.status === status)?.count ?? 0

const oldestOf = (rows: ReadonlyArray<typeof CountRow.Type>, status: string) =>
  rows.find((row) => row.status === status)?.oldest ?? null

export class OperationsStatus extends Effect.Service<OperationsStatus>()("OperationsStatus", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const snapshot = Effect.fn("OperationsStatus.snapshot")(function*(organizationId: OrganizationId) {
        const [signals, deliveries, purchases, now] = yield* Effect.all([
          findAll(
            CountRow,
            sql`SELECT status, count(*) AS count, min(received_at) AS oldest FROM signals
                WHERE organization_id = ${organizationId}
                  AND (status <> 'PROCESSED' OR processed_at > now() - interval '1 minute')
                GROUP BY status`
          ),
          findAll(
            CountRow,
            sql`SELECT status, count(*) AS count, min(next_attempt_at) AS oldest FROM webhook_deliveries
                WHERE organization_id = ${organizationId}
                  AND (status IN ('PENDING', 'FAILED') OR delivered_at > now() - interval '1 minute')
                GROUP BY status`
          ),
          findAll(
            CountRow,
            sql`SELECT status, count(*) AS count, min(period_end) AS oldest FROM purchases
                WHERE organization_id = ${organizationId} AND status IN ('ACTIVE', 'SCHEDULED')
                GROUP BY status`
          ),
          orDie(sql<{ now: Date }>`SELECT now() AS now`)
        ])
        const status: WorkStatus = {
          at: now[0]!.now,
          signals: {
            queued: countOf(signals, "QUEUED"),
            pending: countOf(signals, "PENDING"),
            failed: countOf(signals, "FAILED"),
            processedLastMinute: countOf(signals, "PROCESSED"),
            oldestQueuedAt: oldestOf(signals, "QUEUED")
          },
          deliveries: {
            pending: countOf(deliveries, "PENDING"),
            failed: countOf(deliveries, "FAILED"),
            deliveredLastMinute: countOf(deliveries, "DELIVERED"),
            nextAttemptAt: oldestOf(deliveries, "PENDING")
          },
          purchases: {
            active: countOf(purchases, "ACTIVE"),
            scheduled: countOf(purchases, "SCHEDULED"),
            nextCycleEnd: oldestOf(purchases, "ACTIVE")
          }
        }
        return status
      })

    return { snapshot } as const
  })
}) {}
