/**
 * What one step of a purchase's life does, computed in memory from its loaded
 * state, with no database access: the cycle job renews a batch of purchases
 * with it (Purchases.renewBatch), a new purchase starts its first cycle with
 * it, and a cancellation invoices the cycle's ARREAR usage with it. The caller
 * loads the state (purchase, its locked balance rows, the organisation's
 * active taxes), locks the wallets `needsWallet` names, settles the wallet
 * steps against them (`settleWallet`) and writes everything set-based.
 *
 * The rules (docs/billing.md "Batch renewal"):
 * - at a cycle end, each ARREAR component's uninvoiced charges become a line
 *   of a USAGE invoice (none when nothing was charged);
 * - at a cycle start, ADVANCE components are granted their quantity, plus the
 *   remainder when `rollover` is on, minus a composite's debt (a remainder
 *   below zero) whatever `rollover` says; ARREAR rows restart at zero; the
 *   plan's wallet amount is credited (PURCHASE_GRANT at the first cycle,
 *   CYCLE_GRANT later), then the customer's recurring grant, and a PLAN
 *   invoice is issued for the ADVANCE charges and the price adjustment;
 * - with auto-payment on, each invoice that is not free is paid from the
 *   wallet when the wallet holds its whole total at that moment;
 * - a plan change scheduled for the cycle end (`scheduledSnapshot`): the
 *   ended cycle is invoiced and recorded under the plan it ran on, the next
 *   one starts on the new plan, its rows replacing the old ones (a change NOW
 *   is PlanChange.ts).
 * The wallet steps keep the order the one-purchase code had: the USAGE
 * invoice's payment, the grants, the recurring grant, the PLAN invoice's payment.
 */
import { BigDecimal } from "effect"
import { makeId } from "../ids.ts"
import type { BalanceValues, WalletPosting } from "../ledger/Ledger.ts"
import { type Decimal, ZERO } from "../money.ts"
import { type CyclePeriod, cyclePeriod } from "./Cycle.ts"
import type { IssuedInvoice, WalletPayment } from "./Invoice.ts"
import { invoiceTotals, type LineInput, type TaxRate } from "./InvoiceTotals.ts"
import type { PurchaseStatus } from "./Purchase.ts"
import type { PlanSnapshot, SnapshotComponent } from "../pricing/PlanSnapshot.ts"

const { max, min, sum: add } = BigDecimal

/** The purchase fields a step reads (a `PurchaseRow` has them). */
export interface RenewalPurchase {
  readonly id: string
  readonly customerId: string
  readonly status: PurchaseStatus
  readonly billingDate: Date
  readonly cycleIndex: number
  readonly periodStart: Date | null
  readonly periodEnd: Date | null
  readonly autoPayment: boolean
  readonly snapshot: PlanSnapshot
  /** The plan a change at the cycle end (CYCLE_END) puts the purchase on at its next renewal; none by default. */
  readonly scheduledSnapshot?: PlanSnapshot | null
}

/** The balance row fields a step reads (a `BalanceRow` has them): a ledger row's values, keys aside. */
export type RenewalBalance = Omit<BalanceValues, "organizationId" | "purchaseId">

/**
 * A balance row of an ended, FINAL cycle of the customer (any purchase) whose
 * ARREAR charges invoices do not hold in full (`cycle_balances`, locked by the
 * caller): the difference is billed on the customer's next USAGE invoice as a
 * late line of its own (docs/billing.md "Late usage").
 */
export interface LateBalance {
  readonly organizationId: string
  readonly purchaseId: string
  readonly cycleIndex: number
  readonly componentId: string
  readonly customerId: string
  /** The component's name in that purchase's snapshot (null when it has none). */
  readonly targetName: string | null
  readonly periodStart: Date
  readonly periodEnd: Date
  readonly arrearAmount: Decimal
  readonly invoicedArrear: Decimal
}

/** Everything a step needs, loaded (and locked) by the caller. */
export interface RenewalState {
  readonly organizationId: string
  readonly purchase: RenewalPurchase
  /** The purchase's balance rows, by component id; none before its first cycle. */
  readonly balances: ReadonlyArray<RenewalBalance>
  /** The organisation's active taxes, oldest first. */
  readonly taxes: ReadonlyArray<TaxRate>
  /** The organisation's invoice grace period (hours); above 0 a cycle-end USAGE invoice is issued DRAFT. Default 0. */
  readonly graceHours?: number
  /** The customer's FINAL cycle rows still owed (late lines for the next USAGE invoice). Default none. */
  readonly lateBalances?: ReadonlyArray<LateBalance>
}

/**
 * A balance row of an ended cycle, as the cycle end records it (`cycle_balances`):
 * `remaining` is the allowance left to late usage of the cycle, what EXPIRED at
 * its end (0 when it rolled over or was debt).
 */
export interface CycleBalanceValues extends Omit<BalanceValues, "organizationId" | "purchaseId" | "originalGranted"> {
  /** arrearAmount when the cycle is FINAL at once (its invoice holds it), 0 while DRAFT. */
  readonly invoicedArrear: Decimal
}

/** An ended cycle of a purchase, as the cycle end records it (`purchase_cycles` and its `cycle_balances`). */
export interface EndedCycle {
  readonly organizationId: string
  readonly purchaseId: string
  readonly customerId: string
  readonly cycleIndex: number
  readonly periodStart: Date
  readonly periodEnd: Date
  readonly status: "DRAFT" | "FINAL"
  readonly finalizeAt: Date
  readonly usageInvoiceId: string | null
  readonly balances: ReadonlyArray<CycleBalanceValues>
  /** The snapshot the cycle was billed under, when the purchase changes plan as it ends (else the purchase's own). */
  readonly snapshot?: PlanSnapshot | null
}

/** A wallet move a step asks for, settled in order against the locked wallet. */
export type WalletStep =
  | { readonly _tag: "Grant"; readonly type: "PURCHASE_GRANT" | "CYCLE_GRANT"; readonly amount: Decimal; readonly at: Date }
  | { readonly _tag: "RecurringGrant"; readonly at: Date }
  | { readonly _tag: "AutoPay"; readonly invoice: IssuedInvoice }
  | {
    readonly _tag: "Post"
    readonly type: "PLAN_CHANGE"
    readonly amount: Decimal
    readonly at: Date
    readonly invoiceId: string | null
    readonly notes: string
  }

/** The cycle a purchase enters, and the instant it does. */
export interface CycleStart extends CyclePeriod {
  readonly at: Date
}

/** What one step of a purchase's cycles writes: a renewal, a cancellation or a plan change (PlanChange.ts). */
export interface CycleStep {
  readonly organizationId: string
  readonly purchaseId: string
  readonly customerId: string
  /** The cycle the purchase enters (status ACTIVE, spent 0); null when it enters none (a cancellation). */
  readonly cycle: CycleStart | null
  /** Balance rows to create (a first cycle). */
  readonly createBalances: ReadonlyArray<BalanceValues>
  /** Balance rows to set to new values. */
  readonly setBalances: ReadonlyArray<BalanceValues>
  /** In issue order: the ended cycle's USAGE invoice, then the new cycle's PLAN invoice. */
  readonly invoices: ReadonlyArray<IssuedInvoice>
  readonly walletSteps: ReadonlyArray<WalletStep>
  /** The cycle that ended (renewal of an ACTIVE purchase, or its cancellation); null when none did. */
  readonly endedCycle: EndedCycle | null
  /** The late rows the USAGE invoice billed: their invoiced_arrear becomes their arrear_amount. */
  readonly lateBilled: ReadonlyArray<LateBalance>
  /** `createBalances` are all the purchase's rows: the others are deleted (a plan change; Ledger.replaceBalances). */
  readonly replaceBalances?: boolean
  /** With `replaceBalances`: the old rows whose balance a new one carries on (old component id to new). */
  readonly carried?: ReadonlyArray<{ readonly from: string; readonly to: string }>
  /** The plan the purchase is on after the step, when the step changes it (its scheduled change is cleared). */
  readonly changedTo?: PlanSnapshot | null
  /** The plan the purchase was on before the change: the ended cycles that have no snapshot of their own keep it. */
  readonly changedFrom?: PlanSnapshot | null
}

/** Makes ids; tests pass a deterministic one. */
export type NewId = (prefix: string) => string

const advanceQuantity = (component: SnapshotComponent) => component.quantity ?? ZERO

const componentOf = (snapshot: PlanSnapshot, id: string) => snapshot.components.find((c) => c.id === id)

const balanceValues = (state: RenewalState, row: RenewalBalance): BalanceValues => ({
  organizationId: state.organizationId,
  purchaseId: state.purchase.id,
  componentId: row.componentId,
  customerId: row.customerId,
  type: row.type,
  billingMode: row.billingMode,
  targetId: row.targetId,
  granted: row.granted,
  used: row.used,
  remaining: row.remaining,
  originalGranted: row.originalGranted,
  cycleQuantity: row.cycleQuantity,
  arrearAmount: row.arrearAmount
})

export const issue = (
  state: RenewalState,
  newId: NewId,
  input: Pick<IssuedInvoice, "kind" | "periodStart" | "periodEnd" | "lines" | "at" | "cycleIndex" | "draft">
): IssuedInvoice => ({
  organizationId: state.organizationId,
  id: newId("inv"),
  customerId: state.purchase.customerId,
  purchaseId: state.purchase.id,
  currencyCode: state.purchase.snapshot.currencyCode,
  totals: invoiceTotals(input.lines, state.taxes),
  ...input
})

/** Auto-payment applies to an invoice that is not free, issued while it is on; never to a DRAFT. */
export const autoPay = (state: RenewalState, invoice: IssuedInvoice): ReadonlyArray<WalletStep> =>
  state.purchase.autoPayment && !invoice.totals.free && invoice.draft !== true ? [{ _tag: "AutoPay", invoice }] : []

const day = (date: Date) => date.toISOString().slice(0, 10)

/** The description of a late line: the component, "late usage" (or credit) and the cycle's period. */
export const lateDescription = (name: string, amount: Decimal, periodStart: Date, periodEnd: Date) =>
  `${name} (late usage${BigDecimal.isNegative(amount) ? " credit" : ""}, ${day(periodStart)} to ${day(periodEnd)})`

/**
 * The late lines of a customer's next USAGE invoice: one per FINAL cycle row
 * whose ARREAR charges invoices do not hold in full, for the difference (a
 * credit when negative), with that cycle's period. When the credits would take
 * the invoice below zero (`ownTotal` is what the invoice bills besides), they
 * wait for a later usage invoice: a credit is never lost to a negative total.
 */
export const lateLines = (rows: ReadonlyArray<LateBalance>, ownTotal: Decimal) => {
  const owed = rows
    .map((row) => ({ row, amount: BigDecimal.normalize(BigDecimal.subtract(row.arrearAmount, row.invoicedArrear)) }))
    .filter((item) => !BigDecimal.isZero(item.amount))
  const total = add(ownTotal, owed.reduce((acc, item) => add(acc, item.amount), ZERO))
  const billed = BigDecimal.isNegative(total) ? owed.filter((item) => BigDecimal.isPositive(item.amount)) : owed
  return {
    billed: billed.map((item) => item.row),
    lines: billed.map(({ amount, row }): LineInput => ({
      description: lateDescription(row.targetName ?? row.componentId, amount, row.periodStart, row.periodEnd),
      componentId: row.componentId,
      quantity: null,
      unitPrice: null,
      amount,
      periodStart: row.periodStart,
      periodEnd: row.periodEnd,
      cycleIndex: row.cycleIndex
    }))
  }
}

/** What a line needs to know of a snapshot's component. */
export interface LineComponent {
  readonly targetName: string
  readonly type: string
  readonly unitPrice: Decimal | null
}

/** The lines of a cycle's own ARREAR charges, one per ARREAR row that charged something. */
export const arrearLines = (
  componentOf: (componentId: string) => LineComponent | undefined,
  rows: ReadonlyArray<{ readonly componentId: string; readonly billingMode: string; readonly cycleQuantity: Decimal; readonly arrearAmount: Decimal }>
): Array<LineInput> => {
  const lines: Array<LineInput> = []
  for (const row of rows) {
    if (row.billingMode !== "ARREAR" || BigDecimal.isZero(row.arrearAmount)) continue
    const component = componentOf(row.componentId)
    lines.push({
      description: `${component?.targetName ?? row.componentId} (usage)`,
      componentId: row.componentId,
      quantity: row.cycleQuantity,
      unitPrice: component?.type === "UNIT" ? null : component?.unitPrice ?? null,
      amount: row.arrearAmount
    })
  }
  return lines
}

const HOUR_MS = 3_600_000

/**
 * The ended cycle's ARREAR charges, and the customer's late lines, as a USAGE
 * invoice at `at` (DRAFT while the organisation has a grace period), or none
 * when there is nothing to bill; the rows it invoiced restart at zero. Also
 * the ended cycle's record (`cycleEnd` the instant the cycle ended).
 */
const invoiceArrears = (state: RenewalState, at: Date, cycleEnd: Date, newId: NewId) => {
  const { purchase } = state
  const grace = state.graceHours ?? 0
  const draft = grace > 0
  const own = arrearLines((id) => componentOf(purchase.snapshot, id), state.balances)
  const late = lateLines(state.lateBalances ?? [], own.reduce((acc, line) => add(acc, line.amount), ZERO))
  const lines = [...own, ...late.lines]
  const periodStart = purchase.periodStart ?? purchase.billingDate
  const invoice = lines.length === 0 ? null : issue(state, newId, {
    kind: "USAGE",
    periodStart,
    periodEnd: purchase.periodEnd ?? at,
    cycleIndex: purchase.cycleIndex,
    draft,
    lines,
    at
  })
  const endedCycle: EndedCycle = {
    organizationId: state.organizationId,
    purchaseId: purchase.id,
    customerId: purchase.customerId,
    cycleIndex: purchase.cycleIndex,
    periodStart,
    periodEnd: cycleEnd,
    status: draft ? "DRAFT" : "FINAL",
    finalizeAt: new Date(cycleEnd.getTime() + grace * HOUR_MS),
    // A DRAFT cycle with no invoice yet gets its draft when late usage charges it (refreshDrafts).
    usageInvoiceId: invoice?.id ?? null,
    balances: state.balances.map((row) => {
      const component = componentOf(purchase.snapshot, row.componentId)
      const expired = row.billingMode === "ADVANCE" && component?.rollover !== true && BigDecimal.isPositive(row.remaining)
      return {
        ...row,
        remaining: expired ? row.remaining : ZERO,
        invoicedArrear: draft ? ZERO : row.arrearAmount
      }
    })
  }
  return {
    invoice,
    endedCycle,
    lateBilled: late.billed,
    balances: own.length === 0 ? state.balances : state.balances.map((row) => ({ ...row, arrearAmount: ZERO }))
  }
}

/** The PLAN invoice's lines: one per ADVANCE component, one for a non-zero price adjustment, else the plan at zero. */
export const planLines = (snapshot: PlanSnapshot): Array<LineInput> => {
  const lines: Array<LineInput> = snapshot.components
    .filter((c) => c.billingMode === "ADVANCE")
    .map((c) => ({
      description: `${c.targetName} (${c.type === "WALLET" ? "wallet credit" : "prepaid"})`,
      componentId: c.id,
      quantity: c.type === "WALLET" ? null : c.quantity,
      unitPrice: c.type === "WALLET" || c.type === "UNIT" ? null : c.unitPrice,
      amount: c.charge
    }))
  if (!BigDecimal.isZero(snapshot.priceAdjustment)) {
    lines.push({ description: "Price adjustment", componentId: null, quantity: null, unitPrice: null, amount: snapshot.priceAdjustment })
  }
  if (lines.length === 0) {
    lines.push({ description: snapshot.name, componentId: null, quantity: null, unitPrice: null, amount: ZERO })
  }
  return lines
}

/**
 * Starts cycle `index` at `at`: the balance rows (created at the first cycle,
 * re-granted later from `balances`, the rows after the arrears were invoiced),
 * the wallet grants and the PLAN invoice.
 */
const startCycle = (
  state: RenewalState,
  balances: ReadonlyArray<RenewalBalance>,
  index: number,
  at: Date,
  newId: NewId,
  changedTo: PlanSnapshot | null = null
) => {
  const { organizationId, purchase } = state
  const snapshot = changedTo ?? purchase.snapshot
  const period = cyclePeriod(purchase.billingDate, index)
  const metered = snapshot.components.filter((c) => c.type !== "WALLET")
  /** A new row of `c`, `granted` to start with, nothing used: the plan's own quantity is its original grant. */
  const freshBalance = (c: SnapshotComponent, granted: Decimal): BalanceValues => ({
    organizationId,
    purchaseId: purchase.id,
    componentId: c.id,
    customerId: purchase.customerId,
    type: c.type,
    billingMode: c.billingMode,
    targetId: c.targetId,
    granted,
    used: ZERO,
    remaining: granted,
    originalGranted: c.billingMode === "ADVANCE" ? advanceQuantity(c) : null,
    cycleQuantity: ZERO,
    arrearAmount: ZERO
  })
  const createBalances: Array<BalanceValues> = []
  const setBalances: Array<BalanceValues> = []
  const carried: Array<{ readonly from: string; readonly to: string }> = []
  if (changedTo !== null) {
    // A scheduled change: the new plan's rows replace the old ones. A row of a component both plans sell
    // (same kind, target and billing mode) carries what the old plan's rules carry into a next cycle: its
    // remainder under the old component's `rollover`, a composite's debt whatever it says.
    const pool = [...balances]
    for (const c of metered) {
      const found = pool.findIndex((row) => row.type === c.type && row.targetId === c.targetId && row.billingMode === c.billingMode)
      const old = found < 0 ? undefined : pool.splice(found, 1)[0]
      if (old !== undefined) carried.push({ from: old.componentId, to: c.id })
      let granted = ZERO
      if (c.billingMode === "ADVANCE") {
        const carried = old !== undefined && componentOf(purchase.snapshot, old.componentId)?.rollover === true
          ? max(old.remaining, ZERO)
          : ZERO
        const debt = old === undefined ? ZERO : min(old.remaining, ZERO)
        granted = BigDecimal.normalize(add(add(advanceQuantity(c), carried), debt))
      }
      createBalances.push(freshBalance(c, granted))
    }
  } else if (index === 0) {
    for (const c of metered) {
      createBalances.push(freshBalance(c, c.billingMode === "ADVANCE" ? advanceQuantity(c) : ZERO))
    }
  } else {
    for (const row of balances) {
      const component = metered.find((c) => c.id === row.componentId)
      if (!component) {
        // Not a component of the snapshot: left as it is (but for what the arrears invoice cleared).
        setBalances.push(balanceValues(state, row))
        continue
      }
      let granted = ZERO
      if (component.billingMode === "ADVANCE") {
        const carried = component.rollover ? max(row.remaining, ZERO) : ZERO
        const debt = min(row.remaining, ZERO)
        granted = BigDecimal.normalize(add(add(advanceQuantity(component), carried), debt))
      }
      setBalances.push({
        ...balanceValues(state, row),
        granted,
        used: ZERO,
        remaining: granted,
        originalGranted: component.billingMode === "ADVANCE" ? advanceQuantity(component) : null,
        cycleQuantity: ZERO,
        arrearAmount: ZERO
      })
    }
  }
  const walletSteps: Array<WalletStep> = []
  for (const component of snapshot.components) {
    if (component.type !== "WALLET" || component.billingMode !== "ADVANCE") continue
    const amount = component.amount ?? ZERO
    if (BigDecimal.isZero(amount)) continue
    walletSteps.push({ _tag: "Grant", type: index === 0 ? "PURCHASE_GRANT" : "CYCLE_GRANT", amount, at })
  }
  walletSteps.push({ _tag: "RecurringGrant", at })
  const invoice = issue(state, newId, {
    kind: "PLAN",
    periodStart: period.start,
    periodEnd: period.end,
    cycleIndex: index,
    lines: planLines(snapshot),
    at
  })
  walletSteps.push(...autoPay(state, invoice))
  return { cycle: { ...period, at }, createBalances, setBalances, invoice, walletSteps, carried }
}

/**
 * One step of the cycle job for a purchase due now: one that has not started
 * (SCHEDULED, or just bought) starts cycle 0 at its billing date; an ACTIVE one
 * invoices the cycle that ended at `period_end` and starts the next one there.
 * A purchase several cycles behind moves one cycle per step.
 */
export const renewal = (state: RenewalState, newId: NewId = makeId): CycleStep => {
  const { organizationId, purchase } = state
  const base = { organizationId, purchaseId: purchase.id, customerId: purchase.customerId }
  if (purchase.periodEnd === null) {
    const started = startCycle(state, [], 0, purchase.billingDate, newId)
    return {
      ...base,
      cycle: started.cycle,
      createBalances: started.createBalances,
      setBalances: started.setBalances,
      invoices: [started.invoice],
      walletSteps: started.walletSteps,
      endedCycle: null,
      lateBilled: []
    }
  }
  const boundary = purchase.periodEnd
  // A change scheduled for the cycle end: the ended cycle is invoiced under the plan it ran on, the next one
  // starts on the new plan (docs/billing.md "Changing plans").
  const changedTo = purchase.status === "ACTIVE" ? purchase.scheduledSnapshot ?? null : null
  const arrears = invoiceArrears(state, boundary, boundary, newId)
  const started = startCycle(state, arrears.balances, purchase.cycleIndex + 1, boundary, newId, changedTo)
  return {
    ...base,
    cycle: started.cycle,
    createBalances: started.createBalances,
    setBalances: started.setBalances,
    invoices: arrears.invoice === null ? [started.invoice] : [arrears.invoice, started.invoice],
    walletSteps: [...(arrears.invoice === null ? [] : autoPay(state, arrears.invoice)), ...started.walletSteps],
    endedCycle: changedTo === null ? arrears.endedCycle : { ...arrears.endedCycle, snapshot: purchase.snapshot },
    lateBilled: arrears.lateBilled,
    ...(changedTo === null ? {} : { replaceBalances: true, carried: started.carried, changedTo, changedFrom: purchase.snapshot })
  }
}

/**
 * A cancellation at `at` (after the purchase's OPEN invoices were voided): an
 * ACTIVE purchase's ARREAR usage charged so far becomes a final USAGE invoice
 * (auto-paid like any other); the cycle is ended by the caller.
 */
export const cancellation = (state: RenewalState, at: Date, newId: NewId = makeId): CycleStep => {
  const { organizationId, purchase } = state
  const base = { organizationId, purchaseId: purchase.id, customerId: purchase.customerId, cycle: null, createBalances: [] }
  if (purchase.status !== "ACTIVE") {
    return { ...base, setBalances: [], invoices: [], walletSteps: [], endedCycle: null, lateBilled: [] }
  }
  const arrears = invoiceArrears(state, at, at, newId)
  const ended = { endedCycle: arrears.endedCycle, lateBilled: arrears.lateBilled }
  if (arrears.invoice === null) return { ...base, setBalances: [], invoices: [], walletSteps: [], ...ended }
  return {
    ...base,
    setBalances: arrears.balances === state.balances ? [] : arrears.balances.map((row) => balanceValues(state, row)),
    invoices: [arrears.invoice],
    walletSteps: autoPay(state, arrears.invoice),
    ...ended
  }
}

/**
 * Whether the step must lock the customer's wallet: it grants an amount, pays
 * an invoice, or the customer has a recurring grant (read beforehand, unlocked:
 * the locked row decides the amount).
 */
export const needsWallet = (renewal: CycleStep, hasRecurringGrant: boolean) =>
  renewal.walletSteps.some((step) => step._tag !== "RecurringGrant" || hasRecurringGrant)

/** A wallet as settling reads and moves it. */
export interface WalletState {
  readonly balance: Decimal
  readonly recurringGrantUsd: Decimal | null
}

/** The wallet postings and payments of a step, and the balance they leave. */
export interface Settled {
  readonly postings: ReadonlyArray<WalletPosting>
  readonly payments: ReadonlyArray<WalletPayment>
  readonly balance: Decimal
}

/**
 * Applies a step's wallet moves in order to the locked wallet (undefined when
 * `needsWallet` said it needs none): grants credit it, an auto-payment takes
 * an invoice's total when the balance covers it at that point, else leaves
 * the invoice OPEN.
 */
export const settleWallet = (renewal: CycleStep, wallet: WalletState | undefined, newId: NewId = makeId): Settled => {
  const postings: Array<WalletPosting> = []
  const payments: Array<WalletPayment> = []
  if (wallet === undefined) {
    if (needsWallet(renewal, false)) throw new Error(`wallet of ${renewal.customerId} was not locked for its renewal`)
    return { postings, payments, balance: ZERO }
  }
  let balance = wallet.balance
  const key = { organizationId: renewal.organizationId, customerId: renewal.customerId }
  const post = (delta: Decimal, posting: Omit<WalletPosting, "organizationId" | "customerId" | "delta">) => {
    postings.push({ ...key, delta, purchaseId: renewal.purchaseId, ...posting })
    balance = BigDecimal.normalize(add(balance, delta))
  }
  for (const step of renewal.walletSteps) {
    switch (step._tag) {
      case "Grant":
        post(step.amount, { type: step.type, at: step.at })
        break
      case "RecurringGrant": {
        const grant = wallet.recurringGrantUsd
        if (grant !== null && !BigDecimal.isZero(grant)) post(grant, { type: "RECURRING_GRANT", at: step.at })
        break
      }
      case "Post":
        post(step.amount, { type: step.type, at: step.at, invoiceId: step.invoiceId, notes: step.notes })
        break
      case "AutoPay": {
        const { invoice } = step
        if (!BigDecimal.greaterThanOrEqualTo(balance, invoice.totals.total)) break
        post(BigDecimal.negate(invoice.totals.total), { type: "INVOICE_PAYMENT", invoiceId: invoice.id, at: invoice.at })
        payments.push({
          ...key,
          id: newId("pay"),
          invoiceId: invoice.id,
          amount: invoice.totals.total,
          at: invoice.at
        })
        break
      }
    }
  }
  return { postings, payments, balance }
}
