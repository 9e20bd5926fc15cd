/**
 * The hand-written row decoders (src/db/RowDecoders.ts) read a row exactly as
 * its Schema does: the same values for rows that decode, a defect for rows
 * that do not. Checked against a Struct of the same fields, on the balance row
 * the cycle job reads by the thousand, on the rows the cycle job locks (its
 * purchases and their balance rows, against their own Schemas), and on the
 * check's quick read (nested json objects and arrays, a snapshot as text).
 */
import { BigDecimal, Cause, Effect, Equal, Exit, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { BalanceRow } from "../src/billing/Purchase.ts"
import { balanceRowFields, LockedBalance, lockedBalances, LockedRow, lockedRows } from "../src/billing/PurchaseRows.ts"
import * as Rows from "../src/db/RowDecoders.ts"
import { decodeQuickRows, QuickRowOf } from "../src/entitlements/QuickRead.ts"
import { Timestamp } from "../src/schema.ts"

const Struct = Schema.Struct({ organizationId: Schema.String, ...BalanceRow.fields, at: Schema.NullOr(Timestamp), flag: Schema.Boolean, n: Schema.Number })
const bySchema = Schema.decodeUnknown(Schema.Array(Struct))
const byHand = Rows.rowDecoder("balance", {
  ...balanceRowFields,
  at: Rows.nullOr(Rows.timestamp),
  flag: Rows.boolean,
  n: Rows.number
})

const row = (overrides: Record<string, unknown> = {}) => ({
  organizationId: "org_1",
  purchaseId: "pur_1",
  componentId: "cmp_1",
  customerId: "cus_1",
  type: "CREDIT",
  billingMode: "ARREAR",
  targetId: null,
  granted: "1000.000000000000",
  used: "12.5",
  remaining: "-0.10",
  originalGranted: null,
  cycleQuantity: 3,
  arrearAmount: "0",
  at: new Date("2026-01-31T10:00:00.000Z"),
  flag: true,
  n: 4,
  extra: "not a field",
  ...overrides
})

const same = (a: unknown, b: unknown): boolean => {
  if (BigDecimal.isBigDecimal(a) && BigDecimal.isBigDecimal(b)) return Equal.equals(a, b) && a.scale === b.scale
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime()
  if (typeof a === "object" && a !== null && typeof b === "object" && b !== null) {
    const keys = Object.keys(a)
    return keys.join() === Object.keys(b).join() && keys.every((key) => same((a as any)[key], (b as any)[key]))
  }
  return a === b
}

describe("row decoders", () => {
  it("decode what the Schema decodes to the same values, in the same fields and order", () => {
    const rows = [
      row(),
      row({ targetId: "crd_1", originalGranted: "900", at: "2026-02-01T00:00:00Z", flag: false }),
      row({ granted: "1000", used: "1000.00", remaining: "0E-12", at: null })
    ]
    const expected = Effect.runSync(bySchema(rows))
    const actual = Effect.runSync(byHand(rows))
    expect(actual).toHaveLength(rows.length)
    actual.forEach((decoded, i) => expect(same(decoded, expected[i]), `row ${i}`).toBe(true))
  })

  it.each([
    ["a decimal that is not one", { used: "12,5" }],
    ["a literal outside its set", { type: "CREDITS" }],
    ["a missing field", { customerId: undefined }],
    ["null where the field is not nullable", { granted: null }],
    ["an invalid timestamp", { at: "yesterday" }],
    ["a number as text", { n: "4" }],
    ["a boolean as text", { flag: "true" }]
  ])("fail where the Schema fails: %s", (_, overrides) => {
    const input = [row(overrides)]
    expect(Exit.isFailure(Effect.runSyncExit(bySchema(input)))).toBe(true)
    const exit = Effect.runSyncExit(byHand(input))
    expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
  })

  describe("the cycle job's locked rows", () => {
    const purchaseRow = (overrides: Record<string, unknown> = {}) => ({
      organizationId: "org_1",
      id: "pur_1",
      customerId: "cus_1",
      planId: "pln_1",
      status: "ACTIVE",
      billingDate: new Date("2026-01-01T00:00:00.000Z"),
      cycleIndex: 2,
      periodStart: new Date("2026-03-01T00:00:00.000Z"),
      periodEnd: "2026-04-01T00:00:00Z",
      autoPayment: false,
      spentThisCycle: "12.500000000000",
      snapshot: "{\"planId\":\"pln_1\"}",
      cancelledAt: null,
      createdAt: new Date("2026-01-01T00:00:00.000Z"),
      updatedAt: new Date("2026-03-01T00:00:00.000Z"),
      scheduledPlanId: null,
      scheduledSnapshot: null,
      hasRecurringGrant: true,
      invoiceGraceHours: 0,
      extra: "not a field",
      ...overrides
    })
    const purchasesBySchema = Schema.decodeUnknown(Schema.Array(LockedRow))
    const balancesBySchema = Schema.decodeUnknown(Schema.Array(LockedBalance))
    const balance = (overrides: Record<string, unknown> = {}) => {
      const { at: _at, flag: _flag, n: _n, ...columns } = row(overrides)
      return columns
    }

    it("decode the purchases the cycle job locks as LockedRow does", () => {
      const rows = [
        purchaseRow(),
        purchaseRow({ status: "SCHEDULED", periodStart: null, periodEnd: null, spentThisCycle: "0", hasRecurringGrant: false }),
        purchaseRow({ status: "CANCELLED", cancelledAt: "2026-03-15T12:00:00Z", scheduledPlanId: "pln_2", scheduledSnapshot: "{}", invoiceGraceHours: 48 })
      ]
      const expected = Effect.runSync(purchasesBySchema(rows))
      const actual = Effect.runSync(lockedRows(rows))
      expect(actual).toHaveLength(rows.length)
      actual.forEach((decoded, i) => expect(same(decoded, expected[i]), `row ${i}`).toBe(true))
    })

    it("decode their balance rows as LockedBalance does", () => {
      const rows = [balance(), balance({ targetId: "crd_1", originalGranted: "900" }), balance({ remaining: "0E-12" })]
      const expected = Effect.runSync(balancesBySchema(rows))
      const actual = Effect.runSync(lockedBalances(rows))
      expect(actual).toHaveLength(rows.length)
      actual.forEach((decoded, i) => expect(same(decoded, expected[i]), `row ${i}`).toBe(true))
    })

    it.each([
      ["a status outside its set", { status: "PAUSED" }],
      ["a spend that is not a decimal", { spentThisCycle: "12,5" }],
      ["a missing organisation", { organizationId: undefined }],
      ["an invalid period end", { periodEnd: "next month" }],
      ["a snapshot that is not text", { snapshot: { planId: "pln_1" } }],
      ["a grace period as text", { invoiceGraceHours: "24" }],
      ["a flag as text", { hasRecurringGrant: "true" }]
    ])("fail where LockedRow fails: %s", (_, overrides) => {
      const input = [purchaseRow(overrides)]
      expect(Exit.isFailure(Effect.runSyncExit(purchasesBySchema(input)))).toBe(true)
      const exit = Effect.runSyncExit(lockedRows(input))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    })
  })

  describe("the check's quick read", () => {
    const snapshot = {
      planId: "pln_1",
      name: "Plan",
      description: "",
      billingCycle: "MONTHLY",
      currencyCode: "USD",
      priceAdjustment: "0",
      walletFundedArrear: false,
      cost: "12.50",
      components: [{
        id: "cmp_1",
        type: "CREDIT",
        billingMode: "ADVANCE",
        targetId: "crd_1",
        targetName: "Chat",
        agentKey: "chat",
        quantity: "1000",
        amount: null,
        rollover: false,
        unitPrice: "0.0125",
        creditTerms: { basePrice: "0.01", tokensPerCredit: "1000", marginPercent: "25" },
        pricingType: null,
        flatPrice: null,
        tiers: [],
        charge: "12.50",
        steps: [],
        covers: { credits: [], outcomes: [], units: [] }
      }]
    }
    const quickRow = (overrides: Record<string, unknown> = {}) => ({
      request: 2,
      organizationId: "org_1",
      id: "cus_1",
      externalId: null,
      archivedAt: null,
      hasQueued: false,
      holds: [{ id: "rsv_1", meter: "CREDIT", targetId: "crd_1", amount: "2.5" }],
      purchase: {
        id: "pur_1",
        cycleIndex: 3,
        snapshot: JSON.stringify(snapshot),
        balances: [{ componentId: "cmp_1", remaining: "997.50", cycleQuantity: "2.5" }]
      },
      wallet: "10.00",
      credit: { id: "crd_1", name: "Chat", basePrice: "0.01", tokensPerCredit: "1000", marginPercent: "20" },
      step: null,
      unit: { id: "unt_1", name: "Seat" },
      models: [{ id: "gpt-4o", input: "2.5", output: "10", cacheRead: null, cacheWrite: "3.75" }],
      ...overrides
    })
    const quickBySchema = Schema.decodeUnknown(Schema.Array(QuickRowOf))

    it("decodes what the Schema decodes to the same values, the snapshot included", () => {
      const rows = [
        quickRow(),
        quickRow({ purchase: null, wallet: null, credit: null, unit: null, holds: [], models: [], archivedAt: "2026-03-01T00:00:00Z" }),
        quickRow({ externalId: "ext-1", hasQueued: true, step: { outcomeId: "out_1", outcomeName: "Draft", stepName: "write" } })
      ]
      const expected = Effect.runSync(quickBySchema(rows))
      const actual = Effect.runSync(decodeQuickRows(rows))
      expect(actual).toHaveLength(rows.length)
      actual.forEach((decoded, i) => expect(same(decoded, expected[i]), `row ${i}`).toBe(true))
    })

    it.each([
      ["a hold's meter outside its set", { holds: [{ id: "rsv_1", meter: "CREDITS", targetId: null, amount: "1" }] }],
      ["a model's rate that is not a decimal", { models: [{ id: "m", input: "x", output: "1", cacheRead: null, cacheWrite: null }] }],
      ["a snapshot that does not decode", { purchase: { id: "pur_1", cycleIndex: 0, snapshot: "{}", balances: [] } }],
      ["holds that are not an array", { holds: {} }],
      ["a credit missing a field", { credit: { id: "crd_1", name: "Chat" } }]
    ])("fails where the Schema fails: %s", (_, overrides) => {
      const input = [quickRow(overrides)]
      expect(Exit.isFailure(Effect.runSyncExit(quickBySchema(input)))).toBe(true)
      const exit = Effect.runSyncExit(decodeQuickRows(input))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    })
  })
})
