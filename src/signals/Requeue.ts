import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { CustomerArrivals } from "../customers/CustomerArrivals.ts"
import { currentTime } from "../time.ts"

/**
 * Moves the PENDING signals of `externalId` back to the queue. Runs inside the
 * transaction of the customer that takes the externalId; the advisory lock
 * pairs with the worker's (SignalProcessor), so a signal being set PENDING
 * right now is either seen here or sees the new customer. The requeue's
 * moment, by the service's clock, is the moment of those without a timestamp
 * of their own (`momentColumns`): the usage is billed as sent now, in the cycle
 * the customer holds now, not refused for having been received before it.
 */
export const requeuePendingSignals = (sql: SqlClient.SqlClient, organizationId: string, externalId: string) =>
  Effect.gen(function*() {
    const at = yield* currentTime
    yield* sql`SELECT pg_advisory_xact_lock(hashtext(${organizationId}), hashtext(${externalId}))`
    yield* sql`UPDATE signals SET status = 'QUEUED', error_status = NULL, error_code = NULL, error_message = NULL,
                 requeued_at = ${at}
               WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND status = 'PENDING'`
  })

/** Customers' arrivals answered by signals: a new holder of an externalId takes its PENDING signals back to the queue. */
export const RequeueOnArrivalLive = Layer.effect(
  CustomerArrivals,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    arrived: (organizationId: string, externalId: string) => requeuePendingSignals(sql, organizationId, externalId)
  }))
)
