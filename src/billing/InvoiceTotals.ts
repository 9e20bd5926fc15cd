/**
 * The arithmetic of an invoice, with no database: its totals (the subtotal
 * rounded to cents, a cent-rounded line per active tax on that subtotal,
 * their sum, in whole cents for `totalCents`) and the order in which a batch
 * of finalised invoices takes its numbers (InvoiceNumbers.ts takes them).
 */
import { BigDecimal } from "effect"
import { type Decimal, HUNDRED, roundTo, sum } from "../money.ts"

export interface LineInput {
  readonly description: string
  readonly componentId: string | null
  readonly quantity: Decimal | null
  readonly unitPrice: Decimal | null
  readonly amount: Decimal
  /** The period the line bills when it is not the invoice's (a late line), with that cycle's index. */
  readonly periodStart?: Date
  readonly periodEnd?: Date
  readonly cycleIndex?: number | null
}

/** A tax as an invoice applies it. */
export interface TaxRate {
  readonly id: string
  readonly name: string
  readonly ratePercent: Decimal
}

/** An invoice's totals: the subtotal and each tax rounded to cents, the total their sum. */
export interface InvoiceTotals {
  readonly subtotal: Decimal
  readonly taxes: ReadonlyArray<{ readonly tax: TaxRate; readonly amount: Decimal }>
  readonly taxTotal: Decimal
  readonly total: Decimal
  /** A total of zero (or less): the invoice is issued PAID. */
  readonly free: boolean
}

/**
 * The totals of an invoice of `lines` under the `taxes` active at issue time
 * (oldest first): the subtotal rounded to cents (half away from zero), one
 * cent-rounded tax line per tax on that subtotal, and their sum.
 */
export const invoiceTotals = (lines: ReadonlyArray<LineInput>, taxes: ReadonlyArray<TaxRate>): InvoiceTotals => {
  const subtotal = roundTo(sum(lines.map((line) => line.amount)), 2)
  const taxAmounts = taxes.map((tax) => ({
    tax,
    amount: roundTo(BigDecimal.unsafeDivide(BigDecimal.multiply(subtotal, tax.ratePercent), HUNDRED), 2)
  }))
  const taxTotal = sum(taxAmounts.map((t) => t.amount))
  const total = BigDecimal.normalize(BigDecimal.sum(subtotal, taxTotal))
  return { subtotal, taxes: taxAmounts, taxTotal, total, free: !BigDecimal.isPositive(total) }
}

/** An amount in whole cents, as an invoice's `totalCents` answers it. */
export const cents = (amount: Decimal) => BigDecimal.unsafeToNumber(roundTo(BigDecimal.multiply(amount, HUNDRED), 0))

/** An invoice being finalised, as numbering knows it. */
export interface NumberedInvoice {
  readonly organizationId: string
  readonly id: string
}

/** How a batch of finalised invoices takes its numbers (`numberOrder`). */
export interface NumberOrder {
  /** The organisations whose counters move, in the order their rows are taken (sorted, so two batches never wait on each other). */
  readonly organizations: ReadonlyArray<string>
  /** How many numbers each of `organizations` takes, in the same order. */
  readonly taken: ReadonlyArray<number>
  /** An invoice's offset from its organisation's new last number (0 for the last, -1 for the one before...); null when it is not in the batch. */
  readonly offsetOf: (invoice: NumberedInvoice) => number | null
}

/**
 * The numbers of a batch follow creation order within each organisation: its
 * invoices in id order (ids grow with creation time) take consecutive numbers
 * ending at the counter's new last number.
 */
export const numberOrder = (finals: ReadonlyArray<NumberedInvoice>): NumberOrder => {
  const byOrganization = new Map<string, Array<string>>()
  for (const invoice of finals) {
    const ids = byOrganization.get(invoice.organizationId)
    if (ids === undefined) byOrganization.set(invoice.organizationId, [invoice.id])
    else ids.push(invoice.id)
  }
  const organizations = [...byOrganization.keys()].sort()
  const offsets = new Map<string, number>()
  for (const organizationId of organizations) {
    const ids = byOrganization.get(organizationId)!.sort()
    ids.forEach((id, index) => offsets.set(`${organizationId}/${id}`, index - (ids.length - 1)))
  }
  return {
    organizations,
    taken: organizations.map((organizationId) => byOrganization.get(organizationId)!.length),
    offsetOf: (invoice) => offsets.get(`${invoice.organizationId}/${invoice.id}`) ?? null
  }
}
