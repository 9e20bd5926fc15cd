import type { Command } from "commander"
import { Duration, Effect } from "effect"
import { Text } from "../ui/ink.ts"
import { billingCycleLanes } from "../../src/billing/CycleJob.ts"
import { runWorker } from "../../src/worker/Worker.ts"
import { runnerOn, withJson } from "../run.ts"
import { parseInstant } from "./worker.tsx"
import { ServicesLive } from "../../src/app/Services.ts"

const run = runnerOn(ServicesLive)

export const registerCycle = (program: Command) => {
  const cycle = program.command("cycle").description("billing cycles")

  withJson(cycle.command("run").description("activate scheduled purchases, renew ended cycles and finalise due draft invoices, then exit"))
    .option("--now <iso>", "the instant treated as now (default: the clock)")
    .action((options: { json?: boolean; now?: string }) =>
      run(
        options,
        Effect.flatMap(parseInstant(options.now), (now) =>
          Effect.flatMap(billingCycleLanes, (jobs) => runWorker(jobs, { once: true, now, idle: Duration.zero }))),
        {
          json: (handled) => ({ handled }),
          view: (handled) => <Text>Renewed or finalised {handled} purchase cycle(s).</Text>
        }
      )
    )
}
