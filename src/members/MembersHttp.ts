import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { MembersApi } from "./MembersApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toPage } from "../http/Pagination.ts"
import { Members } from "./Members.ts"

export const MembersHttpLive = HttpApiBuilder.group(groupApi(MembersApi), "members", (handlers) =>
  Effect.gen(function*() {
    const members = yield* Members
    return handlers
      .handle("list", ({ path, urlParams }) =>
        forOrganization((org) => members.list(org, path.id, toPage(urlParams))).pipe(
          Effect.map((list) => ({ members: list }))
        ))
      .handle("create", ({ path, payload }) =>
        forOrganization((org) => members.create(org, path.id, payload)).pipe(
          Effect.map((member) => ({ created: true as const, member }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => members.update(org, path.id, path.memberId, payload)).pipe(
          Effect.map((member) => ({ updated: true as const, member }))
        ))
      .handle("remove", ({ path }) =>
        forOrganization((org) => members.remove(org, path.id, path.memberId)).pipe(
          Effect.map((member) => ({ removed: true as const, member }))
        ))
  }))
