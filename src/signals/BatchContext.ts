/**
 * Loads what a batch of signals needs to be priced, in a fixed number of
 * statements whatever the batch size: the customers, their ACTIVE purchases
 * and balance rows (locked), the cycle each signal is billed in (its moment's:
 * the current one, or an ended cycle with its `cycle_balances`, locked, when
 * the batch holds late signals), the wallets that may move (locked), the live
 * catalogue the signals name, members, outcome runs and composite occurrences.
 * Runs in the batch's transaction; locks are taken in key order, so the
 * loaders run in this order: customers, purchases, cycles, wallets, the rest.
 * Each concern is read by its own module (Batch*.ts); this one puts them
 * together as the `BatchContext` pricing reads.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { customerKey, type Ledger, type LockedWallet } from "../ledger/Ledger.ts"
import type { Decimal } from "../money.ts"
import type { Catalogue, CustomerContext } from "../pricing/meters/Context.ts"
import { loadCatalogue } from "./BatchCatalogue.ts"
import { type Customer, loadCustomers } from "./BatchCustomers.ts"
import { type SignalCycle, loadSignalCycles } from "./BatchCycles.ts"
import { lockClause, scoped } from "./BatchKeys.ts"
import { loadActivePurchases } from "./BatchPurchases.ts"
import { loadMembers, loadOccurrences, loadRuns, type OccurrenceRow, type RunRow } from "./BatchReferences.ts"
import type { DecodedSignal, SignalRecord } from "./ClaimedSignal.ts"

export type { Customer } from "./BatchCustomers.ts"
export type { CyclePeriod, SignalCycle } from "./BatchCycles.ts"
export { scoped } from "./BatchKeys.ts"
export type { OccurrenceRow } from "./BatchReferences.ts"
export { ClaimedSignal, customColumn, decodeSignal, type DecodedSignal, momentColumns, type SignalRecord } from "./ClaimedSignal.ts"

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
  readonly run: (organizationId: string, runId: string) => RunRow | undefined
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
    const locked = lockClause(sql, options.lock)

    const customers = yield* loadCustomers(sql, records, options.customers, options.lock)
    const customerOfSignal = customers.ofSignal
    const purchases = yield* loadActivePurchases(sql, locked, customers.byId.values())
    const purchaseOf = purchases.contextOf
    const cycles = yield* loadSignalCycles(sql, locked, records, customers, purchases)
    const cycleOfSignal = cycles.ofSignal
    const activeCycleOf = cycles.activeCycleOf

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

    const catalogue = yield* loadCatalogue(sql, signals, records)
    const isMember = yield* loadMembers(sql, records, customerOfSignal)
    const runs = yield* loadRuns(sql, records)
    const occurrence = yield* loadOccurrences(sql, records)

    const context: BatchContext = {
      customerById: (organizationId, customerId) => customers.byId.get(scoped(organizationId, customerId)),
      customerByExternalId: (organizationId, externalId) => customers.byExternalId.get(scoped(organizationId, externalId)),
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
          // A customer resolved after loading (never today): its ACTIVE purchase's current cycle.
          {
            _tag: "Billed",
            purchase: purchaseOf.get(scoped(customer.organizationId, customer.id)) ?? null,
            period: activeCycleOf(customer),
            activeCycle: activeCycleOf(customer)
          },
      isMember,
      catalogue,
      run: runs.run,
      runCost: runs.runCost,
      occurrence,
      wallets
    }
    return context
  })
