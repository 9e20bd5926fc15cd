/**
 * `billing cycle run` killed after its batch's renewals were written and before
 * they committed (`BILLING_FAULT=cycles.before-commit` SIGKILLs it there, see
 * src/Fault.ts): nothing is renewed (no invoice, no grant, cycle_index
 * and the period unchanged), and the next run renews each purchase exactly
 * once. Runs on both databases.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buy, type Client, clientOf, makeCustomer, makePlan, makeUnit, ok, runCycles } from "./billing-support.ts"
import { drain, query } from "./signals-fixtures.ts"
import { describeExit, runCli } from "./support/Cli.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
let api: Client
const purchases: Array<{ id: string; customerId: string; periodStart: string; periodEnd: string }> = []

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Crash cycles")
  api = clientOf(app, acme)
  ok(await api.post("/taxes", { name: "VAT", ratePercent: 20 }), 201)
  const unit = await makeUnit(api, { flatPrice: 0.75 })
  // A wallet grant of 10 per cycle and units in arrears at 0.75 each.
  const plan = await makePlan(app, acme, [
    { type: "WALLET", billingMode: "ADVANCE", amount: 10 },
    { type: "UNIT", billingMode: "ARREAR", unitId: unit.id }
  ])
  for (let i = 0; i < 3; i++) {
    const customer = await makeCustomer(api)
    const purchase = await buy(api, customer.id, plan.id)
    purchases.push({
      id: purchase.id,
      customerId: customer.id,
      periodStart: purchase.currentPeriodStart,
      periodEnd: purchase.currentPeriodEnd
    })
  }
  // The first customer uses 3 units: 2.25 in arrears, invoiced at the cycle end with 20% VAT (0.45): 2.70.
  const sent = await api.post("/signal/unit", { customerId: purchases[0]!.customerId, agentKey: unit.agentKey, quantity: 3 })
  expect(sent.status, JSON.stringify(sent.body)).toBe(202)
  await drain(app)
})
afterAll(() => app.close())

/** Everything a renewal writes, per purchase, read from the tables. */
const state = () =>
  query<Record<string, unknown>>(
    app,
    `SELECT p.id, p.status, p.cycle_index, p.period_start, p.period_end,
            (SELECT count(*) FROM invoices i WHERE i.organization_id = p.organization_id AND i.purchase_id = p.id) AS invoices,
            (SELECT string_agg(i.kind || ' ' || i.total::text, ', ' ORDER BY i.issued_at, CASE i.kind WHEN 'USAGE' THEN 0 ELSE 1 END)
               FROM invoices i WHERE i.organization_id = p.organization_id AND i.purchase_id = p.id) AS invoice_totals,
            (SELECT count(*) FROM wallet_ledger l WHERE l.organization_id = p.organization_id AND l.customer_id = p.customer_id) AS ledger_rows,
            (SELECT w.balance FROM wallets w WHERE w.organization_id = p.organization_id AND w.customer_id = p.customer_id) AS wallet,
            (SELECT string_agg(b.type || ' ' || b.billing_mode || ' ' || b.granted::text || ' ' || b.cycle_quantity::text || ' ' || b.arrear_amount::text, ', ' ORDER BY b.component_id)
               FROM purchase_balances b WHERE b.organization_id = p.organization_id AND b.purchase_id = p.id) AS balances
     FROM purchases p WHERE p.organization_id = $1 ORDER BY p.id`,
    [acme.organizationId]
  )

describe("a cycle run killed before its batch commits", () => {
  it("renews nothing, and the next run renews each purchase exactly once", async () => {
    // Every purchase's cycle has ended at the latest end (they were bought within moments of each other).
    const end = new Date(Math.max(...purchases.map((p) => new Date(p.periodEnd).getTime())))
    const before = await state()
    expect(before).toHaveLength(3)
    for (const row of before) expect(row).toMatchObject({ status: "ACTIVE", cycleIndex: 0, invoices: "1", wallet: "10" })

    const killed = await runCli(app, ["cycle", "run", "--now", end.toISOString(), "--json"], { BILLING_FAULT: "cycles.before-commit" })
    // Killed at the fault point, not failed in some other way.
    expect(killed.signal, describeExit(killed)).toBe("SIGKILL")
    expect(killed.json).toBeUndefined()
    expect(await state()).toEqual(before)

    const run = await runCli(app, ["cycle", "run", "--now", end.toISOString(), "--json"])
    expect(run.code, describeExit(run)).toBe(0)
    expect(run.json).toEqual({ handled: 3 })

    const after = await state()
    expect(after).toHaveLength(3)
    for (const row of after) {
      const purchase = purchases.find((p) => p.id === row.id)!
      expect(new Date(row.periodStart as string).toISOString()).toBe(purchase.periodEnd)
      expect(row).toMatchObject({
        status: "ACTIVE",
        cycleIndex: 1,
        // One cycle grant of 10 on top of the first one.
        wallet: "20",
        ledgerRows: "2"
      })
      const usedUnits = purchase === purchases[0]
      // A new PLAN invoice (10, +20% VAT = 12), and a USAGE one where units were used.
      expect(row.invoices).toBe(usedUnits ? "3" : "2")
      expect(row.invoiceTotals).toBe(usedUnits ? "PLAN 12, USAGE 2.7, PLAN 12" : "PLAN 12, PLAN 12")
      // The ARREAR row restarts at zero once invoiced.
      expect(row.balances).toBe("UNIT ARREAR 0 0 0")
    }
    // Nothing more is due at that instant: no second renewal, from the CLI or the job.
    const again = await runCli(app, ["cycle", "run", "--now", end.toISOString(), "--json"])
    expect(again.json, describeExit(again)).toEqual({ handled: 0 })
    expect(await runCycles(app, end)).toBe(0)
    expect(await state()).toEqual(after)
  })
})
