import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { PortalApi } from "./PortalApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { Portal } from "./Portal.ts"
import { requestOrigin } from "../links/PublicUrl.ts"

export const PortalHttpLive = HttpApiBuilder.group(groupApi(PortalApi), "portal", (handlers) =>
  Effect.map(Portal, (portal) =>
    handlers.handle("token", ({ payload }) =>
      Effect.flatMap(requestOrigin, (origin) => forOrganization((org) => portal.mint(org, payload, origin))))))
