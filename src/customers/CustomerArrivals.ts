/**
 * What waits for an externalId to become a customer's: signals sent for an
 * externalId no customer held are kept PENDING until one does. Customers calls
 * `arrived` inside the transaction that gives an active customer the externalId
 * (a create, or a PATCH that sets it); the signals floor answers it
 * (src/signals/Requeue.ts) and the composition root wires the two. A port, not
 * an import: customers sits on a floor below signals.
 */
import type { SqlError } from "@effect/sql"
import { Context, type Effect } from "effect"

export class CustomerArrivals extends Context.Tag("CustomerArrivals")<CustomerArrivals, {
  readonly arrived: (organizationId: string, externalId: string) => Effect.Effect<void, SqlError.SqlError>
}>() {}
