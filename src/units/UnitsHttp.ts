import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { UnitsApi } from "./UnitsApi.ts"
import { forCaller, forOrganization } from "../http/Auth.ts"
import { toCatalogueQuery } from "../http/Pagination.ts"
import { Units } from "./Units.ts"

export const UnitsHttpLive = HttpApiBuilder.group(groupApi(UnitsApi), "units", (handlers) =>
  Effect.gen(function*() {
    const units = yield* Units
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => units.list(org, toCatalogueQuery(urlParams))).pipe(
          Effect.map((list) => ({ units: list }))
        ))
      .handle("create", ({ payload }) =>
        forCaller((caller) =>
          units.create(caller.organizationId, payload, { apiKeyId: caller.apiKeyId })).pipe(
            Effect.map((unit) => ({ created: true as const, unit }))
          ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => units.update(org, path.id, payload)).pipe(
          Effect.map((unit) => ({ updated: true as const, unit }))
        ))
      .handle("get", ({ path }) => forOrganization((org) => units.get(org, path.id)).pipe(Effect.map((unit) => ({ unit }))))
      .handle("archive", ({ path }) =>
        forOrganization((org) => units.archive(org, path.id)).pipe(
          Effect.map((unit) => ({ archived: true as const, unit }))
        ))
      .handle("unarchive", ({ path }) =>
        forOrganization((org) => units.unarchive(org, path.id)).pipe(
          Effect.map((unit) => ({ unarchived: true as const, unit }))
        ))
  }))
