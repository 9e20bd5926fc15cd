/**
 * A credit note's money (issue 38; docs/billing.md "Credit notes"): a credit
 * note on a PAID invoice gives its amount back to the customer's wallet, the
 * customer's money in this service (it pays wallet usage and, with
 * auto-payment, later invoices). One posting through the ledger, in the
 * caller's transaction: the wallet locked and credited, a wallet ledger row of
 * type ADJUSTMENT naming the invoice and, in its notes, the credit note, and
 * the `wallet.balance.update` event (source ADJUSTMENT) written to the outbox.
 * A credit note on an OPEN invoice moves no money: it lowers what is due.
 */
import type { Decimal } from "../money.ts"
import type { Ledger } from "./Ledger.ts"

export interface CreditNoteCredit {
  readonly organizationId: string
  readonly customerId: string
  readonly invoiceId: string
  /** What a person quotes: the invoice's number and the credit note's, written in the ledger row's notes. */
  readonly invoiceNumber: string
  readonly creditNoteNumber: string
  /** Positive: what the wallet is credited. */
  readonly amount: Decimal
  readonly at: Date
}

/** The ledger row's notes of a credit note's credit: `Credit note CN-000001 on INV-000042`. */
export const creditNoteNotes = (credit: Pick<CreditNoteCredit, "invoiceNumber" | "creditNoteNumber">) =>
  `Credit note ${credit.creditNoteNumber} on ${credit.invoiceNumber}`

/**
 * Credits the customer's wallet with a credit note's amount (a PAID
 * invoice's): the wallet balance before and after, and the ledger row's id,
 * which the credit note keeps (`walletLedgerEntryId`).
 */
export const creditNoteToWallet = (ledger: Ledger, credit: CreditNoteCredit) =>
  ledger.moveWallet({
    organizationId: credit.organizationId,
    customerId: credit.customerId,
    delta: credit.amount,
    type: "ADJUSTMENT",
    invoiceId: credit.invoiceId,
    notes: creditNoteNotes(credit),
    at: credit.at
  })
