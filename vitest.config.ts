import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    // The default output, plus one line naming the tests a run without DATABASE_URL skipped for want of PostgreSQL.
    reporters: ["default", "./test/support/NeedsPostgresReporter.ts"],
    hookTimeout: 120_000,
    // Every test file gets its own database, so files may run side by side.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2 } }
  }
})
