/**
 * The organisation's API keys over HTTP (issue 37): what `billing key create|
 * list|revoke` do, through the same service (`ApiKeys.issue`, `list`,
 * `revokeEverywhere`) and rules. Served from the HTTP kit's folder, as the
 * organisation's settings are (OrganizationApi.ts): src/organizations/ sits
 * below the kit, which authenticates with its keys.
 *
 * The footguns, guarded: a key's secret is in the create answer only (a
 * replay of that answer under the same `Idempotency-Key` carries `secret:
 * null`, since the secret is never stored); no read shows a secret or its
 * hash; a key cannot revoke itself (409 `api_key_in_use`), so a request never
 * locks out its own caller.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { type ApiKey, ApiKeyName, ApiKeyStatus, keyStatusAt } from "../organizations/ApiKeys.ts"
import { strict, Timestamp } from "../schema.ts"
import { documented } from "./Documented.ts"
import { Success } from "./Envelope.ts"
import { PageParams } from "./Pagination.ts"

/** A key as every read shows it: never the key itself, nor its hash. */
export const ApiKeyJson = Schema.Struct({
  id: Schema.String.annotations({ description: "The key's id (`key_...`): what revoke takes. Not the key itself." }),
  name: Schema.String,
  prefix: Schema.String.annotations({
    description: "The first 10 characters of the key (`sk_` and 7 more), to tell which key a system holds."
  }),
  status: ApiKeyStatus.annotations({
    description: "`ACTIVE`, `EXPIRED` (from its `expiresAt`) or `REVOKED`; an expired or revoked key is refused (401)."
  }),
  createdAt: Timestamp,
  expiresAt: Schema.NullOr(Timestamp).annotations({ description: "When the key stops working; null: never." }),
  revokedAt: Schema.NullOr(Timestamp).annotations({ description: "When it was revoked; null while it is not." }),
  createdBy: Schema.NullOr(Schema.String).annotations({
    description: "The id of the API key whose request created this one; null when it was made from the CLI."
  })
}).annotations({ identifier: "ApiKey" })

export const apiKeyJson = (key: ApiKey, now: Date) => ({
  id: key.id,
  name: key.name,
  prefix: key.keyPrefix,
  status: keyStatusAt(key, now),
  createdAt: key.createdAt,
  expiresAt: key.expiresAt,
  revokedAt: key.revokedAt,
  createdBy: key.createdBy
})

export const ApiKeyCreate = Schema.Struct({
  name: Schema.optional(ApiKeyName).annotations({
    description: "A label for people (which integration holds the key), 1 to 100 characters once trimmed; " +
      "`default` when left out."
  }),
  expiresAt: Schema.optional(
    Schema.Date.annotations({
      message: () => "must be an ISO 8601 timestamp",
      jsonSchema: { type: "string", format: "date-time" }
    })
  ).annotations({
    description: "When the key stops working (an ISO 8601 instant in the future); never when left out."
  })
}).annotations(strict)

export const ApiKeyCreated = Schema.Struct({
  created: Schema.Literal(true),
  apiKey: ApiKeyJson,
  secret: Schema.NullOr(Schema.String).annotations({
    description: "The key itself (`sk_` and 39 characters), to send as `Authorization: Bearer <secret>`. Shown in " +
      "this answer only: the service keeps its SHA-256 hash, never the key. null in an answer replayed for a " +
      "repeated `Idempotency-Key` (`Idempotent-Replayed: true`): the secret is not stored for replays either; " +
      "revoke that key and create another if its first answer was lost."
  })
})

const KeyIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The key's id (`key_...`), as listed; not the key itself." })
})

const keyNotFound = "No API key with this id in the organisation (another organisation's key is not found either)."

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Success(Schema.Struct({ apiKeys: Schema.Array(ApiKeyJson) }), { message: "API keys" }))
      .annotateContext(documented({
        summary: "List the organisation's API keys",
        description: "A page of the organisation's API keys in creation order, revoked and expired ones included, " +
          "each with its id, name, prefix and status. Never a key itself: it is shown once, when created."
      }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(ApiKeyCreate)
      .addSuccess(Success(ApiKeyCreated, { status: 201, message: "API key created: keep its secret, it is shown only now" }))
      .annotateContext(documented({
        summary: "Create an API key",
        description: "A new key of the organisation, with an optional `name` and `expiresAt`, as `billing key " +
          "create`. The answer carries the key itself (`secret`) for the only time. Any key may create keys (there " +
          "are no scopes); each records the key that created it (`createdBy`).",
        errors: {
          400: "The body fails its schema (an unknown field, a `name` empty or longer than 100 characters, an " +
            "`expiresAt` that is not an ISO 8601 timestamp), or `expiresAt` is not in the future " +
            "(`api_key_expiry_in_past`). Nothing is created."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/api-keys/:id")
      .setPath(KeyIdPath)
      .addSuccess(Success(Schema.Struct({ apiKey: ApiKeyJson }), { message: "API key" }))
      .annotateContext(documented({
        summary: "Get an API key",
        description: "One key of the organisation, its status included; never the key itself.",
        errors: { 404: keyNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.post("revoke", "/api-keys/:id/revoke")
      .setPath(KeyIdPath)
      .addSuccess(Success(Schema.Struct({ revoked: Schema.Literal(true), apiKey: ApiKeyJson }), { message: "API key revoked" }))
      .annotateContext(documented({
        summary: "Revoke an API key",
        description: "Revokes a key of the organisation, as `billing key revoke`: the answer comes once every API " +
          "process refuses the key (401), about half a second after the revocation commits. Revoking a revoked " +
          "key changes nothing and answers it as it is. A key cannot revoke itself: use another key, or the CLI.",
        errors: {
          404: keyNotFound,
          409: "The key named is the one this request is made with (`api_key_in_use`); nothing is revoked."
        }
      }))
  )
  .annotate(
    OpenApi.Description,
    "API keys: create, list and revoke the organisation's keys. A key's secret is shown once, when it is created " +
      "(docs/api.md \"API keys over HTTP\")."
  )
{}
