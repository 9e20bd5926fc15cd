/**
 * Webhook endpoints, managed from the CLI (`billing webhook ...`) and the API
 * (`/webhook-endpoints`, WebhooksApi.ts), both through this service. A removed
 * endpoint stays in the database with its deliveries, so history is never lost;
 * its pending deliveries are cancelled. A `billing listen` session's endpoint
 * (`listen_until` set) is neither listed nor changed here.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { dieOnSqlError, findAll, findByIdOr, knownCursor, pageClause } from "../db/Sql.ts"
import { WebhookEndpointNotFound } from "../errors.ts"
import { makeId, randomToken, type OrganizationId } from "../ids.ts"
import type { Page } from "../Page.ts"
import { toSql } from "../money.ts"
import { currentTime } from "../time.ts"
import { DEFAULT_EVENT_TYPES, Endpoint, type EndpointCreate, type EndpointUpdate } from "./Webhook.ts"

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

    /** In creation order; every one without a `page`. */
    const list = Effect.fn("WebhookEndpoints.list")((
      organizationId: OrganizationId,
      options: { readonly includeRemoved?: boolean | undefined; readonly page?: Page | undefined } = {}
    ) =>
      Effect.zipRight(
        options.page === undefined ? Effect.void : knownCursor(sql, "webhook_endpoints", organizationId, options.page),
        findAll(
          Endpoint,
          sql`SELECT * FROM webhook_endpoints
              WHERE organization_id = ${organizationId} AND (${options.includeRemoved ?? false} OR removed_at IS NULL)
                AND listen_until IS NULL
              ${options.page === undefined ? sql`ORDER BY id` : pageClause(sql, options.page)}`
        )
      ))

    /** A live endpoint; a removed one is as gone as a missing one. */
    const findLive = findByIdOr(sql, Endpoint, "webhook_endpoints", (id) =>
      new WebhookEndpointNotFound({ message: `Webhook endpoint ${id} not found` }), { where: "removed_at IS NULL AND listen_until IS NULL" })
    /** Any endpoint but a listen session's, removed ones too (their delivery history stays readable). */
    const findAny = findByIdOr(sql, Endpoint, "webhook_endpoints", (id) =>
      new WebhookEndpointNotFound({ message: `Webhook endpoint ${id} not found` }), { where: "listen_until IS NULL" })
    const get = Effect.fn("WebhookEndpoints.get")((organizationId: OrganizationId, id: string, options: { readonly includeRemoved?: boolean } = {}) =>
      options.includeRemoved === true ? findAny(organizationId, id) : findLive(organizationId, id))

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

    /**
     * Changes the fields given; `threshold: null` removes the endpoint's own
     * threshold. Disabling drops the events triggered while it is disabled for
     * good; deliveries queued before wait and go out once it is enabled again.
     */
    const update = Effect.fn("WebhookEndpoints.update")((organizationId: OrganizationId, id: string, input: EndpointUpdate) =>
      change(organizationId, id, {
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(input.events !== undefined ? { events: [...new Set(input.events)] } : {}),
        ...(input.threshold !== undefined ? { threshold: input.threshold === null ? null : toSql(input.threshold) } : {}),
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {})
      }))

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
      update,
      enable: Effect.fn("WebhookEndpoints.enable")((organizationId: OrganizationId, id: string) => update(organizationId, id, { enabled: true })),
      disable: Effect.fn("WebhookEndpoints.disable")((organizationId: OrganizationId, id: string) => update(organizationId, id, { enabled: false })),
      rotateSecret,
      remove
    } as const
  })
}) {}
