import { defineConfig } from "vitest/config"
import SlowFirstSequencer from "./test/support/SlowFirstSequencer.ts"

/** `--sequence.shuffle` keeps its meaning (files in random order): our order applies only without it. */
const shuffled = process.argv.some((arg) => arg.startsWith("--sequence.shuffle"))

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Guards against a hang, not limits on speed: beside other work (load 10 on 2 cores) a test runs
    // 5 to 10 times longer than on a quiet machine, and it must not fail for that. A test's own
    // timeout is set only when it is longer still (test/support/Eventually.ts, HANG_GUARD_MS).
    testTimeout: 300_000,
    // The default output, plus one line naming the tests a run without DATABASE_URL skipped for want of PostgreSQL.
    reporters: ["default", "./test/support/NeedsPostgresReporter.ts"],
    hookTimeout: 300_000,
    // Every test file gets its own database, so files may run side by side.
    pool: "forks",
    poolOptions: {
      forks: {
        maxForks: 2,
        // Files run one after another in two long-lived processes instead of a
        // fresh process each: loading the service's modules anew for every
        // file was half of the suite's time. Nothing a file starts outlives it
        // (servers, pools and workers close in afterAll), and each file's
        // environment variables are put back (test/support/RestoreEnv.ts).
        isolate: false
      }
    },
    setupFiles: ["./test/support/RestoreEnv.ts", "./test/support/RestoreEffectIt.ts"],
    ...(shuffled ? {} : { sequence: { sequencer: SlowFirstSequencer } }),
    // Names the run and drops its PostgreSQL databases at the end.
    globalSetup: ["./test/support/GlobalSetup.ts"]
  }
})
