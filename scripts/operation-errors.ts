/**
 * Writes src/http/OperationErrors.ts: for each operation of the API, the
 * service errors its handler can fail with, read by the TypeScript compiler
 * from the handler's own type. `x-error-codes` of the OpenAPI document lists
 * an operation's codes from it (src/app/OpenApiDoc.ts). Run it after changing
 * a handler, or a service a handler calls, so that what it can fail with
 * changes:
 *
 *   npx tsx scripts/operation-errors.ts
 *
 * test/openapi-document.test.ts fails while an operation of the document has
 * no entry, and test/operation-errors.test.ts while the file differs from what
 * this script writes.
 *
 * How: every handler reaches its services through `forCaller` /
 * `forOrganization` (src/http/Auth.ts), whose type turns a service's named
 * errors into the API's declared failures, losing their names. The program is
 * compiled here with that one cast left out, so that each handler's error type
 * is the union of what its services fail with; each
 * `HttpApiBuilder.group(..., "group", ...)`'s `.handle("name", handler)` is
 * then read for the `_tag`s of that union that are service errors.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("..", import.meta.url))
const target = `${root}src/http/OperationErrors.ts`
const authFile = `${root}src/http/Auth.ts`
const errorsFile = `${root}src/errors.ts`

/** The cast of `forCaller` that hides the services' errors; the compiled program keeps them. */
const hidingCast = "as Exclude<E, ServiceError> | ApiError"

const configFile = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile)
const parsed = ts.parseJsonConfigFileContent(configFile.config, ts.sys, root)
const handlerFiles = parsed.fileNames.filter((file) => file.startsWith(`${root}src/`) && /Http\.ts$/.test(file))

const host = ts.createCompilerHost(parsed.options)
const readFile = host.readFile.bind(host)
host.readFile = (fileName) => {
  const text = readFile(fileName)
  if (text === undefined || fileName !== authFile) return text
  if (!text.includes(hidingCast)) throw new Error(`${authFile} no longer has \`${hidingCast}\`: update scripts/operation-errors.ts`)
  return text.replace(hidingCast, "as E")
}
const program = ts.createProgram([...handlerFiles, errorsFile], parsed.options, host)
const checker = program.getTypeChecker()

/** The tags of src/errors.ts's `errorStatus`: the service errors. */
const serviceTags = (() => {
  const source = program.getSourceFile(errorsFile)!
  const tags = new Set<string>()
  ts.forEachChild(source, function visit(node) {
    if (ts.isVariableDeclaration(node) && node.name.getText() === "errorStatus" && node.initializer !== undefined) {
      const object = node.initializer as ts.ObjectLiteralExpression
      for (const property of object.properties) if (property.name !== undefined) tags.add(property.name.getText())
    }
    ts.forEachChild(node, visit)
  })
  return tags
})()

/** The `_tag`s of the service errors among a type's union members. */
const tagsOf = (type: ts.Type, into: Set<string>) => {
  for (const member of type.isUnion() ? type.types : [type]) {
    const tag = member.getProperty("_tag")
    if (tag === undefined) continue
    const tagType = checker.getTypeOfSymbol(tag)
    for (const literal of tagType.isUnion() ? tagType.types : [tagType]) {
      if (literal.isStringLiteral() && serviceTags.has(literal.value)) into.add(literal.value)
    }
  }
}

/** E of an `Effect<A, E, R>` (a union of them, too). */
const errorTypesOf = (type: ts.Type): Array<ts.Type> => {
  const members = type.isUnion() ? type.types : [type]
  const found: Array<ts.Type> = []
  for (const member of members) {
    const variance = member.getProperties().find((property) => property.escapedName.toString().includes("EffectTypeId"))
    if (variance === undefined) continue
    const struct = checker.getTypeOfSymbol(variance)
    const error = struct.getProperty("_E")
    if (error === undefined) continue
    // `_E: Covariant<E>`, a function type `(_: never) => E`.
    const covariant = checker.getTypeOfSymbol(error)
    for (const signature of covariant.getCallSignatures()) found.push(signature.getReturnType())
  }
  return found
}

const operations = new Map<string, Set<string>>()
for (const file of handlerFiles) {
  const source = program.getSourceFile(file)!
  const visitGroup = (call: ts.CallExpression) => {
    const [, name, build] = call.arguments
    if (name === undefined || !ts.isStringLiteral(name) || build === undefined) return
    const visitHandle = (node: ts.Node) => {
      if (
        ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) &&
        node.expression.name.text === "handle" && node.arguments.length >= 2 && ts.isStringLiteral(node.arguments[0]!)
      ) {
        const operation = `${name.text}.${(node.arguments[0] as ts.StringLiteral).text}`
        const tags = operations.get(operation) ?? new Set<string>()
        const handler = checker.getTypeAtLocation(node.arguments[1]!)
        for (const signature of handler.getCallSignatures()) {
          for (const error of errorTypesOf(signature.getReturnType())) tagsOf(error, tags)
        }
        operations.set(operation, tags)
      }
      ts.forEachChild(node, visitHandle)
    }
    visitHandle(build)
  }
  ts.forEachChild(source, function visit(node) {
    if (
      ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) &&
      node.expression.name.text === "group" && node.expression.expression.getText() === "HttpApiBuilder"
    ) visitGroup(node)
    ts.forEachChild(node, visit)
  })
}

/** The service errors the worker refuses a signal with (`Refusal` of src/errors.ts). */
const refusals = (() => {
  const source = program.getSourceFile(errorsFile)!
  const tags = new Set<string>()
  ts.forEachChild(source, (node) => {
    if (ts.isTypeAliasDeclaration(node) && node.name.text === "Refusal") tagsOf(checker.getTypeAtLocation(node), tags)
  })
  return [...tags].sort()
})()

const entries = [...operations].sort(([a], [b]) => (a < b ? -1 : 1))
const list = (tags: Iterable<string>) => `[${[...tags].sort().map((tag) => JSON.stringify(tag)).join(", ")}]`
const text = `/**
 * Generated by scripts/operation-errors.ts from the handlers' types: do not
 * edit. Run \`npx tsx scripts/operation-errors.ts\` after changing what a
 * handler, or a service it calls, can fail with.
 *
 * For each operation (\`group.endpoint\`, its operationId), the service errors
 * (src/errors.ts) its handler can fail with; \`x-error-codes\` lists their codes
 * beside those the edge answers (src/app/OpenApiDoc.ts).
 */
import type { ServiceError } from "../errors.ts"

type Tag = ServiceError["_tag"]

export const operationServiceErrors: Readonly<Record<string, ReadonlyArray<Tag>>> = {
${entries.map(([operation, tags]) => `  ${JSON.stringify(operation)}: ${list(tags)}`).join(",\n")}
}

/**
 * What the worker refuses a signal with (\`Refusal\`): the answers of a route
 * that waits for the worker's end (\`Prefer: wait=N\`, docs/api.md).
 */
export const workerRefusals: ReadonlyArray<Tag> = ${list(refusals)}
`

if (process.argv.includes("--check")) {
  const current = (() => {
    try {
      return readFileSync(target, "utf8")
    } catch {
      return ""
    }
  })()
  if (current !== text) {
    process.stderr.write("src/http/OperationErrors.ts differs from the handlers' types: npx tsx scripts/operation-errors.ts\n")
    process.exitCode = 1
  }
} else {
  writeFileSync(target, text)
  process.stdout.write(`wrote src/http/OperationErrors.ts (${entries.length} operations)\n`)
}
