/**
 * Webhook endpoints, managed from the CLI only (the spec has no API for them).
 * A removed endpoint stays in the database with its deliveries, so history is
 * never lost; its pending deliveries are cancelled.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { dieOnSqlError, findAll, findByIdOr } from "../db/Sql.ts"
import { WebhookEndpointNotFound } from "../errors.ts"
import { makeId, randomToken, type OrganizationId } from "../ids.ts"
import { toSql } from "../money.ts"
import { currentTime } from "../time.ts"
import { DEFAULT_EVENT_TYPES, Endpoint, type EndpointCreate } from "./Webhook.ts"

const newSecret = () => `whsec_${randomToken(32)}`

export class WebhookEndpoints extends Effect.Service<WebhookEndpoints>()("WebhookEndpoints", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const add = Effect.fn("WebhookEndpoints.add")((organizationId: OrganizationId, input: EndpointCreate) =>
      Effect.map(
        findAll(
          Endpoint,
          sql`INSERT INTO webhook_endpoints ${
            sql.insert({
              organizationId,
              id: makeId("whe"),
              url: input.url,
              events: [...new Set(input.events ?? DEFAULT_EVENT_TYPES)],
              threshold: input.threshold == null ? null : toSql(input.threshold),
              secret: newSecret()
            })
          } RETURNING *`
        ),
        (rows) => rows[0]!
      ))

    const list = Effect.fn("WebhookEndpoints.list")((organizationId: OrganizationId, options: { readonly includeRemoved?: boolean | undefined } = {}) =>
      findAll(
        Endpoint,
        sql`SELECT * FROM webhook_endpoints
            WHERE organization_id = ${organizationId} AND (${options.includeRemoved ?? false} OR removed_at IS NULL)
              AND listen_until IS NULL
            ORDER BY id`
      ))

    /** A live endpoint; a removed one is as gone as a missing one. */
    const findLive = findByIdOr(sql, Endpoint, "webhook_endpoints", (id) =>
      new WebhookEndpointNotFound({ message: `Webhook endpoint ${id} not found` }), { where: "removed_at IS NULL AND listen_until IS NULL" })
    const get = Effect.fn("WebhookEndpoints.get")((organizationId: OrganizationId, id: string) => findLive(organizationId, id))

    const change = (organizationId: OrganizationId, id: string, changes: Record<string, unknown>) =>
      Effect.flatMap(Effect.zip(get(organizationId, id), currentTime), ([, updatedAt]) =>
        Effect.map(
          findAll(
            Endpoint,
            sql`UPDATE webhook_endpoints SET ${sql.update({ ...changes, updatedAt })}
                WHERE organization_id = ${organizationId} AND id = ${id} RETURNING *`
          ),
          (rows) => rows[0]!
        ))

    /** Takes effect at once: every later attempt, retries of earlier events included, is signed with the new secret. */
    const rotateSecret = Effect.fn("WebhookEndpoints.rotateSecret")((organizationId: OrganizationId, id: string) => change(organizationId, id, { secret: newSecret() }))

    const remove = Effect.fn("WebhookEndpoints.remove")(function*(organizationId: OrganizationId, id: string) {
        const removed = yield* change(organizationId, id, { enabled: false, removedAt: yield* currentTime })
        yield* sql`UPDATE webhook_deliveries
                   SET status = 'CANCELLED', next_attempt_at = NULL, updated_at = now()
                   WHERE organization_id = ${organizationId} AND endpoint_id = ${id} AND status = 'PENDING'`
        return removed
      }, sql.withTransaction, dieOnSqlError)

    return {
      add,
      list,
      get,
      enable: Effect.fn("WebhookEndpoints.enable")((organizationId: OrganizationId, id: string) => change(organizationId, id, { enabled: true })),
      disable: Effect.fn("WebhookEndpoints.disable")((organizationId: OrganizationId, id: string) => change(organizationId, id, { enabled: false })),
      rotateSecret,
      remove
    } as const
  })
}) {}
