/**
 * The codes of `statusDetail.code` (docs/api.md "Error codes") held to their
 * one source: every service error of src/errors.ts and every edge situation of
 * src/http/ApiErrors.ts has its code, derived from its name, and docs/api.md's
 * table is exactly the table made from them (code, status, and the error's own
 * words: its doc comment in src/errors.ts, its description in `edgeErrors`).
 * A new error, a changed status or doc comment fails this test until the table
 * is made again: `BILLING_WRITE_DOCS=1 npx vitest run test/error-codes.test.ts`.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { codeOf, errorStatus } from "../src/errors.ts"
import { codesOfStatus, edgeErrors, errorCodes } from "../src/http/ApiErrors.ts"
import { errorStatuses } from "../src/http/Envelope.ts"

const docsFile = new URL("../docs/api.md", import.meta.url)
const start = "<!-- error-codes:start (made by test/error-codes.test.ts from src/errors.ts and src/http/ApiErrors.ts) -->"
const end = "<!-- error-codes:end -->"

/** Each service error's doc comment in src/errors.ts, by class name. */
const docComments = (): Map<string, string> => {
  const source = readFileSync(new URL("../src/errors.ts", import.meta.url), "utf8")
  const comments = new Map<string, string>()
  for (const match of source.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*export class (\w+) extends Data\.TaggedError/g)) {
    const words = match[1]!.split("\n").map((line) => line.replace(/^\s*\*\s?/, "").trim()).filter(Boolean).join(" ")
    comments.set(match[2]!, words)
  }
  return comments
}

const cell = (text: string) => text.replace(/\|/g, "\\|")

/** The table docs/api.md must hold. */
const table = () => {
  const comments = docComments()
  const rows = errorCodes.map((entry) => {
    const words = entry.origin === "edge"
      ? edgeErrors[entry.name as keyof typeof edgeErrors].description
      : comments.get(entry.name) ?? ""
    return `| \`${entry.code}\` | ${entry.status} | ${cell(words)} |`
  })
  return ["| code | status | when |", "|---|---|---|", ...rows].join("\n")
}

const docsTable = (docs: string) => {
  const from = docs.indexOf(start)
  const to = docs.indexOf(end)
  return from < 0 || to < from ? undefined : docs.slice(from + start.length, to).trim()
}

describe("error codes", () => {
  it("are derived from the errors' names, one per name, each of a status the envelope has", () => {
    expect(codeOf("ExternalIdTaken")).toBe("external_id_taken")
    expect(codeOf("ValidationFailed")).toBe("validation_failed")
    const codes = errorCodes.map((entry) => entry.code)
    expect(new Set(codes).size).toBe(codes.length)
    expect(errorCodes.length).toBe(Object.keys(errorStatus).length + Object.keys(edgeErrors).length)
    for (const code of codes) expect(code).toMatch(/^[a-z]+(_[a-z0-9]+)*$/)
    for (const entry of errorCodes) expect(errorStatuses as ReadonlyArray<number>).toContain(entry.status)
    for (const status of errorStatuses) expect(codesOfStatus(status).length, `codes of ${status}`).toBeGreaterThan(0)
    // Every service error of a status the API answers has its code there: the examples among them.
    expect(codes).toEqual(expect.arrayContaining([
      "customer_archived",
      "external_id_taken",
      "out_of_allowance",
      "idempotency_key_reused",
      "validation_failed"
    ]))
  })

  it("are the table of docs/api.md, word for word", () => {
    const docs = readFileSync(docsFile, "utf8")
    const expected = table()
    if (process.env.BILLING_WRITE_DOCS === "1") {
      const from = docs.indexOf(start)
      const to = docs.indexOf(end)
      expect(from, "docs/api.md has the table's markers").toBeGreaterThanOrEqual(0)
      writeFileSync(docsFile, `${docs.slice(0, from + start.length)}\n${expected}\n${docs.slice(to)}`)
      return
    }
    expect(
      docsTable(docs),
      "docs/api.md's error codes table differs from the errors: BILLING_WRITE_DOCS=1 npx vitest run test/error-codes.test.ts"
    ).toBe(expected)
    // Every service error has its words.
    const comments = docComments()
    expect(Object.keys(errorStatus).filter((name) => !comments.get(name))).toEqual([])
  })
})
