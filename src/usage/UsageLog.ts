/**
 * Reading the usage log: a customer's rows (cursor pagination, time range,
 * meter), an organisation-wide lookup of up to 10 rows by id, and per-meter
 * totals for operators. Sums per window are src/usage/UsageSummary.ts.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { readClient } from "../db/ReadSql.ts"
import { findAll, knownCursor, pageClause } from "../db/Sql.ts"
import type { Page } from "../Page.ts"
import { Money } from "../schema.ts"
import { maxTimestampLeadMs } from "../time.ts"
import { type Meter, UsageRecord } from "./UsageLogEntry.ts"
import { type CustomerId, type OrganizationId } from "../ids.ts"
import { prepared } from "../db/Prepared.ts"

export interface UsageQuery {
  readonly page: Page
  readonly from?: Date | undefined
  readonly to?: Date | undefined
  readonly meter?: Meter | undefined
}

export const MAX_LOOKUP_IDS = 10

export class UsageTotal extends Schema.Class<UsageTotal>("UsageTotal")({
  meter: Schema.String,
  rows: Schema.NumberFromString,
  quantity: Money,
  providerCost: Money,
  customerCost: Money
}) {}

/** One meter's customer cost in one UTC period of the portal's chart (`day` is YYYY-MM-DD, or YYYY-MM for a month). */
export class DailyUsage extends Schema.Class<DailyUsage>("DailyUsage")({
  day: Schema.String,
  meter: Schema.String,
  customerCost: Money
}) {}

export class UsageLog extends Effect.Service<UsageLog>()("UsageLog", {
  dependencies: [Customers.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // The list's rows tolerate lag: they come from the read connection when there is one
    // (docs/operations.md, "Reads off the primary"). Lookups by id stay on the primary.
    const read = yield* readClient
    const customers = yield* Customers

    /** A row's `timestamp`: when its usage happened; rows written before `occurred_at` existed have only `created_at`. */
    const moment = sql`coalesce(u.occurred_at, u.created_at)`

    // `custom` as text too: the SQL client camelCases the keys of the JSON it reads (UsageRecord's `custom`).
    const selectRows = sql`SELECT u.*, ${moment} AS moment, c.external_id, u.custom::text AS custom_json FROM usage_log u
      JOIN customers c ON c.organization_id = u.organization_id AND c.id = u.customer_id`

    /**
     * The months a range starting at `from` can hold rows of: a row's
     * `timestamp` is never more than 5 minutes after its `created_at` (the
     * intake refuses a `timestamp` more than 5 minutes ahead of its clock, and
     * a row is created when its signal is priced, after its intake), so rows
     * with a `timestamp` at or after `from` were all created at or after
     * `from` less 5 minutes. Said on the partition key, it lets PostgreSQL
     * skip the older months when it plans the statement: without it, a range
     * from this month's start would read every kept month's index
     * (docs/operations.md "What the months kept cost a read"). The bound is
     * computed here, not in SQL: `timestamptz - interval` is only stable, so
     * PostgreSQL could prune by it when the statement runs, not when it is
     * planned, and would plan every kept month each time (docs/benchmarks.md,
     * "Figures that were in code comments").
     */
    const createdSince = (from: Date) => sql`u.created_at >= ${new Date(from.getTime() - maxTimestampLeadMs)}`

    /**
     * The time range is [from, to) on the row's `timestamp` (when the usage
     * happened, not when it was priced): `to` is exclusive, so consecutive
     * ranges never count a row twice. Only the filters asked for are in the
     * text (no `$n IS NULL OR ...`), so that a statement's generic plan is as
     * good as a custom one and PostgreSQL keeps it (below).
     */
    const filters = (query: Omit<UsageQuery, "page">) =>
      sql.and([
        ...(query.from === undefined ? [] : [sql`${moment} >= ${query.from}`, createdSince(query.from)]),
        ...(query.to === undefined ? [] : [sql`${moment} < ${query.to}`]),
        ...(query.meter === undefined ? [] : [sql`u.meter = ${query.meter}`])
      ])

    /**
     * A customer's rows, oldest first unless the page asks for newest first; another organisation's customer is 404.
     * The customer is looked up on the primary (one just created has its usage log at once, empty, not a 404);
     * the cursor and the rows on the read connection, where the cursor's row came from.
     *
     * Without a time range the statement is prepared: planning it over every month kept cost
     * more than running it. PostgreSQL plans a prepared statement for its values five times, then keeps one
     * generic plan when that plan is estimated no dearer. A `LIMIT $n` is estimated at a tenth of the rows in
     * a generic plan, and a `$n IS NULL OR` filter as matching some, so the generic plan never won and every
     * request planned every month kept again, which cost more than running the statement (docs/benchmarks.md,
     * "History and the present"). Hence only
     * the filters asked for, and the page's limit written in the text (`pageClause`): one prepared statement
     * per shape, each keeping its generic plan, which reads each month's index in id order whoever the
     * customer is. A range (`from`, `to`) is planned for its values instead, each time: the months before
     * `from` are left out when it is planned, and how many of a customer's rows fall in a range differs by
     * customer and by month (a generic plan guessed one row for a customer with thousands this month, and
     * sorted them all). docs/operations.md "What the months kept cost a read".
     */
    const forCustomer = Effect.fn("UsageLog.forCustomer")(function*(organizationId: OrganizationId, customerId: CustomerId, query: UsageQuery) {
        yield* customers.get(organizationId, customerId)
        yield* knownCursor(read, "usage_log", organizationId, query.page)
        const hasRange = query.from !== undefined || query.to !== undefined
        return yield* findAll(
          UsageRecord,
          (hasRange ? read : prepared(read))`${selectRows}
              WHERE u.organization_id = ${organizationId} AND u.customer_id = ${customerId} AND ${filters(query)}
                ${pageClause(read, query.page, "u.id")}`
        )
      })

    /** Rows by id in the order asked, duplicates removed; ids matching nothing are `notFound`. */
    const lookup = Effect.fn("UsageLog.lookup")(function*(organizationId: OrganizationId, ids: ReadonlyArray<string>) {
        const wanted = [...new Set(ids)]
        const rows = yield* findAll(
          UsageRecord,
          sql`${selectRows} WHERE u.organization_id = ${organizationId} AND ${sql.in("u.id", wanted)}`
        )
        const byId = new Map(rows.map((row) => [row.id, row] as const))
        return {
          rows: wanted.flatMap((id) => byId.get(id) ?? []),
          notFound: wanted.filter((id) => !byId.has(id))
        }
      })

    /** Per-meter totals of a customer's usage in the range. */
    const totals = Effect.fn("UsageLog.totals")(function*(organizationId: OrganizationId, customerId: CustomerId, query: Omit<UsageQuery, "page">) {
        yield* customers.get(organizationId, customerId)
        return yield* findAll(
          UsageTotal,
          sql`SELECT u.meter, count(*) AS rows, sum(u.quantity) AS quantity,
                     sum(u.provider_cost) AS provider_cost, sum(u.customer_cost) AS customer_cost
              FROM usage_log u
              WHERE u.organization_id = ${organizationId} AND u.customer_id = ${customerId} AND ${filters(query)}
              GROUP BY u.meter ORDER BY u.meter`
        )
      })

    /** A customer's latest rows, newest first. */
    const latest = Effect.fn("UsageLog.latest")((organizationId: OrganizationId, customerId: CustomerId, limit: number) =>
      findAll(
        UsageRecord,
        sql`${selectRows}
            WHERE u.organization_id = ${organizationId} AND u.customer_id = ${customerId}
            ORDER BY u.id DESC LIMIT ${limit}`
      ))

    return { forCustomer, lookup, totals, latest } as const
  })
}) {}
