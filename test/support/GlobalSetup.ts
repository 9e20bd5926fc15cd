/**
 * Runs once per `vitest run`, in vitest's own process. On PostgreSQL each test
 * process keeps one database for the run (test/support/TestDatabase.ts), named
 * `billing_run_<run>_<pid>`: this names the run (vitest's pid, inherited by the
 * test processes as BILLING_TEST_RUN), drops the databases of runs whose
 * process is gone (a run that was killed), and drops this run's at its end.
 */
import { Effect } from "effect"
import { isProcessAlive } from "../../src/db/Embedded.ts"
import { runAlone, testRunDatabasePrefix } from "./TestDatabase.ts"

const dropDatabases = (adminUrl: string, keep: (name: string) => boolean) =>
  Effect.runPromise(Effect.gen(function*() {
    const rows = yield* runAlone(adminUrl, "SELECT datname FROM pg_database WHERE datname LIKE 'billing\\_run\\_%'")
    for (const { datname } of rows as ReadonlyArray<{ datname: string }>) {
      if (!keep(datname)) yield* runAlone(adminUrl, `DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
    }
  }))

export default async function setup() {
  const run = String(process.pid)
  process.env.BILLING_TEST_RUN = run
  const adminUrl = process.env.DATABASE_URL ?? ""
  if (adminUrl === "") return
  await dropDatabases(adminUrl, (name) => {
    const runPid = Number(/^billing_run_(\d+)_/.exec(name)?.[1])
    return Number.isInteger(runPid) && runPid !== process.pid && isProcessAlive(runPid)
  })
  return () => dropDatabases(adminUrl, (name) => !name.startsWith(testRunDatabasePrefix(run)))
}
