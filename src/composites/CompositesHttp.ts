import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { CompositesApi } from "./CompositesApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toCatalogueQuery } from "../http/Pagination.ts"
import { Composites } from "./Composites.ts"

export const CompositesHttpLive = HttpApiBuilder.group(groupApi(CompositesApi), "composites", (handlers) =>
  Effect.gen(function*() {
    const composites = yield* Composites
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => composites.list(org, toCatalogueQuery(urlParams))).pipe(
          Effect.map((list) => ({ composites: list }))
        ))
      .handle("create", ({ payload }) =>
        forOrganization((org) => composites.create(org, payload)).pipe(
          Effect.map((composite) => ({ created: true as const, composite }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => composites.update(org, path.id, payload)).pipe(
          Effect.map((composite) => ({ updated: true as const, composite }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => composites.get(org, path.id)).pipe(Effect.map((composite) => ({ composite }))))
      .handle("archive", ({ path }) =>
        forOrganization((org) => composites.archive(org, path.id)).pipe(
          Effect.map((composite) => ({ archived: true as const, composite }))
        ))
      .handle("unarchive", ({ path }) =>
        forOrganization((org) => composites.unarchive(org, path.id)).pipe(
          Effect.map((composite) => ({ unarchived: true as const, composite }))
        ))
  }))
