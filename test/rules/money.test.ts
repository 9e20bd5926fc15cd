/**
 * The exact decimals of src/money.ts: `decimal` reads a JSON number as the
 * decimal it prints as, the same as its text (a number never reaches
 * BigDecimal's string parser, which would throw).
 */
import { describe, expect, it } from "vitest"
import { decimal, toSql } from "../../src/money.ts"

describe("decimal", () => {
  it("reads a number as the same exact decimal as its text", () => {
    expect([decimal(0.1), decimal(1.5), decimal(-3.25), decimal(12)].map(toSql)).toEqual(["0.1", "1.5", "-3.25", "12"])
    expect(toSql(decimal("0.10"))).toBe("0.1")
  })
})
