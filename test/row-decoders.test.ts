/**
 * The hand-written row decoders (src/db/RowDecoders.ts) read a row exactly as
 * its Schema does: the same values for rows that decode, a defect for rows
 * that do not. Checked against a Struct of the same fields, on the balance row
 * the cycle job reads by the thousand.
 */
import { BigDecimal, Cause, Effect, Equal, Exit, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { BalanceRow } from "../src/billing/Purchase.ts"
import { balanceRowFields } from "../src/billing/Purchases.ts"
import * as Rows from "../src/db/RowDecoders.ts"
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
})
