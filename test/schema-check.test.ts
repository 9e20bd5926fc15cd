/**
 * The plain check that stands in for the decoder on the intake path
 * (src/SchemaCheck.ts) is held to Effect's decoder itself, the independent
 * oracle: on generated values, valid ones from each schema's Arbitrary and
 * broken ones made from them, it vouches for a value exactly when the decoder
 * accepts it and returns it unchanged. (The one valid value the decoder
 * changes: an object with an own "__proto__" key, which its copy drops.)
 *
 * The runs are seeded, so CI sees the same values every time; FC_SEED=<n>
 * explores other ones by hand.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { isDeepStrictEqual } from "node:util"
import { checkOf, identityDecoder } from "../src/SchemaCheck.ts"
import { schemaOfRoute } from "../src/signals/Signal.ts"

const routes = ["CREDIT", "OUTCOME", "WALLET"] as const

const seed = process.env.FC_SEED === undefined ? 20261127 : Number(process.env.FC_SEED)

/** Whether an own "__proto__" key sits anywhere in the value: the decoder's copy drops it, so the value is not its own decoding. */
const holdsProtoKey = (value: unknown): boolean =>
  typeof value === "object" && value !== null &&
  (Object.hasOwn(value, "__proto__") || Object.values(value).some(holdsProtoKey))

/** The law: vouched for exactly when the decoder gives the value back unchanged. */
const agrees = (check: (value: unknown) => boolean, decode: (value: unknown) => Either.Either<unknown, unknown>) =>
  (value: unknown) => {
    const decoded = decode(value)
    return check(value) === (Either.isRight(decoded) && isDeepStrictEqual(decoded.right, value))
  }

/** A value with one change: a field removed, replaced by any JSON, or added; or the whole value replaced. */
const broken = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof(
    fc.tuple(valid, fc.nat(), fc.jsonValue()).map(([value, pick, json]) => {
      if (typeof value !== "object" || value === null) return json
      const keys = Object.keys(value)
      if (keys.length === 0) return json
      const copy: Record<string, unknown> = { ...value }
      copy[keys[pick % keys.length]!] = json
      return copy
    }),
    fc.tuple(valid, fc.nat()).map(([value, pick]) => {
      const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) }
      const keys = Object.keys(copy)
      if (keys.length > 0) delete copy[keys[pick % keys.length]!]
      return copy
    }),
    fc.tuple(valid, fc.string(), fc.jsonValue()).map(([value, key, json]) => ({ ...(value as object), [key]: json })),
    fc.tuple(valid, fc.jsonValue()).map(([value, json]) => ({
      ...(value as object),
      usage: { ...((value as { usage?: object }).usage ?? {}), extra: json }
    })),
    fc.jsonValue()
  )

describe("the plain check of a signal body", () => {
  for (const route of routes) {
    const schema = schemaOfRoute[route] as unknown as Schema.Schema<unknown, unknown>
    const check = checkOf(schema.ast)
    const decode = Schema.decodeUnknownEither(schema)
    const valid = Arbitrary.make(schema)

    it(`${route}: vouches for the valid bodies the decoder returns unchanged, and only those`, () => {
      fc.assert(fc.property(valid, agrees(check, decode)), { numRuns: 300, seed })
      // The schema's Arbitrary knows nothing of "__proto__": a record holding one may lose its only key to the
      // decoder's copy (a composite tag then has no property and is refused), so those are not valid bodies.
      fc.assert(fc.property(valid, (value) => holdsProtoKey(value) || Either.isRight(decode(value))), { numRuns: 100, seed })
    })

    it(`${route}: agrees with the decoder on broken bodies`, () => {
      fc.assert(fc.property(broken(valid), agrees(check, decode)), { numRuns: 1000, seed })
    })
  }

  it("leaves a body with a \"__proto__\" key to the decoder, which drops it", () => {
    const body = JSON.parse(`{"customerId":"cus_1","agentKey":"chat","usage":{"model":"m"},"custom":{"__proto__":{"a":1},"b":2}}`)
    expect(checkOf(schemaOfRoute.CREDIT.ast)(body)).toBe(false)
    const decoded = identityDecoder(schemaOfRoute.CREDIT)(body)
    expect(Either.isRight(decoded) && JSON.stringify(decoded.right.custom)).toBe(`{"b":2}`)
  })

  it("answers a refused body with the decoder's own error", () => {
    const decode = identityDecoder(schemaOfRoute.CREDIT)
    const refused = decode({ customerId: "cus_1", agentKey: "", usage: { model: "gpt-4o" } })
    expect(Either.isLeft(refused)).toBe(true)
    expect(String(Either.getLeft(refused).pipe((left) => left._tag === "Some" ? left.value.message : ""))).toContain("must not be empty")
    const accepted = { customerId: "cus_1", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 3 } }
    expect(decode(accepted)).toEqual(Either.right(accepted))
  })

  it("never vouches for what it does not judge: a transformation, a declaration, a struct with a record, a tuple", () => {
    expect(checkOf(Schema.NumberFromString.ast)("1")).toBe(false)
    expect(checkOf(Schema.Struct({ at: Schema.DateFromSelf }).ast)({ at: new Date(0) })).toBe(false)
    expect(checkOf(Schema.Struct({ a: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.String })).ast)({ a: "x" }))
      .toBe(false)
    expect(checkOf(Schema.Tuple(Schema.String).ast)(["x"])).toBe(false)
    // A non-strict struct drops an unknown field: the decoded value is not the input, so the check refuses it too.
    const loose = Schema.Struct({ a: Schema.String })
    expect(checkOf(loose.ast)({ a: "x", b: 1 })).toBe(false)
    expect(Schema.decodeUnknownSync(loose)({ a: "x", b: 1 })).toEqual({ a: "x" })
    // The decoder of a schema that does not decode to itself is the schema's own.
    expect(identityDecoder(Schema.NumberFromString)("1")).toEqual(Either.right(1))
  })
})
