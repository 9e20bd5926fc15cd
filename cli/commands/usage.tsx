import type { Command } from "commander"
import { listFooter, newestFirstPage, nextCursorOf, withOldest, limitOption } from "../lists.ts"
import { BigDecimal, Effect, Schema } from "effect"
import { Box } from "../ui/ink.ts"
import { UsageLogParams } from "../../src/usage/UsageApi.ts"
import { UsageLog, UsageTotal } from "../../src/usage/UsageLog.ts"
import { toEntry, UsageLogEntry } from "../../src/usage/UsageLogEntry.ts"
import { Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"
import { registerUsageReverse } from "./usageReverse.tsx"
import { registerUsageSummary } from "./usageSummary.tsx"
import { CustomerId } from "../../src/ids.ts"

const run = runnerOn(withArrivalsAnswered(UsageLog.Default))

const entryJson = encode(UsageLogEntry)
const totalJson = encode(UsageTotal)
const format = (value: BigDecimal.BigDecimal) => BigDecimal.format(value)

interface UsageFlags {
  readonly json?: boolean
  readonly org?: string
  readonly customer: string
  readonly from?: string
  readonly to?: string
  readonly meter?: string
  readonly limit?: number
  readonly cursor?: string
  readonly oldest?: boolean
}

export const registerUsage = (program: Command) => {
  const usage = withOldest(withOrg(program.command("usage").description("a customer's usage log, newest first, with totals per meter")))
    .requiredOption("--customer <id>", "the customer's id")
    .option("--from <iso>", "rows at or after this instant")
    .option("--to <iso>", "rows before this instant")
    .option("--meter <meter>", "CREDIT, OUTCOME_STEP, OUTCOME, UNIT, WALLET or COMPOSITE")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: UsageFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const query = yield* decodeInput(
            Schema.Struct({ from: UsageLogParams.fields.from, to: UsageLogParams.fields.to, meter: UsageLogParams.fields.meter }),
            { from: options.from, to: options.to, meter: options.meter?.toUpperCase() }
          )
          const usage = yield* UsageLog
          const rows = yield* usage.forCustomer(organizationId, CustomerId.make(options.customer), { ...query, page: newestFirstPage(options) })
          const totals = yield* usage.totals(organizationId, CustomerId.make(options.customer), query)
          return { rows: rows.map(toEntry), totals }
        }),
        {
          json: ({ rows, totals }) => ({
            usageLogs: rows.map(entryJson),
            nextCursor: nextCursorOf(rows, options),
            totals: totals.map(totalJson)
          }),
          view: ({ rows, totals }) => (
            <Box flexDirection="column">
              <Table
                title={`Usage of ${options.customer}`}
                columns={[
                  { header: "ID", value: (r) => r.id },
                  { header: "WHEN", value: (r) => r.createdAt.toISOString() },
                  { header: "METER", value: (r) => r.meter },
                  { header: "AGENT KEY", value: (r) => r.agentKey ?? "-" },
                  { header: "QUANTITY", value: (r) => format(r.quantity), align: "right" },
                  { header: "PROVIDER COST", value: (r) => format(r.providerCost), align: "right" },
                  { header: "CUSTOMER COST", value: (r) => format(r.customerCost), align: "right" },
                  { header: "REMAINING", value: (r) => (r.balance.remaining ? format(r.balance.remaining) : "-"), align: "right" }
                ]}
                rows={rows}
                footer={listFooter(`${rows.length} row(s)`, rows, options)}
              />
              <Table
                title="Totals"
                columns={[
                  { header: "METER", value: (t) => t.meter },
                  { header: "ROWS", value: (t) => String(t.rows), align: "right" },
                  { header: "QUANTITY", value: (t) => format(t.quantity), align: "right" },
                  { header: "PROVIDER COST", value: (t) => format(t.providerCost), align: "right" },
                  { header: "CUSTOMER COST", value: (t) => format(t.customerCost), align: "right" }
                ]}
                rows={totals}
              />
            </Box>
          )
        }
      )
    )
  registerUsageReverse(usage)
  registerUsageSummary(usage)
}
