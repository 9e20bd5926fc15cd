import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/OpenApiDoc.ts"
import { PageParams } from "../http/Pagination.ts"
import { strict } from "../schema.ts"
import { MAX_LOOKUP_IDS } from "./UsageLog.ts"
import { Meter, UsageLogEntry, UsageLogLookupEntry } from "./UsageLogEntry.ts"

const Instant = Schema.Date.annotations({ message: () => "must be an ISO 8601 timestamp" })

export const UsageLogParams = Schema.Struct({
  ...PageParams,
  customerId: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })).annotations({
    description: "The service's id of the customer whose usage is listed."
  }),
  from: Schema.optional(Instant).annotations({ description: "Keeps rows created at or after this ISO 8601 instant." }),
  to: Schema.optional(Instant).annotations({ description: "Keeps rows created before this ISO 8601 instant." }),
  meter: Schema.optional(Meter.annotations({ message: () => `must be one of ${Meter.literals.join(", ")}` })).annotations({
    description: "Keeps the rows of one meter."
  })
})

export const LookupRequest = Schema.Struct({
  ids: Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).pipe(
    Schema.minItems(1, { message: () => "must hold at least one id" }),
    Schema.maxItems(MAX_LOOKUP_IDS, { message: () => `must hold at most ${MAX_LOOKUP_IDS} ids` })
  ).annotations({ description: `1 to ${MAX_LOOKUP_IDS} usage-log row ids of the workspace.` })
}).annotations(strict)

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("list", "/signal/usage-log")
      .setUrlParams(UsageLogParams)
      .addSuccess(Success(Schema.Struct({ usageLogs: Schema.Array(UsageLogEntry) }), { message: "Usage log" }))
      .annotateContext(documented({
        summary: "List a customer's usage log",
        description: "A page of the priced usage rows of one customer in creation order, optionally within a time " +
          "window and of one meter. Composite rows carry the occurrence's `custom`.",
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
  .annotate(OpenApi.Description, "Usage log: the priced rows metered usage produced.")
{}
