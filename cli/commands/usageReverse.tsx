/** `billing usage reverse ID`: the CLI door of POST /signal/usage-log/{id}/reverse (src/usage/Reversals.ts). */
import type { Command } from "commander"
import { BigDecimal, Effect } from "effect"
import { ReverseRequest, Reversals } from "../../src/usage/Reversals.ts"
import { toEntry, UsageLogEntry } from "../../src/usage/UsageLogEntry.ts"
import { Details } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"

const run = runnerOn(withArrivalsAnswered(Reversals.Default))

interface ReverseOptions {
  readonly json?: boolean
  readonly org?: string
  readonly reason?: string
  readonly idempotencyKey?: string
}

const format = (value: BigDecimal.BigDecimal) => BigDecimal.format(value)

/** Registers `reverse` under the `usage` command. */
export const registerUsageReverse = (usage: Command) => {
  // commander checks the mandatory options of every ancestor, so `usage`'s own --customer would be demanded of
  // `usage reverse` too: it stops being mandatory once a subcommand is dispatched.
  usage.hook("preSubcommand", () => {
    for (const option of usage.options) option.makeOptionMandatory(false)
  })
  // With an action of its own, `usage` would get no implicit `help [command]`; the help tree (cli/helpTree.ts),
  // which rebuilds commands without actions, lists it, and so does every other command with subcommands.
  usage.helpCommand(true)
  withOrg(
    usage.command("reverse").description("take back one priced usage row: a reversing row, and what it drew given back")
      .argument("<id>", "the usage-log row's id (usg_...)")
  )
    .option("--reason <text>", "why (at most 500 characters)")
    .option("--idempotency-key <key>", "a repeat with this key reverses nothing again and answers the same row")
    .action((id: string, _options: ReverseOptions, command: Command) => {
      // `usage` itself takes --json and --org, and commander hands them to it wherever they stand on the line.
      const options = command.optsWithGlobals<ReverseOptions>()
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(ReverseRequest, {
            ...(options.reason !== undefined ? { reason: options.reason } : {}),
            ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {})
          })
          const reversals = yield* Reversals
          return toEntry(yield* reversals.reverse(organizationId, id, input))
        }),
        {
          json: encode(UsageLogEntry),
          view: (row) => (
            <Details
              title={`Usage row ${id} reversed`}
              fields={[
                ["reversing row", row.id],
                ["meter", row.meter],
                ["quantity", format(row.quantity)],
                ["customer cost", format(row.customerCost)],
                ["provider cost", format(row.providerCost)],
                ["remaining", row.balance.remaining ? format(row.balance.remaining) : "-"]
              ]}
            />
          )
        }
      )
    })
}
