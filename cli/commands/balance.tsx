import type { Command } from "commander"
import { BigDecimal, Effect, Layer, Schema } from "effect"
import { Balances, CurrentPlan, CustomerBalances } from "../../src/billing/Balances.ts"
import { Hold } from "../../src/entitlements/Entitlement.ts"
import { Entitlements } from "../../src/entitlements/Entitlements.ts"
import { Box } from "../ui/ink.ts"
import { Details, Table } from "../ui/Table.tsx"
import { encode, organizationOf, runnerOn } from "../run.ts"
import { customerIdOf, withCustomer } from "../customerRef.ts"
import { BillingCommandServices } from "../commandServices.ts"

const run = runnerOn(BillingCommandServices)
/** `balance show` also lists the customer's active spend holds. */
const runShow = runnerOn(Layer.merge(BillingCommandServices, Entitlements.Default))

/** The balances with the customer's active holds (`POST /entitlements/check` with `reserve`). */
const BalancesWithHolds = Schema.Struct({ ...CustomerBalances.fields, holds: Schema.Array(Hold) })

interface CustomerOptions {
  readonly json?: boolean
  readonly org?: string
  readonly externalId?: string
}

export const registerBalance = (program: Command) => {
  const balance = program.command("balance").description("a customer's balances and current plan")

  withCustomer(balance.command("show").description("the customer's balances and active spend holds"))
    .action((id: string | undefined, options: CustomerOptions) =>
      runShow(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          const balances = yield* Effect.flatMap(Balances, (balances) => balances.balances(organizationId, customerId))
          const holds = yield* Effect.flatMap(Entitlements, (entitlements) => entitlements.activeHolds(organizationId, customerId))
          return { ...balances, holds }
        }),
        {
          json: encode(BalancesWithHolds),
          view: (b) => (
            <Box flexDirection="column">
              <Table
                title={`Balances of ${b.customerId}: wallet ${BigDecimal.format(b.wallet.balance)} USD`}
                columns={[
                  { header: "KIND", value: (row) => row.kind },
                  { header: "NAME", value: (row) => row.name },
                  { header: "GRANTED", value: (row) => row.granted, align: "right" },
                  // As the API: every kind carries `used`, the ADVANCE and ARREAR use of the cycle.
                  { header: "USED", value: (row) => row.used, align: "right" },
                  { header: "REMAINING", value: (row) => row.remaining, align: "right" }
                ]}
                rows={[
                  ...b.credits.map((c) => ({ kind: "credit", name: c.creditName, granted: c.granted, used: c.used, remaining: c.remaining })),
                  ...b.outcomes.map((o) => ({ kind: "outcome", name: o.outcomeName, granted: o.granted, used: o.used, remaining: o.remaining })),
                  ...b.units.map((u) => ({ kind: "unit", name: u.unitName, granted: u.granted, used: u.used, remaining: u.remaining })),
                  ...b.composites.map((c) => ({ kind: "composite", name: c.name, granted: c.granted, used: c.used, remaining: c.remaining }))
                ].map((row) => ({
                  ...row,
                  granted: BigDecimal.format(row.granted),
                  used: BigDecimal.format(row.used),
                  remaining: BigDecimal.format(row.remaining)
                }))}
                footer={b.hasPlan ? undefined : "no active plan"}
              />
              <Table
                title="Active holds"
                columns={[
                  { header: "ID", value: (hold) => hold.id },
                  { header: "METER", value: (hold) => hold.meter },
                  { header: "TARGET", value: (hold) => hold.targetId ?? "wallet" },
                  { header: "AMOUNT", value: (hold) => BigDecimal.format(hold.amount), align: "right" },
                  { header: "EXPIRES", value: (hold) => hold.expiresAt.toISOString() }
                ]}
                rows={b.holds}
              />
            </Box>
          )
        }
      )
    )

  withCustomer(balance.command("plan").description("the customer's current plan"))
    .action((id: string | undefined, options: CustomerOptions) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          return yield* Effect.flatMap(Balances, (balances) => balances.currentPlan(organizationId, customerId))
        }),
        {
          json: encode(CurrentPlan),
          view: (current) =>
            current.plan === null
              ? <Details title={`Customer ${current.customerId}`} fields={[["plan", "none"]]} />
              : (
                <Details
                  title={`Current plan of ${current.customerId}`}
                  fields={[
                    ["purchase", current.plan.purchaseId],
                    ["plan", `${current.plan.planName} (${current.plan.planId})`],
                    ["status", current.plan.status],
                    ["cost", BigDecimal.format(current.plan.cost)],
                    ["billing date", current.plan.billingDate.toISOString()],
                    ["spent this cycle", BigDecimal.format(current.plan.spentThisCycle)]
                  ]}
                />
              )
        }
      )
    )
}
