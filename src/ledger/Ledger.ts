/**
 * The ledger: the one door through which money moves. It owns the purchase
 * balance counters, the purchases' spent-this-cycle, the ordinary Wallet, the
 * wallet ledger and (through the outbox) the webhook events a wallet change
 * causes, and the threshold alerts of prepaid balances (docs/webhooks.md). Signals, adjustments, purchases, cycles and invoices move money only
 * through here, always inside the caller's transaction, so a move commits
 * together with the rows that say why. Beside it: the usage log's rows and
 * the holds they settle (UsageRows.ts), the cycles' money (Cycles.ts).
 *
 * Every operation takes a set: a batch of signals writes each balance row and
 * each wallet once, whatever the number of signals, and a single adjustment is
 * a set of one. Locks are always taken in key order (purchases, then balance
 * rows, then ended cycles (`purchase_cycles`), then their balance rows
 * (`cycle_balances`), then wallets), so concurrent callers never deadlock on
 * each other.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Schema } from "effect"
import { keyPairs } from "../db/KeyPairs.ts"
import { findAll, insertRows, insertRowsStatement, leadingWrites, orDie, type Write, writeTogether } from "../db/Sql.ts"
import { makeId } from "../ids.ts"
import { Money, Timestamp } from "../schema.ts"
import { type Decimal, toSql } from "../money.ts"
import type { BalanceMove } from "../pricing/meters/Context.ts"
import { type WalletChangeSource, WebhookOutbox } from "../webhooks/Outbox.ts"
import { thresholdsReached, USED_THRESHOLDS } from "./Thresholds.ts"
import { type LedgerType, ledgerSource } from "./LedgerType.ts"
import { type HoldSettlement, settleHoldsStatement, type UsageRow, usageRowsStatement } from "./UsageRows.ts"
import { currentTime } from "../time.ts"
import { prepared } from "../db/Prepared.ts"

export type { BalanceMove }

export interface CustomerKey {
  readonly organizationId: string
  readonly customerId: string
}

export const customerKey = (key: CustomerKey) => `${key.organizationId}/${key.customerId}`

/** A locked wallet with what its webhook events need. */
export class LockedWallet extends Schema.Class<LockedWallet>("LockedWallet")({
  organizationId: Schema.String,
  customerId: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  balance: Money,
  reservedBalance: Money,
  lowBalanceAlertUsd: Schema.NullOr(Money),
  recurringGrantUsd: Schema.NullOr(Money)
}) {}

/** One posting to a customer's wallet, in the order the caller wants them applied. */
export interface WalletPosting extends CustomerKey {
  readonly delta: Decimal
  readonly type: LedgerType
  readonly usageLogId?: string | null
  readonly purchaseId?: string | null
  readonly invoiceId?: string | null
  readonly notes?: string | null
  readonly at?: Date
}

export interface WalletPosted {
  readonly previousBalance: Decimal
  readonly balance: Decimal
  readonly ledgerId: string
}

/** What a purchase's spent_this_cycle grows by. */
export interface SpentMove {
  readonly organizationId: string
  readonly purchaseId: string
  readonly amount: Decimal
}

/**
 * What a batch of priced signals writes besides its wallet postings, in one
 * statement (`Ledger.recordUsage`).
 */
export interface PricedUsage {
  readonly moves: ReadonlyArray<BalanceMove>
  readonly spent: ReadonlyArray<SpentMove>
  readonly usageRows: ReadonlyArray<UsageRow>
  /** The spend holds the signals settle. */
  readonly settlements: ReadonlyArray<HoldSettlement>
}

/**
 * A purchase balance row as a cycle start leaves it: the values themselves,
 * not deltas (the cycle job holds the row's lock and computed them from it).
 */
export interface BalanceValues {
  readonly organizationId: string
  readonly purchaseId: string
  readonly componentId: string
  readonly customerId: string
  readonly type: string
  readonly billingMode: string
  readonly targetId: string | null
  readonly granted: Decimal
  readonly used: Decimal
  readonly remaining: Decimal
  readonly originalGranted: Decimal | null
  readonly cycleQuantity: Decimal
  readonly arrearAmount: Decimal
}

const { sum: add } = BigDecimal

/** A column of the moved row's purchase (`m`), looked up by key. */
const ofPurchase = (column: string) =>
  `(SELECT p.${column} FROM purchases p WHERE p.organization_id = m.organization_id AND p.id = m.purchase_id)`

/** The threshold a balance is at (`usedLevel`, src/ledger/Thresholds.ts), in SQL: the moved rows' filter. */
const usedLevelSql = (granted: string, used: string) =>
  `CASE WHEN ${granted} <= 0 THEN 0 ${
    [...USED_THRESHOLDS].reverse().map((threshold) => `WHEN (${used}) * 100 >= (${granted}) * ${threshold} THEN ${threshold}`)
      .join(" ")
  } ELSE 0 END`

/** A moved prepaid balance row whose used share rose past a threshold, with what its alert says. */
const RaisedBalance = Schema.Struct({
  organizationId: Schema.String,
  purchaseId: Schema.String,
  componentId: Schema.String,
  customerId: Schema.String,
  type: Schema.String,
  targetId: Schema.String,
  granted: Money,
  used: Money,
  remaining: Money,
  grantedMoved: Money,
  usedMoved: Money,
  remainingMoved: Money,
  cycleIndex: Schema.Number,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  externalId: Schema.NullOr(Schema.String)
})
type RaisedBalance = typeof RaisedBalance.Type

/** The customers' distinct keys in key order, for `unnest`: wallets are locked in that order. */
const keyColumns = (keys: ReadonlyArray<CustomerKey>) => {
  const pairs = keyPairs(keys.map((key) => [key.organizationId, key.customerId] as const))
  return { organizations: pairs.organizations, customers: pairs.keys }
}

/** The columns a balance row is inserted with, keys aside (`purchase_balances`, and an ended cycle's `cycle_balances`). */
export const balanceColumns = (
  row: Omit<BalanceValues, "organizationId" | "purchaseId" | "originalGranted">
) => ({
  componentId: row.componentId,
  customerId: row.customerId,
  type: row.type,
  billingMode: row.billingMode,
  targetId: row.targetId,
  granted: toSql(row.granted),
  used: toSql(row.used),
  remaining: toSql(row.remaining),
  cycleQuantity: toSql(row.cycleQuantity),
  arrearAmount: toSql(row.arrearAmount)
})

/**
 * The join that finds each row of an UPDATE ... FROM unnest(...) AS v by its
 * key: a probe of the key's index of its own (a LATERAL subquery, `OFFSET 0`
 * so that it stays one), locked, its `ctid` the row the UPDATE takes
 * (`WHERE alias.ctid = found.row_ctid`, a TID scan). Joined to v by key, the
 * planner read the whole table and hashed it for every batch once it held a
 * few thousand rows (a probe a key costs more in its model than it does in
 * memory): the cost of a drain batch grew with the customers of the database
 * (docs/benchmarks.md "A balance move read every balance row"). The lock is the
 * caller's already (the rows were locked when the moves were computed from
 * them): taken again it costs nothing, and it makes the ctid the row's latest
 * version even if a caller forgot to lock, so a move is never lost.
 */
export const byKeyProbe = (table: string, keys: ReadonlyArray<string>, lock: "FOR UPDATE" | "FOR NO KEY UPDATE") =>
  `CROSS JOIN LATERAL (SELECT r.ctid AS row_ctid FROM ${table} r
     WHERE ${keys.map((key) => `r.${key} = v.${key}`).join(" AND ")} OFFSET 0 ${lock}) found`

/**
 * The UPDATE adding to purchases' spent_this_cycle, aggregated per purchase,
 * for `writeTogether`; undefined when nothing moves.
 */
const addSpentStatement = (sql: SqlClient.SqlClient, moves: ReadonlyArray<SpentMove>) => {
  const byPurchase = new Map<string, SpentMove>()
  for (const move of moves) {
    if (BigDecimal.isZero(move.amount)) continue
    const key = `${move.organizationId}/${move.purchaseId}`
    const known = byPurchase.get(key)
    byPurchase.set(key, known === undefined ? move : { ...known, amount: add(known.amount, move.amount) })
  }
  const rows = [...byPurchase.values()]
  if (rows.length === 0) return undefined
  return prepared(sql)`UPDATE purchases AS p SET spent_this_cycle = p.spent_this_cycle + v.amount
      FROM unnest(${rows.map((row) => row.organizationId)}::text[], ${rows.map((row) => row.purchaseId)}::text[],
                  ${rows.map((row) => toSql(row.amount))}::numeric[]) AS v(organization_id, id, amount)
      ${sql.literal(byKeyProbe("purchases", ["organization_id", "id"], "FOR NO KEY UPDATE"))}
      WHERE p.ctid = found.row_ctid`
}

/** The INSERT of new balance rows (a first cycle), for `writeTogether`; undefined when there are none. */
export const createBalancesStatement = (sql: SqlClient.SqlClient, rows: ReadonlyArray<BalanceValues>) =>
  insertRowsStatement(sql, "purchase_balances", rows.map((row) => ({
    organizationId: row.organizationId,
    purchaseId: row.purchaseId,
    ...balanceColumns(row),
    originalGranted: row.originalGranted === null ? null : toSql(row.originalGranted)
  })))

/**
 * The UPDATE setting balance rows to the values given (a cycle start re-grants
 * them, a cycle end clears what it invoiced), one statement for any number of
 * rows, for `writeTogether`; undefined when there are none. The caller holds
 * the rows' locks and computed the values from them.
 */
export const setBalancesStatement = (sql: SqlClient.SqlClient, rows: ReadonlyArray<BalanceValues>) => {
  if (rows.length === 0) return undefined
  const column = (pick: (row: BalanceValues) => Decimal) => rows.map((row) => toSql(pick(row)))
  return sql`UPDATE purchase_balances AS b SET
        granted = v.granted, used = v.used, remaining = v.remaining, original_granted = v.original_granted,
        cycle_quantity = v.cycle_quantity, arrear_amount = v.arrear_amount
      FROM unnest(
        ${rows.map((row) => row.organizationId)}::text[], ${rows.map((row) => row.purchaseId)}::text[],
        ${rows.map((row) => row.componentId)}::text[], ${column((row) => row.granted)}::numeric[],
        ${column((row) => row.used)}::numeric[], ${column((row) => row.remaining)}::numeric[],
        ${rows.map((row) => (row.originalGranted === null ? null : toSql(row.originalGranted)))}::numeric[],
        ${column((row) => row.cycleQuantity)}::numeric[], ${column((row) => row.arrearAmount)}::numeric[]
      ) AS v(organization_id, purchase_id, component_id, granted, used, remaining, original_granted,
             cycle_quantity, arrear_amount)
      WHERE b.organization_id = v.organization_id AND b.purchase_id = v.purchase_id
        AND b.component_id = v.component_id`
}

export class Ledger extends Effect.Service<Ledger>()("Ledger", {
  dependencies: [WebhookOutbox.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* WebhookOutbox

    /**
     * Locks the wallets of `keys` for the rest of the transaction, creating the
     * missing ones: two statements for any number of customers.
     */
    const lockWallets = Effect.fn("Ledger.lockWallets")(function*(keys: ReadonlyArray<CustomerKey>) {
        const locked = new Map<string, LockedWallet>()
        if (keys.length === 0) return locked
        const { customers, organizations } = keyColumns(keys)
        yield* orDie(sql`INSERT INTO wallets (organization_id, customer_id)
            SELECT * FROM unnest(${organizations}::text[], ${customers}::text[]) ON CONFLICT DO NOTHING`)
        const rows = yield* findAll(
          LockedWallet,
          sql`SELECT w.organization_id, w.customer_id, c.external_id, w.balance, w.reserved_balance,
                     w.low_balance_alert_usd, w.recurring_grant_usd
              FROM wallets w
              JOIN customers c ON c.organization_id = w.organization_id AND c.id = w.customer_id
              WHERE (w.organization_id, w.customer_id) IN (
                SELECT * FROM unnest(${organizations}::text[], ${customers}::text[]))
              ORDER BY w.organization_id, w.customer_id
              FOR UPDATE OF w`
        )
        for (const row of rows) locked.set(customerKey(row), row)
        return locked
      })

    /**
     * The wallets of `keys` as committed, neither locked nor created (a
     * missing wallet is absent: balance 0): what a spend check reads.
     */
    const readWallets = Effect.fn("Ledger.readWallets")(function*(keys: ReadonlyArray<CustomerKey>) {
        const read = new Map<string, LockedWallet>()
        if (keys.length === 0) return read
        const { customers, organizations } = keyColumns(keys)
        const rows = yield* findAll(
          LockedWallet,
          sql`SELECT w.organization_id, w.customer_id, c.external_id, w.balance, w.reserved_balance,
                     w.low_balance_alert_usd, w.recurring_grant_usd
              FROM wallets w
              JOIN customers c ON c.organization_id = w.organization_id AND c.id = w.customer_id
              WHERE (w.organization_id, w.customer_id) IN (
                SELECT * FROM unnest(${organizations}::text[], ${customers}::text[]))`
        )
        for (const row of rows) read.set(customerKey(row), row)
        return read
      })

    /**
     * Posts to wallets that the caller locked with `lockWallets` (the map is
     * kept current): one ledger row a posting, each wallet written once, and
     * the webhook events of every change. Postings apply in the order given.
     */
    const postToWallets = Effect.fn("Ledger.postToWallets")(function*(locked: Map<string, LockedWallet>, postings: ReadonlyArray<WalletPosting>) {
        const results: Array<WalletPosted> = []
        if (postings.length === 0) return results
        const ledgerRows: Array<Record<string, unknown>> = []
        const changes: Array<Parameters<typeof outbox.walletChanged>[0]> = []
        const touched = new Set<string>()
        const postedAt = yield* currentTime
        for (const posting of postings) {
          const key = customerKey(posting)
          const wallet = locked.get(key)
          if (wallet === undefined) return yield* Effect.die(new Error(`wallet ${key} was not locked before posting`))
          const at = posting.at ?? postedAt
          const balance = BigDecimal.normalize(add(wallet.balance, posting.delta))
          const ledgerId = makeId("wle")
          ledgerRows.push({
            organizationId: posting.organizationId,
            id: ledgerId,
            customerId: posting.customerId,
            type: posting.type,
            delta: toSql(posting.delta),
            balanceAfter: toSql(balance),
            usageLogId: posting.usageLogId ?? null,
            purchaseId: posting.purchaseId ?? null,
            invoiceId: posting.invoiceId ?? null,
            notes: posting.notes ?? null,
            createdAt: at.toISOString()
          })
          changes.push({
            organizationId: posting.organizationId,
            customerId: posting.customerId,
            externalId: wallet.externalId,
            previousBalance: wallet.balance,
            currentBalance: balance,
            delta: posting.delta,
            source: ledgerSource[posting.type] as WalletChangeSource,
            usageLogId: posting.usageLogId ?? null,
            alertLevel: wallet.lowBalanceAlertUsd,
            at
          })
          results.push({ previousBalance: wallet.balance, balance, ledgerId })
          // The map holds plain rows from here on: re-validating a class instance per posting costs more than the posting.
          locked.set(key, { ...wallet, balance } as LockedWallet)
          touched.add(key)
        }
        const finals = [...touched].map((key) => locked.get(key)!)
        yield* orDie(sql`UPDATE wallets AS w SET balance = v.balance, updated_at = now()
            FROM unnest(${finals.map((w) => w.organizationId)}::text[], ${finals.map((w) => w.customerId)}::text[],
                        ${finals.map((w) => toSql(w.balance))}::numeric[]) AS v(organization_id, customer_id, balance)
            WHERE w.organization_id = v.organization_id AND w.customer_id = v.customer_id`)
        yield* insertRows(sql, "wallet_ledger", ledgerRows)
        yield* outbox.walletChangedMany(changes)
        return results
      })

    /** One wallet move (locks, posts, tells the outbox): a set of one. */
    const moveWallet = Effect.fn("Ledger.moveWallet")(function*(posting: WalletPosting) {
        const locked = yield* lockWallets([posting])
        const [posted] = yield* postToWallets(locked, [posting])
        return posted!
      })

    /** The thresholds the moves reached on the raised balances (`thresholdsReached`), told to the outbox. */
    const alertThresholds = (raised: ReadonlyArray<RaisedBalance>, moves: ReadonlyArray<BalanceMove>) =>
      Effect.flatMap(currentTime, (at) => outbox.thresholdsCrossed(thresholdsReached(raised, moves, at)))

    /**
     * Moves balance rows by the deltas given, aggregated per row: one
     * statement for any number of moves. The caller holds the rows' locks
     * (`lockBalances`) when it computed the moves from their values.
     * A move with `closedCycle` is a late signal's: it moves that ended
     * cycle's row (`cycle_balances`, one more statement when there are any),
     * never the purchase's current one.
     * A current prepaid balance whose share used reaches 50, 80 or 100 % of
     * its grant is told to the outbox (`alertThresholds`), in the same
     * transaction; an ended cycle's balance fires nothing.
     * `alongside`: writes to other tables that go in the current rows'
     * statement (`leadingWrites`), so that a batch's writes are one round trip
     * (`recordUsage`'s).
     */
    const moveBalances = Effect.fn("Ledger.moveBalances")((moves: ReadonlyArray<BalanceMove>, alongside: ReadonlyArray<Write> = []) => {
      if (moves.length === 0) return Effect.asVoid(writeTogether(sql, alongside))
      type Row = { -readonly [K in keyof BalanceMove]: BalanceMove[K] }
      const current = new Map<string, Row>()
      const closed = new Map<string, Row>()
      for (const move of moves) {
        const byRow = move.closedCycle === undefined ? current : closed
        const key = `${move.organizationId}/${move.purchaseId}/${move.closedCycle ?? ""}/${move.componentId}`
        const row = byRow.get(key)
        if (row === undefined) {
          byRow.set(key, { ...move })
        } else {
          row.granted = add(row.granted, move.granted)
          row.used = add(row.used, move.used)
          row.remaining = add(row.remaining, move.remaining)
          row.cycleQuantity = add(row.cycleQuantity, move.cycleQuantity)
          row.arrearAmount = add(row.arrearAmount, move.arrearAmount)
        }
      }
      const values = (rows: ReadonlyArray<BalanceMove>) => {
        const column = (pick: (row: BalanceMove) => Decimal) => rows.map((row) => toSql(pick(row)))
        return {
          organizations: rows.map((row) => row.organizationId),
          purchases: rows.map((row) => row.purchaseId),
          components: rows.map((row) => row.componentId),
          granted: column((row) => row.granted),
          used: column((row) => row.used),
          remaining: column((row) => row.remaining),
          cycleQuantity: column((row) => row.cycleQuantity),
          arrearAmount: column((row) => row.arrearAmount)
        }
      }
      // A prepaid balance whose used share rose past a threshold comes back from the same statement
      // (no row otherwise: a drain batch pays nothing more for alerts than this filter).
      const moveCurrent = Effect.suspend(() => {
        if (current.size === 0) return Effect.asVoid(writeTogether(sql, alongside))
        const v = values([...current.values()])
        return Effect.flatMap(
          findAll(
            RaisedBalance,
            prepared(sql)`WITH ${leadingWrites(sql, alongside)} moved AS (
                UPDATE purchase_balances AS b SET
                  granted = b.granted + v.granted, used = b.used + v.used, remaining = b.remaining + v.remaining,
                  cycle_quantity = b.cycle_quantity + v.cycle_quantity, arrear_amount = b.arrear_amount + v.arrear_amount
                FROM unnest(
                  ${v.organizations}::text[], ${v.purchases}::text[],
                  ${v.components}::text[], ${v.granted}::numeric[],
                  ${v.used}::numeric[], ${v.remaining}::numeric[],
                  ${v.cycleQuantity}::numeric[], ${v.arrearAmount}::numeric[]
                ) AS v(organization_id, purchase_id, component_id, granted, used, remaining, cycle_quantity, arrear_amount)
                ${sql.literal(byKeyProbe("purchase_balances", ["organization_id", "purchase_id", "component_id"], "FOR UPDATE"))}
                WHERE b.ctid = found.row_ctid
                RETURNING b.organization_id, b.purchase_id, b.component_id, b.customer_id, b.type, b.billing_mode,
                  b.target_id, b.granted, b.used, b.remaining, v.granted AS granted_moved, v.used AS used_moved,
                  v.remaining AS remaining_moved
              )
              -- What an alert says is looked up by key for the rows that crossed only: subqueries of the select
              -- list, evaluated per row kept, never a join the planner could make a scan of every purchase.
              SELECT m.organization_id, m.purchase_id, m.component_id, m.customer_id, m.type, m.target_id,
                     m.granted, m.used, m.remaining, m.granted_moved, m.used_moved, m.remaining_moved,
                     ${sql.literal(ofPurchase("cycle_index"))} AS cycle_index,
                     ${sql.literal(ofPurchase("period_start"))} AS period_start,
                     ${sql.literal(ofPurchase("period_end"))} AS period_end,
                     (SELECT c.external_id FROM customers c
                      WHERE c.organization_id = m.organization_id AND c.id = m.customer_id) AS external_id
              FROM moved m
              WHERE m.billing_mode = 'ADVANCE' AND m.target_id IS NOT NULL
                AND ${sql.literal(usedLevelSql("m.granted", "m.used"))}
                  > ${sql.literal(usedLevelSql("m.granted - m.granted_moved", "m.used - m.used_moved"))}`
          ),
          (raised) => raised.length === 0 ? Effect.void : alertThresholds(raised, moves)
        )
      })
      const moveClosed = Effect.suspend(() => {
        if (closed.size === 0) return Effect.void
        const rows = [...closed.values()]
        const v = values(rows)
        return orDie(sql`UPDATE cycle_balances AS b SET
            granted = b.granted + v.granted, used = b.used + v.used, remaining = b.remaining + v.remaining,
            cycle_quantity = b.cycle_quantity + v.cycle_quantity, arrear_amount = b.arrear_amount + v.arrear_amount
          FROM unnest(
            ${v.organizations}::text[], ${v.purchases}::text[], ${rows.map((row) => row.closedCycle!)}::int[],
            ${v.components}::text[], ${v.granted}::numeric[],
            ${v.used}::numeric[], ${v.remaining}::numeric[],
            ${v.cycleQuantity}::numeric[], ${v.arrearAmount}::numeric[]
          ) AS v(organization_id, purchase_id, cycle_index, component_id, granted, used, remaining, cycle_quantity,
                 arrear_amount)
          ${sql.literal(byKeyProbe("cycle_balances", ["organization_id", "purchase_id", "cycle_index", "component_id"], "FOR UPDATE"))}
          WHERE b.ctid = found.row_ctid`)
      })
      return Effect.asVoid(Effect.zipRight(moveCurrent, moveClosed))
    })

    /**
     * Writes a batch of priced signals: its balance moves, the spent-this-cycle
     * they add, its usage-log rows and the holds it settles (UsageRows.ts), all
     * in the moves' statement (`moveBalances`), so that the batch's writes are
     * one round trip. `alongside`: the caller's writes that are not money (the
     * signals' end), last in the same statement.
     */
    const recordUsage = Effect.fn("Ledger.recordUsage")(function*(usage: PricedUsage, alongside: ReadonlyArray<Write> = []) {
      const at = yield* currentTime
      yield* moveBalances(usage.moves, [
        addSpentStatement(sql, usage.spent),
        usageRowsStatement(sql, usage.usageRows),
        settleHoldsStatement(sql, usage.settlements, at),
        ...alongside
      ])
    })

    /** Adds to purchases' spent_this_cycle, aggregated per purchase: one statement. */
    const addSpent = Effect.fn("Ledger.addSpent")((moves: ReadonlyArray<SpentMove>) =>
      Effect.asVoid(writeTogether(sql, [addSpentStatement(sql, moves)])))

    /** Creates the balance rows of purchases starting their first cycle: one statement. */
    const createBalances = Effect.fn("Ledger.createBalances")((rows: ReadonlyArray<BalanceValues>) =>
      Effect.asVoid(writeTogether(sql, [createBalancesStatement(sql, rows)])))

    /**
     * Replaces the balance rows of purchases changing plan with `rows` (all of
     * theirs): the new rows written (upserted: a change to the same plan keeps
     * its keys), the balance adjustments of a row that carries over re-pointed
     * to its successor (`carried`, old component id to new) and those of a row
     * dropped detached (component null), then the rows no longer sold deleted.
     * Three statements, before the step's others; the caller holds the rows' locks.
     */
    const replaceBalances = Effect.fn("Ledger.replaceBalances")(function*(
      purchases: ReadonlyArray<{ readonly organizationId: string; readonly purchaseId: string }>,
      rows: ReadonlyArray<BalanceValues>,
      carried: ReadonlyArray<{ readonly organizationId: string; readonly purchaseId: string; readonly from: string; readonly to: string }>
    ) {
        if (purchases.length === 0) return
        const insert = createBalancesStatement(sql, rows)
        if (insert !== undefined) {
          yield* orDie(sql`${insert} ON CONFLICT (organization_id, purchase_id, component_id) DO UPDATE SET
              customer_id = excluded.customer_id, type = excluded.type, billing_mode = excluded.billing_mode,
              target_id = excluded.target_id, granted = excluded.granted, used = excluded.used,
              remaining = excluded.remaining, original_granted = excluded.original_granted,
              cycle_quantity = excluded.cycle_quantity, arrear_amount = excluded.arrear_amount`)
        }
        const keep = rows.map((row) => `${row.organizationId}/${row.purchaseId}/${row.componentId}`)
        const moved = carried.filter((c) => c.from !== c.to)
        yield* orDie(sql`UPDATE balance_adjustments AS a
            SET component_id = (SELECT v.to_id FROM unnest(
                ${moved.map((c) => c.organizationId)}::text[], ${moved.map((c) => c.purchaseId)}::text[],
                ${moved.map((c) => c.from)}::text[], ${moved.map((c) => c.to)}::text[]
              ) AS v(organization_id, purchase_id, from_id, to_id)
              WHERE v.organization_id = a.organization_id AND v.purchase_id = a.purchase_id AND v.from_id = a.component_id)
            WHERE (a.organization_id, a.purchase_id) IN (
                SELECT * FROM unnest(${purchases.map((p) => p.organizationId)}::text[], ${purchases.map((p) => p.purchaseId)}::text[]))
              AND a.component_id IS NOT NULL
              AND NOT (a.organization_id || '/' || a.purchase_id || '/' || a.component_id) = ANY(${keep}::text[])`)
        yield* orDie(sql`DELETE FROM purchase_balances AS b
            WHERE (b.organization_id, b.purchase_id) IN (
                SELECT * FROM unnest(${purchases.map((p) => p.organizationId)}::text[], ${purchases.map((p) => p.purchaseId)}::text[]))
              AND NOT (b.organization_id || '/' || b.purchase_id || '/' || b.component_id) = ANY(${keep}::text[])`)
      })

    /** Sets balance rows to the values given (`setBalancesStatement`), run. */
    const setBalances = Effect.fn("Ledger.setBalances")((rows: ReadonlyArray<BalanceValues>) =>
      Effect.asVoid(writeTogether(sql, [setBalancesStatement(sql, rows)])))

    /**
     * Moves the Reserved Wallet by `delta`, floored at zero: no ledger row and
     * no webhook event (the spec: Reserved Wallet changes trigger neither).
     * What was applied may differ from `delta` when the floor took part of it.
     */
    const moveReservedWallet = Effect.fn("Ledger.moveReservedWallet")(function*(key: CustomerKey, delta: Decimal) {
        const locked = yield* lockWallets([key])
        const wallet = locked.get(customerKey(key))!
        const reservedBalance = BigDecimal.normalize(BigDecimal.max(add(wallet.reservedBalance, delta), BigDecimal.fromBigInt(0n)))
        yield* orDie(sql`UPDATE wallets SET reserved_balance = ${toSql(reservedBalance)}, updated_at = now()
            WHERE organization_id = ${key.organizationId} AND customer_id = ${key.customerId}`)
        return { reservedBalance, applied: BigDecimal.normalize(BigDecimal.subtract(reservedBalance, wallet.reservedBalance)) }
      })

    return {
      lockWallets,
      readWallets,
      postToWallets,
      moveWallet,
      moveBalances: (moves: ReadonlyArray<BalanceMove>) => moveBalances(moves),
      recordUsage,
      addSpent,
      moveReservedWallet,
      createBalances,
      setBalances,
      replaceBalances
    } as const
  })
}) {}


