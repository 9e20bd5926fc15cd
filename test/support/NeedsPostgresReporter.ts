/**
 * A vitest reporter that adds one line to the default output: on a run without
 * DATABASE_URL (the embedded database), the tests skipped because they need
 * real PostgreSQL, by name, and what to do about it:
 *
 *   skipped (need real PostgreSQL: set DATABASE_URL): test/a.test.ts > suite (needs real PostgreSQL) > test; ...
 *
 * Such tests are `describe.skipIf(!usesRealPostgres)` / `it.runIf(usesRealPostgres)`
 * and, by the suite's convention (README, Tests), say "PostgreSQL" in their
 * names; that is how they are told apart from tests skipped for another reason
 * (`.skip`, `.todo`, a `-t` filter). Nothing is printed when none was skipped
 * or when DATABASE_URL is set.
 *
 * The other way round, on a run with DATABASE_URL: the tests about the embedded
 * database alone (they unset DATABASE_URL for their own processes, so a
 * PostgreSQL run would repeat them unchanged), which say "embedded database
 * only" in their names:
 *
 *   skipped (embedded database only: run without DATABASE_URL): test/b.test.ts > suite (embedded database only) > test
 */
import { relative } from "node:path"
import type { Reporter, TestModule, Vitest } from "vitest/node"

/** What the reporter reads of a test. */
export interface SkippableTest {
  /** Path of the test file, relative to the project root. */
  readonly file: string
  /** Suites and test name joined with " > ". */
  readonly fullName: string
  readonly state: "passed" | "failed" | "skipped" | "pending"
  readonly mode: "run" | "only" | "skip" | "todo"
}

export const SKIPPED_PREFIX = "skipped (need real PostgreSQL: set DATABASE_URL): "
export const SKIPPED_EMBEDDED_PREFIX = "skipped (embedded database only: run without DATABASE_URL): "

const NEEDS_POSTGRES = /PostgreSQL/
const EMBEDDED_ONLY = /embedded database only/

/**
 * The line to print for `tests`, or undefined when there is nothing to say: the
 * tests skipped for want of PostgreSQL on an embedded run, or those about the
 * embedded database alone on a PostgreSQL run. A test a name filter (`-t`)
 * left out is not reported.
 */
export const skippedLine = (
  tests: Iterable<SkippableTest>,
  options: { readonly databaseUrl: string | undefined; readonly namePattern?: RegExp | string | undefined }
): string | undefined => {
  const onPostgres = (options.databaseUrl ?? "") !== ""
  const [prefix, reason] = onPostgres ? [SKIPPED_EMBEDDED_PREFIX, EMBEDDED_ONLY] : [SKIPPED_PREFIX, NEEDS_POSTGRES]
  const pattern = options.namePattern === undefined || options.namePattern === ""
    ? undefined
    : typeof options.namePattern === "string"
    ? new RegExp(options.namePattern)
    : options.namePattern
  const names: Array<string> = []
  for (const test of tests) {
    if (test.state !== "skipped" || test.mode !== "skip") continue
    if (!reason.test(test.fullName)) continue
    if (pattern !== undefined && !pattern.test(test.fullName)) continue
    names.push(`${test.file} > ${test.fullName}`)
  }
  return names.length === 0 ? undefined : `${prefix}${names.join("; ")}`
}

export default class NeedsPostgresReporter implements Reporter {
  private vitest: Vitest | undefined

  onInit(vitest: Vitest) {
    this.vitest = vitest
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    const root = this.vitest?.config.root ?? process.cwd()
    const tests = testModules.flatMap((module) =>
      [...module.children.allTests()].map((test): SkippableTest => ({
        file: relative(root, module.moduleId),
        fullName: test.fullName,
        state: test.result().state,
        mode: test.options.mode
      }))
    )
    const line = skippedLine(tests, {
      databaseUrl: process.env.DATABASE_URL,
      namePattern: this.vitest?.config.testNamePattern
    })
    if (line === undefined) return
    if (this.vitest) this.vitest.logger.log(line)
    else console.log(line)
  }
}
