import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { Organizations, settingsOf } from "../organizations/Organizations.ts"
import { forOrganization } from "./Auth.ts"
import { groupApi } from "./GroupApi.ts"
import { OrganizationApi } from "./OrganizationApi.ts"


export const OrganizationHttpLive = HttpApiBuilder.group(groupApi(OrganizationApi), "organization", (handlers) =>
  Effect.gen(function*() {
    const organizations = yield* Organizations
    return handlers
      .handle("settings", () =>
        forOrganization((org) => organizations.get(org).pipe(
          // The key's own organisation, which authentication has just found: not finding it is a defect, not a 404.
          Effect.catchTag("OrganizationNotFound", (missing) => Effect.die(missing))
        )).pipe(
          Effect.map((organization) => ({ organization: settingsOf(organization) }))
        ))
      .handle("updateSettings", ({ payload }) =>
        forOrganization((org) =>
          organizations.updateSettings(org, {
            ...payload,
            paymentInstructions: payload.paymentInstructions === null ? "" : payload.paymentInstructions
          }).pipe(Effect.catchTag("OrganizationNotFound", (missing) => Effect.die(missing)))
        ).pipe(
          Effect.map((organization) => ({ updated: true as const, organization: settingsOf(organization) }))
        ))
  }))
