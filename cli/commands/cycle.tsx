import type { Command } from "commander"
import { Duration, Effect, Layer } from "effect"
import { Text } from "../ui/ink.ts"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"
import { billingCycleLanes } from "../../src/billing/CycleJob.ts"
import { Purchases } from "../../src/billing/Purchases.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { runWorker } from "../../src/worker/Worker.ts"
import { parseInstant } from "../instantFlag.ts"
import { runnerOn, withJson } from "../run.ts"

/**
 * The cycle job's services alone (renewals through Purchases, finalising DRAFT
 * invoices through the Ledger): a billing day's run starts without the signal
 * pipeline, the webhook sender or the API's modules.
 */
const run = runnerOn(withArrivalsAnswered(Layer.merge(Purchases.Default, Ledger.Default)))

export const registerCycle = (program: Command) => {
  const cycle = program.command("cycle").description("billing cycles")

  withJson(cycle.command("run").description("activate scheduled purchases, renew ended cycles, finalise due draft invoices and mark unpaid invoices past their due date overdue, then exit"))
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
