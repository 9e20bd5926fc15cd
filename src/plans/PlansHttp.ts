import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { PlansApi } from "./PlansApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toCatalogueQuery } from "../http/Pagination.ts"
import { Plans } from "./Plans.ts"

export const PlansHttpLive = HttpApiBuilder.group(groupApi(PlansApi), "plans", (handlers) =>
  Effect.gen(function*() {
    const plans = yield* Plans
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => plans.list(org, toCatalogueQuery(urlParams))).pipe(
          Effect.map((list) => ({ plans: list }))
        ))
      .handle("create", ({ payload }) =>
        forOrganization((org) => plans.create(org, payload)).pipe(
          Effect.map((plan) => ({ created: true as const, plan }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => plans.update(org, path.id, payload)).pipe(
          Effect.map((plan) => ({ updated: true as const, plan }))
        ))
      .handle("get", ({ path }) => forOrganization((org) => plans.get(org, path.id)).pipe(Effect.map((plan) => ({ plan }))))
      .handle("archive", ({ path }) =>
        forOrganization((org) => plans.archive(org, path.id)).pipe(
          Effect.map((plan) => ({ archived: true as const, plan }))
        ))
      .handle("unarchive", ({ path }) =>
        forOrganization((org) => plans.unarchive(org, path.id)).pipe(
          Effect.map((plan) => ({ unarchived: true as const, plan }))
        ))
  }))
