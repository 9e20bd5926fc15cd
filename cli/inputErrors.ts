/**
 * Input errors in the CLI's own words: the flag a person typed (`--agent-key`,
 * `--margin`), not the API field behind it (`agentKey`, `marginPercent`); one
 * line per problem; every allowed value of a choice; no schema internals.
 */
import type { Command } from "commander"

interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** API fields whose flag is not simply the field in kebab case. */
const flagOfField: Record<string, string> = {
  marginPercent: "margin",
  currencyCode: "currency",
  customerId: "customer",
  planId: "plan",
  ratePercent: "rate",
  endpointId: "endpoint",
  eventId: "event",
  reservedWallet: "reserved-wallet"
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)

/** `--flag` for an API field when the command has such a flag; the field's name otherwise. */
const nameOfField = (field: string, command: Command | undefined): string => {
  if (command === undefined) return field
  const longs = new Set(command.options.map((option) => option.long))
  const candidates = [flagOfField[field], kebab(field)].filter((flag): flag is string => flag !== undefined)
  for (const flag of candidates) if (longs.has(`--${flag}`)) return `--${flag}`
  return longs.has("--file") ? `${field} (in --file)` : field
}

const nameOfPath = (path: ReadonlyArray<PropertyKey>, command: Command | undefined, root: string | undefined) => {
  const [head, ...rest] = path.map(String)
  if (head === undefined) return root ?? "the input"
  const tail = rest.map((segment) => (/^\d+$/.test(segment) ? `[${Number(segment) + 1}]` : `.${segment}`)).join("")
  const base = nameOfField(head, command)
  if (tail === "") return base
  // `--model-bundle[1].modelId`; a field named for --file keeps its note at the end.
  const inFile = base.endsWith(" (in --file)")
  return inFile ? `${base.slice(0, -" (in --file)".length)}${tail} (in --file)` : `${base}${tail}`
}

const typeWords: Record<string, string> = {
  string: "text",
  number: "a number",
  boolean: "true or false",
  Int: "a whole number",
  Date: "an ISO 8601 instant",
  object: "an object"
}

const literal = /^Expected ("(?:[^"\\]|\\.)*"|-?\d[\d.]*|true|false|null), actual (.*)$/s

/** A schema message in plain words: no `Expected { readonly ... }`. */
const plainWords = (message: string): string => {
  if (message === "is missing") return "is required"
  const expected = /^Expected (.*?), actual (.*)$/s.exec(message)
  if (expected === null) return message
  const [, type, actual] = expected as unknown as [string, string, string]
  const got = actual.length > 40 ? `${actual.slice(0, 39)}…` : actual
  if (type === "undefined" || type === "never") return "is not allowed here"
  if (typeWords[type] !== undefined) return `must be ${typeWords[type]} (got ${got})`
  if (type.startsWith("{") || type.startsWith("Record")) return `must be an object (got ${got})`
  if (type.startsWith("ReadonlyArray") || type.startsWith("[") || type.startsWith("Array")) return `must be a list (got ${got})`
  return `is not valid (got ${got})`
}

/**
 * One line per field: a choice lists every allowed value (a union reports one
 * issue per member, gathered here); other problems in plain words.
 */
export const describeInputIssues = (
  issues: ReadonlyArray<Issue>,
  command: Command | undefined,
  root?: string
): ReadonlyArray<string> => {
  const byField = new Map<string, { path: ReadonlyArray<PropertyKey>; messages: Array<string> }>()
  for (const issue of issues) {
    const key = issue.path.map(String).join("\u0000")
    const entry = byField.get(key) ?? { path: issue.path, messages: [] }
    entry.messages.push(issue.message)
    byField.set(key, entry)
  }
  return [...byField.values()].map(({ messages, path }) => {
    const name = nameOfPath(path, command, root)
    // A failing optional field also reports "Expected undefined": its real problem is in the other messages.
    const withoutUndefined = messages.filter((message) => !/^Expected undefined, actual/.test(message))
    const meaningful = withoutUndefined.length > 0 ? withoutUndefined : messages
    const choices = meaningful.map((message) => literal.exec(message)).filter((match) => match !== null)
    if (choices.length > 0 && choices.length === meaningful.length) {
      const allowed = [...new Set(choices.map((match) => match[1]!.replace(/^"|"$/g, "")))]
      return allowed.length === 1
        ? `${name} must be ${allowed[0]} (got ${choices[0]![2]})`
        : `${name} must be one of ${allowed.join(", ")} (got ${choices[0]![2]})`
    }
    // A message written for people (a schema's own annotation) beats a generic "Expected ...".
    const written = meaningful.find((message) => !message.startsWith("Expected "))
    return `${name} ${plainWords(written ?? meaningful[0]!)}`
  })
}
