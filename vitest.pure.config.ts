import { defineConfig } from "vitest/config"

/**
 * The pure project: tests of rules that decide amounts and answers, run with
 * no database, no server and no worker (no global setup, nothing to drop at
 * the end). `npm run mutation` (Stryker) runs this project against every
 * mutant, so it must stay fast. The same files also run in the whole suite
 * (vitest.config.ts takes test/**\/*.test.ts). New pure rule tests go in
 * test/rules/.
 */
export default defineConfig({
  test: {
    include: [
      "test/rules/**/*.test.ts",
      "test/pricing.test.ts",
      "test/meters.test.ts",
      "test/short-lane.test.ts",
      "test/claim-customers.test.ts"
    ],
    testTimeout: 20_000,
    // The files share one module cache: Stryker runs the covering tests once
    // per mutant, and loading effect anew for each run was most of its time.
    // Nothing here holds state between files.
    isolate: false
  }
})
