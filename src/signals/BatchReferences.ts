/**
 * What a batch's signals refer to besides their customer and the catalogue:
 * the members they name, the outcome runs they complete (with what the runs'
 * steps cost so far) and the composite occurrences they bill. A statement
 * each, none when no signal of the batch needs it.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { findAll } from "../db/Sql.ts"
import { type Decimal, ZERO } from "../money.ts"
import { Money } from "../schema.ts"
import type { Customer } from "./BatchCustomers.ts"
import { pairs, scoped } from "./BatchKeys.ts"
import type { SignalRecord } from "./ClaimedSignal.ts"

const MemberRow = Schema.Struct({ organizationId: Schema.String, customerId: Schema.String, email: Schema.String })

/** An outcome run: the outcome its first step names. */
const RunRow = Schema.Struct({
  organizationId: Schema.String,
  runId: Schema.String,
  outcomeId: Schema.String,
  outcomeName: Schema.String,
  agentKey: Schema.String
})
export type RunRow = typeof RunRow.Type

/** The provider cost of a customer's run's steps, billed so far. */
const RunCostRow = Schema.Struct({
  organizationId: Schema.String,
  customerId: Schema.String,
  runId: Schema.String,
  cost: Money
})

const OccurrenceRow = Schema.Struct({
  organizationId: Schema.String,
  signalId: Schema.String,
  compositeId: Schema.String,
  compositeName: Schema.String,
  refId: Schema.String,
  value: Schema.String,
  /** The occurrence's `custom` as stored, from its JSON text: read as JSON, the SQL client camelCases its keys. */
  custom: Schema.propertySignature(Schema.NullOr(Schema.parseJson())).pipe(Schema.fromKey("customJson"))
})
export type OccurrenceRow = typeof OccurrenceRow.Type

const index = <A>(rows: ReadonlyArray<A>, key: (row: A) => string) => new Map(rows.map((row) => [key(row), row] as const))

/** Reads the members signals name; tells whether an email is a member of a customer. */
export const loadMembers = (
  sql: SqlClient.SqlClient,
  records: ReadonlyArray<SignalRecord>,
  customerOfSignal: (record: SignalRecord) => Customer | undefined
) =>
  Effect.gen(function*() {
    // Members named by signals.
    const memberKeys = records.flatMap((r) => {
      const customer = r.member === null ? undefined : customerOfSignal(r)
      return customer === undefined ? [] : [[r.organizationId, customer.id, r.member!.toLowerCase()] as const]
    })
    const members = memberKeys.length === 0 ? [] : yield* findAll(
      MemberRow,
      sql`SELECT organization_id, customer_id, lower(email) AS email FROM customer_members
          WHERE (organization_id, customer_id, lower(email)) IN (
            SELECT * FROM unnest(${memberKeys.map((k) => k[0])}::text[], ${memberKeys.map((k) => k[1])}::text[],
                                 ${memberKeys.map((k) => k[2])}::text[]))`
    )
    const memberSet = new Set(members.map((m) => `${m.organizationId}/${m.customerId}/${m.email}`))
    return (organizationId: string, customerId: string, email: string) =>
      memberSet.has(`${organizationId}/${customerId}/${email.toLowerCase()}`)
  })

/** Reads the outcome runs signals complete and what their steps cost so far. */
export const loadRuns = (sql: SqlClient.SqlClient, records: ReadonlyArray<SignalRecord>) =>
  Effect.gen(function*() {
    // Outcome runs being completed: the outcome their first step names, and what their steps cost so far.
    const completions = records.filter((r) => r.route === "OUTCOME_COMPLETE" && r.runId !== null)
    const runKeys = pairs(completions.map((r) => [r.organizationId, r.runId!] as const))
    const runs = runKeys.size === 0 ? [] : yield* findAll(
      RunRow,
      sql`SELECT DISTINCT ON (s.organization_id, s.run_id)
                 s.organization_id, s.run_id, o.id AS outcome_id, o.name AS outcome_name, o.agent_key
          FROM signals s
          JOIN outcome_steps st ON st.organization_id = s.organization_id AND st.agent_key = s.agent_key
          JOIN outcomes o ON o.organization_id = st.organization_id AND o.id = st.outcome_id
          WHERE s.route = 'OUTCOME' AND (s.organization_id, s.run_id) IN (
            SELECT * FROM unnest(${runKeys.organizations}::text[], ${runKeys.keys}::text[]))
          ORDER BY s.organization_id, s.run_id, s.id`
    )
    const runCosts = runKeys.size === 0 ? [] : yield* findAll(
      RunCostRow,
      sql`SELECT organization_id, customer_id, run_id, sum(provider_cost) AS cost FROM usage_log
          WHERE meter = 'OUTCOME_STEP' AND (organization_id, run_id) IN (
            SELECT * FROM unnest(${runKeys.organizations}::text[], ${runKeys.keys}::text[]))
          GROUP BY organization_id, customer_id, run_id`
    )
    const runMap = index(runs, (r) => scoped(r.organizationId, r.runId))
    const runCostMap = index(runCosts, (r) => `${r.organizationId}/${r.customerId}/${r.runId}`)
    return {
      run: (organizationId: string, runId: string): RunRow | undefined => runMap.get(scoped(organizationId, runId)),
      runCost: (organizationId: string, customerId: string, runId: string): Decimal =>
        runCostMap.get(`${organizationId}/${customerId}/${runId}`)?.cost ?? ZERO
    }
  })

/** Reads the composite occurrences signals bill, by signal. */
export const loadOccurrences = (sql: SqlClient.SqlClient, records: ReadonlyArray<SignalRecord>) =>
  Effect.gen(function*() {
    // Composite occurrences being billed.
    const occurrenceKeys = pairs(records.flatMap((r) => (r.route === "COMPOSITE_COMPLETE" ? [[r.organizationId, r.id] as const] : [])))
    const occurrences = occurrenceKeys.size === 0 ? [] : yield* findAll(
      OccurrenceRow,
      sql`SELECT o.organization_id, o.signal_id, o.composite_id, c.name AS composite_name, c.ref_id, o.value,
                 o.custom::text AS custom_json
          FROM composite_occurrences o
          JOIN composites c ON c.organization_id = o.organization_id AND c.id = o.composite_id
          WHERE (o.organization_id, o.signal_id) IN (
            SELECT * FROM unnest(${occurrenceKeys.organizations}::text[], ${occurrenceKeys.keys}::text[]))`
    )
    const occurrenceMap = index(occurrences, (r) => scoped(r.organizationId, r.signalId))
    return (organizationId: string, signalId: string): OccurrenceRow | undefined =>
      occurrenceMap.get(scoped(organizationId, signalId))
  })
