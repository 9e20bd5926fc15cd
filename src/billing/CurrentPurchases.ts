/**
 * The customer's current purchase, as the completion routes read it (a
 * composite completion checks that the plan sells the composite). Usage is
 * priced by the signal worker only (src/signals/SignalProcessor.ts, the pure
 * meters in src/pricing/meters/), written through the ledger.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { findOne } from "../db/Sql.ts"
import { PurchaseRow } from "./Purchase.ts"
import type { PlanSnapshot } from "../pricing/PlanSnapshot.ts"
import type { OrganizationId } from "../ids.ts"

/** The customer's current purchase with its frozen snapshot. */
export interface CurrentPurchase {
  readonly id: string
  readonly customerId: string
  readonly planId: string
  readonly snapshot: PlanSnapshot
  readonly periodStart: Date
  readonly periodEnd: Date
}

export class CurrentPurchases extends Effect.Service<CurrentPurchases>()("CurrentPurchases", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The customer's ACTIVE purchase and its snapshot, or None. */
    const currentPurchase = Effect.fn("CurrentPurchases.currentPurchase")((organizationId: OrganizationId, customerId: string) =>
      Effect.map(
        findOne(
          PurchaseRow,
          sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                AND status = 'ACTIVE'`
        ),
        Option.map((row): CurrentPurchase => ({
          id: row.id,
          customerId: row.customerId,
          planId: row.planId,
          snapshot: row.snapshot,
          periodStart: row.periodStart!,
          periodEnd: row.periodEnd!
        }))
      ))

    return { currentPurchase } as const
  })
}) {}
