import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { UsageApi } from "./UsageApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toPage } from "../http/Pagination.ts"
import { Reversals } from "./Reversals.ts"
import { UsageLog } from "./UsageLog.ts"
import { toEntry, toLookupEntry } from "./UsageLogEntry.ts"
import { toSummaryRowJson, UsageSummary } from "./UsageSummary.ts"

export const UsageHttpLive = HttpApiBuilder.group(groupApi(UsageApi), "usage", (handlers) =>
  Effect.gen(function*() {
    const usage = yield* UsageLog
    const reversals = yield* Reversals
    const summaries = yield* UsageSummary
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) =>
          usage.forCustomer(org, urlParams.customerId, {
            page: toPage(urlParams),
            from: urlParams.from,
            to: urlParams.to,
            meter: urlParams.meter
          })
        ).pipe(Effect.map((rows) => ({ usageLogs: rows.map(toEntry) }))))
      .handle("lookup", ({ payload }) =>
        forOrganization((org) => usage.lookup(org, payload.ids)).pipe(
          Effect.map(({ notFound, rows }) => ({ usageLogs: rows.map(toLookupEntry), notFound }))
        ))
      .handle("reverse", ({ path, payload }) =>
        forOrganization((org) => reversals.reverse(org, path.id, payload ?? {})).pipe(Effect.map(toEntry)))
      .handle("summary", ({ urlParams }) =>
        forOrganization((org) => summaries.summarize(org, urlParams)).pipe(
          Effect.map((rows) => ({ rows: rows.map(toSummaryRowJson) }))
        ))
  }))
