import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import type { Organization } from "../organizations/Organizations.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { rateLimitsInForce } from "../organizations/RateLimits.ts"
import { forOrganization } from "./Auth.ts"
import { groupApi } from "./GroupApi.ts"
import { OrganizationApi } from "./OrganizationApi.ts"

/** An organisation's settings as the API shows them: the rate limits in force, and where each comes from. */
const settingsJson = (organization: Organization) => {
  const rateLimits = rateLimitsInForce(organization.rateLimits)
  return {
    id: organization.id,
    name: organization.name,
    currencyCode: organization.currencyCode,
    reservedWalletEnabled: organization.reservedWalletEnabled,
    paymentInstructions: organization.paymentInstructions,
    lateUsageDays: organization.lateUsageDays,
    invoiceGraceHours: organization.invoiceGraceHours,
    invoiceNumberPrefix: organization.invoiceNumberPrefix,
    rateLimits,
    createdAt: organization.createdAt,
    updatedAt: organization.updatedAt
  }
}

export const OrganizationHttpLive = HttpApiBuilder.group(groupApi(OrganizationApi), "organization", (handlers) =>
  Effect.gen(function*() {
    const organizations = yield* Organizations
    return handlers
      .handle("settings", () =>
        forOrganization((org) => organizations.get(org)).pipe(
          Effect.map((organization) => ({ organization: settingsJson(organization) }))
        ))
      .handle("updateSettings", ({ payload }) =>
        forOrganization((org) =>
          organizations.updateSettings(org, {
            ...payload,
            paymentInstructions: payload.paymentInstructions === null ? "" : payload.paymentInstructions
          })
        ).pipe(
          Effect.map((organization) => ({ updated: true as const, organization: settingsJson(organization) }))
        ))
  }))
