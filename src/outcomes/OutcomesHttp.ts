import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { OutcomesApi } from "./OutcomesApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toCatalogueQuery } from "../http/Pagination.ts"
import { Outcomes } from "./Outcomes.ts"

export const OutcomesHttpLive = HttpApiBuilder.group(groupApi(OutcomesApi), "outcomes", (handlers) =>
  Effect.gen(function*() {
    const outcomes = yield* Outcomes
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => outcomes.list(org, toCatalogueQuery(urlParams))).pipe(
          Effect.map((list) => ({ outcomes: list }))
        ))
      .handle("create", ({ payload }) =>
        forOrganization((org) => outcomes.create(org, payload)).pipe(
          Effect.map((outcome) => ({ created: true as const, outcome }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => outcomes.update(org, path.id, payload)).pipe(
          Effect.map((outcome) => ({ updated: true as const, outcome }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => outcomes.get(org, path.id)).pipe(Effect.map((outcome) => ({ outcome }))))
      .handle("archive", ({ path }) =>
        forOrganization((org) => outcomes.archive(org, path.id)).pipe(
          Effect.map((outcome) => ({ archived: true as const, outcome }))
        ))
      .handle("unarchive", ({ path }) =>
        forOrganization((org) => outcomes.unarchive(org, path.id)).pipe(
          Effect.map((outcome) => ({ unarchived: true as const, outcome }))
        ))
  }))
