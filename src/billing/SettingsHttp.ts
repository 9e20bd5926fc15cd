import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { OrganizationApi } from "./SettingsApi.ts"
import { Organizations } from "../organizations/Organizations.ts"

export const OrganizationHttpLive = HttpApiBuilder.group(groupApi(OrganizationApi), "organization", (handlers) =>
  Effect.gen(function*() {
    const organizations = yield* Organizations
    return handlers
      .handle("get", () =>
        forOrganization((org) => organizations.get(org)).pipe(Effect.map((organization) => ({ organization }))))
      .handle("update", ({ payload }) =>
        forOrganization((org) =>
          organizations.updateSettings(org, {
            ...payload,
            paymentInstructions: payload.paymentInstructions === null ? "" : payload.paymentInstructions
          })
        ).pipe(Effect.map((organization) => ({ updated: true as const, organization }))))
  }))
