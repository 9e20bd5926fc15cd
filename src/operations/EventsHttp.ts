/** The events group's handlers (EventsApi.ts) over the WebhookEvents service, for the caller's organisation. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { Customers } from "../customers/Customers.ts"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { toPage } from "../http/Pagination.ts"
import { WebhookEvents } from "../webhooks/Events.ts"
import { EventsApi } from "./EventsApi.ts"

export const EventsHttpLive = HttpApiBuilder.group(groupApi(EventsApi), "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* WebhookEvents
    const customers = yield* Customers
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) =>
          // A customer filter names a customer of the workspace (as on `GET /signals`), else 404.
          Effect.zipRight(
            urlParams.customerId === undefined ? Effect.void : customers.get(org, urlParams.customerId),
            events.list(org, {
              page: toPage(urlParams),
              eventType: urlParams.type,
              customerId: urlParams.customerId,
              from: urlParams.from,
              to: urlParams.to
            })
          )
        ).pipe(Effect.map((list) => ({ events: list }))))
      .handle("get", ({ path }) => forOrganization((org) => events.get(org, path.id)))
      .handle("replay", ({ path }) =>
        forOrganization((org) => events.replay(org, path.id)).pipe(
          Effect.map((replayed) => ({ replayed: true as const, ...replayed }))
        ))
  }))
