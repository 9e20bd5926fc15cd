/**
 * Exact decimals. SQL keeps money in NUMERIC, TypeScript in BigDecimal, and the
 * wire carries JSON numbers. Nothing in between is a float.
 */
import { BigDecimal, Schema } from "effect"

export type Decimal = BigDecimal.BigDecimal

/** A NUMERIC column as node-postgres returns it: a decimal string. */
export const DecimalFromString = Schema.BigDecimal

/** A JSON number on the wire. */
export const DecimalFromNumber = Schema.BigDecimalFromNumber

/** Usage amounts keep this many decimal places (docs/signals.md "Pricing per meter"). */
export const USAGE_SCALE = 12

export const ZERO = BigDecimal.fromBigInt(0n)
export const ONE = BigDecimal.fromBigInt(1n)
export const HUNDRED = BigDecimal.fromBigInt(100n)
export const MILLION = BigDecimal.fromBigInt(1_000_000n)

export const decimal = (text: string | number): Decimal =>
  typeof text === "number" ? BigDecimal.unsafeFromNumber(text) : BigDecimal.unsafeFromString(text)

/** The SQL parameter for a NUMERIC column. */
export const toSql = (value: Decimal): string => BigDecimal.format(BigDecimal.normalize(value))

export const toNumber = (value: Decimal): number => BigDecimal.unsafeToNumber(value)

export const sum = (values: Iterable<Decimal>): Decimal => {
  let total = ZERO
  for (const value of values) total = BigDecimal.sum(total, value)
  return total
}

/** Rounds half away from zero to `scale` decimal places. */
export const roundTo = (value: Decimal, scale: number): Decimal =>
  BigDecimal.normalize(BigDecimal.round(value, { scale, mode: "half-from-zero" }))

/** `dividend / divisor` rounded to `scale` places; the divisor must not be zero. */
export const divideTo = (dividend: Decimal, divisor: Decimal, scale = USAGE_SCALE): Decimal =>
  roundTo(BigDecimal.unsafeDivide(dividend, divisor), scale)
