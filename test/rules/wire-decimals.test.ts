/**
 * Amounts in the API's JSON are written with their exact digits
 * (src/WireDecimals.ts): a decimal whose float writes its digits stays that
 * number; any other one is a marker while an answer is made, which the
 * answer's text turns into the bare digits; elsewhere it is the nearest float,
 * as before. And the client's reader of those digits (client/src/decimals.ts).
 */
import { BigDecimal, Effect, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { parseJson, plainDecimal } from "../../client/src/decimals.ts"
import { Money } from "../../src/schema.ts"
import { encodeDecimal, ExactDecimalsWire, exactJsonText, plainText, replaceMarkers } from "../../src/WireDecimals.ts"

const decimal = (text: string) => BigDecimal.unsafeFromString(text)

describe("plainText", () => {
  it.each([
    ["0", "0"],
    ["-0.0", "0"],
    ["2.50", "2.5"],
    ["100", "100"],
    ["0.0000001", "0.0000001"],
    ["-0.000000000001", "-0.000000000001"],
    ["1234567.123456789012", "1234567.123456789012"],
    ["1e25", "10000000000000000000000000"],
    ["1.5e-20", "0.000000000000000000015"]
  ])("%s is written %s", (input, written) => {
    expect(plainText(decimal(input))).toBe(written)
  })
})

const encodeOnWire = (value: BigDecimal.BigDecimal) =>
  Effect.runSync(Effect.locally(Schema.encode(Money)(value), ExactDecimalsWire, true))

describe("Money's encode", () => {
  it("is the number itself when the float writes the digits, on the wire and off it", () => {
    for (const text of ["0", "20", "19.994", "-0.1", "0.000001", "123456789012345", "9999999999999.99"]) {
      expect(encodeOnWire(decimal(text)), text).toBe(Number(text))
      expect(Schema.encodeSync(Money)(decimal(text)), text).toBe(Number(text))
    }
  })

  it("is a marker of the digits on the wire when a float would change them, and the float elsewhere", () => {
    for (const text of ["1234567.123456789012", "0.0000001", "1e21", "0.1234567890123456789", "99999999999999.99"]) {
      const value = decimal(text)
      const marked = encodeOnWire(value)
      expect(typeof marked, text).toBe("string")
      expect(replaceMarkers(JSON.stringify({ amount: marked }))).toBe(`{"amount":${plainText(value)}}`)
      expect(Schema.encodeSync(Money)(value)).toBe(Number(plainText(value)))
    }
  })

  it("writes the digits in a synchronous encode inside exactJsonText, and only there", () => {
    const encode = Schema.encodeSync(Schema.Struct({ amount: Money, count: Schema.Number }))
    const value = { amount: decimal("1234567.123456789012"), count: 3 }
    expect(exactJsonText(() => JSON.stringify(encode(value)))).toBe(`{"amount":1234567.123456789012,"count":3}`)
    expect(JSON.stringify(encode(value))).toBe(`{"amount":1234567.123456789,"count":3}`)
  })

  it("never makes a number whose text differs from the digits (random decimals)", () => {
    let seed = 7
    const next = (bound: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % bound
    for (let i = 0; i < 20_000; i++) {
      const digits = BigInt(`${next(10 ** 8)}${next(10 ** 8)}`.slice(0, 1 + next(17)))
      const value = BigDecimal.make(next(3) === 0 ? -digits : digits, next(30) - 8)
      const encoded = encodeDecimal(value)
      if (Either.isEither(encoded) && Either.isRight(encoded) && typeof encoded.right === "number") {
        expect(String(encoded.right)).toBe(plainText(value))
      }
    }
  })
})

describe("the client's reader", () => {
  it("writes a JSON number's text as a plain decimal", () => {
    expect(["1e-7", "2.50", "-0", "-0.0", "1.5E+3", "0.000", "12", "-1.25e1", "123.456e-2"].map(plainDecimal))
      .toEqual(["0.0000001", "2.5", "0", "0", "1500", "0", "12", "-12.5", "1.23456"])
    expect(() => plainDecimal("1.")).toThrow(SyntaxError)
  })

  it("parses as JSON.parse does, with the shape's numbers as their digits", () => {
    const escaped = JSON.stringify("a\\\"b\u00e9\n")
    const text = ` {"a": 1.10, "b": [ {"c": 1e-7, "d": 2}, {"c": -3} ], "m": {"x": {"v": 0.30000000000000004}},` +
      ` "s": ${escaped}, "t": true, "f": false, "n": null, "__proto__": {"c": 1}} `
    const shape = { a: 1, b: { "[]": { c: 1 } }, m: { "{}": { v: 1 } } } as const
    expect(parseJson(text, shape)).toEqual({
      a: "1.1",
      b: [{ c: "0.0000001", d: 2 }, { c: "-3" }],
      m: { x: { v: "0.30000000000000004" } },
      s: "a\\\"b\u00e9\n",
      t: true,
      f: false,
      n: null,
      ["__proto__"]: { c: 1 }
    })
    const parsed = parseJson(text, shape) as Record<string, unknown>
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype)
    expect(Object.keys(parsed)).toContain("__proto__")
    // Without a shape, and for anything the shape does not name: JSON.parse's values.
    expect(parseJson(text)).toEqual(JSON.parse(text))
    for (const bad of ["", "{", "[1,]", `{"a":01}`, `{"a":1} x`, `"\u0001"`, "tru"]) {
      expect(() => parseJson(bad, {}), bad).toThrow(SyntaxError)
    }
  })
})
