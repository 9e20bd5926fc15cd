/**
 * Composite occurrences: the signals of one customer tagged `{refId: value}`.
 * An occurrence is ready when every credit, outcome and unit of its composite
 * has reported under the value; signals still in the inbox count, failed ones
 * do not. Both the completion request and the worker lock the occurrence row
 * before they count, so a parked occurrence can never miss its last signal.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll, findOne } from "../db/Sql.ts"

export class LiveComposite extends Schema.Class<LiveComposite>("LiveComposite")({
  id: Schema.String,
  name: Schema.String,
  refId: Schema.String
}) {}

export class Occurrence extends Schema.Class<Occurrence>("Occurrence")({
  compositeId: Schema.String,
  value: Schema.String,
  status: Schema.Literal("WAITING", "PARKED", "COMPLETED"),
  customerId: Schema.NullOr(Schema.String),
  signalId: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String),
  /** Read from its JSON text (`custom_json`): read as JSON, the SQL client camelCases its keys. */
  custom: Schema.propertySignature(Schema.NullOr(Schema.parseJson())).pipe(Schema.fromKey("customJson"))
}) {}

const Requirement = Schema.Struct({ name: Schema.String, kind: Schema.String, reported: Schema.Boolean })

/** The customer whose signals count: by id, or by the externalId of signals not yet resolved. */
export interface OccurrenceCustomer {
  readonly id: string
  readonly externalId: string | null
}

export const liveComposite = (sql: SqlClient.SqlClient, organizationId: string, refId: string) =>
  findOne(
    LiveComposite,
    sql`SELECT id, name, ref_id FROM composites
        WHERE organization_id = ${organizationId} AND ref_id = ${refId} AND is_active`
  )

/** The occurrence row, created WAITING if new, locked for the rest of the transaction. */
export const lockOccurrence = (sql: SqlClient.SqlClient, organizationId: string, compositeId: string, value: string) =>
  Effect.gen(function*() {
    yield* sql`INSERT INTO composite_occurrences (organization_id, composite_id, value)
               VALUES (${organizationId}, ${compositeId}, ${value}) ON CONFLICT DO NOTHING`
    const row = yield* findOne(
      Occurrence,
      sql`SELECT composite_id, value, status, customer_id, signal_id, member, custom::text AS custom_json FROM composite_occurrences
          WHERE organization_id = ${organizationId} AND composite_id = ${compositeId} AND value = ${value}
          FOR UPDATE`
    )
    return yield* Effect.orDie(row)
  })

/** The names of the composite's entitlements that have not reported under the tag yet. */
export const missingSignals = (
  sql: SqlClient.SqlClient,
  organizationId: string,
  composite: LiveComposite,
  value: string,
  customer: OccurrenceCustomer
) =>
  Effect.map(
    findAll(
      Requirement,
      sql`SELECT
            coalesce(c.name, u.name, o.name, e.target_id) AS name,
            e.kind,
            EXISTS (
              SELECT 1 FROM signals s
              WHERE s.organization_id = e.organization_id
                AND s.composite_ref = ${composite.refId} AND s.composite_value = ${value}
                AND s.status <> 'FAILED'
                AND (s.customer_id = ${customer.id}
                     OR (s.customer_id IS NULL AND s.external_id = ${customer.externalId}))
                AND ((e.kind = 'CREDIT' AND s.route = 'CREDIT' AND s.agent_key = c.agent_key)
                  OR (e.kind = 'UNIT' AND s.route = 'UNIT' AND s.agent_key = u.agent_key)
                  OR (e.kind = 'OUTCOME' AND s.route = 'OUTCOME' AND s.agent_key IN (
                        SELECT st.agent_key FROM outcome_steps st
                        WHERE st.organization_id = e.organization_id AND st.outcome_id = e.target_id)))
            ) AS reported
          FROM composite_entitlements e
          LEFT JOIN credits c ON e.kind = 'CREDIT' AND c.organization_id = e.organization_id AND c.id = e.target_id
          LEFT JOIN units u ON e.kind = 'UNIT' AND u.organization_id = e.organization_id AND u.id = e.target_id
          LEFT JOIN outcomes o ON e.kind = 'OUTCOME' AND o.organization_id = e.organization_id AND o.id = e.target_id
          WHERE e.organization_id = ${organizationId} AND e.composite_id = ${composite.id}
          ORDER BY e.position`
    ),
    (requirements) => requirements.filter((r) => !r.reported).map((r) => `${r.kind.toLowerCase()} ${r.name}`)
  )
