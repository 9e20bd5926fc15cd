/**
 * An independent oracle for usage in its own time (docs/billing.md "Late usage"):
 * a seeded random mix of on-time, late and reversed unit signals across two
 * cycles of one purchase, sent through HTTP, priced by the worker, invoiced by
 * the cycle job. What each cycle owes is computed by the test from what it
 * sent (a FLAT unit: price x net quantity; a SLAB unit that is never reversed:
 * its tiers over the cycle's whole quantity, as if every signal had come on
 * time) and must equal the sum of every USAGE invoice's lines billing that
 * cycle's period. The invoice that closed the first cycle never changes.
 * Run with and without a grace period (DRAFT invoices).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cycleStart } from "../src/billing/Cycle.ts"
import { runCycles } from "./billing-support.ts"
import { client, drain as drainIn, query } from "./signals-fixtures.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

let app: TestApp

beforeAll(async () => {
  app = await startTestApp({ ownDatabase: true })
})
afterAll(() => app.close())

/** mulberry32: a small seeded generator, so every run sends the same mix. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const DAY = 86_400_000

/** SLAB: 1.00 each up to 10, then 0.50 each. */
const slabTotal = (quantity: number) => Math.min(quantity, 10) * 1 + Math.max(quantity - 10, 0) * 0.5
const FLAT_PRICE = 0.25

/** Cents, to compare sums of exact decimals without float drift. */
const cents = (amount: number) => Math.round(amount * 100)

describe.each([
  { graceHours: 0, seed: 11 },
  { graceHours: 720, seed: 29 }
])("billed in the cycle it happened (grace $graceHours h, seed $seed)", ({ graceHours, seed }) => {
  it("every cycle's usage lines equal what the test sent for that cycle; the closed invoice never changes", async () => {
    const random = seeded(seed)
    const tenant = await app.tenant(`Oracle ${graceHours}`)
    const api = client(app, tenant)
    const settings = await app.cli(["org", "settings", "--org", tenant.organizationId, "--invoice-grace-hours", String(graceHours), "--json"])
    expect(settings.code, settings.stderr).toBe(0)

    const calls = await api.created("/units", { name: "Calls", agentKey: "calls", pricingType: "FLAT", flatPrice: FLAT_PRICE }, "unit")
    const pages = await api.created("/units", {
      name: "Pages",
      agentKey: "pages",
      pricingType: "SLAB",
      tiers: [{ upTo: 10, price: 1 }, { price: 0.5 }]
    }, "unit")
    const plan = await api.created("/plans", {
      name: "Metered",
      billingCycle: "MONTHLY",
      entitlements: [
        { type: "UNIT", billingMode: "ARREAR", unitId: calls },
        { type: "UNIT", billingMode: "ARREAR", unitId: pages }
      ]
    }, "plan")
    const customerId = await api.created("/customers", { name: "Ora", email: `ora-${seed}@example.com` }, "customer")
    const bought = await api.post("/purchases", { customerId, planId: plan })
    expect(bought.status).toBe(201)
    const purchaseId: string = bought.body.result.purchase.id

    // The purchase began 45 days ago: cycle 0 is [anchor, anchor + 1 month), and ends about 15 days ago.
    const now = Date.now()
    const anchor = new Date(now - 45 * DAY)
    const cycle0 = { start: anchor, end: cycleStart(anchor, 1) }
    const cycle1 = { start: cycle0.end, end: cycleStart(anchor, 2) }
    await query(app, `UPDATE purchases SET billing_date = $3, period_start = $3, period_end = $4
                      WHERE organization_id = $1 AND id = $2`, [tenant.organizationId, purchaseId, cycle0.start, cycle0.end])

    /** What the test sent, per cycle and unit: the expected bill. */
    const sent: Record<"calls" | "pages", [number, number]> = { calls: [0, 0], pages: [0, 0] }
    const rawCycle = new Map<string, number>()
    const signal = async (unit: "calls" | "pages", cycle: 0 | 1, quantity: number, at: Date | null) => {
      const response = await api.post("/signal/unit", {
        customerId,
        agentKey: unit,
        quantity,
        ...(at === null ? {} : { timestamp: at.toISOString() })
      })
      expect(response.status, JSON.stringify(response.body)).toBe(202)
      sent[unit][cycle] += quantity
      rawCycle.set(response.body.result.rawId, cycle)
    }
    /** A moment inside cycle 0 still inside the 35-day late-usage window (cycle 0 ends ~15 days ago). */
    const inCycle0 = () => new Date(Math.max(cycle0.start.getTime(), now - 34 * DAY) + random() * 18 * DAY)
    const quantity = () => 1 + Math.floor(random() * 6)

    // Cycle 0, while it is still the current cycle.
    for (let i = 0; i < 8; i++) await signal(random() < 0.5 ? "calls" : "pages", 0, quantity(), inCycle0())
    await drainIn(app)

    // Cycle 0 ends: its USAGE invoice is issued (DRAFT with a grace period).
    await runCycles(app, new Date(now))
    const closedInvoices = async () =>
      (await api.get(`/invoices?customerId=${customerId}`)).body.result.invoices.filter((i: any) => i.kind === "USAGE")
    const [closing] = await closedInvoices()
    expect(closing).toMatchObject({ status: graceHours > 0 ? "DRAFT" : "OPEN", periodStart: cycle0.start.toISOString() })

    // Cycle 1: on-time signals (no timestamp), late ones for cycle 0, and reversals of earlier rows.
    const reversed = new Set<string>()
    let lateSignals = 0
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 6; i++) {
        const late = random() < 0.4
        if (late) lateSignals++
        await signal(random() < 0.5 ? "calls" : "pages", late ? 0 : 1, quantity(), late ? inCycle0() : null)
      }
      await drainIn(app)
      const rows = (await api.get(`/signal/usage-log?customerId=${customerId}&limit=200`)).body.result.usageLogs as Array<any>
      const reversible = rows.filter((row) => row.agentKey === "calls" && row.reverses === null && !reversed.has(row.id))
      for (const row of reversible.filter(() => random() < 0.3)) {
        const answer = await api.post(`/signal/usage-log/${row.id}/reverse`, { reason: "sent twice" })
        expect(answer.status, JSON.stringify(answer.body)).toBe(200)
        reversed.add(row.id)
        sent.calls[rawCycle.get(row.rawId) as 0 | 1] -= row.quantity
      }
    }
    // The mix holds every case: late signals for the closed cycle and reversals.
    expect(lateSignals).toBeGreaterThan(0)
    expect(reversed.size).toBeGreaterThan(0)

    if (graceHours === 0) {
      // A FINAL invoice is never edited: late usage and reversals wait for the next usage invoice.
      expect((await closedInvoices())[0]).toEqual(closing)
    }

    // Cycle 1 ends (and with a grace period, both drafts are finalised): every line is on an invoice.
    await runCycles(app, new Date(cycle1.end.getTime() + 1000))
    await runCycles(app, new Date(cycle1.end.getTime() + (graceHours + 1) * 3_600_000))
    const invoices = await closedInvoices()
    expect(invoices.every((invoice: any) => invoice.status !== "DRAFT")).toBe(true)

    const billed = (period: { start: Date }, unitName: string) =>
      invoices.flatMap((invoice: any) => invoice.lines)
        .filter((line: any) => line.periodStart === period.start.toISOString() && line.description.includes(unitName))
        .reduce((total: number, line: any) => total + cents(line.amount), 0)
    for (const [cycle, period] of [[0, cycle0], [1, cycle1]] as const) {
      expect(billed(period, "Calls"), `Calls, cycle ${cycle}`).toBe(cents(sent.calls[cycle] * FLAT_PRICE))
      expect(billed(period, "Pages"), `Pages, cycle ${cycle}`).toBe(cents(slabTotal(sent.pages[cycle])))
    }
    // The usage rows say the same, cycle by cycle.
    const rows = await query<{ cycleIndex: number; total: string }>(
      app,
      `SELECT cycle_index, sum(customer_cost)::text AS total FROM usage_log
       WHERE organization_id = $1 AND customer_id = $2 GROUP BY cycle_index ORDER BY cycle_index`,
      [tenant.organizationId, customerId]
    )
    expect(rows.map((row) => [row.cycleIndex, cents(Number(row.total))])).toEqual([
      [0, cents(sent.calls[0] * FLAT_PRICE + slabTotal(sent.pages[0]))],
      [1, cents(sent.calls[1] * FLAT_PRICE + slabTotal(sent.pages[1]))]
    ])
  })
})
