/**
 * Pricing one claimed signal, in memory: its customer resolved from the
 * batch's context, its cycle found by its moment, the pure meters run
 * (MeterSignal.ts), and what it writes gathered into the batch's `Writes`.
 * No statement runs here: the batch's writes (BatchWrites.ts, the ledger)
 * send what the signals gathered, so this decides alone how each one ends.
 */
import { BigDecimal, Either } from "effect"
import { makeId } from "../ids.ts"
import { customerKey, type PricedUsage, type SpentMove, type WalletPosting } from "../ledger/Ledger.ts"
import type { HoldSettlement, UsageRow } from "../ledger/UsageRows.ts"
import { toSql, ZERO } from "../money.ts"
import { CustomerArchived, CustomerNotFound, UnknownMember } from "../errors.ts"
import { ensureActive } from "../customers/Customer.ts"
import type { CycleKey } from "../billing/DraftInvoices.ts"
import { applyMoves, type BalanceMove, type CustomerContext } from "../pricing/meters/Context.ts"
import type { Priced } from "../pricing/meters/Meters.ts"
import type { AllowanceDraw } from "../pricing/meters/Allowance.ts"
import type { BatchContext, Customer, DecodedSignal, SignalRecord } from "./BatchContext.ts"
import { customOf } from "./ClaimedSignal.ts"
import { meterSignal, type RunCosts } from "./MeterSignal.ts"
import { refusalAt, refusalMessage } from "./RefusalMoment.ts"
import { settlementOf } from "./Settlements.ts"
import { type Ended, refused, type Waiting } from "./SignalEnd.ts"

/** What a priced signal writes, gathered over the batch: the ledger writes its `PricedUsage` (Ledger.recordUsage). */
export interface Writes extends PricedUsage {
  readonly usageRows: Array<UsageRow>
  readonly moves: Array<BalanceMove>
  readonly spent: Array<SpentMove>
  readonly postings: Array<WalletPosting>
  /** The ended cycles late signals moved, for refreshDrafts. */
  readonly endedCycles: Map<string, CycleKey>
  /** The spend holds priced signals settle (src/signals/Settlements.ts). */
  readonly settlements: Array<HoldSettlement>
}

/** A batch's writes before its first signal is priced. */
export const noWrites = (): Writes => ({ usageRows: [], moves: [], spent: [], postings: [], endedCycles: new Map(), settlements: [] })

/** The usage log's row of a priced signal. */
export const usageRow = (
  signal: SignalRecord,
  customer: Customer,
  id: string,
  priced: Priced,
  cycleIndex: number | null
): UsageRow => {
  const { entry } = priced
  const draw: AllowanceDraw | null = priced.draw
  return {
    organizationId: signal.organizationId,
    id,
    customerId: customer.id,
    meter: entry.meter,
    entitlementId: entry.entitlementId,
    entitlementName: entry.entitlementName,
    agentKey: entry.agentKey,
    model: entry.usage?.model ?? null,
    inputTokens: entry.usage ? entry.usage.inputTokens ?? 0 : null,
    outputTokens: entry.usage ? entry.usage.outputTokens ?? 0 : null,
    cacheTokens: entry.usage ? entry.usage.cacheTokens ?? 0 : null,
    cacheWriteTokens: entry.usage ? entry.usage.cacheWriteTokens ?? 0 : null,
    quantity: toSql(entry.quantity),
    providerCost: toSql(entry.providerCost),
    customerCost: toSql(entry.customerCost),
    billingMode: entry.billingMode,
    balanceRemaining: entry.balanceRemaining === null ? null : toSql(entry.balanceRemaining),
    purchaseId: entry.purchaseId,
    signalId: signal.id,
    messageId: signal.messageId,
    runId: signal.runId,
    compositeId: entry.composite?.id ?? null,
    compositeRef: entry.composite?.refId ?? null,
    compositeValue: entry.composite?.value ?? null,
    member: signal.member,
    // A composite row carries its occurrence's custom; every other row its signal's, as sent.
    custom: entry.custom ?? customOf(signal),
    occurredAt: signal.moment.toISOString(),
    cycleIndex,
    // How the row split between allowance and arrears: what a reversal gives back (null: nothing drawn).
    advanceQuantity: draw === null ? null : toSql(draw.advanceQuantity),
    arrearQuantity: draw === null ? null : toSql(draw.arrearQuantity),
    arrearCharge: draw === null ? null : toSql(draw.arrearCharge)
  }
}

/** The signal's customer: missing (404), archived (409), or None when its externalId is not held yet. */
const customerOf = (signal: SignalRecord, context: BatchContext): Either.Either<Customer | null, CustomerNotFound | CustomerArchived> => {
  if (signal.customerId !== null) {
    const customer = context.customerById(signal.organizationId, signal.customerId)
    if (customer === undefined) return Either.left(new CustomerNotFound({ message: `Customer ${signal.customerId} not found` }))
    return ensureActive(customer, "cannot receive signals")
  }
  return Either.right(context.customerByExternalId(signal.organizationId, signal.externalId ?? "") ?? null)
}

/**
 * Prices one signal against the in-memory state and records what it
 * writes; the state moves only when the signal is billed.
 */
export const priceOne = (
  signal: DecodedSignal,
  context: BatchContext,
  customers: Map<string, CustomerContext>,
  runCosts: RunCosts,
  writes: Writes
): Ended | Waiting => {
  const record = signal.record
  const resolved = customerOf(record, context)
  if (Either.isLeft(resolved)) {
    return refused(resolved.left)
  }
  const customer = resolved.right
  if (customer === null) return { _tag: "Pending", message: `No active customer has externalId ${record.externalId}` }
  if (record.member !== null && !context.isMember(record.organizationId, customer.id, record.member)) {
    return refused(new UnknownMember({ message: `member ${record.member} does not belong to customer ${customer.id}` }), customer.id)
  }
  const key = customerKey({ organizationId: customer.organizationId, customerId: customer.id })
  let state = customers.get(key)
  if (state === undefined) {
    state = context.customerContext(customer)
    customers.set(key, state)
  }
  // Billed in the cycle containing the signal's moment: the current one (today's path), an ended one
  // (late: its cycle_balances, shared by the batch's late signals of that cycle), or none (no active plan).
  const cycle = context.cycleOf(record, customer)
  if (cycle._tag === "Waiting") {
    return {
      _tag: "Waiting",
      organizationId: customer.organizationId,
      customerId: customer.id,
      externalId: customer.externalId,
      purchaseId: cycle.purchaseId,
      periodEnd: cycle.periodEnd
    }
  }
  const purchase = cycle.purchase
  const signalState: CustomerContext = purchase === state.purchase ? state : { ...state, purchase }
  const metered = meterSignal(signal, signalState, context, runCosts)
  if (Either.isLeft(metered)) {
    const at = { moment: record.moment, source: record.momentSource, period: cycle.period, activeCycle: cycle.activeCycle }
    const refusal = refusalAt(metered.left, at)
    return refused(refusal, customer.id, refusalMessage(refusal, at))
  }
  const priced = metered.right
  const usageLogId = makeId("usg")
  const ended = purchase !== null && purchase.closedCycle
  writes.usageRows.push(usageRow(record, customer, usageLogId, priced, purchase?.cycleIndex ?? null))
  if (priced.draw !== null && purchase !== null) {
    applyMoves(purchase, priced.draw.moves)
    for (const move of priced.draw.moves) writes.moves.push({ ...move, usageLogId })
    if (ended && priced.draw.moves.length > 0) {
      const key = { organizationId: record.organizationId, purchaseId: purchase.id, cycleIndex: purchase.cycleIndex }
      writes.endedCycles.set(`${key.organizationId}/${key.purchaseId}/${key.cycleIndex}`, key)
    }
  }
  // An ended cycle's usage never counts in the purchase's (current) spent_this_cycle.
  if (!ended && !BigDecimal.isZero(priced.spent) && priced.entry.purchaseId !== null) {
    writes.spent.push({ organizationId: record.organizationId, purchaseId: priced.entry.purchaseId, amount: priced.spent })
  }
  if (!BigDecimal.isZero(priced.walletDebit) && state.wallet !== null) {
    state.wallet.balance = BigDecimal.normalize(BigDecimal.subtract(state.wallet.balance, priced.walletDebit))
    writes.postings.push({
      organizationId: record.organizationId,
      customerId: customer.id,
      delta: BigDecimal.negate(priced.walletDebit),
      type: "USAGE_LOG",
      usageLogId,
      purchaseId: priced.entry.purchaseId
    })
  }
  if (priced.entry.meter === "OUTCOME_STEP" && record.runId !== null) {
    const runKey = `${record.organizationId}/${customer.id}/${record.runId}`
    runCosts.set(runKey, BigDecimal.sum(runCosts.get(runKey) ?? ZERO, priced.entry.providerCost))
  }
  const settlement = settlementOf(signal, customer.id, usageLogId)
  if (settlement !== undefined) writes.settlements.push(settlement)
  return { _tag: "Processed", customerId: customer.id, usageLogId }
}
