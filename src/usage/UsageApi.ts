import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { strict } from "../schema.ts"
import { MAX_LOOKUP_IDS } from "./UsageLog.ts"
import { Meter, UsageLogEntry, UsageLogLookupEntry } from "./UsageLogEntry.ts"

const Instant = Schema.Date.annotations({ message: () => "must be an ISO 8601 timestamp" })

export const UsageLogParams = Schema.Struct({
  ...PageParams,
  customerId: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })),
  from: Schema.optional(Instant),
  to: Schema.optional(Instant),
  meter: Schema.optional(Meter.annotations({ message: () => `must be one of ${Meter.literals.join(", ")}` }))
})

export const LookupRequest = Schema.Struct({
  ids: Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).pipe(
    Schema.minItems(1, { message: () => "must hold at least one id" }),
    Schema.maxItems(MAX_LOOKUP_IDS, { message: () => `must hold at most ${MAX_LOOKUP_IDS} ids` })
  )
}).annotations(strict)

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("list", "/signal/usage-log")
      .setUrlParams(UsageLogParams)
      .addSuccess(Success(Schema.Struct({ usageLogs: Schema.Array(UsageLogEntry) }), { message: "Usage log" }))
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
  )
{}
