/**
 * Field schemas shared across the domain: the spec's patterns and limits in one
 * place, plus the two representation-crossing types (timestamps and money) that
 * decode from database rows and encode to the wire.
 */
import { BigDecimal, Effect, FiberRef, ParseResult, Schema } from "effect"
import { encodeDecimal } from "./WireDecimals.ts"

/** A timestamp: a Date from the database (or an ISO string), an ISO 8601 string on the wire. */
export const Timestamp = Schema.transformOrFail(
  Schema.Union(Schema.DateFromSelf, Schema.String),
  Schema.DateFromSelf,
  {
    strict: true,
    decode: (value, _, ast) => {
      const date = value instanceof Date ? value : new Date(value)
      return Number.isNaN(date.getTime())
        ? ParseResult.fail(new ParseResult.Type(ast, value, "not a valid timestamp"))
        : ParseResult.succeed(date)
    },
    encode: (date) => ParseResult.succeed(date.toISOString())
  }
).annotations({ identifier: "Timestamp", jsonSchema: { type: "string", format: "date-time" } })

/**
 * An exact decimal: decoded from a NUMERIC column's string (or a number),
 * encoded as a JSON number for the wire, whose text in an API answer is its
 * exact digits (src/WireDecimals.ts).
 */
export const Money = Schema.transformOrFail(
  Schema.Union(Schema.String, Schema.Number),
  Schema.BigDecimalFromSelf,
  {
    strict: true,
    decode: (value, _, ast) => {
      const parsed = typeof value === "number" ? BigDecimal.safeFromNumber(value) : BigDecimal.fromString(value)
      return parsed._tag === "Some"
        ? ParseResult.succeed(BigDecimal.normalize(parsed.value))
        : ParseResult.fail(new ParseResult.Type(ast, value, "not a decimal number"))
    },
    encode: encodeDecimal
  }
).annotations({
  identifier: "Money",
  jsonSchema: {
    type: "number",
    // The OpenAPI format registry's `decimal`: a generator (client/, scripts/client-codegen.ts) finds every exact
    // decimal by it, whether the document refers to Money or inlines it (an annotated Money is inlined).
    format: "decimal",
    description: "An exact decimal kept as NUMERIC by the service, sent as a JSON number written with its exact " +
      "digits, never an exponent: usage amounts and unit prices carry up to 12 decimal places, invoice amounts 2 " +
      "(cents). Read its text with a decimal type, not a float, when adding amounts up (the typed client's " +
      "`decimals: \"string\"`)."
  }
})

/**
 * Whether amounts may also be written as decimal strings (`"0.05"`). The API
 * takes JSON numbers only (the spec's contract); input typed by a person (CLI
 * flags, `--file` bodies, YAML/JSON fixtures) is text already, and a string
 * is the one way to write an amount that no float ever touches. Set with
 * `acceptDecimalText` around such a decode; off everywhere else.
 */
export const DecimalTextAccepted = FiberRef.unsafeMake(false)

/** Runs a decode (or anything) that takes amounts written as decimal strings, exactly. */
export const acceptDecimalText = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.locally(effect, DecimalTextAccepted, true)

/** Plain decimal notation only: no exponent, no spaces, no `+`, no thousands separators. */
const decimalText = /^-?(?:\d+(?:\.\d*)?|\.\d+)$/

/**
 * A decimal sent by a client: a finite JSON number, kept exact from its
 * shortest text; or, where `DecimalTextAccepted`, a decimal string taken
 * digit for digit.
 */
export const MoneyInput = Schema.transformOrFail(
  Schema.Union(Schema.Number, Schema.String),
  Schema.BigDecimalFromSelf,
  {
    strict: true,
    decode: (value, _, ast) => {
      if (typeof value === "string") {
        return Effect.flatMap(FiberRef.get(DecimalTextAccepted), (accepted) => {
          const parsed = accepted && decimalText.test(value) ? BigDecimal.fromString(value) : undefined
          if (parsed?._tag === "Some") return ParseResult.succeed(BigDecimal.normalize(parsed.value))
          return ParseResult.fail(
            new ParseResult.Type(ast, value, accepted ? "must be a decimal number such as 0.05" : "must be a finite number")
          )
        })
      }
      const parsed = BigDecimal.safeFromNumber(value)
      return parsed._tag === "Some"
        ? ParseResult.succeed(BigDecimal.normalize(parsed.value))
        : ParseResult.fail(new ParseResult.Type(ast, value, "must be a finite number"))
    },
    encode: (value) => ParseResult.succeed(BigDecimal.unsafeToNumber(value))
  }
).annotations({
  identifier: "Decimal",
  jsonSchema: {
    type: "number",
    description: "A finite JSON number, kept exactly as written (the decimal of its shortest text), never as a float."
  }
})

const slugPattern = /^[a-z0-9._-]+$/

/** Catalogue names (composite, credit, outcome, step): 1 to 80 characters. */
export const Name = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(80, { message: () => "must be at most 80 characters" })
).annotations({ description: "A name for people, 1 to 80 characters." })

/** agentKey and refId of catalogue records: 1 to 80 characters of `a-z 0-9 . _ -`. */
export const AgentKey = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(80, { message: () => "must be at most 80 characters" }),
  Schema.pattern(slugPattern, { message: () => "must match ^[a-z0-9._-]+$" })
).annotations({
  description: "The key signals name this record by: 1 to 80 characters of `a-z 0-9 . _ -`, not held by another " +
    "active record of its kind."
})

export const RefId = AgentKey.annotations({
  description: "The composite's name in signal tags (`composite: {refId: value}`): 1 to 80 characters of " +
    "`a-z 0-9 . _ -`, not held by another active composite."
})

export const Description = Schema.String.pipe(
  Schema.maxLength(400, { message: () => "must be at most 400 characters" })
).annotations({ description: "Free text for people, at most 400 characters; null clears it." })

/** The caller's own customer id: 1 to 32 characters from `A-Z a-z 0-9 -`, case-sensitive. */
export const ExternalId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9-]{1,32}$/, {
    message: () => "must be 1 to 32 characters from letters, numbers and -"
  })
).annotations({
  description: "Your own id of the customer: 1 to 32 characters from `A-Z a-z 0-9 -`, case-sensitive, unique among " +
    "active customers; null clears it."
})

export const IdempotencyKey = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(255, { message: () => "must be at most 255 characters" })
).annotations({
  description: "1 to 255 characters. The same key with the same request does nothing again and answers the first " +
    "result; the same key with a different request is refused (422)."
})

export const CurrencyCode = Schema.String.pipe(
  Schema.pattern(/^[A-Z]{3}$/, { message: () => "must be a 3-letter ISO 4217 code such as USD" })
).annotations({ description: "A 3-letter ISO 4217 currency code such as `USD`." })

/**
 * Any JSON value. Documented by its JSON types: the generated `$id: /schemas/unknown`
 * would be defined once per use, which a strict OpenAPI validator refuses.
 */
export const AnyJson = Schema.Unknown.annotations({
  jsonSchema: { type: ["object", "array", "string", "number", "boolean", "null"] }
})

/**
 * The spec's rule that a body names its customer by `customerId` or by
 * `externalId`, for the document (the service checks it when it resolves the
 * customer). An `allOf` so that the generated object schema is kept beside it.
 */
export const namesCustomer = {
  jsonSchema: { allOf: [{ anyOf: [{ required: ["customerId"] }, { required: ["externalId"] }] }] }
} as const

/** A UTF-16 surrogate without its pair (String.prototype.isWellFormed, which our TS lib target lacks). */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const nul = /\u0000/

/** Why PostgreSQL refuses a text: a NUL character, or a lone surrogate (no character at all). */
export type UnstorableReason = "NUL" | "LONE_SURROGATE"

const reasonOf = (text: string): UnstorableReason | undefined =>
  nul.test(text) ? "NUL" : loneSurrogate.test(text) ? "LONE_SURROGATE" : undefined

/** Where a JSON value holds text PostgreSQL cannot store, and why. */
export interface UnstorableText {
  /** The keys and indexes down to the string, or the key, at fault. */
  readonly path: ReadonlyArray<string | number>
  readonly reason: UnstorableReason
}

const found = (key: string | number, inner: UnstorableText): UnstorableText => ({ ...inner, path: [key, ...inner.path] })

/**
 * The first string or object key of a JSON value that PostgreSQL could not
 * store, or undefined (the common case, which allocates nothing). The one
 * check: the HTTP edge refuses such a body (BodyGuard.ts) and intake such a
 * signal (signals/InboxRow.ts), so no such text reaches a shared statement.
 * Recursive: callers bound the depth first (`MAX_JSON_DEPTH`, or a schema).
 */
export const unstorableText = (value: unknown): UnstorableText | undefined => {
  if (typeof value === "string") {
    const reason = reasonOf(value)
    return reason === undefined ? undefined : { path: [], reason }
  }
  if (typeof value !== "object" || value === null) return undefined
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const inner = unstorableText(value[index])
      if (inner !== undefined) return found(index, inner)
    }
    return undefined
  }
  for (const key in value) {
    const reason = reasonOf(key)
    if (reason !== undefined) return { path: [key], reason }
    const inner = unstorableText((value as Record<string, unknown>)[key])
    if (inner !== undefined) return found(key, inner)
  }
  return undefined
}

/**
 * Why a signal was refused (FAILED) or is held (PENDING), as the API's signal
 * view and the `signal.refused` webhook event both say it: what an error
 * answer of the same refusal carries. Fields, so that each can be its own
 * struct (the API's is a named component; an event body's is inline).
 */
export const signalErrorFields = {
  status: Schema.Int.annotations({ description: "The status an error answer of the same refusal carries (mostly 422)." }),
  code: Schema.String.annotations({
    description: "The refusal's stable code, as `statusDetail.code` of an error answer (docs/api.md \"Error codes\"): " +
      "`out_of_allowance`, `model_not_enabled`, `unknown_target`, `no_active_plan`, `no_plan_at_signal_time`, `not_on_plan`, `unknown_member`, " +
      "`customer_archived`, `customer_not_found`, `invalid_usage`, `internal_error`; a PENDING signal's is `customer_not_found`."
  }),
  message: Schema.String
}

/**
 * Where a request fails validation and what is wrong there: one item of an
 * error answer's `statusDetail.errors` (docs/api.md "Error codes"), and of a
 * refused batch item's `error.errors`.
 */
export const FieldProblemSchema = Schema.Struct({
  field: Schema.NullOr(Schema.String).annotations({
    description: "Where the problem is: a body field's path (`email`, `entitlements.0.quantity`), a query or path " +
      "parameter's name, or null for the request as a whole (a body that is not an object or nests too deep, a " +
      "malformed path, a malformed header)."
  }),
  message: Schema.String.annotations({ description: "What is wrong there, for people." })
}).annotations({ identifier: "FieldProblem", description: "One problem of a request that fails validation." })

/**
 * Rejects unknown fields: a client can never smuggle a price or a type past
 * the schema. And reports every problem of a body, not the first one only
 * (`errors: "all"`), so that one answer names them all (docs/api.md "Error codes").
 */
export const strict = { parseOptions: { onExcessProperty: "error", errors: "all" } } as const

const formatPath = (path: ReadonlyArray<PropertyKey>) => path.map(String).join(".")

type Issue = { readonly path: ReadonlyArray<PropertyKey>; readonly message: string }

/** At most this many problems are named in one answer (a body of thousands of bad items stays a small answer). */
export const MAX_PROBLEMS = 100

/**
 * Each field's problem, in the order found: `{field, message}`, `field` the
 * path with dots (`entitlements.0.quantity`), null for the value as a whole.
 * One problem per field: an optional field's failure also reports "Expected
 * undefined", and a union tells each of its members' failures.
 */
export const fieldProblems = (issues: ReadonlyArray<Issue>): Array<{ readonly field: string | null; readonly message: string }> => {
  const byField = new Map<string, string>()
  for (const issue of issues) {
    const field = formatPath(issue.path)
    // At the root the schema's own text would spell out every field: say what was wrong instead.
    const message = field === "" && issue.message.startsWith("Expected {") ? "the body must be a JSON object" : issue.message
    if (!byField.has(field)) byField.set(field, message)
    if (byField.size >= MAX_PROBLEMS) break
  }
  return [...byField].map(([field, message]) => ({ field: field === "" ? null : field, message }))
}

/** "email: must be a valid e-mail address; name: is missing": the problems in words, field first. */
export const describeProblems = (problems: ReadonlyArray<{ readonly field: string | null; readonly message: string }>) => {
  const named = problems.slice(0, 5).map(({ field, message }) => (field ? `${field}: ${message}` : message)).join("; ")
  return problems.length > 5 ? `${named}; and ${problems.length - 5} more (statusDetail.errors names each)` : named
}

/** "email: must be a valid e-mail address; name: is missing" — the first few issues, field first. */
export const describeIssues = (issues: ReadonlyArray<Issue>) => describeProblems(fieldProblems(issues))
