import type { Command } from "commander"
import { Text } from "ink"
import { markLongLived } from "../../src/db/Embedded.ts"
import { BadRequest } from "../../src/errors.ts"
import { workerJobs } from "../../src/worker/Jobs.ts"
import { pollInterval, runWorker } from "../../src/worker/Worker.ts"
import { Effect } from "effect"
import { run, withJson } from "../run.ts"

export const parseInstant = (value: string | undefined) => {
  if (value === undefined) return Effect.succeed(undefined)
  const date = new Date(value)
  return Number.isNaN(date.getTime())
    ? Effect.fail(new BadRequest({ message: `--now: not an ISO 8601 instant: ${value}` }))
    : Effect.succeed(date)
}

export const registerWorker = (program: Command) => {
  withJson(program.command("worker").description("price queued signals, deliver webhooks, renew billing cycles"))
    .option("--once", "drain every job, then exit (for cron)")
    .option("--now <iso>", "the instant billing cycles treat as now")
    .action((options: { json?: boolean; once?: boolean; now?: string }) => {
      // The loop runs until stopped: on the embedded database it never joins a one-off command's process.
      if (!options.once) markLongLived()
      return run(
        options,
        Effect.flatMap(parseInstant(options.now), (now) =>
          runWorker(workerJobs, { once: options.once ?? false, now, idle: pollInterval() })),
        {
          json: (handled) => ({ handled }),
          view: (handled) => <Text>Worker drained {handled} item(s).</Text>
        }
      )
    })
}
