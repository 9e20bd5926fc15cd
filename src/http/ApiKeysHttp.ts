/** The API keys group's handlers (ApiKeysApi.ts) over the ApiKeys service, for the caller's organisation. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, FiberRef, Option } from "effect"
import { type ApiKey, ApiKeys } from "../organizations/ApiKeys.ts"
import { currentTime } from "../time.ts"
import { apiKeyJson, ApiKeysApi } from "./ApiKeysApi.ts"
import { forCaller, forOrganization } from "./Auth.ts"
import { groupApi } from "./GroupApi.ts"
import { recordedAnswer } from "./IdempotencyKeyHeader.ts"
import { toPage } from "./Pagination.ts"

/**
 * The create answer as an `Idempotency-Key` records it for its repeats: the
 * key's secret left out (null), since the service keeps only the key's hash.
 */
const withoutSecret = (body: string) => {
  const envelope = JSON.parse(body) as { result?: { secret?: unknown } }
  if (envelope.result !== undefined && "secret" in envelope.result) envelope.result.secret = null
  return JSON.stringify(envelope)
}

/** A key as the API shows it, its status as of now. */
const shown = (key: ApiKey) => Effect.map(currentTime, (now) => apiKeyJson(key, now))

export const ApiKeysHttpLive = HttpApiBuilder.group(groupApi(ApiKeysApi), "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => keys.list(org, toPage(urlParams))).pipe(
          Effect.flatMap((list) => Effect.forEach(list, shown)),
          Effect.map((apiKeys) => ({ apiKeys }))
        ))
      .handle("create", ({ payload }) =>
        forCaller((caller) => keys.issue(caller.organizationId, payload, { createdBy: caller.apiKeyId })).pipe(
          Effect.tap(() => FiberRef.set(recordedAnswer, Option.some(withoutSecret))),
          Effect.flatMap(({ apiKey, secret }) => Effect.map(shown(apiKey), (json) => ({ created: true as const, apiKey: json, secret })))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => keys.get(org, path.id)).pipe(
          Effect.flatMap(shown),
          Effect.map((apiKey) => ({ apiKey }))
        ))
      .handle("revoke", ({ path }) =>
        forCaller((caller) => keys.revokeEverywhere(caller.organizationId, path.id, { by: caller.apiKeyId })).pipe(
          Effect.flatMap(shown),
          Effect.map((apiKey) => ({ revoked: true as const, apiKey }))
        ))
  }))
