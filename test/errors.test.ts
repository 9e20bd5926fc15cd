/**
 * The rules of src/errors.ts: every service error is named for what happened,
 * its name can become a stable machine code, and only the edge builds the
 * HTTP-status errors of src/http/ApiErrors.ts.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { CustomerArchived, errorStatus, isServiceError, PlanNotFound } from "../src/errors.ts"
import { apiErrorOfStatus, failureStatus, NotFound, toApiError } from "../src/http/ApiErrors.ts"

/** The code a name would be sent as (issue 27): `ExternalIdTaken` -> `external_id_taken`. */
const codeOf = (name: string) => name.replace(/(?<!^)[A-Z]/g, (letter) => `_${letter}`).toLowerCase()

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sourceFiles(path) : /\.tsx?$/.test(name) ? [path] : []
  })

describe("service errors", () => {
  it("are PascalCase names that give distinct codes and none named for a status", () => {
    const names = Object.keys(errorStatus)
    for (const name of names) expect(name).toMatch(/^[A-Z][A-Za-z]+$/)
    expect(new Set(names.map(codeOf)).size).toBe(names.length)
    const statusNames = Object.values(apiErrorOfStatus).map((errorClass) => errorClass._tag as string)
    expect(names.filter((name) => statusNames.includes(name))).toEqual([])
    expect(codeOf("ExternalIdTaken")).toBe("external_id_taken")
  })

  it("are answered with the declared error of their status and their own message", () => {
    const archived = new CustomerArchived({ message: "Customer cus_1 is archived and cannot be changed" })
    expect(isServiceError(archived)).toBe(true)
    expect(failureStatus(archived)).toBe(409)
    const answered = toApiError(new PlanNotFound({ message: "Plan pln_1 not found" }))
    expect(answered).toBeInstanceOf(NotFound)
    expect(answered.message).toBe("Plan pln_1 not found")
    expect(failureStatus(answered)).toBe(404)
    expect(failureStatus({ _tag: "toString", message: "x" })).toBeUndefined()
  })

  it("are the only errors src/ builds outside the edge (src/http)", () => {
    const builtHere = /new (BadRequest|Unauthorized|Forbidden|NotFound|Conflict|Unprocessable)\(/
    const offenders = sourceFiles("src")
      .filter((file) => !file.startsWith(join("src", "http")))
      .filter((file) => builtHere.test(readFileSync(file, "utf8")))
    expect(offenders).toEqual([])
  })
})
