/**
 * The reporter line of a run without DATABASE_URL (test/support/NeedsPostgresReporter.ts):
 * one line naming the tests skipped because they need real PostgreSQL, and
 * nothing about tests skipped for other reasons or on a PostgreSQL run.
 */
import { describe, expect, it } from "vitest"
import { type SkippableTest, skippedLine } from "./support/NeedsPostgresReporter.ts"

const test = (fullName: string, state: SkippableTest["state"], mode: SkippableTest["mode"], file = "test/a.test.ts"): SkippableTest => ({
  file,
  fullName,
  state,
  mode
})

const run = [
  test("parallel workers (needs real PostgreSQL) > price each signal once", "skipped", "skip"),
  test("parallel workers (needs real PostgreSQL) > never deadlock", "skipped", "skip"),
  test("hears a revocation through NOTIFY (PostgreSQL)", "skipped", "skip", "test/b.test.ts"),
  test("prices a signal", "passed", "run"),
  test("a later feature", "skipped", "todo"),
  test("switched off by hand", "skipped", "skip"),
  test("on PostgreSQL it also passes", "passed", "run")
]

describe("the skipped-for-PostgreSQL line", () => {
  it("names every test skipped for want of PostgreSQL, with its file, on one line", () => {
    const line = skippedLine(run, { databaseUrl: undefined })
    expect(line).toBe(
      "skipped (need real PostgreSQL: set DATABASE_URL): " +
        "test/a.test.ts > parallel workers (needs real PostgreSQL) > price each signal once; " +
        "test/a.test.ts > parallel workers (needs real PostgreSQL) > never deadlock; " +
        "test/b.test.ts > hears a revocation through NOTIFY (PostgreSQL)"
    )
    expect(line).not.toContain("\n")
    expect(skippedLine(run, { databaseUrl: "" })).toBe(line)
  })

  it("says nothing of them with DATABASE_URL set, or when nothing needing PostgreSQL was skipped", () => {
    expect(skippedLine(run, { databaseUrl: "postgres://postgres@127.0.0.1:5432/test" })).toBeUndefined()
    expect(skippedLine(run.slice(3), { databaseUrl: undefined })).toBeUndefined()
    expect(skippedLine([], { databaseUrl: undefined })).toBeUndefined()
  })

  it("leaves out tests that a -t name filter skipped", () => {
    expect(skippedLine(run, { databaseUrl: undefined, namePattern: /deadlock/ })).toBe(
      "skipped (need real PostgreSQL: set DATABASE_URL): test/a.test.ts > parallel workers (needs real PostgreSQL) > never deadlock"
    )
    expect(skippedLine(run, { databaseUrl: undefined, namePattern: "prices" })).toBeUndefined()
  })
})

describe("the skipped-for-the-embedded-database line", () => {
  const onPostgres = [
    test("serve on a data folder (embedded database only) > keeps the data", "skipped", "skip", "test/c.test.ts"),
    ...run
  ]

  it("names, on a PostgreSQL run, the tests about the embedded database alone", () => {
    expect(skippedLine(onPostgres, { databaseUrl: "postgres://postgres@127.0.0.1:5432/test" })).toBe(
      "skipped (embedded database only: run without DATABASE_URL): test/c.test.ts > serve on a data folder (embedded database only) > keeps the data"
    )
  })

  it("says nothing of them on an embedded run", () => {
    expect(skippedLine(onPostgres.slice(0, 1), { databaseUrl: undefined })).toBeUndefined()
  })
})
