/** `billing usage summary`: the CLI door of GET /usage/summary (src/usage/UsageSummary.ts). */
import type { Command } from "commander"
import { BigDecimal, Effect } from "effect"
import { SummaryParams, SummaryRowJson, toSummaryRowJson, UsageSummary } from "../../src/usage/UsageSummary.ts"
import { Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"

const run = runnerOn(withArrivalsAnswered(UsageSummary.Default))

const rowJson = encode(SummaryRowJson)
const format = (value: BigDecimal.BigDecimal) => BigDecimal.format(value)

interface SummaryOptions {
  readonly json?: boolean
  readonly org?: string
  readonly customer?: string
  readonly externalId?: string
  readonly from?: string
  readonly to?: string
  readonly window?: string
  readonly groupBy?: string
}

/** A grouped value in a cell: text as it is, anything else of a custom field as JSON, none as "-". */
const cell = (value: unknown) => (value === null || value === undefined ? "-" : typeof value === "string" ? value : JSON.stringify(value))

/** Registers `summary` under the `usage` command. */
export const registerUsageSummary = (usage: Command) => {
  withOrg(
    usage.command("summary").description(
      "usage added up per UTC window (HOUR, DAY, MONTH) and per the fields of --group-by: one customer's, or the organisation's"
    )
  )
    .option("--customer <id>", "the customer's id (neither this nor --external-id: every customer of the organisation)")
    .option("--external-id <id>", "the active customer with this external id, instead of --customer")
    // Not `requiredOption`: `usage` takes --from and --to too, and commander hands them to it; the query's own
    // decoding names a missing one.
    .option("--from <iso>", "the range's start: usage that happened at or after this instant (required)")
    .option("--to <iso>", "the range's end: usage that happened before this instant (required)")
    .option("--window <window>", "HOUR, DAY or MONTH, aligned to UTC (required)")
    .option("--group-by <fields>", "comma-separated: agentKey, meter, member, model, customerId, custom.<key>")
    .action((_options: SummaryOptions, command: Command) => {
      // `usage` itself takes --json, --org, --customer, --from and --to, and commander hands them to it wherever
      // they stand on the line.
      const options = command.optsWithGlobals<SummaryOptions>()
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const query = yield* decodeInput(SummaryParams, {
            ...(options.customer !== undefined ? { customerId: options.customer } : {}),
            ...(options.externalId !== undefined ? { externalId: options.externalId } : {}),
            ...(options.from !== undefined ? { from: options.from } : {}),
            ...(options.to !== undefined ? { to: options.to } : {}),
            ...(options.window !== undefined ? { window: options.window.toUpperCase() } : {}),
            ...(options.groupBy !== undefined ? { groupBy: options.groupBy } : {})
          })
          const summaries = yield* UsageSummary
          const rows = yield* summaries.summarize(organizationId, query)
          return { rows: rows.map(toSummaryRowJson), groupBy: query.groupBy ?? [] }
        }),
        {
          json: ({ rows }) => ({ rows: rows.map(rowJson) }),
          view: ({ groupBy, rows }) => (
            <Table
              title={`Usage of ${options.customer ?? options.externalId ?? "the organisation"} per ${options.window?.toLowerCase()} (UTC)`}
              columns={[
                { header: "WINDOW START", value: (r: typeof SummaryRowJson.Type) => r.windowStart.toISOString() },
                { header: "WINDOW END", value: (r) => r.windowEnd.toISOString() },
                ...groupBy.map((field) => ({
                  header: field.startsWith("custom.") ? field : field.replace(/([A-Z])/g, " $1").toUpperCase(),
                  value: (r: typeof SummaryRowJson.Type) =>
                    cell(field.startsWith("custom.") ? r.custom?.[field.slice("custom.".length)] : r[field as "agentKey"])
                })),
                { header: "QUANTITY", value: (r) => format(r.quantity), align: "right" },
                { header: "COST", value: (r) => format(r.cost), align: "right" },
                { header: "PROVIDER COST", value: (r) => format(r.providerCost), align: "right" },
                { header: "COUNT", value: (r) => String(r.count), align: "right" }
              ]}
              rows={rows}
              footer={`${rows.length} row(s)`}
            />
          )
        }
      )
    })
}
