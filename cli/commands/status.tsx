import type { Command } from "commander"
import { Effect } from "effect"
import { Box, Text } from "../ui/ink.ts"
import { OperationsStatus, type WorkStatus } from "../../src/operations/Status.ts"
import { watch } from "../ui/Live.tsx"
import { Details } from "../ui/Table.tsx"
import { numberFlag, organizationOf, runnerOn, withOrg } from "../run.ts"

const run = runnerOn(OperationsStatus.Default)

const iso = (date: Date | null) => date?.toISOString() ?? "-"

const lag = (status: WorkStatus) =>
  status.signals.oldestQueuedAt === null
    ? "none queued"
    : `${((status.at.getTime() - status.signals.oldestQueuedAt.getTime()) / 1000).toFixed(1)} s behind`

const StatusView = (props: { readonly status: WorkStatus; readonly footer?: string }) => (
  <Box flexDirection="column">
    <Details
      title="Signals"
      fields={[
        ["queued", `${props.status.signals.queued} (${lag(props.status)})`],
        ["processed in the last minute", String(props.status.signals.processedLastMinute)],
        ["pending (unknown externalId)", String(props.status.signals.pending)],
        ["failed", String(props.status.signals.failed)]
      ]}
    />
    <Details
      title="Webhook deliveries"
      fields={[
        ["pending", String(props.status.deliveries.pending)],
        ["next attempt", iso(props.status.deliveries.nextAttemptAt)],
        ["delivered in the last minute", String(props.status.deliveries.deliveredLastMinute)],
        ["failed", String(props.status.deliveries.failed)]
      ]}
    />
    <Details
      title="Purchases"
      fields={[
        ["active", String(props.status.purchases.active)],
        ["scheduled", String(props.status.purchases.scheduled)],
        ["next cycle end", iso(props.status.purchases.nextCycleEnd)]
      ]}
    />
    {props.footer ? <Text dimColor>{props.footer}</Text> : null}
  </Box>
)

const statusJson = (status: WorkStatus) => ({
  at: status.at.toISOString(),
  signals: { ...status.signals, oldestQueuedAt: status.signals.oldestQueuedAt?.toISOString() ?? null },
  deliveries: { ...status.deliveries, nextAttemptAt: status.deliveries.nextAttemptAt?.toISOString() ?? null },
  purchases: { ...status.purchases, nextCycleEnd: status.purchases.nextCycleEnd?.toISOString() ?? null }
})

export const registerStatus = (program: Command) => {
  withOrg(program.command("status").description("the signal queue, webhook deliveries and billing cycles at a glance"))
    .option("--watch [seconds]", "keep the view on screen, refreshed every few seconds (default 1), until Ctrl-C", numberFlag)
    .action((options: { json?: boolean; org?: string; watch?: number | true }) => {
      const load = Effect.flatMap(organizationOf(options), (organizationId) =>
        Effect.flatMap(OperationsStatus, (status) => status.snapshot(organizationId)))
      if (options.watch !== undefined && !options.json) {
        const seconds = options.watch === true ? 1 : Math.max(0.5, options.watch)
        return run(
          options,
          watch(load, (status) => <StatusView status={status} footer={`${iso(status.at)}, every ${seconds} s; Ctrl-C to stop`} />, seconds),
          { json: () => ({}), view: () => <Text dimColor>Stopped watching.</Text> }
        )
      }
      return run(options, load, { json: statusJson, view: (status) => <StatusView status={status} /> })
    })
}
