import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { CustomerArrivals } from "../customers/CustomerArrivals.ts"

/**
 * Moves the PENDING signals of `externalId` back to the queue. Runs inside the
 * transaction of the customer that takes the externalId; the advisory lock
 * pairs with the worker's (SignalProcessor), so a signal being set PENDING
 * right now is either seen here or sees the new customer.
 */
export const requeuePendingSignals = (sql: SqlClient.SqlClient, organizationId: string, externalId: string) =>
  Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(hashtext(${organizationId}), hashtext(${externalId}))`
    yield* sql`UPDATE signals SET status = 'QUEUED', error_status = NULL, error_code = NULL, error_message = NULL
               WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND status = 'PENDING'`
  })

/** Customers' arrivals answered by signals: a new holder of an externalId takes its PENDING signals back to the queue. */
export const RequeueOnArrivalLive = Layer.effect(
  CustomerArrivals,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    arrived: (organizationId: string, externalId: string) => requeuePendingSignals(sql, organizationId, externalId)
  }))
)
