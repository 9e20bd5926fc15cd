// Mutation testing of the money rules (docs/testing.md "Mutation testing").
// Stryker 9.6 is the last line that runs on Node 20.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  packageManager: "npm",
  testRunner: "vitest",
  vitest: { configFile: "vitest.pure.config.ts", related: false },
  // No TypeScript checker: it cost a second and a half of CPU per group of
  // mutants and made a whole run 40 minutes. Vitest strips types, so a mutant
  // the compiler would refuse is run anyway; the ones that survive are listed
  // in docs/testing.md like any other survivor (docs/testing.md, "Settings").
  coverageAnalysis: "perTest",
  // The pure rule modules: they decide amounts and answers with no database.
  mutate: [
    "src/pricing/**/*.ts",
    "src/money.ts",
    "src/billing/PlanChange.ts",
    "src/billing/Renewal.ts",
    "src/billing/InvoiceTotals.ts",
    "src/entitlements/SpendState.ts",
    "src/http/TokenBucket.ts",
    "src/ledger/Thresholds.ts",
    "src/signals/LateWindow.ts"
  ],
  // One test runner per core.
  concurrency: 2,
  // A run on a loaded machine is slow at times: a tight timeout reported
  // mutants as hanging that were only starved, and each one restarted a runner.
  timeoutMS: 30_000,
  // Code that runs when a module loads (the stored snapshot's schema, constant
  // tables) is not run per test: Stryker would rerun every test with the modules
  // reloaded for each such mutant. They are left out of the score (docs/testing.md).
  ignoreStatic: true,
  // Results are kept in reports/: a rerun tests again only the mutants whose
  // code or covering tests changed. `npm run mutation -- --force` for a full run.
  incremental: true,
  incrementalFile: "reports/stryker-incremental.json",
  ignorePatterns: ["dist", ".billing", "reports", ".stryker-tmp*", "test-output", "coverage", "client/dist", "bench", "docs", "examples"],
  reporters: ["html", "clear-text", "json", "progress"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
  thresholds: { high: 95, low: 90, break: null }
}
