/**
 * Corrections (issue 22 point 5, docs/signals.md "Corrections"): a priced usage
 * row taken back through `POST /signal/usage-log/{id}/reverse` and
 * `billing usage reverse ID`. Signals are priced by the worker; every figure is
 * read back exactly (the balances, the wallet, its ledger and webhook events,
 * the usage rows), and every refusal is shown to write nothing.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Organizations } from "../src/organizations/Organizations.ts"
import { WebhookEndpoints } from "../src/webhooks/Endpoints.ts"
import { buy, makePlan, runCycles } from "./billing-support.ts"
import { client, drain as drainIn, expectError, gpt4oBundle, query } from "./signals-fixtures.ts"
import { clientOf } from "./support/Http.ts"
import { usesRealPostgres } from "./support/TestDatabase.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
const ids: Record<string, string> = {}

const api = () => client(app, acme)
const drain = () => drainIn(app)

const reverse = (id: string, body?: unknown, tenant: Tenant = acme) =>
  client(app, tenant).post(`/signal/usage-log/${id}/reverse`, body)

interface BalanceSql {
  componentId: string
  type: string
  billingMode: string
  granted: string
  used: string
  remaining: string
  cycleQuantity: string
  arrearAmount: string
}

/** Balance rows of a purchase, as decimal text, by type and mode. */
const balancesOf = async (purchaseId: string) => {
  const rows = await query<BalanceSql>(
    app,
    `SELECT component_id, type, billing_mode, trim_scale(granted)::text AS granted, trim_scale(used)::text AS used,
            trim_scale(remaining)::text AS remaining, trim_scale(cycle_quantity)::text AS cycle_quantity,
            trim_scale(arrear_amount)::text AS arrear_amount
     FROM purchase_balances WHERE organization_id = $1 AND purchase_id = $2 ORDER BY component_id`,
    [acme.organizationId, purchaseId]
  )
  return Object.fromEntries(rows.map((row) => [`${row.type}/${row.billingMode}`, row]))
}

const spentOf = async (purchaseId: string) =>
  (await query<{ spent: string }>(
    app,
    "SELECT trim_scale(spent_this_cycle)::text AS spent FROM purchases WHERE organization_id = $1 AND id = $2",
    [acme.organizationId, purchaseId]
  ))[0]!.spent

const walletOf = async (customerId: string) =>
  (await query<{ balance: string }>(
    app,
    "SELECT trim_scale(balance)::text AS balance FROM wallets WHERE organization_id = $1 AND customer_id = $2",
    [acme.organizationId, customerId]
  ))[0]!.balance

const usageCount = async () =>
  Number((await query<{ n: string }>(app, "SELECT count(*) AS n FROM usage_log WHERE organization_id = $1", [
    acme.organizationId
  ]))[0]!.n)

const stored = async (id: string) =>
  (await query<
    {
      reverses: string | null
      reversedBy: string | null
      reason: string | null
      quantity: string
      customerCost: string
      advanceQuantity: string | null
      arrearQuantity: string | null
      arrearCharge: string | null
      cycleIndex: number | null
      inputTokens: string | null
    }
  >(
    app,
    `SELECT reverses, reversed_by, reason, trim_scale(quantity)::text AS quantity,
            trim_scale(customer_cost)::text AS customer_cost, trim_scale(advance_quantity)::text AS advance_quantity,
            trim_scale(arrear_quantity)::text AS arrear_quantity, trim_scale(arrear_charge)::text AS arrear_charge, cycle_index, input_tokens::text
     FROM usage_log WHERE organization_id = $1 AND id = $2`,
    [acme.organizationId, id]
  ))[0]!

let seq = 0

/** A new customer on `plan` (default: the shared one), and what a test does as it. */
const newCustomer = async (planId = ids.plan!) => {
  const customerId = await api().created("/customers", { name: "Jo", email: `jo-${++seq}@example.com` }, "customer")
  const purchase = await buy(clientOf(app, acme), customerId, planId)
  const send = async (path: string, body: Record<string, unknown>) => {
    const response = await api().post(path, { customerId, ...body })
    expect(response.status, JSON.stringify(response.body)).toBe(202)
    return response.body.result.rawId as string
  }
  /** Sends a signal, prices it, and answers its usage row. */
  const priced = async (path: string, body: Record<string, unknown>) => {
    const rawId = await send(path, body)
    await drain()
    const rows = await api().get(`/signal/usage-log?customerId=${customerId}&limit=200`)
    const row = rows.body.result.usageLogs.find((r: any) => r.rawId === rawId)
    expect(row, `no usage row for ${rawId}`).toBeDefined()
    return row
  }
  return { customerId, purchaseId: purchase.id as string, send, priced }
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  await app.run(Effect.flatMap(WebhookEndpoints, (endpoints) =>
    endpoints.add(acme.organizationId, { url: "https://example.com/hook" })))
  // basePrice 0.00625; 1,000 in / 500 out on gpt-4o = 1.2 credits, 0.009 USD at margin 20.
  ids.chat = await api().created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: gpt4oBundle }, "credit")
  ids.pages = await api().created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
  ids.report = await api().created("/outcomes", {
    name: "Report",
    agentKey: "report",
    marginPercent: 50,
    steps: [{ name: "Draft", agentKey: "draft", modelBundle: gpt4oBundle }]
  }, "outcome")
  ids.plan = (await makePlan(app, acme, [
    { type: "CREDIT", billingMode: "ADVANCE", creditId: ids.chat, quantity: 10 },
    { type: "UNIT", billingMode: "ARREAR", unitId: ids.pages },
    { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: ids.report, quantity: 5 },
    { type: "WALLET", billingMode: "ADVANCE", amount: 10 }
  ])).id
  ids.docs = await api().created("/units", { name: "Docs", agentKey: "docs", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
  ids.overflow = (await makePlan(app, acme, [
    { type: "UNIT", billingMode: "ADVANCE", unitId: ids.docs, quantity: 2 },
    { type: "UNIT", billingMode: "ARREAR", unitId: ids.docs }
  ])).id
  ids.funded = (await makePlan(app, acme, [
    { type: "WALLET", billingMode: "ADVANCE", amount: 5 },
    { type: "UNIT", billingMode: "ARREAR", unitId: ids.pages }
  ], { walletFundedArrear: true })).id
})
afterAll(() => app?.close())

const chatUsage = { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } }

describe("reversing a usage row", () => {
  it("gives an ADVANCE credit row's allowance back exactly and answers the reversing row", async () => {
    const { priced, purchaseId } = await newCustomer()
    await priced("/signal/credit", chatUsage)
    const row = await priced("/signal/credit", chatUsage)
    expect(row).toMatchObject({ quantity: 1.2, customerCost: 0.009, billingMode: "ADVANCE", balance: { remaining: 7.6 } })
    expect((await balancesOf(purchaseId))["CREDIT/ADVANCE"]).toMatchObject({ used: "2.4", remaining: "7.6", cycleQuantity: "2.4" })

    const response = await reverse(row.id, { reason: "sent twice by a misconfigured client" })
    expect(response.status, JSON.stringify(response.body)).toBe(200)
    expect(response.body.statusDetail).toEqual({ status: "SUCCESS", message: "Usage reversed" })
    const reversal = response.body.result
    expect(reversal).toMatchObject({
      id: expect.stringMatching(/^usg_/),
      customerId: row.customerId,
      meter: "CREDIT",
      agentKey: "chat",
      model: "gpt-4o",
      tokens: null,
      quantity: -1.2,
      providerCost: -0.0075,
      customerCost: -0.009,
      billingMode: "ADVANCE",
      balance: { remaining: 8.8 },
      purchaseId,
      rawId: row.rawId
    })
    expect(reversal.id).not.toBe(row.id)
    expect((await balancesOf(purchaseId))["CREDIT/ADVANCE"]).toMatchObject({ used: "1.2", remaining: "8.8", cycleQuantity: "1.2" })
    expect(await spentOf(purchaseId)).toBe("0")
    expect(await stored(row.id)).toMatchObject({ reversedBy: reversal.id, reverses: null })
    expect(await stored(reversal.id)).toMatchObject({
      reverses: row.id,
      reversedBy: null,
      reason: "sent twice by a misconfigured client",
      quantity: "-1.2",
      advanceQuantity: "-1.2",
      arrearQuantity: "0",
      arrearCharge: "0",
      inputTokens: null
    })
    // The customer's log lists it like any row.
    const log = (await api().get(`/signal/usage-log?customerId=${row.customerId}&limit=200`)).body.result.usageLogs
    expect(log.map((r: any) => r.id)).toContain(reversal.id)
  })

  it("gives an ARREAR unit row's charge and cycle quantity back exactly, through the CLI", async () => {
    const { priced, purchaseId } = await newCustomer()
    await priced("/signal/unit", { agentKey: "pages", quantity: 2 })
    const row = await priced("/signal/unit", { agentKey: "pages", quantity: 3 })
    expect(row).toMatchObject({ quantity: 3, customerCost: 1.5, billingMode: "ARREAR" })
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ used: "5", cycleQuantity: "5", arrearAmount: "2.5" })
    expect(await spentOf(purchaseId)).toBe("2.5")

    const cli = await app.cli(["usage", "reverse", row.id, "--reason", "test data", "--json", "--org", acme.organizationId])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json).toMatchObject({ meter: "UNIT", quantity: -3, customerCost: -1.5, billingMode: "ARREAR" })
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ used: "2", cycleQuantity: "2", arrearAmount: "1" })
    expect(await spentOf(purchaseId)).toBe("1")
    expect(await stored(cli.json.id)).toMatchObject({ reverses: row.id, reason: "test data", arrearCharge: "-1.5" })

    // The view for people, and --json / --org anywhere on the line.
    const other = await priced("/signal/unit", { agentKey: "pages", quantity: 1 })
    const shown = await app.cli(["usage", "reverse", "--org", acme.organizationId, other.id])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain(`Usage row ${other.id} reversed`)
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ cycleQuantity: "2", arrearAmount: "1" })
    const again = await app.cli(["usage", "reverse", other.id, "--json", "--org", acme.organizationId])
    expect(again.code).toBe(5)
    expect(again.stderr).toContain("already reversed")
  })

  it("credits a wallet row's cost back with a ledger row and a wallet.balance.update event", async () => {
    const { customerId, priced, purchaseId } = await newCustomer()
    // (2,000 * 2.5 + 1,000 * 10) / 1e6 = 0.015
    const row = await priced("/signal/wallet", { usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } })
    expect(row).toMatchObject({ meter: "WALLET", customerCost: 0.015 })
    expect(await walletOf(customerId)).toBe("9.985")
    expect(await spentOf(purchaseId)).toBe("0.015")

    const reversal = (await reverse(row.id)).body.result
    expect(reversal).toMatchObject({ meter: "WALLET", quantity: -0.015, customerCost: -0.015, balance: { remaining: 10 } })
    expect(await walletOf(customerId)).toBe("10")
    expect(await spentOf(purchaseId)).toBe("0")
    const ledger = (await api().get(`/customers/${customerId}/wallet/ledger`)).body.result.entries
    expect(ledger.at(-1)).toMatchObject({ type: "USAGE_LOG", delta: 0.015, balanceAfter: 10, usageLogId: reversal.id })
    const events = await query<{ body: any }>(
      app,
      `SELECT body FROM webhook_events WHERE organization_id = $1 AND body::text LIKE $2 ORDER BY id`,
      [acme.organizationId, `%${reversal.id}%`]
    )
    const bodies = events.map((e) => (typeof e.body === "string" ? JSON.parse(e.body) : e.body))
    expect(bodies.map((b) => [b.event_type, b.data.source, b.data.delta, b.data.current_balance])).toEqual([
      ["wallet.balance.update", "USAGE", 0.015, 10]
    ])
    expect(bodies[0].data).toMatchObject({ customer_id: customerId, previous_balance: 9.985, usage_log_id: reversal.id })
  })

  it("credits a walletFundedArrear charge back to the wallet and leaves the arrear amount alone", async () => {
    const { customerId, priced, purchaseId } = await newCustomer(ids.funded)
    const row = await priced("/signal/unit", { agentKey: "pages", quantity: 4 })
    expect(row).toMatchObject({ customerCost: 2, billingMode: "ARREAR" })
    expect(await walletOf(customerId)).toBe("3")
    const reversal = (await reverse(row.id)).body.result
    expect(reversal).toMatchObject({ customerCost: -2, quantity: -4 })
    expect(await walletOf(customerId)).toBe("5")
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ used: "0", cycleQuantity: "0", arrearAmount: "0" })
    expect(await spentOf(purchaseId)).toBe("0")
  })

  it("reverses a row that drew nothing (an outcome step) and moves nothing", async () => {
    const { customerId, priced, purchaseId } = await newCustomer()
    const row = await priced("/signal/outcome", { agentKey: "draft", runId: `run-${seq}`, usage: { model: "gpt-4o", inputTokens: 100 } })
    expect(row).toMatchObject({ meter: "OUTCOME_STEP", customerCost: 0 })
    const before = [await balancesOf(purchaseId), await walletOf(customerId), await spentOf(purchaseId)]
    const reversal = (await reverse(row.id)).body.result
    expect(reversal).toMatchObject({ meter: "OUTCOME_STEP", quantity: -1, customerCost: 0, providerCost: -0.00025 })
    expect([await balancesOf(purchaseId), await walletOf(customerId), await spentOf(purchaseId)]).toEqual(before)
  })

  it("gives a MIXED row back exactly as it split: allowance to ADVANCE, charge off ARREAR", async () => {
    const { priced, purchaseId } = await newCustomer(ids.overflow)
    const row = await priced("/signal/unit", { agentKey: "docs", quantity: 3 })
    expect(row).toMatchObject({ billingMode: "MIXED", quantity: 3, customerCost: 1.5, balance: { remaining: 0 } })
    expect(await spentOf(purchaseId)).toBe("0.5")
    const reversal = (await reverse(row.id)).body.result
    expect(reversal).toMatchObject({ billingMode: "MIXED", quantity: -3, customerCost: -1.5, balance: { remaining: 2 } })
    expect(await stored(reversal.id)).toMatchObject({ advanceQuantity: "-2", arrearQuantity: "-1", arrearCharge: "-0.5" })
    const balances = await balancesOf(purchaseId)
    expect(balances["UNIT/ADVANCE"]).toMatchObject({ used: "0", remaining: "2", cycleQuantity: "0" })
    expect(balances["UNIT/ARREAR"]).toMatchObject({ used: "0", cycleQuantity: "0", arrearAmount: "0" })
    expect(await spentOf(purchaseId)).toBe("0")
    // The allowance is whole again: the same usage draws it as if the row never happened.
    expect(await priced("/signal/unit", { agentKey: "docs", quantity: 2 })).toMatchObject({ billingMode: "ADVANCE" })
  })

  it("derives the split of a row written before rows recorded it, and refuses a MIXED one (409)", async () => {
    const { priced, purchaseId } = await newCustomer()
    const old = await priced("/signal/credit", chatUsage)
    const mixed = await priced("/signal/credit", chatUsage)
    await query(app, `UPDATE usage_log SET advance_quantity = NULL, arrear_quantity = NULL, arrear_charge = NULL,
                        cycle_index = NULL WHERE organization_id = $1 AND id IN ($2, $3)`, [acme.organizationId, old.id, mixed.id])
    await query(app, "UPDATE usage_log SET billing_mode = 'MIXED' WHERE organization_id = $1 AND id = $2", [
      acme.organizationId,
      mixed.id
    ])
    const count = await usageCount()
    const refused = await reverse(mixed.id)
    expectError(refused, 409, "usage_not_reversible")
    expect(refused.body.statusDetail.message).toContain("cannot be reversed exactly")
    expect(await usageCount()).toBe(count)
    expect((await reverse(old.id)).status).toBe(200)
    expect((await balancesOf(purchaseId))["CREDIT/ADVANCE"]).toMatchObject({ used: "1.2", remaining: "8.8" })
  })
})

describe("refusals write nothing", () => {
  it("answers 409 to a second reversal and to reversing a reversal, 404 to an unknown or another workspace's row", async () => {
    const { customerId, priced, purchaseId } = await newCustomer()
    const row = await priced("/signal/credit", chatUsage)
    const other = await priced("/signal/credit", chatUsage)
    const first = (await reverse(row.id)).body.result
    const snapshot = async () => [await usageCount(), await balancesOf(purchaseId), await walletOf(customerId), await spentOf(purchaseId)]
    const before = await snapshot()

    const twice = await reverse(row.id, { reason: "again" })
    expectError(twice, 409, "usage_already_reversed")
    expect(twice.body.statusDetail.message).toContain(`already reversed by ${first.id}`)
    const ofReversal = await reverse(first.id)
    expectError(ofReversal, 409, "usage_row_is_reversal")
    expect(ofReversal.body.statusDetail.message).toContain("is a reversal")
    expectError(await reverse("usg_nothing_here"), 404, "usage_row_not_found")
    const globex = await app.tenant("Globex")
    expectError(await reverse(row.id, undefined, globex), 404, "usage_row_not_found")
    expectError(await reverse(other.id, {}, globex), 404, "usage_row_not_found")
    expect(await snapshot()).toEqual(before)
    expect(await stored(other.id)).toMatchObject({ reversedBy: null })
    expect(await stored(row.id)).toMatchObject({ reversedBy: first.id })
  })

  it("refuses a bad body (400) and an archived customer's row (409)", async () => {
    const { customerId, priced } = await newCustomer()
    const row = await priced("/signal/credit", chatUsage)
    expectError(await reverse(row.id, { reason: "" }), 400, "validation_failed")
    expectError(await reverse(row.id, { why: "unknown field" }), 400, "validation_failed")
    expectError(await reverse(row.id, { idempotencyKey: "" }), 400, "validation_failed")
    expect((await api().del(`/customers/${customerId}`)).status).toBe(200)
    const count = await usageCount()
    const archived = await reverse(row.id)
    expectError(archived, 409, "customer_archived")
    expect(archived.body.statusDetail.message).toContain("archived")
    expect(await usageCount()).toBe(count)
    expect(await stored(row.id)).toMatchObject({ reversedBy: null })
  })

  it("answers a repeated idempotencyKey with the first answer and writes nothing; the key on another row is 422", async () => {
    const { customerId, priced, purchaseId } = await newCustomer()
    const row = await priced("/signal/credit", chatUsage)
    const other = await priced("/signal/credit", chatUsage)
    const first = await reverse(row.id, { idempotencyKey: "fix-1", reason: "duplicate" })
    expect(first.status).toBe(200)
    const before = [await usageCount(), await balancesOf(purchaseId), await walletOf(customerId)]
    const repeat = await reverse(row.id, { idempotencyKey: "fix-1", reason: "duplicate" })
    expect(repeat.status).toBe(200)
    expect(repeat.body).toEqual(first.body)
    const cli = await app.cli(["usage", "reverse", row.id, "--idempotency-key", "fix-1", "--json", "--org", acme.organizationId])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.json.id).toBe(first.body.result.id)
    const reused = await reverse(other.id, { idempotencyKey: "fix-1" })
    expectError(reused, 422, "idempotency_key_reused")
    expect(reused.body.statusDetail.message).toContain("fix-1")
    expect([await usageCount(), await balancesOf(purchaseId), await walletOf(customerId)]).toEqual(before)
    expect(await stored(other.id)).toMatchObject({ reversedBy: null })
    // Another workspace's key space is its own; it still cannot see the row.
    expectError(await reverse(row.id, { idempotencyKey: "fix-1" }, await app.tenant("Initech")), 404, "usage_row_not_found")
  })
})

describe("a row of an ended cycle", () => {
  it("gives back to that cycle's cycle_balances, never to the current cycle's balances", async () => {
    const { priced, purchaseId } = await newCustomer()
    const credit = await priced("/signal/credit", chatUsage)
    const unit = await priced("/signal/unit", { agentKey: "pages", quantity: 3 })
    const purchase = (await api().get(`/purchases/${purchaseId}`)).body.result.purchase
    const end = new Date(purchase.currentPeriodEnd)
    const ended = await balancesOf(purchaseId)
    await runCycles(app, end)
    const renewed = (await api().get(`/purchases/${purchaseId}`)).body.result.purchase
    expect(new Date(renewed.currentPeriodStart).getTime()).toBe(end.getTime())
    const cycleIndex = (await query<{ cycleIndex: number }>(
      app,
      "SELECT cycle_index FROM purchases WHERE organization_id = $1 AND id = $2",
      [acme.organizationId, purchaseId]
    ))[0]!.cycleIndex - 1
    // The renewal recorded the ended cycle and its balances itself (none written here): a reversal of a row
    // of that cycle has somewhere to give back to only because the renewal kept it.
    const known = await query<{ status: string }>(
      app,
      "SELECT status FROM purchase_cycles WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = $3",
      [acme.organizationId, purchaseId, cycleIndex]
    )
    expect(known).toEqual([{ status: "FINAL" }])
    const rowsCycle = await query<{ id: string; cycleIndex: number }>(
      app,
      "SELECT id, cycle_index FROM usage_log WHERE organization_id = $1 AND id IN ($2, $3) ORDER BY id",
      [acme.organizationId, credit.id, unit.id]
    )
    expect(rowsCycle.map((row) => row.cycleIndex)).toEqual([cycleIndex, cycleIndex])
    const closedOf = async () =>
      Object.fromEntries(
        (await query<BalanceSql & { invoicedArrear: string }>(
          app,
          `SELECT type, billing_mode, trim_scale(remaining)::text AS remaining, trim_scale(used)::text AS used,
                  trim_scale(cycle_quantity)::text AS cycle_quantity, trim_scale(arrear_amount)::text AS arrear_amount,
                  trim_scale(invoiced_arrear)::text AS invoiced_arrear
           FROM cycle_balances WHERE organization_id = $1 AND purchase_id = $2 AND cycle_index = $3`,
          [acme.organizationId, purchaseId, cycleIndex]
        )).map((row) => [`${row.type}/${row.billingMode}`, row])
      )
    const closedBefore = await closedOf()
    // The renewal kept each balance as the cycle left it.
    expect(Object.keys(closedBefore).sort()).toEqual(Object.keys(ended).sort())
    for (const [key, row] of Object.entries(ended)) {
      expect(closedBefore[key], key).toMatchObject({
        used: row.used,
        remaining: row.remaining,
        cycleQuantity: row.cycleQuantity,
        arrearAmount: row.arrearAmount
      })
    }
    expect(closedBefore["UNIT/ARREAR"]).toMatchObject({ cycleQuantity: "3", arrearAmount: "1.5", invoicedArrear: "1.5" })
    const current = await balancesOf(purchaseId)
    const spent = await spentOf(purchaseId)

    const unitReversal = await reverse(unit.id)
    expect(unitReversal.status, JSON.stringify(unitReversal.body)).toBe(200)
    const creditReversal = await reverse(credit.id)
    expect(creditReversal.status, JSON.stringify(creditReversal.body)).toBe(200)
    const closedAfter = await closedOf()
    // The FINAL cycle now owes -1.5 (a credit line on the next usage invoice).
    expect(closedAfter["UNIT/ARREAR"]).toMatchObject({ cycleQuantity: "0", used: "0", arrearAmount: "0", invoicedArrear: "1.5" })
    // The credit's allowance goes back to the ended cycle's pool (what late usage of that cycle may draw).
    const [expected] = await query<{ remaining: string }>(app, "SELECT trim_scale($1::numeric + 1.2)::text AS remaining", [
      closedBefore["CREDIT/ADVANCE"]!.remaining
    ])
    expect(closedAfter["CREDIT/ADVANCE"]).toMatchObject({ remaining: expected!.remaining })
    expect(await balancesOf(purchaseId)).toEqual(current)
    expect(await spentOf(purchaseId)).toBe(spent)
    expect(await stored(unitReversal.body.result.id)).toMatchObject({ cycleIndex, reverses: unit.id })
  })
})

describe("a row of a cycle still in its grace period", () => {
  it("changes that cycle's DRAFT usage invoice", async () => {
    const tenant = await app.tenant("Graceful")
    const as = client(app, tenant)
    await app.run(Effect.flatMap(Organizations, (orgs) => orgs.updateSettings(tenant.organizationId, { invoiceGraceHours: 48 })))
    const unit = await as.created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
    const plan = (await makePlan(app, tenant, [{ type: "UNIT", billingMode: "ARREAR", unitId: unit }])).id
    const customerId = await as.created("/customers", { name: "Al", email: "al@example.com" }, "customer")
    const purchase = await buy(clientOf(app, tenant), customerId, plan)
    const sent: Array<string> = []
    for (const quantity of [3, 2]) {
      const response = await as.post("/signal/unit", { customerId, agentKey: "pages", quantity })
      expect(response.status).toBe(202)
      sent.push(response.body.result.rawId)
    }
    await drain()
    const rows = (await as.get(`/signal/usage-log?customerId=${customerId}`)).body.result.usageLogs
    const three = rows.find((row: any) => row.rawId === sent[0])
    await runCycles(app, new Date(purchase.currentPeriodEnd))
    const usageInvoice = async () =>
      (await as.get(`/invoices?customerId=${customerId}`)).body.result.invoices.find((i: any) => i.kind === "USAGE")
    expect(await usageInvoice()).toMatchObject({ status: "DRAFT", total: 2.5 })

    const reversal = await reverse(three.id, { reason: "test traffic" }, tenant)
    expect(reversal.status, JSON.stringify(reversal.body)).toBe(200)
    const draft = await usageInvoice()
    expect(draft).toMatchObject({ status: "DRAFT", total: 1 })
    expect(draft.lines.filter((line: any) => line.quantity !== undefined).map((line: any) => line.quantity)).toContain(2)
  })
})

describe.skipIf(!usesRealPostgres)("concurrent reversals (real PostgreSQL only: the embedded database is one session)", () => {
  it("let exactly one of many concurrent reversals of a row through", async () => {
    const { customerId, priced, purchaseId } = await newCustomer()
    const row = await priced("/signal/unit", { agentKey: "pages", quantity: 3 })
    const count = await usageCount()
    const answers = await Promise.all(Array.from({ length: 8 }, () => reverse(row.id)))
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409, 409, 409, 409, 409, 409])
    expect(await usageCount()).toBe(count + 1)
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ cycleQuantity: "0", arrearAmount: "0" })
    expect(await walletOf(customerId)).toBe("10")

    const keyed = await priced("/signal/unit", { agentKey: "pages", quantity: 1 })
    const twins = await Promise.all(Array.from({ length: 6 }, () => reverse(keyed.id, { idempotencyKey: "twin" })))
    expect(twins.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200])
    expect(new Set(twins.map((a) => a.body.result.id)).size).toBe(1)
    expect(await usageCount()).toBe(count + 3)
    expect((await balancesOf(purchaseId))["UNIT/ARREAR"]).toMatchObject({ cycleQuantity: "0", arrearAmount: "0" })
  })
})
