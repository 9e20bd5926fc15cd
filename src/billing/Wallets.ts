/**
 * The customer's ordinary Wallet: a USD balance that may go negative, its
 * ledger, its low-balance alert level and its recurring grant. Every move of
 * the balance writes one ledger row and tells the webhook outbox, in the
 * caller's transaction, so the balance, its history and its events agree.
 */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect, Option, Schema } from "effect"
import { Customers } from "../customers/Customers.ts"
import { dieOnSqlError, findAll, findOne, knownCursor, pageClause } from "../db/Sql.ts"
import { ReservedWalletDisabled } from "../errors.ts"
import type { Page } from "../Page.ts"
import { type Decimal, toSql } from "../money.ts"
import { Money, Timestamp } from "../schema.ts"
import { type CustomerKey, customerKey, Ledger, type WalletPosted, type WalletPosting } from "../ledger/Ledger.ts"
import { LedgerType } from "../ledger/LedgerType.ts"
import { type CustomerId, type OrganizationId } from "../ids.ts"

export { LedgerType }

export class WalletRow extends Schema.Class<WalletRow>("WalletRow")({
  customerId: Schema.String,
  balance: Money,
  reservedBalance: Money,
  lowBalanceAlertUsd: Schema.NullOr(Money),
  recurringGrantUsd: Schema.NullOr(Money)
}) {}

export class LedgerEntry extends Schema.Class<LedgerEntry>("LedgerEntry")({
  id: Schema.String,
  customerId: Schema.String,
  type: LedgerType,
  delta: Money,
  balanceAfter: Money,
  usageLogId: Schema.NullOr(Schema.String),
  purchaseId: Schema.NullOr(Schema.String),
  invoiceId: Schema.NullOr(Schema.String),
  notes: Schema.NullOr(Schema.String),
  createdAt: Timestamp
}) {}

export class Wallets extends Effect.Service<Wallets>()("Wallets", {
  dependencies: [Customers.Default, Ledger.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const moneyLedger = yield* Ledger
    const customers = yield* Customers

    const emptyWallet = (customerId: CustomerId) =>
      new WalletRow({
        customerId,
        balance: BigDecimal.fromBigInt(0n),
        reservedBalance: BigDecimal.fromBigInt(0n),
        lowBalanceAlertUsd: null,
        recurringGrantUsd: null
      })

    /** The wallet as it stands (a customer who never had one has an empty one). */
    const get = Effect.fn("Wallets.get")((organizationId: OrganizationId, customerId: CustomerId) =>
      Effect.map(
        findOne(WalletRow, sql`SELECT * FROM wallets WHERE organization_id = ${organizationId} AND customer_id = ${customerId}`),
        Option.getOrElse(() => emptyWallet(customerId))
      ))

    /** Locks the wallet row for the rest of the caller's transaction, creating it on first use. */
    const lock = Effect.fn("Wallets.lock")((organizationId: OrganizationId, customerId: CustomerId) =>
      Effect.map(moneyLedger.lockWallets([{ organizationId, customerId }]), (locked) => {
        const row = locked.get(customerKey({ organizationId, customerId }))!
        return new WalletRow({
          customerId,
          balance: row.balance,
          reservedBalance: row.reservedBalance,
          lowBalanceAlertUsd: row.lowBalanceAlertUsd,
          recurringGrantUsd: row.recurringGrantUsd
        })
      }))

    /**
     * Moves the balance by `delta` (negative debits; never refused), writes the
     * ledger row and the webhook events, through the ledger. Must run inside
     * the caller's transaction.
     */
    const move = Effect.fn("Wallets.move")((
      organizationId: OrganizationId,
      customerId: CustomerId,
      delta: Decimal,
      entry: Omit<WalletPosting, keyof CustomerKey | "delta">
    ): Effect.Effect<WalletPosted> =>
      moneyLedger.moveWallet({ organizationId, customerId, delta, ...entry }))

    /**
     * Moves the Reserved Wallet by `delta`, floored at zero: no ledger row, no
     * webhook event (the spec: Reserved Wallet changes trigger neither event).
     * 422 where the workspace has not enabled it. Runs in the caller's transaction.
     */
    const moveReserved = Effect.fn("Wallets.moveReserved")(function*(organizationId: OrganizationId, customerId: CustomerId, delta: Decimal) {
        const [settings] = yield* Effect.orDie(sql<{ reservedWalletEnabled: boolean }>`
          SELECT reserved_wallet_enabled FROM organizations WHERE id = ${organizationId}`)
        if (!settings?.reservedWalletEnabled) {
          return yield* new ReservedWalletDisabled({ message: "The Reserved Wallet is not enabled in this workspace" })
        }
        return yield* moneyLedger.moveReservedWallet({ organizationId, customerId }, delta)
      })

    const activeCustomer = customers.requireActive

    /** The low-balance alert level in USD; null falls back to each webhook endpoint's threshold. */
    const setAlert = Effect.fn("Wallets.setAlert")(function*(organizationId: OrganizationId, customerId: CustomerId, threshold: Decimal | null) {
        yield* activeCustomer(organizationId, customerId)
        yield* lock(organizationId, customerId)
        const rows = yield* findAll(
          WalletRow,
          sql`UPDATE wallets SET low_balance_alert_usd = ${threshold === null ? null : toSql(threshold)}, updated_at = now()
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId} RETURNING *`
        )
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    /** USD credited to the wallet at every cycle start; null stops it. */
    const setRecurringGrant = Effect.fn("Wallets.setRecurringGrant")(function*(organizationId: OrganizationId, customerId: CustomerId, quantity: Decimal | null) {
        yield* activeCustomer(organizationId, customerId)
        yield* lock(organizationId, customerId)
        const rows = yield* findAll(
          WalletRow,
          sql`UPDATE wallets SET recurring_grant_usd = ${quantity === null ? null : toSql(quantity)}, updated_at = now()
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId} RETURNING *`
        )
        return rows[0]!
      }, sql.withTransaction, dieOnSqlError)

    /** The ledger, oldest first, one page at a time. */
    const ledger = Effect.fn("Wallets.ledger")(function*(organizationId: OrganizationId, customerId: CustomerId, page: Page) {
        yield* customers.get(organizationId, customerId)
        const wallet = yield* get(organizationId, customerId)
        yield* knownCursor(sql, "wallet_ledger", organizationId, page)
        const entries = yield* findAll(
          LedgerEntry,
          sql`SELECT * FROM wallet_ledger
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                ${pageClause(sql, page)}`
        )
        return { wallet, entries }
      })

    return { get, lock, move, moveReserved, setAlert, setRecurringGrant, ledger, activeCustomer } as const
  })
}) {}
