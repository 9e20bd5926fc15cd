import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { PageParams } from "../http/Pagination.ts"
import { strict } from "../schema.ts"
import { ReverseRequest } from "./Reversals.ts"
import { MAX_LOOKUP_IDS } from "./UsageLog.ts"
import { Meter, UsageLogEntry, UsageLogLookupEntry } from "./UsageLogEntry.ts"
import { MAX_SUMMARY_ROWS, SummaryParams, SummaryRowJson } from "./UsageSummary.ts"
import { CustomerId } from "../ids.ts"

const Instant = Schema.Date.annotations({ message: () => "must be an ISO 8601 timestamp" })

export const UsageLogParams = Schema.Struct({
  ...PageParams,
  customerId: CustomerId.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "The service's id of the customer whose usage is listed."
  }),
  from: Schema.optional(Instant).annotations({
    description: "Keeps rows whose `timestamp` (when the usage happened) is at or after this ISO 8601 instant."
  }),
  to: Schema.optional(Instant).annotations({
    description: "Keeps rows whose `timestamp` (when the usage happened) is before this ISO 8601 instant."
  }),
  meter: Schema.optional(Meter.annotations({ message: () => `must be one of ${Meter.literals.join(", ")}` })).annotations({
    description: "Keeps the rows of one meter."
  })
})

const UsageLogIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The usage-log row's id (`usg_...`)." })
})

/** How many ids a lookup may send, repeats included: a bound on the body, well above the distinct limit. */
const MAX_LOOKUP_ITEMS = 10 * MAX_LOOKUP_IDS

/**
 * The limit counts distinct ids (the spec: duplicates are removed), so 11 ids
 * that are 10 once repeats are dropped are accepted, as the 10 they are.
 */
export const LookupRequest = Schema.Struct({
  ids: Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).pipe(
    Schema.minItems(1, { message: () => "must hold at least one id" }),
    Schema.maxItems(MAX_LOOKUP_ITEMS, { message: () => `must hold at most ${MAX_LOOKUP_ITEMS} ids, repeats included` }),
    Schema.filter((ids) => new Set(ids).size <= MAX_LOOKUP_IDS, {
      message: () => `must hold at most ${MAX_LOOKUP_IDS} distinct ids`,
      // The document: the array's bounds, and what no JSON Schema keyword says (distinct ids counted).
      jsonSchema: {
        description: `1 to ${MAX_LOOKUP_IDS} distinct usage-log row ids of the workspace; a repeated id counts once ` +
          `(at most ${MAX_LOOKUP_ITEMS} items in all).`
      }
    })
  )
}).annotations(strict)

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("list", "/signal/usage-log")
      .setUrlParams(UsageLogParams)
      .addSuccess(Success(Schema.Struct({ usageLogs: Schema.Array(UsageLogEntry) }), { message: "Usage log" }))
      .annotateContext(documented({
        summary: "List a customer's usage log",
        description: "A page of the priced usage rows of one customer in creation order, optionally within a time " +
          "window and of one meter. Composite rows carry the occurrence's `custom`. Each row has `timestamp` (when " +
          "the usage happened: the signal's own `timestamp`, else its moment of intake) and `createdAt` (when it was " +
          "priced); `from` and `to` filter on `timestamp`, so a late signal is found in the period it belongs to. " +
          "A reversing row names the row it takes back in `reverses`.",
        errors: { 404: "No customer with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("lookup", "/signal/usage-log/lookup")
      .setPayload(LookupRequest)
      .addSuccess(
        Success(
          Schema.Struct({ usageLogs: Schema.Array(UsageLogLookupEntry), notFound: Schema.Array(Schema.String) }),
          { message: "Usage log lookup" }
        )
      )
      .annotateContext(documented({
        summary: "Look up usage-log rows by id",
        description: `Up to ${MAX_LOOKUP_IDS} usage-log rows of the workspace, any customer's, in the order of \`ids\` ` +
          "(duplicates removed); ids that match nothing are listed in `notFound`. The row format differs from the " +
          "customer usage log's."
      }))
  )
  .add(
    HttpApiEndpoint.post("reverse", "/signal/usage-log/:id/reverse")
      .setPath(UsageLogIdPath)
      .setPayload(Schema.NullOr(ReverseRequest))
      .addSuccess(Success(UsageLogEntry, { message: "Usage reversed" }))
      .annotateContext(documented({
        summary: "Reverse a usage-log row",
        description: "Takes back one priced usage row (a correction): writes a reversing row (negative quantity and " +
          "costs, `reverses` = the row's id) and gives back what the row drew (allowance, arrear charge, wallet " +
          "amount) to the cycle that billed it. A row of a cycle that has ended changes that cycle's draft usage " +
          "invoice, or is credited on the customer's next usage invoice when the cycle's invoice is final. Wallet " +
          "credits send the wallet events a usage charge does. The body is optional. Answers the reversing row.",
        errors: {
          404: "No usage-log row with this id in the workspace.",
          409: "The row was reversed already, is itself a reversal, belongs to an archived customer, or was split " +
            "between allowance and arrears before rows recorded the split (it cannot be taken back exactly).",
          422: "The idempotencyKey was already used to reverse another row."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("summary", "/usage/summary")
      .setUrlParams(SummaryParams)
      .addSuccess(Success(Schema.Struct({ rows: Schema.Array(SummaryRowJson) }), { message: "Usage summary" }))
      .annotateContext(documented({
        summary: "Summarise usage per window",
        description: "The usage log added up per UTC window (`HOUR`, `DAY` or `MONTH`) of the rows' `timestamp` in " +
          "[`from`, `to`), and per the fields of `groupBy`: exact sums of quantity, customer cost (`cost`) and " +
          "provider cost, and the rows counted. Reversing rows are included (a reversed row and its reversal cancel " +
          "out; a reversal counts -1). One customer's usage (`customerId` or `externalId`), or without either the " +
          "whole organisation's. Windows are aligned to UTC hour, day and month starts, and cut to the range at " +
          "its ends. Only windows and groups holding rows are answered, ordered by window, then by the groups in " +
          `the order of \`groupBy\` (text byte by byte, nulls last); at most ${MAX_SUMMARY_ROWS} rows.`,
        errors: {
          400: "A query parameter missing, malformed or not taken (`from` and `to` must be ISO 8601 instants, " +
            "`window` one of HOUR, DAY, MONTH, `groupBy` known fields), both `customerId` and `externalId` sent " +
            "(`validation_failed`); `from` not before `to` (`invalid_time_range`); a range of more windows than its " +
            "window size allows, or an answer of more rows than one holds (`summary_too_large`); a malformed " +
            "`externalId` (`validation_failed`, naming it).",
          404: "No customer with this id, or active customer with this externalId, in the workspace."
        }
      }))
  )
  .annotate(OpenApi.Description, "Usage log: the priced rows metered usage produced, and their sums.")
{}
