/**
 * The suite's file order: the files known to take longest first, so that the
 * two test processes finish together instead of one waiting on a long file
 * that started last. vitest orders by the durations of the last run, but a
 * fresh clone (CI) has none and falls back to file size, which put the
 * README walkthrough, a small file of a long test, near the end. The list is
 * the slowest files of a `.ci/run` on 2026-11-25 on either database; a file
 * not in it keeps vitest's own order (last run's duration, else size).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node"

export const slowestFirst: ReadonlyArray<string> = [
  "test/embedded-shared.test.ts",
  "test/cli-output.test.ts",
  "test/readme-walkthrough.test.ts",
  "test/openapi-prism.test.ts",
  "test/serve-processes.test.ts",
  "test/embedded.test.ts",
  "test/signals-workers.test.ts",
  "test/cycles-batch.test.ts",
  "test/webhooks-cli.test.ts",
  "test/signals-intake-crash.test.ts",
  "test/portal-browser.test.ts",
  "test/embedded-socket.test.ts",
  "test/key-cache.test.ts"
]

const rankOf = (moduleId: string) => {
  const rank = slowestFirst.findIndex((file) => moduleId.endsWith(`/${file}`))
  return rank < 0 ? slowestFirst.length : rank
}

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>) {
    const ordered = await super.sort(files)
    // Array.prototype.sort is stable: files outside the list keep vitest's order.
    return ordered.sort((a, b) => rankOf(a.moduleId) - rankOf(b.moduleId))
  }
}
