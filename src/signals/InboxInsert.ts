/**
 * The one way every signal row reaches the inbox: `insertSignals`, many rows
 * in ONE statement.
 *
 * `insertSignals(sql, rows)` is a multi-row `INSERT ... ON CONFLICT DO NOTHING`
 * that checks each row's customerId (and its timestamp against the
 * workspace's late-usage window) in the same statement, followed, only when
 * some idempotency keys were already taken, by one `SELECT` of the rows that
 * hold them. Two statements at most, whatever the row count. Each row's answer
 * is then reconstructed as if the rows had come one after the other: written,
 * a replay of the signal first written under its key, or refused. Intake
 * writes through the grouping writer (InboxWriter.ts); the completions (inside
 * their transaction) and the worker completing a parked composite (inside its
 * batch) call it directly.
 *
 * A row's refusal (unknown or archived customer) is that row's answer only. If
 * a whole statement fails (a row the database refuses), nothing of it was
 * committed and each row is written again on its own, so only the row at
 * fault fails.
 */
import type { SqlClient } from "@effect/sql"
import { Cause, Effect, Exit, Schema } from "effect"
import { isUnavailableCause } from "../db/Faults.ts"
import { prepared } from "../db/Prepared.ts"
import { decodeRows } from "../db/Sql.ts"
import { CustomerArchived, CustomerNotFound, TimestampTooOld } from "../errors.ts"
import { archivedRefusal } from "../customers/Customer.ts"
import type { InboxRow } from "./InboxRow.ts"
import { tooOldRefusal } from "./LateWindow.ts"
import { queuedPayload, signalsQueuedChannel } from "./QueueWake.ts"

/** A row in the inbox: this one (`replayed: false`), or the first one written under its idempotency key. */
export interface Written {
  readonly id: string
  readonly messageId: string
  readonly replayed: boolean
}

/**
 * Why a row was not written: its customerId names no customer of the workspace,
 * or an archived one; or its timestamp is older than the workspace's
 * late-usage window (422).
 */
export type Refusal = CustomerNotFound | CustomerArchived | TimestampTooOld

const Checked = Schema.Struct({
  ord: Schema.Int,
  customerFound: Schema.Boolean,
  customerArchived: Schema.Boolean,
  tooOld: Schema.Boolean,
  lateUsageDays: Schema.NullOr(Schema.Int)
})

const Holder = Schema.Struct({
  organizationId: Schema.String,
  route: Schema.String,
  idempotencyKey: Schema.String,
  id: Schema.String,
  messageId: Schema.String
})

const keyOf = (organizationId: string, route: string, key: string) => `${organizationId}\u0000${route}\u0000${key}`

/** Counts the statements `insertSignals` sends (the writer's stats). */
export interface StatementCounter {
  readonly insert: (rows: number) => void
  readonly lookup: () => void
}

const uncounted: StatementCounter = { insert: () => {}, lookup: () => {} }

/**
 * The insert: one row per input row that did NOT go in, saying what its customerId named.
 * A row absent from the answer went in (RETURNING named it): nearly every row of a
 * batch, so the answer is empty in the common case rather than a row to parse and
 * check per signal.
 */
const insert = (sql: SqlClient.SqlClient, rows: ReadonlyArray<InboxRow>) => {
  const payload = JSON.stringify(rows.map((row, ord) => ({
    ord,
    organization_id: row.organizationId,
    id: row.id,
    message_id: row.messageId,
    route: row.route,
    customer_id: row.customerId,
    external_id: row.externalId,
    idempotency_key: row.idempotencyKey,
    agent_key: row.agentKey,
    run_id: row.runId,
    composite_ref: row.compositeRef,
    composite_value: row.compositeValue,
    member: row.member,
    body: row.body,
    occurred_at: row.occurredAt ?? null,
    late: row.late ?? false,
    intake_at: row.intakeAt ?? null,
    response: row.response ?? null
  })))
  // The rows go in in the order given (ORDER BY ord), so of two rows with one key the first
  // written wins and the second conflicts, exactly as two requests one after the other would.
  // The late-usage window is the organisation's setting read by this same statement (only for
  // rows with a timestamp): no cache to keep coherent, a settings change applies to the next insert.
  // The worker's wake (QueueWake.ts) is this statement's too: an uncorrelated subquery is evaluated
  // once per statement (the plan makes it a one-time filter), so the statement notifies once, at its
  // commit, whatever its row count, and costs no round trip. A statement whose rows were all refused
  // notifies too: one idle claim, rarer than to be worth a second statement.
  // A key whose signal the history job moved to the archive (src/signals/Retention.ts) is taken as
  // well: the inbox's unique index no longer holds it, so the row is kept out here, one probe of the
  // archive's key index per keyed row, and answered by that signal like any other taken key.
  // Prepared: its text never changes (the rows are one json parameter), and planning it took 0.4 ms of
  // PostgreSQL a statement, a fifth of its 2.1 ms of execution (docs/benchmarks.md "One head a round").
  return Effect.flatMap(
    prepared(sql)`WITH input AS (
          SELECT * FROM json_to_recordset(${payload}::json) AS r(
            ord int, organization_id text, id text, message_id text, route text, customer_id text,
            external_id text, idempotency_key text, agent_key text, run_id text, composite_ref text,
            composite_value text, member text, body jsonb, occurred_at timestamptz, late boolean,
            intake_at timestamptz, response jsonb)
        ),
        checked AS (
          SELECT input.*, c.id IS NOT NULL AS customer_found, c.archived_at IS NOT NULL AS customer_archived,
                 coalesce(input.occurred_at < input.intake_at - o.late_usage_days * interval '86400 seconds', false) AS too_old,
                 o.late_usage_days
          FROM input
          -- One primary-key probe a row, whatever the planner thinks of the input (it guesses 100 rows for
          -- any json_to_recordset): as plain joins, an organisation with 10,000 customers got a hash join
          -- that read and hashed all of them on every statement, 35 µs a signal of PostgreSQL's CPU
          -- (docs/benchmarks.md "History and the present"). OFFSET 0 keeps each a subquery of its own.
          LEFT JOIN LATERAL (
            SELECT c.id, c.archived_at FROM customers c
            WHERE c.organization_id = input.organization_id AND c.id = input.customer_id OFFSET 0
          ) c ON true
          LEFT JOIN LATERAL (
            SELECT o.late_usage_days FROM organizations o
            WHERE input.occurred_at IS NOT NULL AND o.id = input.organization_id OFFSET 0
          ) o ON true
        ),
        inserted AS (
          INSERT INTO signals (organization_id, id, message_id, route, customer_id, external_id, idempotency_key,
                               agent_key, run_id, composite_ref, composite_value, member, body, occurred_at, late,
                               response)
          SELECT organization_id, id, message_id, route, customer_id, external_id, idempotency_key,
                 agent_key, run_id, composite_ref, composite_value, member, body, occurred_at, late, response
          FROM checked
          WHERE (customer_id IS NULL OR (customer_found AND NOT customer_archived)) AND NOT too_old
            AND (idempotency_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM signals_archive a
              WHERE a.organization_id = checked.organization_id AND a.route = checked.route
                AND a.idempotency_key = checked.idempotency_key))
            AND (SELECT true FROM pg_notify(${signalsQueuedChannel}, ${queuedPayload}))
          ORDER BY ord
          ON CONFLICT (organization_id, route, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
          RETURNING id
        )
        SELECT checked.ord, checked.customer_found, checked.customer_archived, checked.too_old,
               checked.late_usage_days
        FROM checked LEFT JOIN inserted ON inserted.id = checked.id
        WHERE inserted.id IS NULL`,
    decodeRows(Checked)
  )
}

/**
 * The rows holding the keys that were taken: the first answer under each key,
 * in the inbox or in the archive (a signal the history job moved). The inbox's
 * row comes last and so wins (a row being moved is in both for a while); of
 * the archive's, the oldest.
 */
const holdersOf = (sql: SqlClient.SqlClient, rows: ReadonlyArray<InboxRow>) => {
  const keys = JSON.stringify(rows.map((row) => ({
    organization_id: row.organizationId,
    route: row.route,
    idempotency_key: row.idempotencyKey
  })))
  return Effect.flatMap(
    sql`WITH k AS (
          SELECT DISTINCT * FROM json_to_recordset(${keys}::json) AS k(organization_id text, route text, idempotency_key text)
        )
        SELECT organization_id, route, idempotency_key, id, message_id FROM (
          SELECT s.organization_id, s.route, s.idempotency_key, s.id, s.message_id, 0 AS place
          FROM k JOIN signals s ON s.organization_id = k.organization_id AND s.route = k.route
                               AND s.idempotency_key = k.idempotency_key
          UNION ALL
          SELECT a.organization_id, a.route, a.idempotency_key, a.id, a.message_id, 1 AS place
          FROM k JOIN signals_archive a ON a.organization_id = k.organization_id AND a.route = k.route
                                       AND a.idempotency_key = k.idempotency_key
        ) holders
        ORDER BY place DESC, id DESC`,
    decodeRows(Holder)
  ).pipe(
    Effect.map((found) => new Map(found.map((h) => [keyOf(h.organizationId, h.route, h.idempotencyKey), h])))
  )
}

/**
 * Each row's answer once the insert has committed, as if the rows had come
 * one after the other in their order. A row with an idempotency key that
 * was taken before it (by an earlier request, or an earlier row of this
 * set) answers the first signal, whatever its own body says, even a
 * customer that would be refused; a key is not used up by a refused row.
 */
const answers = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<InboxRow>,
  notInserted: ReadonlyArray<typeof Checked.Type>,
  count: StatementCounter
) =>
  Effect.gen(function*() {
    // The rows that did not go in, by position; every other row did.
    const byOrd = new Array<typeof Checked.Type | undefined>(rows.length)
    for (const result of notInserted) byOrd[result.ord] = result
    const keyOfRow = (row: InboxRow) =>
      row.idempotencyKey === null ? undefined : keyOf(row.organizationId, row.route, row.idempotencyKey)
    // The row of this set that went in under each key.
    const insertedUnder = new Map<string, number>()
    rows.forEach((row, ord) => {
      const key = keyOfRow(row)
      if (key !== undefined && byOrd[ord] === undefined) insertedUnder.set(key, ord)
    })
    // Keys taken before this set: one look-up for all of them, only when there are some.
    const taken = rows.filter((row, ord) => {
      const key = keyOfRow(row)
      return key !== undefined && byOrd[ord] !== undefined && !insertedUnder.has(key)
    })
    if (taken.length > 0) count.lookup()
    // The inserted rows are committed whatever happens to the look-up: only the others depend on it.
    const holders = taken.length === 0 ? Exit.succeed(new Map()) : yield* Effect.exit(holdersOf(sql, taken))
    return rows.map((row, ord): Exit.Exit<Written, Refusal> => {
      const result = byOrd[ord]
      if (result === undefined) return Exit.succeed({ id: row.id, messageId: row.messageId, replayed: false })
      const key = keyOfRow(row)
      const earlier = key === undefined ? undefined : insertedUnder.get(key)
      if (earlier !== undefined && earlier < ord) {
        return Exit.succeed({ id: rows[earlier]!.id, messageId: rows[earlier]!.messageId, replayed: true })
      }
      if (key !== undefined && earlier === undefined) {
        if (Exit.isFailure(holders)) return Exit.die(Cause.squash(holders.cause))
        const holder = holders.value.get(key)
        if (holder !== undefined) return Exit.succeed({ id: holder.id, messageId: holder.messageId, replayed: true })
      }
      if (row.customerId !== null && !result.customerFound) {
        return Exit.fail(new CustomerNotFound({ message: `Customer ${row.customerId} not found` }))
      }
      if (row.customerId !== null && result.customerArchived) {
        return Exit.fail(archivedRefusal(row.customerId, "cannot receive signals"))
      }
      if (result.tooOld) return Exit.fail(tooOldRefusal(result.lateUsageDays ?? 0))
      // A row neither refused nor written would have lost its signal: never answer it 202.
      return Exit.die(new Error(`signal ${row.id} was neither written nor refused`))
    })
  })

/**
 * Writes `rows` into the inbox in one statement (plus one look-up of taken
 * keys) and gives each row's answer in order: written, refused, or (a row the
 * database itself refuses) a defect of that row alone. `parts` (several
 * batches sharing the statement) are what a failed statement is written
 * again as, so only the batch at fault goes on to row by row. Inside a transaction
 * (a completion's, the worker's batch) a failed statement fails the
 * transaction too: those write one row, whose failure is then a defect.
 */
export const insertSignals = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<InboxRow>,
  count: StatementCounter = uncounted,
  parts?: ReadonlyArray<ReadonlyArray<InboxRow>>
): Effect.Effect<ReadonlyArray<Exit.Exit<Written, Refusal>>> => {
  if (rows.length === 0) return Effect.succeed([])
  count.insert(rows.length)
  return Effect.matchCauseEffect(insert(sql, rows), {
    onSuccess: (checked) => answers(sql, rows, checked, count),
    // A failed statement committed nothing: its parts again on their own (several batches sharing
    // the statement: each batch, then its rows), else each row, isolate the one at fault. A
    // database that is away has no row at fault: every row gets its failure at once (the request
    // answers 503, and the client's retry with the same keys writes each row once).
    onFailure: (cause) =>
      rows.length === 1 || isUnavailableCause(cause)
        ? Effect.succeed(rows.map(() => Exit.die(Cause.squash(cause))))
        : Effect.map(
          Effect.forEach(parts !== undefined && parts.length > 1 ? parts : rows.map((row) => [row]), (part) =>
            insertSignals(sql, part, count)),
          (exits) => exits.flat()
        )
  })
}
