/**
 * The customers a batch's signals name, by id (any state) and as the active
 * holder of an externalId, each read once for the batch; the drain also waits
 * on an externalId nobody holds yet, so a customer taking it now is seen.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, orDie } from "../db/Sql.ts"
import { Timestamp } from "../schema.ts"
import { pairs, scoped } from "./BatchKeys.ts"
import type { SignalRecord } from "./ClaimedSignal.ts"
import { prepared } from "../db/Prepared.ts"

/** The customer fields the drain needs. */
export const Customer = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  archivedAt: Schema.NullOr(Timestamp)
})
export type Customer = typeof Customer.Type

export interface BatchCustomers {
  /** Every customer read, by `scoped(organizationId, id)`. */
  readonly byId: Map<string, Customer>
  /** The active holder of each externalId, by `scoped(organizationId, externalId)`. */
  readonly byExternalId: Map<string, Customer>
  /** The customer a signal names: by its customerId, else by its externalId. */
  readonly ofSignal: (record: SignalRecord) => Customer | undefined
}

/**
 * Reads the signals' customers, or takes `known` (as the claim read them, in
 * the batch's transaction) instead; `lock` (the drain's) waits on the
 * externalIds nobody holds.
 */
export const loadCustomers = (
  sql: SqlClient.SqlClient,
  records: ReadonlyArray<SignalRecord>,
  known: ReadonlyArray<Customer> | undefined,
  lock: boolean
) =>
  Effect.gen(function*() {
    // Customers: by id, and the active holder of each externalId.
    const byId = pairs(records.flatMap((r) => (r.customerId === null ? [] : [[r.organizationId, r.customerId] as const])))
    const byExternal = pairs(
      records.flatMap((r) => (r.customerId === null && r.externalId !== null ? [[r.organizationId, r.externalId] as const] : []))
    )
    const customers = known ?? (byId.size + byExternal.size === 0 ? [] : yield* findAll(
      Customer,
      prepared(sql)`SELECT organization_id, id, external_id, archived_at FROM customers WHERE (organization_id, id) IN (
            SELECT * FROM unnest(${byId.organizations}::text[], ${byId.keys}::text[]))
          UNION ALL
          SELECT organization_id, id, external_id, archived_at FROM customers
          WHERE archived_at IS NULL AND (organization_id, external_id) IN (
            SELECT * FROM unnest(${byExternal.organizations}::text[], ${byExternal.keys}::text[]))`
    ))
    const customerMap = new Map<string, Customer>()
    const externalMap = new Map<string, Customer>()
    for (const customer of customers) {
      customerMap.set(scoped(customer.organizationId, customer.id), customer)
      if (customer.externalId !== null && customer.archivedAt === null) {
        externalMap.set(scoped(customer.organizationId, customer.externalId), customer)
      }
    }
    // An externalId nobody holds yet: take the lock `requeuePendingSignals` takes and look again,
    // so a customer taking that externalId right now is either seen here or requeues the signal.
    for (let i = 0; lock && i < byExternal.size; i++) {
      const organizationId = byExternal.organizations[i]!
      const externalId = byExternal.keys[i]!
      if (externalMap.has(scoped(organizationId, externalId))) continue
      yield* orDie(sql`SELECT pg_advisory_xact_lock(hashtext(${organizationId}), hashtext(${externalId}))`)
      const found = yield* findAll(
        Customer,
        sql`SELECT organization_id, id, external_id, archived_at FROM customers
            WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND archived_at IS NULL`
      )
      for (const customer of found) {
        customerMap.set(scoped(organizationId, customer.id), customer)
        externalMap.set(scoped(organizationId, externalId), customer)
      }
    }

    const customerOfSignal = (r: SignalRecord) =>
      r.customerId !== null
        ? customerMap.get(scoped(r.organizationId, r.customerId))
        : r.externalId !== null
        ? externalMap.get(scoped(r.organizationId, r.externalId))
        : undefined

    const loaded: BatchCustomers = { byId: customerMap, byExternalId: externalMap, ofSignal: customerOfSignal }
    return loaded
  })
