/**
 * Exact decimals out of JSON text. The API sends amounts as JSON numbers whose
 * text is the amount's digits (src/schema.ts `Money`); `JSON.parse` turns them
 * into floats, which cannot hold every decimal (`0.1 + 0.2`), and a number of
 * more than 15 significant digits loses its last ones. `parseJson` reads the
 * text itself and gives the numbers at the places a `DecimalShape` names
 * (generated from the document's `format: decimal` schemas) as decimal
 * strings, digit for digit; every other value is what `JSON.parse` makes.
 */

/**
 * The places of exact decimals in a JSON value: `1` is a decimal itself; an object names the properties that hold
 * some, with `"[]"` for an array's items and `"{}"` for a map's values.
 */
export type DecimalShape = 1 | { readonly [key: string]: DecimalShape }

const numberLiteral = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

/**
 * A JSON number's text as a plain decimal: no exponent, no `+`, no leading zeros before the point nor trailing
 * zeros after it (`"1e-7"` → `"0.0000001"`, `"2.50"` → `"2.5"`, `"-0"` → `"0"`). The digits are never read as a float.
 */
export const plainDecimal = (literal: string): string => {
  const match = numberLiteral.exec(literal)
  if (match === null) throw new SyntaxError(`not a JSON number: ${JSON.stringify(literal)}`)
  const [, sign, whole = "", fraction = "", exponent = "0"] = match
  let digits = whole + fraction
  // Where the point falls in `digits`, after the exponent moved it.
  let point = whole.length + Number(exponent)
  if (point <= 0) {
    digits = "0".repeat(1 - point) + digits
    point = 1
  } else if (point > digits.length) {
    digits += "0".repeat(point - digits.length)
  }
  const integer = digits.slice(0, point).replace(/^0+(?=\d)/, "")
  const decimals = digits.slice(point).replace(/0+$/, "")
  const text = decimals === "" ? integer : `${integer}.${decimals}`
  return sign === "-" && /[1-9]/.test(text) ? `-${text}` : text
}

const whitespace = /[ \t\n\r]*/y
const numberToken = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y
const stringToken = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y

const childShape = (shape: DecimalShape | undefined, key: string): DecimalShape | undefined =>
  shape === undefined || shape === 1
    ? undefined
    : Object.prototype.hasOwnProperty.call(shape, key)
    ? shape[key]
    : Object.prototype.hasOwnProperty.call(shape, "{}")
    ? shape["{}"]
    : undefined

class Reader {
  private at = 0
  constructor(private readonly text: string) {}

  fail(what: string): never {
    throw new SyntaxError(`${what} in JSON at position ${this.at}`)
  }

  skip() {
    whitespace.lastIndex = this.at
    whitespace.exec(this.text)
    this.at = whitespace.lastIndex
  }

  end() {
    this.skip()
    if (this.at !== this.text.length) this.fail("Unexpected text after the value")
  }

  private token(pattern: RegExp): string | undefined {
    pattern.lastIndex = this.at
    const match = pattern.exec(this.text)
    if (match === null) return undefined
    this.at = pattern.lastIndex
    return match[0]
  }

  private string(): string {
    const token = this.token(stringToken) ?? this.fail("Bad string")
    return token.includes("\\") ? (JSON.parse(token) as string) : token.slice(1, -1)
  }

  private expect(character: string) {
    this.skip()
    if (this.text[this.at] !== character) this.fail(`Expected '${character}'`)
    this.at++
  }

  value(shape: DecimalShape | undefined): unknown {
    this.skip()
    const character = this.text[this.at]
    if (character === "{") {
      this.at++
      const object: Record<string, unknown> = {}
      this.skip()
      if (this.text[this.at] === "}") {
        this.at++
        return object
      }
      for (;;) {
        this.skip()
        const key = this.string()
        this.expect(":")
        const value = this.value(childShape(shape, key))
        // As JSON.parse: "__proto__" is a property like any other, never the object's prototype.
        if (key === "__proto__") Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true })
        else object[key] = value
        this.skip()
        if (this.text[this.at] === ",") {
          this.at++
          continue
        }
        this.expect("}")
        return object
      }
    }
    if (character === "[") {
      this.at++
      const array: Array<unknown> = []
      const items = childShape(shape, "[]")
      this.skip()
      if (this.text[this.at] === "]") {
        this.at++
        return array
      }
      for (;;) {
        array.push(this.value(items))
        this.skip()
        if (this.text[this.at] === ",") {
          this.at++
          continue
        }
        this.expect("]")
        return array
      }
    }
    if (character === "\"") return this.string()
    if (character === "-" || (character !== undefined && character >= "0" && character <= "9")) {
      const literal = this.token(numberToken) ?? this.fail("Bad number")
      return shape === 1 ? plainDecimal(literal) : Number(literal)
    }
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length
        return value
      }
    }
    return this.fail(character === undefined ? "Unexpected end" : `Unexpected token '${character}'`)
  }
}

/**
 * `JSON.parse(text)`, except that the numbers at the places of `shape` are plain decimal strings of their exact
 * digits (`plainDecimal`). Without a shape it is `JSON.parse`.
 */
export const parseJson = (text: string, shape?: DecimalShape): unknown => {
  if (shape === undefined) return JSON.parse(text)
  const reader = new Reader(text)
  const value = reader.value(shape)
  reader.end()
  return value
}

/**
 * A value's type with the numbers at the places of shape `S` as decimal strings: what `parseJson` makes of a JSON
 * value of type `T`. `null` and absent values stay as they are.
 */
export type WithDecimalStrings<T, S> = [S] extends [never] ? T
  : S extends 1 ? (T extends number ? string : T)
  : T extends ReadonlyArray<infer E> ? (S extends { readonly "[]": infer I } ? Array<WithDecimalStrings<E, I>> : T)
  : T extends object ? (
      S extends { readonly "{}": infer V } ? { [P in keyof T]: WithDecimalStrings<T[P], P extends keyof S ? S[P] : V> }
        : { [P in keyof T]: P extends keyof S ? WithDecimalStrings<T[P], S[P]> : T[P] }
    )
  : T
