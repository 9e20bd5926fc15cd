/**
 * Usage summaries (docs/signals.md "Usage summaries"): the usage log's rows
 * added up per UTC window (hour, day or month) and per the fields asked for
 * (`agentKey`, `meter`, `member`, `model`, `customerId`, `custom.<key>`), for one customer
 * or the whole organisation, by PostgreSQL in NUMERIC: exact sums, reversing
 * rows included, so a reversed row and its reversal cancel out.
 *
 * The range is `[from, to)` on a row's `timestamp` (when the usage happened),
 * as the usage log's `from`/`to`. Windows are aligned to UTC hour, day and
 * month starts; a row's window is cut to the range, so its sums always cover
 * exactly `[windowStart, windowEnd)`. Only windows and groups holding rows are
 * answered, ordered by window then by the groups in the order asked.
 *
 * The statement reads the months (partitions) from `from` less 5 minutes on,
 * through the indexes on the row's moment (migrations/0025): a range of last
 * year reads last year's rows and one probe of each later month, whatever the
 * history kept (docs/benchmarks.md "Usage summaries").
 */
import { Effect, ParseResult, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { readClient } from "../db/ReadSql.ts"
import * as Rows from "../db/RowDecoders.ts"
import { InvalidTimeRange, SummaryTooLarge } from "../errors.ts"
import { type CustomerId, CustomerId as CustomerIdSchema, type OrganizationId } from "../ids.ts"
import type { Decimal } from "../money.ts"
import { AnyJson, Money, Timestamp } from "../schema.ts"
import { maxTimestampLeadMs } from "../time.ts"
import { Meter } from "./UsageLogEntry.ts"

export const SummaryWindow = Schema.Literal("HOUR", "DAY", "MONTH")
export type SummaryWindow = typeof SummaryWindow.Type

/** The fields a summary groups by besides the window (`custom.<path>` aside). */
export const GROUP_FIELDS = ["agentKey", "meter", "member", "model", "customerId"] as const
export type GroupField = typeof GROUP_FIELDS[number] | `custom.${string}`

/** At most this many fields in `groupBy`. */
export const MAX_GROUP_FIELDS = 5
/** A custom field's path: at most this many keys, each 1 to 64 characters other than `.` and `,`. */
export const MAX_CUSTOM_DEPTH = 3
const CUSTOM_KEY = /^[^.,\u0000-\u001f]{1,64}$/

/** The most windows of each size one summary spans: 31 days of hours, 366 days, 36 months. */
export const MAX_WINDOWS: Record<SummaryWindow, number> = { HOUR: 744, DAY: 366, MONTH: 36 }
/** The most rows one answer holds. */
export const MAX_SUMMARY_ROWS = 10_000

const groupByRule = `a comma-separated list of at most ${MAX_GROUP_FIELDS} distinct fields from ` +
  `${GROUP_FIELDS.join(", ")} and custom.<key> (a key of the rows' \`custom\`, or a path of up to ` +
  `${MAX_CUSTOM_DEPTH} keys such as custom.user.team; keys of 1 to 64 characters other than "." and ",")`

/** The problem with one entry of `groupBy`, or undefined when it is a field the summary takes. */
const fieldProblem = (field: string): string | undefined => {
  if ((GROUP_FIELDS as ReadonlyArray<string>).includes(field)) return undefined
  if (field.startsWith("custom.")) {
    const path = field.slice("custom.".length).split(".")
    if (path.length > MAX_CUSTOM_DEPTH) return `"${field}" has more than ${MAX_CUSTOM_DEPTH} keys`
    if (path.every((key) => CUSTOM_KEY.test(key))) return undefined
    return `"${field}" is not a custom field (keys of 1 to 64 characters other than "." and ",")`
  }
  return `unknown field "${field}"`
}

/**
 * `groupBy` as sent (`agentKey,model`) and as the service takes it (the list).
 * One parameter holding a comma-separated list, not a repeated parameter: a
 * parameter given twice is refused as on every route (docs/api.md "Strict queries").
 */
export const GroupBy = Schema.transformOrFail(
  Schema.String.annotations({
    jsonSchema: { type: "string", description: `The fields to group by besides the window: ${groupByRule}.` }
  }),
  Schema.Array(Schema.String),
  {
    strict: true,
    decode: (text, _, ast) => {
      const fields = text.split(",").map((field) => field.trim())
      const problems = [
        ...fields.some((field) => field === "") ? ["an empty field"] : [],
        ...fields.filter((field) => field !== "").flatMap((field) => fieldProblem(field) ?? []),
        ...new Set(fields).size < fields.length ? ["a field named twice"] : [],
        ...fields.length > MAX_GROUP_FIELDS ? [`more than ${MAX_GROUP_FIELDS} fields`] : []
      ]
      return problems.length === 0
        ? ParseResult.succeed(fields)
        : ParseResult.fail(new ParseResult.Type(ast, text, `${problems.join("; ")}: takes ${groupByRule}`))
    },
    encode: (fields) => ParseResult.succeed(fields.join(","))
  }
)

const Instant = Schema.Date.annotations({ message: () => "must be an ISO 8601 timestamp" })

/** The query of a summary, as the API's query parameters and the CLI's flags both give it. */
export const SummaryParams = Schema.Struct({
  customerId: Schema.optional(CustomerIdSchema.pipe(Schema.minLength(1, { message: () => "must not be empty" })))
    .annotations({
      description: "The service's id of the customer whose usage is summed. Without it and without `externalId`, " +
        "the organisation's usage, every customer's."
    }),
  externalId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })))
    .annotations({ description: "Your own id of the (active) customer, instead of `customerId`; not both." }),
  from: Schema.propertySignature(Instant).annotations({
    description: "The range's start, an ISO 8601 instant: rows whose `timestamp` (when the usage happened) is at or after it."
  }),
  to: Schema.propertySignature(Instant).annotations({
    description: "The range's end, an ISO 8601 instant after `from`: rows whose `timestamp` is before it."
  }),
  window: SummaryWindow.annotations({
    message: () => `must be one of ${SummaryWindow.literals.join(", ")}`,
    description: `The windows the range is cut into, aligned to UTC hour, day or month starts. A range spans at most ` +
      `${MAX_WINDOWS.HOUR} hours (31 days), ${MAX_WINDOWS.DAY} days or ${MAX_WINDOWS.MONTH} months.`
  }),
  groupBy: Schema.optional(GroupBy)
}).pipe(
  Schema.filter((params) =>
    params.customerId !== undefined && params.externalId !== undefined
      ? { path: ["externalId"], message: "send customerId or externalId, not both" }
      : undefined, { jsonSchema: {} })
)
export type SummaryParams = typeof SummaryParams.Type

/** One window's sums for one combination of the grouped fields. */
export interface SummaryRow {
  readonly windowStart: Date
  readonly windowEnd: Date
  /** The grouped fields, by name as asked (`agentKey`, `custom.team`); a row lacking one has null. */
  readonly groups: ReadonlyArray<readonly [GroupField, unknown]>
  readonly quantity: Decimal
  readonly cost: Decimal
  readonly providerCost: Decimal
  readonly count: number
}

/** A summary's row on the wire: the grouped fields between the window and the sums, `custom.*` under `custom`. */
export const SummaryRowJson = Schema.Struct({
  windowStart: Schema.propertySignature(Timestamp).annotations({ description: "The window's first instant (UTC), or `from` in a window cut by it." }),
  windowEnd: Schema.propertySignature(Timestamp).annotations({ description: "The instant after the window (UTC), or `to` in a window cut by it." }),
  customerId: Schema.optional(Schema.String).annotations({
    description: "Grouped by customerId: the customer's id (an organisation's summary per customer)."
  }),
  agentKey: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Grouped by agentKey: the rows' agentKey (the composite's refId on composite rows; null on wallet rows)."
  }),
  meter: Schema.optional(Meter).annotations({ description: "Grouped by meter: the rows' meter." }),
  member: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Grouped by member: the member e-mail the rows' signals named, in lower case (members are matched " +
      "case-insensitively); null for usage attributed to no member."
  }),
  model: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "Grouped by model: the rows' model; null for usage without one (units, outcomes, composites)."
  }),
  custom: Schema.optional(Schema.Record({ key: Schema.String, value: AnyJson })).annotations({
    description: "Grouped by custom fields: each field asked (`custom.team` as `team`) with the rows' value, any JSON " +
      "value; null where the rows' `custom` lacks it."
  }),
  quantity: Schema.propertySignature(Money).annotations({
    description: "The rows' quantities added up (credits, units, 1 per outcome, step or occurrence, USD on the " +
      "wallet): a sum over different meters adds different things, so group by meter or agentKey to read it."
  }),
  cost: Schema.propertySignature(Money).annotations({ description: "The rows' customer cost added up: what the customer is charged, in USD. Exact, as every sum here: " +
      "NUMERIC in the service, a JSON number on the wire; read it with a decimal type." }),
  providerCost: Schema.propertySignature(Money).annotations({ description: "The rows' provider cost added up, in USD." }),
  count: Schema.Int.annotations({
    description: "The usage-log rows counted, a reversing row counting -1: the uses that stand."
  })
})
export type SummaryRowJson = typeof SummaryRowJson.Encoded

export const toSummaryRowJson = (row: SummaryRow): typeof SummaryRowJson.Type => {
  const named: Record<string, unknown> = {}
  const custom: Record<string, unknown> = {}
  for (const [field, value] of row.groups) {
    if (field.startsWith("custom.")) custom[field.slice("custom.".length)] = value ?? null
    else named[field] = value
  }
  return {
    windowStart: row.windowStart,
    windowEnd: row.windowEnd,
    ...named,
    ...(Object.keys(custom).length === 0 ? {} : { custom }),
    quantity: row.quantity,
    cost: row.cost,
    providerCost: row.providerCost,
    count: row.count
  }
}

/** The first instant of the UTC window holding `at`. */
export const windowStartOf = (at: Date, window: SummaryWindow): Date => {
  switch (window) {
    case "HOUR":
      return new Date(Math.floor(at.getTime() / 3_600_000) * 3_600_000)
    case "DAY":
      return new Date(Math.floor(at.getTime() / 86_400_000) * 86_400_000)
    case "MONTH":
      return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1))
  }
}

/** The first instant of the UTC window after the one starting at `start`. */
export const nextWindow = (start: Date, window: SummaryWindow): Date => {
  switch (window) {
    case "HOUR":
      return new Date(start.getTime() + 3_600_000)
    case "DAY":
      return new Date(start.getTime() + 86_400_000)
    case "MONTH":
      return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1))
  }
}

/** How many windows of `[from, to)` (from before to) has, the cut first and last included. */
export const windowsIn = (from: Date, to: Date, window: SummaryWindow): number => {
  const first = windowStartOf(from, window)
  const last = windowStartOf(new Date(to.getTime() - 1), window)
  if (window === "MONTH") {
    return (last.getUTCFullYear() - first.getUTCFullYear()) * 12 + last.getUTCMonth() - first.getUTCMonth() + 1
  }
  const size = window === "HOUR" ? 3_600_000 : 86_400_000
  return Math.round((last.getTime() - first.getTime()) / size) + 1
}

/** What a summary sums: one customer (by id or externalId) or the organisation, over `[from, to)`. */
export interface SummaryQuery {
  readonly customerId?: CustomerId | undefined
  readonly externalId?: string | undefined
  readonly from: Date
  readonly to: Date
  readonly window: SummaryWindow
  readonly groupBy?: ReadonlyArray<string> | undefined
}

/**
 * A summary's row as the statement answers it: the window and the sums (the
 * groups, g0..gN, are read as they come). Decoded by hand (src/db/RowDecoders.ts),
 * each field as Timestamp, Money and Schema.Number would: an organisation's
 * summary answers up to 10,000 rows, and decoding them through their Schema
 * cost more of serve's time than PostgreSQL took to add them up.
 */
const decodeSums = Rows.rowDecoder("UsageSummary", {
  windowStart: Rows.timestamp,
  quantity: Rows.money,
  cost: Rows.money,
  providerCost: Rows.money,
  count: Rows.number
})

const truncUnit: Record<SummaryWindow, string> = { HOUR: "hour", DAY: "day", MONTH: "month" }

export class UsageSummary extends Effect.Service<UsageSummary>()("UsageSummary", {
  dependencies: [Customers.Default],
  effect: Effect.gen(function*() {
    // Sums tolerate lag, as the usage log's list does (docs/operations.md, "Reads off the primary").
    const read = yield* readClient
    const customers = yield* Customers

    /** A row's `timestamp`: when its usage happened (`created_at` for rows written before `occurred_at` existed). */
    const moment = read`coalesce(u.occurred_at, u.created_at)`

    /**
     * A grouped field's column. Text is compared byte by byte (`COLLATE "C"`),
     * so the order is the same on every database whatever its locale; a member
     * e-mail in lower case; a custom field as the text of its JSON value (a
     * JSON null and a missing key alike SQL NULL), parsed here: a JSON object
     * read as such would have its keys camelCased by the client, as column
     * names are.
     */
    const columnOf = (field: string) => {
      switch (field) {
        case "agentKey":
          return read`u.agent_key COLLATE "C"`
        case "meter":
          return read`u.meter COLLATE "C"`
        case "member":
          return read`lower(u.member) COLLATE "C"`
        case "model":
          return read`u.model COLLATE "C"`
        case "customerId":
          return read`u.customer_id COLLATE "C"`
        default:
          return read`nullif(u.custom #> string_to_array(${field.slice("custom.".length)}, '.'), 'null'::jsonb)::text COLLATE "C"`
      }
    }

    const summarize = Effect.fn("UsageSummary.summarize")(function*(organizationId: OrganizationId, query: SummaryQuery) {
      const { from, to, window } = query
      const groupBy = (query.groupBy ?? []) as ReadonlyArray<GroupField>
      if (from.getTime() >= to.getTime()) {
        return yield* new InvalidTimeRange({ message: "from must be before to" })
      }
      const windows = windowsIn(from, to, window)
      if (windows > MAX_WINDOWS[window]) {
        return yield* new SummaryTooLarge({
          message: `The range spans ${windows} ${window} windows; a summary spans at most ${MAX_WINDOWS[window]}: ` +
            "narrow the range or take a larger window"
        })
      }
      const customerId = query.customerId !== undefined
        ? (yield* customers.get(organizationId, query.customerId)).id
        : query.externalId !== undefined
        ? (yield* customers.getByExternalId(organizationId, query.externalId)).id
        : undefined

      const groups = groupBy.map((field, index) => read`${columnOf(field)} AS ${read(`g${index}`)}`)
      const positions = read.literal(groupBy.map((_, index) => `, ${index + 2}`).join(""))
      // `created_at` bounds the months read: a row's moment is never more than 5 minutes after its `created_at`
      // (src/usage/UsageLog.ts `createdSince`); the bound is a value computed here, so that PostgreSQL leaves the
      // older months out when it plans the statement.
      const rows = yield* read<Record<string, unknown>>`
        SELECT date_trunc(${truncUnit[window]}, ${moment}, 'UTC') AS window_start
               ${groups.length === 0 ? read`` : read`, ${read.csv(groups)}`},
               sum(u.quantity) AS quantity, sum(u.customer_cost) AS cost, sum(u.provider_cost) AS provider_cost,
               sum(CASE WHEN u.reverses IS NULL THEN 1 ELSE -1 END)::int AS count
        FROM usage_log u
        WHERE u.organization_id = ${organizationId}
          ${customerId === undefined ? read`` : read`AND u.customer_id = ${customerId}`}
          AND ${moment} >= ${from} AND ${moment} < ${to}
          AND u.created_at >= ${new Date(from.getTime() - maxTimestampLeadMs)}
        GROUP BY 1${positions}
        ORDER BY 1${positions}
        LIMIT ${MAX_SUMMARY_ROWS + 1}`.pipe(Effect.orDie)
      if (rows.length > MAX_SUMMARY_ROWS) {
        return yield* new SummaryTooLarge({
          message: `The summary holds more than ${MAX_SUMMARY_ROWS.toLocaleString("en-US")} rows: narrow the range, ` +
            "take a larger window or group by fewer fields"
        })
      }
      const sums = yield* decodeSums(rows)
      return sums.map((sum, index): SummaryRow => {
        const row = rows[index]!
        const start = sum.windowStart
        const end = nextWindow(start, window)
        return {
          windowStart: start < from ? from : start,
          windowEnd: end > to ? to : end,
          groups: groupBy.map((field, position) => {
            const value = row[`g${position}`] ?? null
            return [field, field.startsWith("custom.") && typeof value === "string" ? JSON.parse(value) : value] as const
          }),
          quantity: sum.quantity,
          cost: sum.cost,
          providerCost: sum.providerCost,
          count: sum.count
        }
      })
    })

    return { summarize } as const
  })
}) {}
