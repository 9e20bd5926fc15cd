/**
 * The two read models of a customer's money: "Customer balances" and
 * "Current plan", in exactly the spec's shapes. They read the maintained
 * counters (purchase_balances, wallets), never sums over history.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { findAll, findOne } from "../db/Sql.ts"
import { type Decimal, ONE, sum, ZERO } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { BalanceRow, PurchaseRow } from "./Purchase.ts"
import type { ComponentType, SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import { Wallets } from "./Wallets.ts"
import { type CustomerId, type OrganizationId } from "../ids.ts"

const Currency = Schema.Struct({ code: Schema.String, rateUsd: Money })

export const CustomerBalances = Schema.Struct({
  customerId: Schema.String,
  currency: Currency,
  hasPlan: Schema.Boolean,
  wallet: Schema.Struct({ balance: Money, reservedBalance: Schema.optional(Money) }),
  credits: Schema.Array(Schema.Struct({
    creditId: Schema.String,
    agentKey: Schema.String,
    creditName: Schema.String,
    granted: Money,
    used: Money,
    remaining: Money
  })),
  outcomes: Schema.Array(Schema.Struct({
    outcomeId: Schema.String,
    outcomeName: Schema.String,
    granted: Money,
    used: Money,
    remaining: Money,
    steps: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String, agentKey: Schema.String }))
  })),
  units: Schema.Array(Schema.Struct({
    unitId: Schema.String,
    agentKey: Schema.String,
    unitName: Schema.String,
    granted: Money,
    used: Money,
    remaining: Money
  })),
  composites: Schema.Array(Schema.Struct({
    compositeId: Schema.String,
    refId: Schema.String,
    name: Schema.String,
    granted: Money,
    used: Money,
    remaining: Money,
    originalGranted: Schema.NullOr(Money)
  }))
})
export type CustomerBalances = typeof CustomerBalances.Type

export const CurrentPlan = Schema.Struct({
  customerId: Schema.String,
  currency: Currency,
  plan: Schema.NullOr(Schema.Struct({
    purchaseId: Schema.String,
    planId: Schema.String,
    planName: Schema.String,
    planType: Schema.String,
    planKind: Schema.String,
    seatScope: Schema.String,
    billingCycle: Schema.String,
    cost: Money,
    status: Schema.String,
    billingDate: Timestamp,
    spendingLimit: Money,
    spentThisCycle: Money,
    meters: Schema.Struct({ wallet: Schema.Boolean, credit: Schema.Boolean, outcome: Schema.Boolean, unit: Schema.Boolean })
  }))
})
export type CurrentPlan = typeof CurrentPlan.Type

/** One allowance of the current cycle, any kind, with what was used of it (the portal's bars). */
export interface Allowance {
  readonly kind: "CREDIT" | "OUTCOME" | "UNIT" | "COMPOSITE"
  readonly name: string
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
}

interface TargetTotals {
  readonly component: SnapshotComponent
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
  readonly originalGranted: Decimal | null
}

/** One row per target: the ADVANCE allowance, and what every component of the target used. */
const totalsByTarget = (
  components: ReadonlyArray<SnapshotComponent>,
  rows: ReadonlyArray<BalanceRow>,
  type: ComponentType
): Array<TargetTotals> => {
  const targets = [...new Set(components.filter((c) => c.type === type).map((c) => c.targetId ?? ""))]
  return targets.map((targetId) => {
    const own = components.filter((c) => c.type === type && c.targetId === targetId)
    const rowsOf = rows.filter((row) => own.some((c) => c.id === row.componentId))
    const advance = rowsOf.find((row) => row.billingMode === "ADVANCE")
    return {
      component: own.find((c) => c.billingMode === "ADVANCE") ?? own[0]!,
      granted: advance?.granted ?? ZERO,
      used: sum(rowsOf.map((row) => row.used)),
      remaining: advance?.remaining ?? ZERO,
      originalGranted: advance?.originalGranted ?? null
    }
  })
}

/** The service bills in USD; no exchange-rate table exists, so every currency reports rate 1. */
const currencyOf = (code: string) => ({ code, rateUsd: ONE })

export class Balances extends Effect.Service<Balances>()("Balances", {
  dependencies: [Customers.Default, Wallets.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const customers = yield* Customers
    const wallets = yield* Wallets

    const livePurchase = (organizationId: OrganizationId, customerId: CustomerId, statuses: ReadonlyArray<string>) =>
      findOne(
        PurchaseRow,
        sql`SELECT * FROM purchases WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
              AND ${sql.in("status", statuses)} ORDER BY id DESC LIMIT 1`
      )

    const balances = Effect.fn("Balances.balances")(function*(organizationId: OrganizationId, customerId: CustomerId) {
        const customer = yield* customers.get(organizationId, customerId)
        const wallet = yield* wallets.get(organizationId, customerId)
        const [settings] = yield* Effect.orDie(sql<{ reservedWalletEnabled: boolean }>`
          SELECT reserved_wallet_enabled FROM organizations WHERE id = ${organizationId}`)
        const purchase = yield* livePurchase(organizationId, customerId, ["ACTIVE"])
        const walletView = settings?.reservedWalletEnabled
          ? { balance: wallet.balance, reservedBalance: wallet.reservedBalance }
          : { balance: wallet.balance }
        const base = { customerId, currency: currencyOf(customer.currencyCode), wallet: walletView }
        if (Option.isNone(purchase)) {
          return { ...base, hasPlan: false, credits: [], outcomes: [], units: [], composites: [] } satisfies CustomerBalances
        }
        const rows = yield* findAll(
          BalanceRow,
          sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId}
                AND purchase_id = ${purchase.value.id} ORDER BY component_id`
        )
        const { components } = purchase.value.snapshot
        return {
          ...base,
          hasPlan: true,
          credits: totalsByTarget(components, rows, "CREDIT").map((t) => ({
            creditId: t.component.targetId ?? "",
            agentKey: t.component.agentKey ?? "",
            creditName: t.component.targetName,
            granted: t.granted,
            used: t.used,
            remaining: t.remaining
          })),
          outcomes: totalsByTarget(components, rows, "OUTCOME").map((t) => ({
            outcomeId: t.component.targetId ?? "",
            outcomeName: t.component.targetName,
            granted: t.granted,
            used: t.used,
            remaining: t.remaining,
            steps: t.component.steps
          })),
          units: totalsByTarget(components, rows, "UNIT").map((t) => ({
            unitId: t.component.targetId ?? "",
            agentKey: t.component.agentKey ?? "",
            unitName: t.component.targetName,
            granted: t.granted,
            used: t.used,
            remaining: t.remaining
          })),
          composites: totalsByTarget(components, rows, "PRICING_METRIC").map((t) => ({
            compositeId: t.component.targetId ?? "",
            refId: t.component.agentKey ?? "",
            name: t.component.targetName,
            granted: t.granted,
            used: t.used,
            remaining: t.remaining,
            originalGranted: t.originalGranted
          }))
        } satisfies CustomerBalances
      })

    const currentPlan = Effect.fn("Balances.currentPlan")(function*(organizationId: OrganizationId, customerId: CustomerId) {
        const customer = yield* customers.get(organizationId, customerId)
        const found = yield* livePurchase(organizationId, customerId, ["SCHEDULED", "ACTIVE"])
        const currency = currencyOf(customer.currencyCode)
        if (Option.isNone(found)) return { customerId, currency, plan: null } satisfies CurrentPlan
        const purchase = found.value
        const { components } = purchase.snapshot
        const sells = (type: ComponentType, covered: (c: SnapshotComponent) => ReadonlyArray<string>) =>
          components.some((c) => c.type === type || (c.type === "PRICING_METRIC" && covered(c).length > 0))
        return {
          customerId,
          currency,
          plan: {
            purchaseId: purchase.id,
            planId: purchase.planId,
            planName: purchase.snapshot.name,
            planType: "BUNDLE",
            planKind: "FLAT_PRICE",
            seatScope: "CUSTOMER",
            billingCycle: purchase.snapshot.billingCycle,
            cost: purchase.snapshot.cost,
            status: purchase.status,
            billingDate: purchase.periodStart ?? purchase.billingDate,
            spendingLimit: ZERO,
            spentThisCycle: purchase.spentThisCycle,
            meters: {
              wallet: components.some((c) => c.type === "WALLET"),
              credit: sells("CREDIT", (c) => c.covers.credits),
              outcome: sells("OUTCOME", (c) => c.covers.outcomes),
              unit: sells("UNIT", (c) => c.covers.units)
            }
          }
        } satisfies CurrentPlan
      })

    /** Every allowance of the customer's ACTIVE purchase, any kind, with `used` (the portal's bars). */
    const allowances = Effect.fn("Balances.allowances")(function*(organizationId: OrganizationId, customerId: CustomerId) {
        yield* customers.get(organizationId, customerId)
        const purchase = yield* livePurchase(organizationId, customerId, ["ACTIVE"])
        if (Option.isNone(purchase)) return [] as Array<Allowance>
        const rows = yield* findAll(
          BalanceRow,
          sql`SELECT * FROM purchase_balances WHERE organization_id = ${organizationId}
                AND purchase_id = ${purchase.value.id} ORDER BY component_id`
        )
        const { components } = purchase.value.snapshot
        const kinds = [["CREDIT", "CREDIT"], ["OUTCOME", "OUTCOME"], ["UNIT", "UNIT"], ["PRICING_METRIC", "COMPOSITE"]] as const
        return kinds.flatMap(([type, kind]) =>
          totalsByTarget(components, rows, type).map((t): Allowance => ({
            kind,
            name: t.component.targetName,
            granted: t.granted,
            used: t.used,
            remaining: t.remaining
          }))
        )
      })

    return { balances, currentPlan, allowances } as const
  })
}) {}
