/**
 * One queued signal priced alone (src/signals/PriceSignal.ts): how it ends,
 * and what it leaves in the batch's writes, against a batch context built in
 * memory. The drain's tests (test/signals*.test.ts) price the same rules
 * through the database; here each outcome is pinned without one.
 */
import { BigDecimal } from "effect"
import { describe, expect, it } from "vitest"
import { codeOf } from "../../src/errors.ts"
import { type Decimal, decimal, ZERO } from "../../src/money.ts"
import type { Catalogue, CustomerContext, PurchaseContext } from "../../src/pricing/meters/Context.ts"
import type { SnapshotComponent } from "../../src/pricing/PlanSnapshot.ts"
import type { BatchContext, Customer, DecodedSignal, SignalCycle, SignalRecord } from "../../src/signals/BatchContext.ts"
import type { RunCosts } from "../../src/signals/MeterSignal.ts"
import { noWrites, priceOne, type Writes } from "../../src/signals/PriceSignal.ts"
import { CUSTOMER, MOMENT, ORG, queued, snapshotComponent as component } from "./fixtures.ts"

const d = decimal
const text = (value: Decimal | null | undefined) => (value == null ? value : BigDecimal.format(BigDecimal.normalize(value)))


const unitAdvance = component({ id: "cmp_uadv", type: "UNIT", billingMode: "ADVANCE", targetId: "unt_1", quantity: d("10"), pricingType: "FLAT", flatPrice: d("0.5") })
const walletComponent = component({ id: "cmp_w", type: "WALLET", billingMode: "ADVANCE", amount: ZERO })

const catalogue: Catalogue = {
  credit: () => undefined,
  outcomeStep: () => undefined,
  unit: (agentKey) => (agentKey === "pages" ? { id: "unt_1", name: "Pages" } : agentKey === "faxes" ? { id: "unt_3", name: "Faxes" } : undefined),
  composite: () => undefined,
  model: (modelId) => (modelId === "gpt-4o" ? { input: d("2.5"), output: d("10"), cacheRead: d("1.25"), cacheWrite: null } : undefined)
}

const purchase = (components: ReadonlyArray<SnapshotComponent>, remaining: Record<string, string>, closedCycle = false): PurchaseContext => ({
  id: "pur_1",
  snapshot: {
    planId: "pln_1",
    name: "Plan",
    description: "",
    billingCycle: "MONTHLY",
    currencyCode: "USD",
    priceAdjustment: ZERO,
    walletFundedArrear: false,
    cost: ZERO,
    components
  },
  cycleIndex: 3,
  closedCycle,
  balances: new Map(Object.entries(remaining).map(([componentId, value]) => [componentId, { componentId, remaining: d(value), cycleQuantity: ZERO }]))
})

interface World {
  readonly purchase: PurchaseContext | null
  readonly wallet?: string
  /** The customers the context holds (by id, and by externalId when active); CUSTOMER when not given. */
  readonly customers?: ReadonlyArray<Customer>
  /** The cycle every signal is billed in, when not the purchase's current one. */
  readonly cycle?: SignalCycle
}

/** A batch context holding the world's customers, as the drain loads it. */
const contextOf = (world: World): BatchContext => {
  const customers = world.customers ?? [CUSTOMER]
  const state: CustomerContext = {
    organizationId: ORG,
    customerId: CUSTOMER.id,
    purchase: world.purchase,
    wallet: world.wallet === undefined ? null : { balance: d(world.wallet) }
  }
  const period = { start: new Date("2026-11-01T00:00:00.000Z"), end: new Date("2026-12-01T00:00:00.000Z") }
  return {
    customerById: (_, id) => customers.find((customer) => customer.id === id),
    customerByExternalId: (_, externalId) => customers.find((customer) => customer.externalId === externalId && customer.archivedAt === null),
    customerContext: () => state,
    cycleOf: () => world.cycle ?? { _tag: "Billed", purchase: state.purchase, period, activeCycle: period },
    isMember: (organizationId, customerId, email) => organizationId === ORG && customerId === CUSTOMER.id && email === "ann@example.com",
    catalogue: () => catalogue,
    run: () => undefined,
    runCost: () => ZERO,
    occurrence: () => undefined,
    wallets: new Map()
  }
}

const pages = (quantity: string, fields: Partial<SignalRecord> = {}, reservationId?: string) =>
  queued("UNIT", { agentKey: "pages", quantity: d(quantity), ...(reservationId === undefined ? {} : { reservationId }) }, fields)

/** Prices the signals in order, as one batch does, returning each one's outcome and the batch's writes. */
const price = (world: World, ...signals: ReadonlyArray<DecodedSignal>) => {
  const context = contextOf(world)
  const customers = new Map<string, CustomerContext>()
  const runCosts: RunCosts = new Map()
  const writes: Writes = noWrites()
  const outcomes = signals.map((signal) => priceOne(signal, context, customers, runCosts, writes))
  return { outcomes, writes, context }
}

const nothingWritten = (writes: Writes) => {
  expect(writes.usageRows).toEqual([])
  expect(writes.moves).toEqual([])
  expect(writes.spent).toEqual([])
  expect(writes.postings).toEqual([])
  expect(writes.settlements).toEqual([])
  expect(writes.endedCycles.size).toBe(0)
}

describe("a priced signal", () => {
  it("is processed: one usage row, its balance moves under the same usage id, the allowance drawn in memory", () => {
    const current = purchase([unitAdvance], { cmp_uadv: "10" })
    const signal = pages("3")
    const { outcomes, writes } = price({ purchase: current }, signal)
    const [outcome] = outcomes
    expect(outcome?._tag).toBe("Processed")
    if (outcome?._tag !== "Processed") return
    expect(outcome.customerId).toBe(CUSTOMER.id)
    expect(outcome.usageLogId).toMatch(/^usg_/)
    expect(writes.usageRows).toHaveLength(1)
    expect(writes.usageRows[0]).toMatchObject({
      organizationId: ORG,
      id: outcome.usageLogId,
      customerId: CUSTOMER.id,
      meter: "UNIT",
      agentKey: "pages",
      quantity: "3",
      billingMode: "ADVANCE",
      purchaseId: "pur_1",
      signalId: signal.record.id,
      occurredAt: MOMENT.toISOString(),
      cycleIndex: 3,
      advanceQuantity: "3",
      arrearQuantity: "0"
    })
    expect(writes.moves.length).toBeGreaterThan(0)
    for (const move of writes.moves) expect(move).toMatchObject({ purchaseId: "pur_1", componentId: "cmp_uadv", usageLogId: outcome.usageLogId })
    expect(text(current.balances.get("cmp_uadv")?.remaining)).toBe("7")
    expect(writes.endedCycles.size).toBe(0)
  })

  it("draws after the signals before it in the batch: the second finds what the first left, and is refused", () => {
    const current = purchase([unitAdvance], { cmp_uadv: "10" })
    const { outcomes, writes } = price({ purchase: current }, pages("6"), pages("6"), pages("4"))
    expect(outcomes.map((outcome) => outcome._tag)).toEqual(["Processed", "Failed", "Processed"])
    expect(outcomes[1]).toMatchObject({ code: codeOf("OutOfAllowance"), customerId: CUSTOMER.id })
    expect(writes.usageRows.map((row) => row.quantity)).toEqual(["6", "4"])
    expect(text(current.balances.get("cmp_uadv")?.remaining)).toBe("0")
  })

  it("of an ended cycle names that cycle for its draft invoice and never counts in the current spent", () => {
    const ended = purchase([unitAdvance], { cmp_uadv: "5" }, true)
    const { outcomes, writes } = price({ purchase: null, cycle: { _tag: "Billed", purchase: ended, period: null, activeCycle: null } }, pages("2"))
    expect(outcomes[0]?._tag).toBe("Processed")
    expect([...writes.endedCycles.values()]).toEqual([{ organizationId: ORG, purchaseId: "pur_1", cycleIndex: 3 }])
    expect(writes.spent).toEqual([])
  })

  it("settles the spend hold it names", () => {
    const signal = pages("1", {}, "rsv_1")
    const { outcomes, writes } = price({ purchase: purchase([unitAdvance], { cmp_uadv: "10" }) }, signal)
    const [outcome] = outcomes
    if (outcome?._tag !== "Processed") throw new Error(`expected Processed, got ${outcome?._tag}`)
    expect(writes.settlements).toEqual([
      { organizationId: ORG, reservationId: "rsv_1", customerId: CUSTOMER.id, signalId: signal.record.id, usageLogId: outcome.usageLogId }
    ])
  })

  it("of the wallet debits it in memory and posts the debit under its usage id", () => {
    const world = { purchase: purchase([walletComponent], {}), wallet: "5" }
    const { outcomes, writes, context } = price(world, queued("WALLET", { usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 500 } }))
    const [outcome] = outcomes
    if (outcome?._tag !== "Processed") throw new Error(`expected Processed, got ${outcome?._tag}`)
    expect(writes.postings).toHaveLength(1)
    expect(writes.postings[0]).toMatchObject({ organizationId: ORG, customerId: CUSTOMER.id, type: "USAGE_LOG", usageLogId: outcome.usageLogId })
    expect(text(writes.postings[0]?.delta)).toBe("-0.0075")
    expect(text(context.customerContext(CUSTOMER).wallet?.balance)).toBe("4.9925")
  })
})

describe("a signal that is not priced", () => {
  it("fails 404 when its customer id is unknown, with nothing written", () => {
    const { outcomes, writes } = price({ purchase: null }, pages("1", { customerId: "cus_missing" }))
    expect(outcomes[0]).toMatchObject({ _tag: "Failed", status: 404, code: codeOf("CustomerNotFound"), customerId: null })
    nothingWritten(writes)
  })

  it("fails 409 when its customer is archived", () => {
    const archived: Customer = { ...CUSTOMER, archivedAt: new Date("2026-10-01T00:00:00.000Z") }
    const { outcomes } = price({ purchase: null, customers: [archived] }, pages("1"))
    expect(outcomes[0]).toMatchObject({ _tag: "Failed", status: 409, code: codeOf("CustomerArchived") })
  })

  it("is held PENDING when no active customer holds its externalId", () => {
    const { outcomes, writes } = price({ purchase: null }, pages("1", { customerId: null, externalId: "nobody" }))
    expect(outcomes[0]).toEqual({ _tag: "Pending", message: "No active customer has externalId nobody" })
    nothingWritten(writes)
  })

  it("is priced for the customer holding its externalId", () => {
    const { outcomes } = price({ purchase: purchase([unitAdvance], { cmp_uadv: "10" }) }, pages("1", { customerId: null, externalId: "jo-1" }))
    expect(outcomes[0]).toMatchObject({ _tag: "Processed", customerId: CUSTOMER.id })
  })

  it("fails naming its customer when its member does not belong to that customer", () => {
    const { outcomes, writes } = price({ purchase: purchase([unitAdvance], { cmp_uadv: "10" }) }, pages("1", { member: "bob@example.com" }))
    expect(outcomes[0]).toMatchObject({ _tag: "Failed", code: codeOf("UnknownMember"), customerId: CUSTOMER.id })
    nothingWritten(writes)
  })

  it("waits for its purchase's renewal, naming the purchase and its period end, with nothing written", () => {
    const periodEnd = new Date("2026-11-01T00:00:00.000Z")
    const { outcomes, writes } = price({ purchase: null, cycle: { _tag: "Waiting", purchaseId: "pur_1", periodEnd } }, pages("1"))
    expect(outcomes[0]).toEqual({
      _tag: "Waiting",
      organizationId: ORG,
      customerId: CUSTOMER.id,
      externalId: CUSTOMER.externalId,
      purchaseId: "pur_1",
      periodEnd
    })
    nothingWritten(writes)
  })

  it("fails with the meters' refusal, naming its customer, when its plan does not sell what it reports", () => {
    const current = purchase([unitAdvance], { cmp_uadv: "10" })
    const { outcomes, writes } = price({ purchase: current }, queued("UNIT", { agentKey: "faxes", quantity: d("1") }))
    expect(outcomes[0]).toMatchObject({ _tag: "Failed", code: codeOf("NotOnPlan"), customerId: CUSTOMER.id })
    nothingWritten(writes)
    expect(text(current.balances.get("cmp_uadv")?.remaining)).toBe("10")
  })
})
