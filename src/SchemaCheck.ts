/**
 * Decoding without the decoder, for schemas whose valid values decode to
 * themselves (structs of strings, numbers, literals and refinements: the
 * signal routes' bodies).
 *
 * Effect's decoder builds a result and an Either per node, and decoding a body
 * of the credit route was the largest part of everything the intake lane
 * allocated per request (docs/benchmarks.md, "Intake without fibers"). `checkOf(ast)`
 * compiles the schema's AST once into a plain predicate that runs the schema's
 * own refinements and allocates nothing. It only ever vouches for a value the
 * decoder would return unchanged: a node it does not know (a transformation, a
 * declaration, a recursive schema) or an unknown property makes it answer
 * false, and `identityDecoder` then asks the schema's decoder, which gives the
 * answer and its message. test/schema-check.test.ts holds it to the decoder on
 * generated values.
 */
import { Either, Option, ParseResult, Schema, SchemaAST } from "effect"

/** Whether decoding by `ast` gives back every value as it came (no transformation or declaration anywhere in it). */
export const decodesToItself = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
    case "Suspend":
      return false
    case "Refinement":
      return decodesToItself(ast.from)
    case "TypeLiteral":
      return ast.propertySignatures.every((property) => decodesToItself(property.type)) &&
        ast.indexSignatures.every((index) => decodesToItself(index.type))
    case "Union":
      return ast.types.every(decodesToItself)
    case "TupleType":
      return ast.elements.every((element) => decodesToItself(element.type)) && ast.rest.every((rest) => decodesToItself(rest.type))
    default:
      return true
  }
}

type Check = (value: unknown) => boolean

const cannotVouch: Check = () => false

const noOptions: SchemaAST.ParseOptions = {}

/**
 * A predicate that is true only for values `ast` decodes, unchanged. False
 * means "ask the decoder": the value may be invalid, or of a kind this
 * predicate does not judge.
 */
export const checkOf = (ast: SchemaAST.AST): Check => {
  switch (ast._tag) {
    case "StringKeyword":
      return (value) => typeof value === "string"
    case "NumberKeyword":
      return (value) => typeof value === "number"
    case "BooleanKeyword":
      return (value) => typeof value === "boolean"
    case "UndefinedKeyword":
      return (value) => value === undefined
    case "UnknownKeyword":
    case "AnyKeyword":
      return () => true
    case "Literal": {
      const literal = ast.literal
      return (value) => value === literal
    }
    case "Refinement": {
      const from = checkOf(ast.from)
      const refinement = ast
      return (value) => from(value) && Option.isNone(refinement.filter(value, noOptions, refinement))
    }
    case "Union": {
      const members = ast.types.map(checkOf)
      return (value) => members.some((member) => member(value))
    }
    case "TupleType": {
      // Arrays only (`Schema.Array`): no fixed elements, one rest type.
      if (ast.elements.length > 0 || ast.rest.length !== 1) return cannotVouch
      const item = checkOf(ast.rest[0]!.type)
      return (value) => Array.isArray(value) && value.every(item)
    }
    case "TypeLiteral":
      return typeLiteralCheck(ast)
    default:
      return cannotVouch
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * A struct (named properties, no other key) or a record (string keys, one
 * value type); not both at once, whose rules for a key that is both are the
 * decoder's to apply. A "__proto__" key (JSON.parse makes it an own property)
 * is not copied by the decoder, which sets the copy's prototype instead: a
 * value holding one is never vouched for (a struct does not name it).
 */
const typeLiteralCheck = (ast: SchemaAST.TypeLiteral): Check => {
  const { indexSignatures, propertySignatures } = ast
  if (propertySignatures.length > 0 && indexSignatures.length > 0) return cannotVouch
  if (indexSignatures.length > 0) {
    if (indexSignatures.length > 1 || indexSignatures[0]!.parameter._tag !== "StringKeyword") return cannotVouch
    const item = checkOf(indexSignatures[0]!.type)
    return (value) => {
      if (!isRecord(value)) return false
      for (const key in value) {
        if (key === "__proto__" || !Object.hasOwn(value, key) || !item(value[key])) return false
      }
      return true
    }
  }
  if (propertySignatures.some((property) => typeof property.name !== "string")) return cannotVouch
  const properties = propertySignatures.map((property) => ({
    name: property.name as string,
    isOptional: property.isOptional,
    check: checkOf(property.type)
  }))
  const names = new Set(properties.map((property) => property.name))
  return (value) => {
    if (!isRecord(value)) return false
    for (const property of properties) {
      if (Object.hasOwn(value, property.name)) {
        if (!property.check(value[property.name])) return false
      } else if (!property.isOptional) {
        return false
      }
    }
    // A property the schema does not name is refused or dropped by the decoder: either way, not this value.
    for (const key in value) {
      if (!names.has(key)) return false
    }
    return true
  }
}

/**
 * `Schema.decodeUnknownEither(schema)`, answering at once with the value
 * itself when `checkOf` vouches for it. Only for a schema that decodes to
 * itself everywhere: in a union with a transformation member, the decoder may
 * take that member for a value another member would vouch for.
 */
export const identityDecoder = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = Schema.decodeUnknownEither(schema)
  if (!decodesToItself(schema.ast)) return decode
  const check = checkOf(schema.ast)
  return (input: unknown): Either.Either<A, ParseResult.ParseError> =>
    check(input) ? Either.right(input as A) : decode(input)
}
