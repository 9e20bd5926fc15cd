import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { EntitlementsApi } from "./EntitlementsApi.ts"
import { Entitlements } from "./Entitlements.ts"

export const EntitlementsHttpLive = HttpApiBuilder.group(groupApi(EntitlementsApi), "entitlements", (handlers) =>
  Effect.gen(function*() {
    const entitlements = yield* Entitlements
    return handlers
      .handle("check", ({ payload }) => forOrganization((org) => entitlements.check(org, payload)))
      .handle("list", ({ path }) => forOrganization((org) => entitlements.list(org, path.id)))
      .handle("reservation", ({ path }) => forOrganization((org) => entitlements.hold(org, path.id)))
      .handle("release", ({ path }) => forOrganization((org) => entitlements.release(org, path.id)))
  }))
