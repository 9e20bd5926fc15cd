/**
 * End to end for every meter: a catalogue and a plan made over HTTP, a purchase,
 * signals sent, the worker run, then balances, usage-log rows and costs checked
 * to the exact decimal. Also outcome runs and composite occurrences (parking and
 * self-completion), and the refusals the worker records.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, drain as drainIn, gpt4oBundle, query } from "./signals-fixtures.ts"
import { startTestApp, type Tenant, type TestApp } from "./support/TestApp.ts"

let app: TestApp
let acme: Tenant
/** The catalogue and plan, made once and only read: every test buys the plan for a customer of its own. */
const ids: Record<string, string> = {}

const post = (path: string, body?: unknown) => client(app, acme).post(path, body)
const get = (path: string) => client(app, acme).get(path)
const created = (path: string, body: unknown, field: string) => client(app, acme).created(path, body, field)
const drain = () => drainIn(app)

const signalStatus = async (rawId: string) =>
  (await query<{ status: string; errorStatus: number | null; errorMessage: string | null }>(
    app,
    "SELECT status, error_status, error_message FROM signals WHERE organization_id = $1 AND id = $2",
    [acme.organizationId, rawId]
  ))[0]!

let customerSeq = 0

/** A new customer on the plan, with full balances, and the requests a test makes as or about it. */
const newCustomer = async () => {
  const externalId = `jo-${++customerSeq}`
  const customerId = await created("/customers", { name: "Jo", email: `${externalId}@example.com`, externalId }, "customer")
  const purchase = await post("/purchases", { customerId, planId: ids.plan })
  if (purchase.status !== 201) throw new Error(`purchase: ${purchase.status} ${JSON.stringify(purchase.body)}`)
  const usageRows = async (query = "") => {
    const response = await get(`/signal/usage-log?customerId=${customerId}&limit=200${query}`)
    expect(response.status).toBe(200)
    return response.body.result.usageLogs as Array<any>
  }
  return {
    customerId,
    externalId,
    signal: async (path: string, body: Record<string, unknown>) => {
      const response = await post(path, { customerId, ...body })
      expect(response.status).toBe(202)
      return response.body.result.rawId as string
    },
    usageRows,
    rowOf: async (rawId: string) => (await usageRows()).find((row) => row.rawId === rawId),
    balances: async () => (await get(`/customers/${customerId}/balances`)).body.result
  }
}

beforeAll(async () => {
  app = await startTestApp()
  acme = await app.tenant("Acme")
  // basePrice 0.00625; pricePerCredit = 0.0075 (margin 20)
  const bundle = gpt4oBundle
  ids.chat = await created("/credits", { name: "Chat", agentKey: "chat", marginPercent: 20, modelBundle: bundle }, "credit")
  ids.summarize = await created(
    "/credits",
    { name: "Summarize", agentKey: "summarize", marginPercent: 0, modelBundle: bundle },
    "credit"
  )
  ids.unsold = await created("/credits", { name: "Unsold", agentKey: "unsold", marginPercent: 0, modelBundle: bundle }, "credit")
  // Steps 0.00625 + 2000 * 100 * 0.15 / 100 / 1e6 = 0.0003 -> basePrice 0.00655; pricePerOutcome 0.009825 (margin 50)
  ids.report = await created("/outcomes", {
    name: "Report",
    agentKey: "report",
    marginPercent: 50,
    steps: [
      { name: "Draft", agentKey: "draft", modelBundle: bundle },
      {
        name: "Review",
        agentKey: "review",
        modelBundle: [{ modelId: "gpt-4o-mini", averageTokensPerLLMCall: 2000, input: 100, output: 0, cache: 0, cacheWrite: 0 }]
      }
    ]
  }, "outcome")
  ids.pages = await created("/units", { name: "Pages", agentKey: "pages", pricingType: "FLAT", flatPrice: 0.5 }, "unit")
  ids.exports = await created("/units", { name: "Exports", agentKey: "exports", pricingType: "FLAT", flatPrice: 1 }, "unit")
  ids.bundle = await created("/composites", {
    name: "Bundle",
    refId: "bundle",
    price: 2,
    entitlements: { creditIds: [ids.summarize], unitIds: [ids.exports] }
  }, "composite")
  ids.plan = await created("/plans", {
    name: "Everything",
    billingCycle: "MONTHLY",
    entitlements: [
      { type: "CREDIT", billingMode: "ADVANCE", creditId: ids.chat, quantity: 10 },
      { type: "OUTCOME", billingMode: "ADVANCE", outcomeId: ids.report, quantity: 5 },
      { type: "UNIT", billingMode: "ARREAR", unitId: ids.pages },
      { type: "WALLET", billingMode: "ADVANCE", amount: 10 },
      { type: "PRICING_METRIC", billingMode: "ADVANCE", compositeId: ids.bundle, quantity: 2 }
    ]
  }, "plan")
})
afterAll(() => app.close())

describe("credit signals", () => {
  it("draw the ADVANCE balance by providerCost / basePrice and cost it with the margin", async () => {
    const { customerId, externalId, signal, rowOf, balances } = await newCustomer()
    // providerCost = (1000 * 2.5 + 500 * 10) / 1e6 = 0.0075; credits = 0.0075 / 0.00625 = 1.2; cost = 0.009
    const first = await signal("/signal/credit", { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } })
    const second = await signal("/signal/credit", {
      externalId,
      customerId: undefined,
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 },
      custom: { ticket: "T-1" }
    })
    await drain()
    expect((await signalStatus(first)).status).toBe("PROCESSED")
    const row = await rowOf(first)
    expect(row).toMatchObject({
      customerId,
      meter: "CREDIT",
      agentKey: "chat",
      model: "gpt-4o",
      tokens: { input: 1000, output: 500, cache: 0, cacheWrite: 0, total: 1500 },
      quantity: 1.2,
      providerCost: 0.0075,
      customerCost: 0.009,
      billingMode: "ADVANCE",
      balance: { remaining: 8.8 },
      rawId: first,
      messageId: expect.stringMatching(/^msg_/),
      composite: null
    })
    expect((await rowOf(second)).balance.remaining).toBe(7.6)
    const credit = (await balances()).credits.find((c: any) => c.creditId === ids.chat)
    expect(credit).toMatchObject({ granted: 10, used: 2.4, remaining: 7.6 })
  })

  it("move nothing for a credit signal with zero tokens: a row of 0 credits, balances and spent untouched", async () => {
    const { customerId, signal, rowOf, balances } = await newCustomer()
    const before = await balances()
    const rawId = await signal("/signal/credit", { agentKey: "chat", usage: { model: "gpt-4o" } })
    await drain()
    expect((await signalStatus(rawId)).status).toBe("PROCESSED")
    expect(await rowOf(rawId)).toMatchObject({
      customerId,
      meter: "CREDIT",
      quantity: 0,
      providerCost: 0,
      customerCost: 0,
      tokens: { input: 0, output: 0, cache: 0, cacheWrite: 0, total: 0 }
    })
    expect(await balances()).toEqual(before)
  })

  it("fail with 422 for an agentKey not sold on the plan, an unknown key and a model not enabled", async () => {
    const { signal, rowOf, balances } = await newCustomer()
    const unsold = await signal("/signal/credit", { agentKey: "unsold", usage: { model: "gpt-4o", inputTokens: 10 } })
    const unknown = await signal("/signal/credit", { agentKey: "nobody", usage: { model: "gpt-4o", inputTokens: 10 } })
    const model = await signal("/signal/credit", { agentKey: "chat", usage: { model: "no-such-model", inputTokens: 10 } })
    await drain()
    for (const rawId of [unsold, unknown, model]) {
      expect(await signalStatus(rawId)).toMatchObject({ status: "FAILED", errorStatus: 422 })
      expect(await rowOf(rawId)).toBeUndefined()
    }
    expect((await signalStatus(model)).errorMessage).toContain("no-such-model")
    expect((await balances()).credits.find((c: any) => c.creditId === ids.chat)).toMatchObject({ used: 0, remaining: 10 })
  })

  it("refuse usage beyond the ADVANCE allowance with 422 out of allowance, charging nothing", async () => {
    const { signal, rowOf, balances } = await newCustomer()
    // 10 credits granted; 24,000 input tokens of gpt-4o is 0.06 USD = 9.6 credits, and 10,000 more is 4.
    const fits = await signal("/signal/credit", { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 24000 } })
    const over = await signal("/signal/credit", { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 10000 } })
    await drain()
    expect((await rowOf(fits)).balance.remaining).toBe(0.4)
    expect(await signalStatus(over)).toMatchObject({ status: "FAILED", errorStatus: 422 })
    expect((await signalStatus(over)).errorMessage).toContain("allowance")
    expect(await rowOf(over)).toBeUndefined()
    expect((await balances()).credits.find((c: any) => c.creditId === ids.chat).remaining).toBe(0.4)
  })
})

describe("wallet signals", () => {
  it("debit exactly the provider cost from the wallet, with no margin", async () => {
    const { signal, rowOf, balances } = await newCustomer()
    // (2000 * 2.5 + 1000 * 10) / 1e6 = 0.015
    const rawId = await signal("/signal/wallet", { usage: { model: "gpt-4o", inputTokens: 2000, outputTokens: 1000 } })
    await drain()
    expect(await rowOf(rawId)).toMatchObject({
      meter: "WALLET",
      agentKey: null,
      providerCost: 0.015,
      customerCost: 0.015,
      balance: { remaining: 9.985 }
    })
    expect((await balances()).wallet.balance).toBe(9.985)
  })
})

describe("unit signals", () => {
  it("bill ARREAR units at the unit's price, quantity 1 by default", async () => {
    const { signal, rowOf } = await newCustomer()
    const three = await signal("/signal/unit", { agentKey: "pages", quantity: 3 })
    const one = await signal("/signal/unit", { agentKey: "pages" })
    await drain()
    expect(await rowOf(three)).toMatchObject({ meter: "UNIT", quantity: 3, customerCost: 1.5, billingMode: "ARREAR" })
    expect(await rowOf(one)).toMatchObject({ quantity: 1, customerCost: 0.5 })
  })
})

describe("members", () => {
  it("attribute a signal to a member of the customer, matched case-insensitively; a stranger is 422", async () => {
    const { customerId, signal, rowOf } = await newCustomer()
    const added = await post(`/customers/${customerId}/members`, { email: "Ana@Example.com" })
    expect(added.status).toBe(201)
    const member = await signal("/signal/unit", { agentKey: "pages", member: "ana@example.com" })
    const stranger = await signal("/signal/unit", { agentKey: "pages", member: "eve@example.com" })
    await drain()
    expect(await rowOf(member)).toMatchObject({ member: "ana@example.com", customerCost: 0.5 })
    expect(await signalStatus(stranger)).toMatchObject({ status: "FAILED", errorStatus: 422 })
    expect(await rowOf(stranger)).toBeUndefined()
  })
})

describe("outcome runs", () => {
  it("record steps with their provider cost, bill nothing, and bill one outcome on complete", async () => {
    const { customerId, signal, rowOf, balances } = await newCustomer()
    const draft = await signal("/signal/outcome", {
      agentKey: "draft",
      runId: "run-1",
      usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 }
    })
    const review = await signal("/signal/outcome", { agentKey: "review", runId: "run-1" })
    const again = await signal("/signal/outcome", { agentKey: "draft", runId: "run-1" })
    await drain()
    expect(await rowOf(draft)).toMatchObject({ meter: "OUTCOME_STEP", runId: "run-1", providerCost: 0.0075, customerCost: 0 })
    expect(await rowOf(review)).toMatchObject({ meter: "OUTCOME_STEP", providerCost: 0, customerCost: 0 })
    expect(await rowOf(again)).toBeDefined()
    expect((await balances()).outcomes.find((o: any) => o.outcomeId === ids.report).remaining).toBe(5)

    const complete = await post("/signal/outcome/complete", { customerId, runId: "run-1" })
    expect(complete.status).toBe(200)
    expect(complete.body.result).toEqual({ status: "COMPLETED", usageLog: null, rawId: expect.any(String) })
    await drain()
    expect(await rowOf(complete.body.result.rawId)).toMatchObject({
      meter: "OUTCOME",
      agentKey: "report",
      runId: "run-1",
      quantity: 1,
      providerCost: 0.0075,
      customerCost: 0.009825,
      billingMode: "ADVANCE",
      balance: { remaining: 4 }
    })
    const conflict = await post("/signal/outcome/complete", { customerId, runId: "run-1" })
    expect(conflict.status).toBe(409)
    await drain()
    expect((await balances()).outcomes.find((o: any) => o.outcomeId === ids.report).remaining).toBe(4)
  })
})

describe("composite occurrences", () => {
  it("park until the last signal arrives, then complete themselves and bill once", async () => {
    const { customerId, signal, rowOf, usageRows, balances } = await newCustomer()
    const summarize = await signal("/signal/credit", {
      agentKey: "summarize",
      usage: { model: "gpt-4o", inputTokens: 1000 },
      composite: { bundle: "job-1" }
    })
    const parked = await post("/signal/composite/complete", {
      customerId,
      composite: { bundle: "job-1" },
      // Kept as sent, a key with an underscore included (the SQL client camelCased the JSON it read).
      custom: { order: 42, line_item: "a-1" }
    })
    expect(parked.status).toBe(422)
    expect(parked.body.statusDetail.message).toContain("Exports")
    await drain()
    // Covered only by the composite: recorded with its provider cost, billed by the occurrence.
    expect(await rowOf(summarize)).toMatchObject({
      meter: "CREDIT",
      providerCost: 0.0025,
      customerCost: 0,
      billingMode: "COMPOSITE",
      composite: { id: ids.bundle, refId: "bundle", value: "job-1" }
    })
    expect((await balances()).composites.find((c: any) => c.compositeId === ids.bundle).remaining).toBe(2)

    await signal("/signal/unit", { agentKey: "exports", composite: { bundle: "job-1" } })
    await drain()
    const compositeRows = await usageRows("&meter=COMPOSITE")
    expect(compositeRows).toHaveLength(1)
    expect(compositeRows[0]).toMatchObject({
      meter: "COMPOSITE",
      agentKey: "bundle",
      quantity: 1,
      customerCost: 2,
      composite: { id: ids.bundle, refId: "bundle", value: "job-1" },
      balance: { remaining: 1 }
    })
    expect(compositeRows[0].custom).toEqual({ order: 42, line_item: "a-1" })

    const completed = await post("/signal/composite/complete", { customerId, composite: { bundle: "job-1" } })
    expect(completed.status).toBe(200)
    expect(completed.body.result).toEqual({
      status: "COMPLETED",
      composite: { id: ids.bundle, name: "Bundle", refId: "bundle" },
      value: "job-1",
      rawId: compositeRows[0].rawId
    })
    await drain()
    expect(await usageRows("&meter=COMPOSITE")).toHaveLength(1)
    expect((await balances()).composites.find((c: any) => c.compositeId === ids.bundle).remaining).toBe(1)
  })

  it("complete at once when every signal is in the inbox, even unprocessed", async () => {
    const { externalId, signal, usageRows, balances } = await newCustomer()
    await signal("/signal/credit", { agentKey: "summarize", usage: { model: "gpt-4o", inputTokens: 1 }, composite: { bundle: "job-2" } })
    await signal("/signal/unit", { agentKey: "exports", composite: { bundle: "job-2" } })
    const done = await post("/signal/composite/complete", { externalId, composite: { bundle: "job-2" } })
    expect(done.status).toBe(200)
    expect(done.body.result.value).toBe("job-2")
    await drain()
    const compositeRows = await usageRows("&meter=COMPOSITE")
    expect(compositeRows).toHaveLength(1)
    expect(compositeRows[0]).toMatchObject({ rawId: done.body.result.rawId, composite: { value: "job-2" }, customerCost: 2 })
    expect((await balances()).composites.find((c: any) => c.compositeId === ids.bundle).remaining).toBe(1)
  })

  it("never count a refused signal as reported: refused in the batch that would complete it, or in an earlier one", async () => {
    // The credit signal is refused (a model not enabled), so "Summarize" never reported: the occurrence stays
    // parked whether the refusal and the unit signal are priced in one batch or in two.
    for (const [value, batches] of [["job-3", 1], ["job-4", 2]] as const) {
      const { customerId, signal, usageRows } = await newCustomer()
      const parked = await post("/signal/composite/complete", { customerId, composite: { bundle: value } })
      expect(parked.status).toBe(422)
      const refused = await signal("/signal/credit", {
        agentKey: "summarize",
        usage: { model: "no-such-model", inputTokens: 1000 },
        composite: { bundle: value }
      })
      if (batches === 2) await drain()
      const exported = await signal("/signal/unit", { agentKey: "exports", composite: { bundle: value } })
      await drain()
      expect([(await signalStatus(refused)).status, (await signalStatus(exported)).status], value).toEqual(["FAILED", "PROCESSED"])
      expect(await usageRows("&meter=COMPOSITE"), value).toEqual([])
      const occurrence = await query<{ status: string }>(
        app,
        "SELECT o.status FROM composite_occurrences o WHERE o.organization_id = $1 AND o.value = $2",
        [acme.organizationId, value]
      )
      expect(occurrence.map((row) => row.status), value).toEqual(["PARKED"])
    }
  })

  it("ignore a tag naming no live composite", async () => {
    const { signal, rowOf } = await newCustomer()
    const rawId = await signal("/signal/unit", { agentKey: "pages", composite: { "no-such-thing": "x" } })
    await drain()
    expect(await rowOf(rawId)).toMatchObject({ composite: null, customerCost: 0.5 })
  })
})

describe("the usage log", () => {
  /** A customer with six usage rows: a wallet debit, a credit draw and four pages. */
  const customerWithUsage = async () => {
    const customer = await newCustomer()
    await customer.signal("/signal/wallet", { usage: { model: "gpt-4o", inputTokens: 2000 } })
    await customer.signal("/signal/credit", { agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000 } })
    for (const quantity of [1, 2, 3, 4]) await customer.signal("/signal/unit", { agentKey: "pages", quantity })
    await drain()
    return customer
  }

  it("pages by cursor, filters by meter and time, and the lookup returns rows in the order asked", async () => {
    const { customerId, externalId, usageRows } = await customerWithUsage()
    const all = await usageRows()
    expect(all).toHaveLength(6)
    const firstPage = await get(`/signal/usage-log?customerId=${customerId}&limit=2`)
    expect(firstPage.body.result.usageLogs.map((r: any) => r.id)).toEqual(all.slice(0, 2).map((r) => r.id))
    const next = await get(`/signal/usage-log?customerId=${customerId}&limit=2&cursor=${all[1].id}`)
    expect(next.body.result.usageLogs.map((r: any) => r.id)).toEqual(all.slice(2, 4).map((r) => r.id))
    expect((await usageRows("&meter=WALLET")).map((r) => r.meter)).toEqual(["WALLET"])
    expect(await usageRows(`&from=${new Date(Date.now() + 60_000).toISOString()}`)).toEqual([])

    const wanted = [all[3].id, "usg_missing", all[0].id, all[3].id]
    const lookup = await post("/signal/usage-log/lookup", { ids: wanted })
    expect(lookup.status).toBe(200)
    expect(lookup.body.result.usageLogs.map((r: any) => r.id)).toEqual([all[3].id, all[0].id])
    expect(lookup.body.result.notFound).toEqual(["usg_missing"])
    expect(lookup.body.result.usageLogs[0]).toMatchObject({ customerId, externalId, rawId: all[3].rawId })

    const stranger = await app.tenant("Stranger")
    const hidden = await app.request("POST", "/signal/usage-log/lookup", { key: stranger.apiKey, body: { ids: [all[0].id] } })
    expect(hidden.body.result).toEqual({ usageLogs: [], notFound: [all[0].id] })
  })

  it("counts a row in a range by its timestamp, even one stamped minutes ahead of its creation", async () => {
    // The range's `from` also bounds the months read (UsageLog.ts `createdSince`): a row's created_at may be up
    // to 5 minutes before its timestamp, never more, and such a row still belongs to a range from its timestamp.
    const customer = await newCustomer()
    const ahead = new Date(Date.now() + 4 * 60_000)
    const rawId = await customer.signal("/signal/credit", {
      agentKey: "chat",
      usage: { model: "gpt-4o", inputTokens: 1000 },
      timestamp: ahead.toISOString()
    })
    await drain()
    const from = encodeURIComponent(new Date(ahead.getTime() - 1000).toISOString())
    expect((await customer.usageRows(`&from=${from}`)).map((row) => row.rawId)).toEqual([rawId])
    const later = encodeURIComponent(new Date(ahead.getTime() + 1000).toISOString())
    expect(await customer.usageRows(`&from=${later}`)).toEqual([])
  })

  it("keeps rows in the partition of their month, never the default one", async () => {
    await customerWithUsage()
    const partitions = await query<{ partition: string; rows: string }>(
      app,
      "SELECT tableoid::regclass::text AS partition, count(*) AS rows FROM usage_log GROUP BY 1"
    )
    const month = new Date().toISOString().slice(0, 7).replace("-", "_")
    expect(partitions.map((p) => p.partition)).toEqual([`usage_log_${month}`])
  })

  it("billing usage prints the rows and totals per meter", async () => {
    // Pages of 1 + 2 + 3 + 4 at 0.5 each: 5 in units, beside a wallet and a credit row the filter leaves out.
    const { customerId } = await customerWithUsage()
    const result = await app.cli(["usage", "--customer", customerId, "--org", acme.organizationId, "--json", "--meter", "unit"])
    expect(result.code).toBe(0)
    const unitTotal = result.json.totals.find((t: any) => t.meter === "UNIT")
    expect(unitTotal.customerCost).toBe(5)
    expect(result.json.usageLogs).toHaveLength(4)
    expect(result.json.usageLogs.every((r: any) => r.meter === "UNIT")).toBe(true)
  })

  it("billing worker --once drains the queue in its own process", async () => {
    const { signal } = await newCustomer()
    const rawId = await signal("/signal/unit", { agentKey: "pages" })
    const worker = await app.cli(["worker", "--once", "--json"])
    expect(worker.code).toBe(0)
    expect((await signalStatus(rawId)).status).toBe("PROCESSED")
  })
})
