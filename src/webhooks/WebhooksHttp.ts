import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { toPage } from "../http/Pagination.ts"
import { WebhookDeliveries } from "./Deliveries.ts"
import { WebhookEndpoints } from "./Endpoints.ts"
import { type Endpoint, maskSecret } from "./Webhook.ts"
import { WebhooksApi } from "./WebhooksApi.ts"

/** An endpoint as the API shows it: the secret whole only where it was just made. */
const shown = (endpoint: Endpoint, secret: "whole" | "masked") => ({
  id: endpoint.id,
  url: endpoint.url,
  events: endpoint.events,
  threshold: endpoint.threshold,
  enabled: endpoint.enabled,
  secret: secret === "whole" ? endpoint.secret : maskSecret(endpoint.secret),
  removedAt: endpoint.removedAt,
  createdAt: endpoint.createdAt,
  updatedAt: endpoint.updatedAt
})

export const WebhooksHttpLive = HttpApiBuilder.group(groupApi(WebhooksApi), "webhooks", (handlers) =>
  Effect.gen(function*() {
    const endpoints = yield* WebhookEndpoints
    const deliveries = yield* WebhookDeliveries
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) =>
          endpoints.list(org, { includeRemoved: urlParams.includeRemoved === "true", page: toPage(urlParams) })
        ).pipe(Effect.map((list) => ({ endpoints: list.map((endpoint) => shown(endpoint, "masked")) }))))
      .handle("create", ({ payload }) =>
        forOrganization((org) => endpoints.add(org, payload)).pipe(
          Effect.map((endpoint) => ({ created: true as const, endpoint: shown(endpoint, "whole") }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => endpoints.get(org, path.id)).pipe(
          Effect.map((endpoint) => ({ endpoint: shown(endpoint, "masked") }))
        ))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => endpoints.update(org, path.id, payload)).pipe(
          Effect.map((endpoint) => ({ updated: true as const, endpoint: shown(endpoint, "masked") }))
        ))
      .handle("remove", ({ path }) =>
        forOrganization((org) => endpoints.remove(org, path.id)).pipe(
          Effect.map((endpoint) => ({ removed: true as const, endpoint: shown(endpoint, "masked") }))
        ))
      .handle("rotateSecret", ({ path }) =>
        forOrganization((org) => endpoints.rotateSecret(org, path.id)).pipe(
          Effect.map((endpoint) => ({ rotated: true as const, endpoint: shown(endpoint, "whole") }))
        ))
      .handle("deliveries", ({ path, urlParams }) =>
        forOrganization((org) =>
          Effect.flatMap(endpoints.get(org, path.id, { includeRemoved: true }), () => {
            const page = toPage(urlParams)
            return deliveries.list(org, {
              endpointId: path.id,
              eventId: urlParams.eventId,
              status: urlParams.status,
              limit: page.limit,
              cursor: page.cursor,
              oldestFirst: true
            })
          })
        ).pipe(Effect.map((list) => ({ deliveries: list }))))
      .handle("getDelivery", ({ path }) =>
        forOrganization((org) => deliveries.get(org, path.id)).pipe(Effect.map((delivery) => ({ delivery }))))
      .handle("retryDelivery", ({ path }) =>
        forOrganization((org) => deliveries.retry(org, path.id)).pipe(
          Effect.map((delivery) => ({ retried: true as const, delivery }))
        ))
  }))
