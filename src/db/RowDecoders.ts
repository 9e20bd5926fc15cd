/**
 * Row decoders written by hand, for the few statements that read thousands of
 * rows a call (the cycle job's claimed purchases and their balance rows).
 * `decodeRows` runs a row's Schema field by field through ParseResult's
 * machinery: on a billing day that was a large share of everything the process
 * allocated, and the garbage collector's time with it (docs/benchmarks.md,
 * "Figures that were in code comments"). A decoder here checks
 * each field exactly as the field's Schema would (`string` as Schema.String,
 * `timestamp` as src/schema.ts Timestamp, `money` as Money, `literal` as
 * Schema.Literal) and returns only the fields it names, in their order, as a
 * Struct does; a row that does not decode is a defect, as with `decodeRows`.
 */
import { BigDecimal, Effect } from "effect"

/** One field's check and conversion; throws `FieldError` when the value is not what the field reads. */
export type Field<A> = (value: unknown) => A

class FieldError extends Error {}

const fail = (expected: string, value: unknown): never => {
  throw new FieldError(`expected ${expected}, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`)
}

export const string: Field<string> = (value) => (typeof value === "string" ? value : fail("a string", value))

export const number: Field<number> = (value) => (typeof value === "number" ? value : fail("a number", value))

export const boolean: Field<boolean> = (value) => (typeof value === "boolean" ? value : fail("a boolean", value))

export const literal = <const L extends ReadonlyArray<string>>(literals: L): Field<L[number]> => {
  const allowed = new Set<unknown>(literals)
  return (value) => (allowed.has(value) ? (value as L[number]) : fail(literals.join(" | "), value))
}

/** src/schema.ts `Timestamp`: a Date, or text a Date reads; never an invalid date. */
export const timestamp: Field<Date> = (value) => {
  const date = value instanceof Date ? value : typeof value === "string" ? new Date(value) : fail("a timestamp", value)
  return Number.isNaN(date.getTime()) ? fail("a valid timestamp", value) : date
}

/**
 * Decimals by their text: a billing day's rows repeat a handful of values
 * (the plan's quantities, zero), and a BigDecimal is immutable, so one value
 * serves every row that has its text. Bounded, dropped when full.
 */
const decimals = new Map<string, BigDecimal.BigDecimal>()
const DECIMALS_KEPT = 10_000

/** src/schema.ts `Money`: decimal text (a NUMERIC column) or a number, normalised. */
export const money: Field<BigDecimal.BigDecimal> = (value) => {
  if (typeof value === "string") {
    let decimal = decimals.get(value)
    if (decimal === undefined) {
      const parsed = BigDecimal.fromString(value)
      decimal = parsed._tag === "Some" ? BigDecimal.normalize(parsed.value) : fail("a decimal number", value)
      if (decimals.size >= DECIMALS_KEPT) decimals.clear()
      decimals.set(value, decimal)
    }
    return decimal
  }
  if (typeof value === "number") {
    const parsed = BigDecimal.safeFromNumber(value)
    return parsed._tag === "Some" ? BigDecimal.normalize(parsed.value) : fail("a decimal number", value)
  }
  return fail("a decimal number", value)
}

/** `Schema.NullOr` of a field. */
export const nullOr = <A>(field: Field<A>): Field<A | null> => (value) => (value === null ? null : field(value))

/** `Schema.Array` of a field (a json array the row carries). */
export const array = <A>(field: Field<A>): Field<Array<A>> => (value) => {
  if (!Array.isArray(value)) return fail("an array", value)
  return value.map((item, index) => {
    try {
      return field(item)
    } catch (error) {
      throw error instanceof FieldError ? new FieldError(`[${index}]: ${error.message}`) : error
    }
  })
}

/** `Schema.Struct` of `fields` (a json object the row carries, or the row itself): their values, in their order, and nothing else. */
export const struct = <F extends Record<string, Field<unknown>>>(
  fields: F
): Field<{ -readonly [K in keyof F]: ReturnType<F[K]> }> => {
  const entries = Object.entries(fields)
  return (value) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return fail("an object", value)
    const source = value as Record<string, unknown>
    const out: Record<string, unknown> = {}
    for (const [key, field] of entries) {
      try {
        out[key] = field(source[key])
      } catch (error) {
        throw error instanceof FieldError ? new FieldError(`${key}: ${error.message}`) : error
      }
    }
    return out as { -readonly [K in keyof F]: ReturnType<F[K]> }
  }
}

/** A row of `fields`, in their order, and nothing else. */
export const rowDecoder = <F extends Record<string, Field<unknown>>>(name: string, fields: F) => {
  const decodeStruct = struct(fields)
  const decodeRow = (row: unknown) => {
    try {
      return decodeStruct(row)
    } catch (error) {
      throw error instanceof FieldError ? new FieldError(`${name}.${error.message}`) : error
    }
  }
  /** Every row decoded; one that does not decode is a defect. */
  return (rows: ReadonlyArray<unknown>) => Effect.orDie(Effect.try({ try: () => rows.map(decodeRow), catch: (error) => error }))
}
