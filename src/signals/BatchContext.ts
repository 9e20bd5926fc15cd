/**
 * Loads what a batch of signals needs to be priced, in a fixed number of
 * statements whatever the batch size: the customers, their ACTIVE purchases
 * and balance rows (locked), the cycle each signal is billed in (its moment's:
 * the current one, or an ended cycle with its `cycle_balances`, locked, when
 * the batch holds late signals), the wallets that may move (locked), the live
 * catalogue the signals name, members, outcome runs and composite occurrences.
 * Runs in the batch's transaction; locks are taken in key order.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Either, type ParseResult, Schema } from "effect"
import { BalanceRow, PurchaseRow } from "../billing/Purchase.ts"
import { Timestamp } from "../schema.ts"
import { findAll, orDie } from "../db/Sql.ts"
import { identityDecoder } from "../SchemaCheck.ts"
import { customerKey, type Ledger, type LockedWallet } from "../ledger/Ledger.ts"
import { type Decimal, ZERO } from "../money.ts"
import type { ModelRates } from "../pricing/Pricing.ts"
import { Money } from "../schema.ts"
import type {
  Catalogue,
  CompositeTarget,
  CreditTarget,
  CustomerContext,
  PurchaseContext,
  StepTarget,
  UnitTarget
} from "../pricing/meters/Context.ts"
import { schemaOfRoute, SignalRoute, type Usage } from "./Signal.ts"

/** The columns of a queued signal the drain reads (the inbox row has more, for operators). */
export const ClaimedSignal = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  messageId: Schema.String,
  route: SignalRoute,
  customerId: Schema.NullOr(Schema.String),
  externalId: Schema.NullOr(Schema.String),
  runId: Schema.NullOr(Schema.String),
  compositeRef: Schema.NullOr(Schema.String),
  compositeValue: Schema.NullOr(Schema.String),
  member: Schema.NullOr(Schema.String),
  body: Schema.Unknown,
  /** When the usage happened: coalesce(occurred_at, requeued_at, received_at). Billed in the cycle containing it. */
  moment: Timestamp,
  /** Which of the three the moment is: refusals name it (a signal without a timestamp can be retried into a cycle). */
  momentSource: Schema.Literal("TIMESTAMP", "REQUEUED", "RECEIVED")
})
export type SignalRecord = typeof ClaimedSignal.Type

/**
 * The columns of a queued signal's moment, for every statement that reads
 * signals as `ClaimedSignal`: its own `timestamp` (usage happened then, however
 * often it is retried), else the moment it was last queued again (its
 * customer took its externalId, an operator replayed it: usage sent without a
 * timestamp is usage "now" each time it is submitted), else its intake.
 */
export const momentColumns = "coalesce(occurred_at, requeued_at, received_at) AS moment, " +
  "CASE WHEN occurred_at IS NOT NULL THEN 'TIMESTAMP' WHEN requeued_at IS NOT NULL THEN 'REQUEUED' ELSE 'RECEIVED' END AS moment_source"

/** A claimed signal with its body decoded by its route's schema. */
export interface DecodedSignal {
  readonly record: SignalRecord
  readonly body: {
    readonly agentKey?: string
    readonly usage?: Usage
    readonly quantity?: Decimal
    /** The spend hold the signal settles, when it names one. */
    readonly reservationId?: string
  }
}

/**
 * Each route's decoder of a stored body, built once; a body of a route that
 * decodes to itself is vouched for by a plain check (SchemaCheck.ts), as at
 * intake: the decoder's copy of every body was 12 µs a signal, 6-7 % of the
 * worker's CPU in the drain (docs/benchmarks.md, "The drain's claim").
 */
const bodyDecoderOf = Object.fromEntries(
  Object.entries(schemaOfRoute).map(([route, schema]) => [route, identityDecoder(schema as Schema.Schema<any, any, never>)])
) as Record<SignalRecord["route"], (body: unknown) => Either.Either<DecodedSignal["body"], ParseResult.ParseError>>

/** Decodes a stored body; one that no longer decodes is a defect of ours, and fails only its signal (this throws). */
export const decodeSignal = (record: SignalRecord): DecodedSignal => ({
  record,
  body: Either.getOrThrowWith(bodyDecoderOf[record.route](record.body), (error) => error)
})

/** A key within its organisation, for maps of a batch's rows. */
export const scoped = (organizationId: string, key: string) => `${organizationId}/${key}`

/** Distinct (organization, key) pairs as two parallel arrays, sorted, for `unnest`. */
const pairs = (items: Iterable<readonly [string, string]>) => {
  const unique = new Map<string, readonly [string, string]>()
  for (const item of items) unique.set(scoped(item[0], item[1]), item)
  const sorted = [...unique.values()].sort((a, b) => (scoped(a[0], a[1]) < scoped(b[0], b[1]) ? -1 : 1))
  return { size: sorted.length, organizations: sorted.map((p) => p[0]), keys: sorted.map((p) => p[1]) }
}

/** The customer fields the drain needs. */
const Customer = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  archivedAt: Schema.NullOr(Timestamp)
})
export type Customer = typeof Customer.Type

const Purchase = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  customerId: Schema.String,
  cycleIndex: Schema.Number,
  periodStart: Schema.NullOr(Timestamp),
  periodEnd: Schema.NullOr(Timestamp),
  snapshot: PurchaseRow.fields.snapshot
})

/** An ended cycle containing a late signal's moment, with its purchase's snapshot (cancelled purchases too). */
const EndedCycle = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  customerId: Schema.String,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  snapshot: PurchaseRow.fields.snapshot
})

const CycleBalance = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  cycleIndex: Schema.Number,
  componentId: Schema.String,
  remaining: BalanceRow.fields.remaining,
  cycleQuantity: BalanceRow.fields.cycleQuantity
})

/** A purchase cycle's period, `[start, end)`. */
export interface CyclePeriod {
  readonly start: Date
  readonly end: Date
}

/**
 * The cycle a signal is billed in, by its moment:
 * - Billed: the purchase context of the cycle containing the moment (the
 *   ACTIVE purchase's current cycle, or an ended cycle) and that cycle's
 *   `period`, or null for both when no purchase cycle contains it (the meters
 *   refuse: no active plan). `activeCycle` is the ACTIVE purchase's current
 *   cycle, when the customer has one: a refusal of a moment outside every
 *   cycle names it (the customer may well have a plan, bought after it);
 * - Waiting: the moment is at or after the ACTIVE purchase's period_end, whose
 *   renewal has not run yet: the signal stays QUEUED until it has.
 */
export type SignalCycle =
  | {
    readonly _tag: "Billed"
    readonly purchase: PurchaseContext | null
    readonly period: CyclePeriod | null
    readonly activeCycle: CyclePeriod | null
  }
  | { readonly _tag: "Waiting"; readonly purchaseId: string; readonly periodEnd: Date }

const Balance = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  componentId: Schema.String,
  remaining: BalanceRow.fields.remaining,
  cycleQuantity: BalanceRow.fields.cycleQuantity
})

/** A row of the live catalogue a batch names: a credit, an outcome step, a unit, a composite or a model. */
const CatalogueRow = Schema.Struct({
  kind: Schema.Literal("CREDIT", "OUTCOME", "UNIT", "COMPOSITE", "MODEL"),
  organizationId: Schema.String,
  /** The agent key (a credit, a step, a unit), the ref id (a composite), the model id. */
  key: Schema.String,
  /** The credit's, unit's or composite's id, the step's outcome's, the model's. */
  id: Schema.String,
  /** Its name (the step's outcome's); none for a model. */
  name: Schema.NullOr(Schema.String),
  /** The step's own name. */
  detail: Schema.NullOr(Schema.String),
  /** A credit's base price, tokens per credit and margin; a model's input, output, cache read and cache write rates. */
  a: Schema.NullOr(Money),
  b: Schema.NullOr(Money),
  c: Schema.NullOr(Money),
  d: Schema.NullOr(Money)
})

const MemberRow = Schema.Struct({ organizationId: Schema.String, customerId: Schema.String, email: Schema.String })

const RunRow = Schema.Struct({
  organizationId: Schema.String,
  runId: Schema.String,
  outcomeId: Schema.String,
  outcomeName: Schema.String,
  agentKey: Schema.String
})

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
  custom: Schema.NullOr(Schema.Unknown)
})
export type OccurrenceRow = typeof OccurrenceRow.Type

export interface BatchContext {
  /** A customer by id (any state). */
  readonly customerById: (organizationId: string, customerId: string) => Customer | undefined
  /** The active customer holding an externalId. */
  readonly customerByExternalId: (organizationId: string, externalId: string) => Customer | undefined
  readonly customerContext: (customer: Customer) => CustomerContext
  /** The cycle a signal of `customer` is billed in (its moment's). */
  readonly cycleOf: (signal: SignalRecord, customer: Customer) => SignalCycle
  readonly isMember: (organizationId: string, customerId: string, email: string) => boolean
  readonly catalogue: (organizationId: string) => Catalogue
  readonly run: (organizationId: string, runId: string) => typeof RunRow.Type | undefined
  /** The provider cost of a run's step signals billed before this batch. */
  readonly runCost: (organizationId: string, customerId: string, runId: string) => Decimal
  readonly occurrence: (organizationId: string, signalId: string) => OccurrenceRow | undefined
  /** The wallets locked for this batch, kept current by the ledger as postings apply. */
  readonly wallets: Map<string, LockedWallet>
}

/**
 * How the context is read: `lock` (the drain's) locks what the batch will
 * move and creates missing wallets; without it (a spend check, which must not
 * write nor wait on the drain) the same rows are only read, as committed.
 */
export interface LoadOptions {
  readonly lock: boolean
  /**
   * The signals' customers as their claim read them (by id, any state; the
   * active holder of an externalId), in the batch's transaction: then they
   * are not read again. A signal's customer missing from them is one the
   * statement would not have found either (an unknown id, an externalId
   * nobody held).
   */
  readonly customers?: ReadonlyArray<Customer> | undefined
}

export const loadBatchContext = (
  sql: SqlClient.SqlClient,
  ledger: Ledger,
  signals: ReadonlyArray<DecodedSignal>,
  options: LoadOptions = { lock: true }
) =>
  Effect.gen(function*() {
    const records = signals.map((signal) => signal.record)
    const locked = (clause: string) => sql.literal(options.lock ? clause : "")

    // Customers: by id, and the active holder of each externalId.
    const byId = pairs(records.flatMap((r) => (r.customerId === null ? [] : [[r.organizationId, r.customerId] as const])))
    const byExternal = pairs(
      records.flatMap((r) => (r.customerId === null && r.externalId !== null ? [[r.organizationId, r.externalId] as const] : []))
    )
    const customers = options.customers ?? (byId.size + byExternal.size === 0 ? [] : yield* findAll(
      Customer,
      sql`/* prepared */ SELECT organization_id, id, external_id, archived_at FROM customers WHERE (organization_id, id) IN (
            SELECT * FROM unnest(${byId.organizations}::text[], ${byId.keys}::text[]))
          UNION ALL
          SELECT organization_id, id, external_id, archived_at FROM customers
          WHERE archived_at IS NULL AND (organization_id, external_id) IN (
            SELECT * FROM unnest(${byExternal.organizations}::text[], ${byExternal.keys}::text[]))`
    ))
    const customerMap = new Map<string, Customer>()
    const externalMap = new Map<string, Customer>()
    for (const customer of customers) {
      customerMap.set(scoped(customer.organizationId, customer.id), customer)
      if (customer.externalId !== null && customer.archivedAt === null) {
        externalMap.set(scoped(customer.organizationId, customer.externalId), customer)
      }
    }
    // An externalId nobody holds yet: take the lock `requeuePendingSignals` takes and look again,
    // so a customer taking that externalId right now is either seen here or requeues the signal.
    for (let i = 0; options.lock && i < byExternal.size; i++) {
      const organizationId = byExternal.organizations[i]!
      const externalId = byExternal.keys[i]!
      if (externalMap.has(scoped(organizationId, externalId))) continue
      yield* orDie(sql`SELECT pg_advisory_xact_lock(hashtext(${organizationId}), hashtext(${externalId}))`)
      const found = yield* findAll(
        Customer,
        sql`SELECT organization_id, id, external_id, archived_at FROM customers
            WHERE organization_id = ${organizationId} AND external_id = ${externalId} AND archived_at IS NULL`
      )
      for (const customer of found) {
        customerMap.set(scoped(organizationId, customer.id), customer)
        externalMap.set(scoped(organizationId, externalId), customer)
      }
    }
    const live = pairs([...customerMap.values()].map((c) => [c.organizationId, c.id] as const))

    // Their ACTIVE purchases and balance rows, locked: purchases first, then balances, in key order.
    // Each is found by one index probe a key (a LATERAL subquery of its own), then locked by primary
    // key in key order: the keys found (`found`, sorted) lead a nested loop whose inner side locks, so
    // rows are locked in that order. As a semi-join of the table against the keys, the planner read
    // and hashed every ACTIVE purchase of the database for each batch once the table had statistics
    // (16-23 ms a batch at 4,096 customers; docs/benchmarks.md "Many customers at once").
    const purchases = live.size === 0 ? [] : yield* findAll(
      Purchase,
      sql`/* prepared */ WITH found AS MATERIALIZED (
            SELECT f.organization_id, f.id
            FROM unnest(${live.organizations}::text[], ${live.keys}::text[]) AS k(organization_id, customer_id)
            CROSS JOIN LATERAL (
              SELECT p.organization_id, p.id FROM purchases p
              WHERE p.status = 'ACTIVE' AND p.organization_id = k.organization_id AND p.customer_id = k.customer_id
              OFFSET 0) f
            ORDER BY f.organization_id, f.id)
          SELECT p.organization_id, p.id, p.customer_id, p.cycle_index, p.period_start, p.period_end, p.snapshot
          FROM found CROSS JOIN LATERAL (
            -- By primary key alone: with the status here too, the planner may take the one-live-purchase index
            -- on the organisation and filter the id, every purchase of the workspace a key. The status is
            -- asked of the row as locked (its latest version), outside.
            SELECT organization_id, id, customer_id, cycle_index, period_start, period_end, snapshot, status FROM purchases
            WHERE organization_id = found.organization_id AND id = found.id
            OFFSET 0 ${locked("FOR NO KEY UPDATE")}) p
          WHERE p.status = 'ACTIVE'
          ORDER BY p.organization_id, p.id`
    )
    const purchasePairs = pairs(purchases.map((p) => [p.organizationId, p.id] as const))
    const balances = purchasePairs.size === 0 ? [] : yield* findAll(
      Balance,
      sql`/* prepared */ WITH found AS MATERIALIZED (
            SELECT f.organization_id, f.purchase_id, f.component_id
            FROM unnest(${purchasePairs.organizations}::text[], ${purchasePairs.keys}::text[]) AS k(organization_id, purchase_id)
            CROSS JOIN LATERAL (
              SELECT b.organization_id, b.purchase_id, b.component_id FROM purchase_balances b
              WHERE b.organization_id = k.organization_id AND b.purchase_id = k.purchase_id OFFSET 0) f
            ORDER BY f.organization_id, f.purchase_id, f.component_id)
          SELECT b.* FROM found CROSS JOIN LATERAL (
            SELECT organization_id, purchase_id, component_id, remaining, cycle_quantity FROM purchase_balances
            WHERE organization_id = found.organization_id AND purchase_id = found.purchase_id
              AND component_id = found.component_id
            OFFSET 0 ${locked("FOR UPDATE")}) b
          ORDER BY b.organization_id, b.purchase_id, b.component_id`
    )
    const purchaseOf = new Map<string, PurchaseContext>()
    const activeOf = new Map<string, typeof Purchase.Type>()
    for (const purchase of purchases) {
      activeOf.set(scoped(purchase.organizationId, purchase.customerId), purchase)
      purchaseOf.set(scoped(purchase.organizationId, purchase.customerId), {
        id: purchase.id,
        snapshot: purchase.snapshot,
        cycleIndex: purchase.cycleIndex,
        closedCycle: false,
        balances: new Map()
      })
    }
    const purchaseById = new Map(purchases.map((p) => [scoped(p.organizationId, p.id), purchaseOf.get(scoped(p.organizationId, p.customerId))!]))
    for (const row of balances) {
      purchaseById.get(scoped(row.organizationId, row.purchaseId))?.balances.set(row.componentId, {
        componentId: row.componentId,
        remaining: row.remaining,
        cycleQuantity: row.cycleQuantity
      })
    }

    const activeCycleOf = (customer: Customer): CyclePeriod | null => {
      const active = activeOf.get(scoped(customer.organizationId, customer.id))
      return active === undefined || active.periodStart === null || active.periodEnd === null
        ? null
        : { start: active.periodStart, end: active.periodEnd }
    }

    const customerOfSignal = (r: SignalRecord) =>
      r.customerId !== null
        ? customerMap.get(scoped(r.organizationId, r.customerId))
        : r.externalId !== null
        ? externalMap.get(scoped(r.organizationId, r.externalId))
        : undefined

    // Each signal's cycle, by its moment. On time: the ACTIVE purchase's current cycle, nothing to load.
    // Late (a moment before it, or no ACTIVE purchase): the ended cycles containing those moments, their
    // purchases' snapshots and their balance rows, locked after the purchases' rows, in key order: two
    // statements for the whole batch, none when no signal of the batch is late.
    const cycleOfSignal = new Map<string, SignalCycle>()
    const lateSignals: Array<readonly [SignalRecord, Customer]> = []
    for (const record of records) {
      const customer = customerOfSignal(record)
      if (customer === undefined) continue
      const active = activeOf.get(scoped(customer.organizationId, customer.id))
      const moment = record.moment.getTime()
      if (active !== undefined && active.periodStart !== null && active.periodEnd !== null) {
        if (active.periodStart.getTime() <= moment && moment < active.periodEnd.getTime()) {
          const period = { start: active.periodStart, end: active.periodEnd }
          cycleOfSignal.set(scoped(record.organizationId, record.id), {
            _tag: "Billed",
            purchase: purchaseOf.get(scoped(customer.organizationId, customer.id))!,
            period,
            activeCycle: period
          })
          continue
        }
        if (moment >= active.periodEnd.getTime()) {
          cycleOfSignal.set(scoped(record.organizationId, record.id), {
            _tag: "Waiting",
            purchaseId: active.id,
            periodEnd: active.periodEnd
          })
          continue
        }
      }
      lateSignals.push([record, customer])
    }
    const endedContexts = new Map<string, PurchaseContext>()
    if (lateSignals.length > 0) {
      const moments = new Map<string, readonly [string, string, string]>()
      for (const [record, customer] of lateSignals) {
        const iso = record.moment.toISOString()
        moments.set(`${customer.organizationId}/${customer.id}/${iso}`, [customer.organizationId, customer.id, iso])
      }
      const triples = [...moments.values()]
      const ended = yield* findAll(
        EndedCycle,
        // The plan the cycle was billed under: its own snapshot when the purchase changed plan since.
        sql`SELECT c.organization_id, c.purchase_id, c.cycle_index, c.customer_id, c.period_start, c.period_end,
              coalesce(c.snapshot, p.snapshot) AS snapshot
            FROM purchase_cycles c
            JOIN purchases p ON p.organization_id = c.organization_id AND p.id = c.purchase_id
            WHERE (c.organization_id, c.purchase_id, c.cycle_index) IN (
              SELECT e.organization_id, e.purchase_id, e.cycle_index
              FROM purchase_cycles e
              JOIN unnest(${triples.map((t) => t[0])}::text[], ${triples.map((t) => t[1])}::text[],
                          ${triples.map((t) => t[2])}::timestamptz[]) AS v(organization_id, customer_id, moment)
                ON e.organization_id = v.organization_id AND e.customer_id = v.customer_id
               AND e.period_start <= v.moment AND v.moment < e.period_end)
            ORDER BY c.organization_id, c.purchase_id, c.cycle_index
            ${locked("FOR UPDATE OF c")}`
      )
      const endedKey = (organizationId: string, purchaseId: string, cycleIndex: number) =>
        `${organizationId}/${purchaseId}/${cycleIndex}`
      for (const cycle of ended) {
        endedContexts.set(endedKey(cycle.organizationId, cycle.purchaseId, cycle.cycleIndex), {
          id: cycle.purchaseId,
          snapshot: cycle.snapshot,
          cycleIndex: cycle.cycleIndex,
          closedCycle: true,
          balances: new Map()
        })
      }
      const cycleRows = ended.length === 0 ? [] : yield* findAll(
        CycleBalance,
        sql`SELECT organization_id, purchase_id, cycle_index, component_id, remaining, cycle_quantity FROM cycle_balances
            WHERE (organization_id, purchase_id, cycle_index) IN (
              SELECT * FROM unnest(${ended.map((c) => c.organizationId)}::text[], ${ended.map((c) => c.purchaseId)}::text[],
                                   ${ended.map((c) => c.cycleIndex)}::int[]))
            ORDER BY organization_id, purchase_id, cycle_index, component_id ${locked("FOR UPDATE")}`
      )
      for (const row of cycleRows) {
        endedContexts.get(endedKey(row.organizationId, row.purchaseId, row.cycleIndex))?.balances.set(row.componentId, {
          componentId: row.componentId,
          remaining: row.remaining,
          cycleQuantity: row.cycleQuantity
        })
      }
      const cyclesOfCustomer = new Map<string, Array<typeof EndedCycle.Type>>()
      for (const cycle of ended) {
        const key = scoped(cycle.organizationId, cycle.customerId)
        const list = cyclesOfCustomer.get(key)
        if (list === undefined) cyclesOfCustomer.set(key, [cycle])
        else list.push(cycle)
      }
      for (const [record, customer] of lateSignals) {
        const moment = record.moment.getTime()
        // Ended cycles never overlap for one customer; should two, the later one bills it.
        let found: typeof EndedCycle.Type | undefined
        for (const cycle of cyclesOfCustomer.get(scoped(customer.organizationId, customer.id)) ?? []) {
          if (cycle.periodStart.getTime() <= moment && moment < cycle.periodEnd.getTime()) {
            if (found === undefined || cycle.periodStart.getTime() > found.periodStart.getTime()) found = cycle
          }
        }
        cycleOfSignal.set(scoped(record.organizationId, record.id), {
          _tag: "Billed",
          purchase: found === undefined
            ? null
            : endedContexts.get(endedKey(found.organizationId, found.purchaseId, found.cycleIndex))!,
          period: found === undefined ? null : { start: found.periodStart, end: found.periodEnd },
          activeCycle: activeCycleOf(customer)
        })
      }
    }

    // Wallets that may move: customers with wallet signals, or whose plan (of the signal's cycle) funds ARREAR
    // from the wallet.
    const walletKeys = new Map<string, { organizationId: string; customerId: string }>()
    for (const record of records) {
      const customer = customerOfSignal(record)
      if (customer === undefined) continue
      const cycle = cycleOfSignal.get(scoped(record.organizationId, record.id))
      const funded = (purchaseOf.get(scoped(customer.organizationId, customer.id))?.snapshot.walletFundedArrear ?? false) ||
        (cycle?._tag === "Billed" && cycle.purchase !== null && cycle.purchase.snapshot.walletFundedArrear)
      if (record.route === "WALLET" || funded) {
        walletKeys.set(scoped(customer.organizationId, customer.id), { organizationId: customer.organizationId, customerId: customer.id })
      }
    }
    const wallets = options.lock
      ? yield* ledger.lockWallets([...walletKeys.values()])
      : yield* ledger.readWallets([...walletKeys.values()])

    // The catalogue the signals name.
    const agentKeys = (route: SignalRecord["route"]) =>
      pairs(signals.flatMap((s) =>
        s.record.route === route && s.body.agentKey !== undefined ? [[s.record.organizationId, s.body.agentKey] as const] : []
      ))
    const creditKeys = agentKeys("CREDIT")
    const stepKeys = agentKeys("OUTCOME")
    const unitKeys = agentKeys("UNIT")
    const refKeys = pairs(records.flatMap((r) => (r.compositeRef === null ? [] : [[r.organizationId, r.compositeRef] as const])))
    const modelKeys = pairs(signals.flatMap((s) => (s.body.usage === undefined ? [] : [[s.record.organizationId, s.body.usage.model] as const])))
    // One statement for all five (a round trip each was a fifth of a short queue's batch): an arm whose
    // keys are empty reads nothing.
    const catalogueRows = creditKeys.size + stepKeys.size + unitKeys.size + refKeys.size + modelKeys.size === 0 ? [] : yield* findAll(
      CatalogueRow,
      sql`/* prepared */ SELECT 'CREDIT' AS kind, organization_id, agent_key AS key, id, name, NULL::text AS detail,
                 base_price AS a, tokens_per_credit AS b, margin_percent AS c, NULL::numeric AS d
          FROM credits
          WHERE is_active AND (organization_id, agent_key) IN (
            SELECT * FROM unnest(${creditKeys.organizations}::text[], ${creditKeys.keys}::text[]))
          UNION ALL
          (SELECT DISTINCT ON (s.organization_id, s.agent_key)
                  'OUTCOME', s.organization_id, s.agent_key, o.id, o.name, s.name, NULL, NULL, NULL, NULL
           FROM outcome_steps s
           JOIN outcomes o ON o.organization_id = s.organization_id AND o.id = s.outcome_id
           WHERE s.removed_at IS NULL AND o.is_active AND (s.organization_id, s.agent_key) IN (
             SELECT * FROM unnest(${stepKeys.organizations}::text[], ${stepKeys.keys}::text[]))
           ORDER BY s.organization_id, s.agent_key, o.id)
          UNION ALL
          SELECT 'UNIT', organization_id, agent_key, id, name, NULL, NULL, NULL, NULL, NULL
          FROM units
          WHERE is_active AND (organization_id, agent_key) IN (
            SELECT * FROM unnest(${unitKeys.organizations}::text[], ${unitKeys.keys}::text[]))
          UNION ALL
          SELECT 'COMPOSITE', organization_id, ref_id, id, name, NULL, NULL, NULL, NULL, NULL
          FROM composites
          WHERE is_active AND (organization_id, ref_id) IN (
            SELECT * FROM unnest(${refKeys.organizations}::text[], ${refKeys.keys}::text[]))
          UNION ALL
          SELECT 'MODEL', organization_id, id, id, NULL, NULL, input_rate, output_rate, cache_read_rate, cache_write_rate
          FROM models
          WHERE enabled AND (organization_id, id) IN (
            SELECT * FROM unnest(${modelKeys.organizations}::text[], ${modelKeys.keys}::text[]))`
    )
    const creditMap = new Map<string, CreditTarget>()
    const stepMap = new Map<string, StepTarget>()
    const unitMap = new Map<string, UnitTarget>()
    const compositeMap = new Map<string, CompositeTarget>()
    const modelMap = new Map<string, ModelRates>()
    for (const row of catalogueRows) {
      const key = scoped(row.organizationId, row.key)
      switch (row.kind) {
        case "CREDIT":
          creditMap.set(key, { id: row.id, name: row.name!, basePrice: row.a!, tokensPerCredit: row.b!, marginPercent: row.c! })
          break
        case "OUTCOME":
          stepMap.set(key, { outcomeId: row.id, outcomeName: row.name!, stepName: row.detail! })
          break
        case "UNIT":
          unitMap.set(key, { id: row.id, name: row.name! })
          break
        case "COMPOSITE":
          compositeMap.set(key, { id: row.id, name: row.name!, refId: row.key })
          break
        case "MODEL":
          modelMap.set(key, { input: row.a!, output: row.b!, cacheRead: row.c, cacheWrite: row.d })
          break
      }
    }

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

    // Composite occurrences being billed.
    const occurrenceKeys = pairs(records.flatMap((r) => (r.route === "COMPOSITE_COMPLETE" ? [[r.organizationId, r.id] as const] : [])))
    const occurrences = occurrenceKeys.size === 0 ? [] : yield* findAll(
      OccurrenceRow,
      sql`SELECT o.organization_id, o.signal_id, o.composite_id, c.name AS composite_name, c.ref_id, o.value, o.custom
          FROM composite_occurrences o
          JOIN composites c ON c.organization_id = o.organization_id AND c.id = o.composite_id
          WHERE (o.organization_id, o.signal_id) IN (
            SELECT * FROM unnest(${occurrenceKeys.organizations}::text[], ${occurrenceKeys.keys}::text[]))`
    )

    const index = <A>(rows: ReadonlyArray<A>, key: (row: A) => string) => new Map(rows.map((row) => [key(row), row] as const))
    const runMap = index(runs, (r) => scoped(r.organizationId, r.runId))
    const runCostMap = index(runCosts, (r) => `${r.organizationId}/${r.customerId}/${r.runId}`)
    const occurrenceMap = index(occurrences, (r) => scoped(r.organizationId, r.signalId))
    const catalogues = new Map<string, Catalogue>()

    const context: BatchContext = {
      customerById: (organizationId, customerId) => customerMap.get(scoped(organizationId, customerId)),
      customerByExternalId: (organizationId, externalId) => externalMap.get(scoped(organizationId, externalId)),
      customerContext: (customer) => {
        const wallet = wallets.get(customerKey({ organizationId: customer.organizationId, customerId: customer.id }))
        return {
          organizationId: customer.organizationId,
          customerId: customer.id,
          purchase: purchaseOf.get(scoped(customer.organizationId, customer.id)) ?? null,
          wallet: wallet === undefined ? null : { balance: wallet.balance }
        }
      },
      cycleOf: (signal, customer) =>
        cycleOfSignal.get(scoped(signal.organizationId, signal.id)) ??
          // A customer resolved after loading (never today): its ACTIVE purchase, as before.
          {
            _tag: "Billed",
            purchase: purchaseOf.get(scoped(customer.organizationId, customer.id)) ?? null,
            period: activeCycleOf(customer),
            activeCycle: activeCycleOf(customer)
          },
      isMember: (organizationId, customerId, email) => memberSet.has(`${organizationId}/${customerId}/${email.toLowerCase()}`),
      catalogue: (organizationId) => {
        const known = catalogues.get(organizationId)
        if (known !== undefined) return known
        const catalogue: Catalogue = {
          credit: (agentKey) => creditMap.get(scoped(organizationId, agentKey)),
          outcomeStep: (agentKey) => stepMap.get(scoped(organizationId, agentKey)),
          unit: (agentKey) => unitMap.get(scoped(organizationId, agentKey)),
          composite: (refId) => compositeMap.get(scoped(organizationId, refId)),
          model: (modelId) => modelMap.get(scoped(organizationId, modelId))
        }
        catalogues.set(organizationId, catalogue)
        return catalogue
      },
      run: (organizationId, runId) => runMap.get(scoped(organizationId, runId)),
      runCost: (organizationId, customerId, runId) => runCostMap.get(`${organizationId}/${customerId}/${runId}`)?.cost ?? ZERO,
      occurrence: (organizationId, signalId) => occurrenceMap.get(scoped(organizationId, signalId)),
      wallets
    }
    return context
  })


