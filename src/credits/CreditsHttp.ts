import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { CreditsApi } from "./CreditsApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toCatalogueQuery } from "../http/Pagination.ts"
import { Credits } from "./Credits.ts"

export const CreditsHttpLive = HttpApiBuilder.group(groupApi(CreditsApi), "credits", (handlers) =>
  Effect.gen(function*() {
    const credits = yield* Credits
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => credits.list(org, toCatalogueQuery(urlParams))).pipe(
          Effect.map((list) => ({ credits: list }))
        ))
      .handle("create", ({ payload }) =>
        forOrganization((org) => credits.create(org, payload)).pipe(
          Effect.map((credit) => ({ created: true as const, credit }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => credits.update(org, path.id, payload)).pipe(
          Effect.map((credit) => ({ updated: true as const, credit }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => credits.get(org, path.id)).pipe(Effect.map((credit) => ({ credit }))))
      .handle("archive", ({ path }) =>
        forOrganization((org) => credits.archive(org, path.id)).pipe(
          Effect.map((credit) => ({ archived: true as const, credit }))
        ))
      .handle("unarchive", ({ path }) =>
        forOrganization((org) => credits.unarchive(org, path.id)).pipe(
          Effect.map((credit) => ({ unarchived: true as const, credit }))
        ))
  }))
