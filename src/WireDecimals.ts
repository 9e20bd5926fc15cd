/**
 * Exact decimals in the API's JSON. An amount is a JSON number on the wire
 * (the spec's contract), and `JSON.stringify` writes a number from a float: a
 * decimal whose digits a float cannot hold (more than 15 significant digits,
 * `1234567.123456789012`) lost its last digits, and a small one was written with
 * an exponent (`1e-7`). A client that reads the number's text (client/,
 * `decimals: "string"`) could not get the exact amount back.
 *
 * So `Money` (src/schema.ts) encodes through `encodeDecimal`: a decimal whose
 * float writes exactly its digits is that number, as before; any other one,
 * while a JSON answer of the API is being made (`ExactDecimalsWire`, set by
 * src/http/ExactDecimals.ts around each request, or `exactJsonText` around a
 * synchronous encode), is a marker string carrying its digits, which
 * `replaceMarkers` turns into the bare number in the answer's text. Everywhere
 * else (the CLI, stored snapshots, webhook bodies made by schema) nothing
 * changes: the encode gives the float, as it always did.
 */
import { BigDecimal, Effect, FiberRef, ParseResult } from "effect"

/** Whether the fiber is making an API answer whose text `replaceMarkers` will read. */
export const ExactDecimalsWire = FiberRef.unsafeMake(false)

/** Set while `exactJsonText` runs its synchronous encode. */
let synchronousWire = false

const marker = "\u0000decimal:"

/** The marker as `JSON.stringify` writes it, opening quote included: what a text holding one contains. */
export const markerInJson = JSON.stringify(marker).slice(0, -1)

const markerPattern = /"\\u0000decimal:(-?\d+(?:\.\d+)?)"/g

/** The plain text of a normalized decimal whose unscaled digits (no sign) are `digits`. */
const plainOf = (digits: string, scale: number, negative: boolean): string => {
  let text: string
  if (scale <= 0) text = digits === "0" ? "0" : digits + "0".repeat(-scale)
  else {
    const padded = digits.padStart(scale + 1, "0")
    text = `${padded.slice(0, -scale)}.${padded.slice(-scale)}`
  }
  return negative ? `-${text}` : text
}

/** A decimal's plain text: its digits, no exponent, no trailing zeros (`0.0000001`, `1234567.123456789012`). */
export const plainText = (value: BigDecimal.BigDecimal): string => {
  const { scale, value: unscaled } = BigDecimal.normalize(value)
  const negative = unscaled < 0n
  return plainOf((negative ? -unscaled : unscaled).toString(), scale, negative)
}

/**
 * A decimal for JSON: the number whose text is exactly its digits; or, on the wire, a marker carrying them (a
 * float would change them); or, anywhere else, the nearest float.
 */
export const encodeDecimal = (value: BigDecimal.BigDecimal) => {
  const { scale, value: unscaled } = BigDecimal.normalize(value)
  const negative = unscaled < 0n
  const digits = (negative ? -unscaled : unscaled).toString()
  const text = plainOf(digits, scale, negative)
  const number = Number(text)
  // Nearly every amount: at most 15 significant digits (a float keeps them all, and its shortest text is they) and
  // between 1e-6 and 1e21 (where that text has no exponent). Else the float's text is compared with the digits.
  const exponent = digits.length - scale - 1
  if ((digits.length <= 15 && exponent >= -6 && exponent <= 20) || String(number) === text) {
    return ParseResult.succeed<number | string>(number)
  }
  if (synchronousWire) return ParseResult.succeed<number | string>(`${marker}${text}`)
  return Effect.map(FiberRef.get(ExactDecimalsWire), (wire): number | string => (wire ? `${marker}${text}` : number))
}

/** `json` with every marker replaced by the bare number it carries. */
export const replaceMarkers = (json: string): string => (json.includes(markerInJson) ? json.replace(markerPattern, "$1") : json)

/** The JSON text `make` writes (by a synchronous encode and `JSON.stringify`), with its decimals exact. */
export const exactJsonText = (make: () => string): string => {
  synchronousWire = true
  try {
    return replaceMarkers(make())
  } finally {
    synchronousWire = false
  }
}
