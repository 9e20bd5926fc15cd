/**
 * Invoice PDFs: loads an invoice of the organisation with what its document
 * names (the organisation's name, billing contact and payment instructions;
 * the customer's name, address and tax number) and renders it (InvoicePdf.ts,
 * pure). The API's `GET /invoices/{id}/pdf`, the hosted invoice page's PDF
 * link and `billing invoice pdf` all come here. Read-only: it writes nothing.
 */
import { Effect } from "effect"
import type { Customer } from "../customers/Customer.ts"
import { Customers } from "../customers/Customers.ts"
import { InvoiceNotFound } from "../errors.ts"
import { CustomerId, type OrganizationId, type PurchaseId } from "../ids.ts"
import type { SnapshotComponent } from "../pricing/PlanSnapshot.ts"
import { billingContactOf, type Organization, Organizations } from "../organizations/Organizations.ts"
import type { Invoice } from "./Invoice.ts"
import { invoicePdf, invoicePdfFileName, type InvoicePdfParty, type InvoicePdfView } from "./InvoicePdf.ts"
import { Invoices } from "./Invoices.ts"
import { unitPriceShown } from "./LineUnitPrice.ts"
import { Purchases } from "./Purchases.ts"

/** A rendered invoice: the invoice as the API shows it, the file's name (`INV-000042.pdf`) and its bytes. */
export interface RenderedInvoicePdf {
  readonly invoice: Invoice
  readonly fileName: string
  readonly bytes: Uint8Array
}

const present = (value: string | null | undefined): value is string => value !== null && value !== undefined && value.trim() !== ""

/** The organisation as the document's issuer: its name, then its billing contact's address lines and e-mail. */
export const sellerOf = (organization: Organization): InvoicePdfParty => {
  const contact = billingContactOf(organization)
  return { name: organization.name, lines: [...contact.addressLines, ...(present(contact.email) ? [contact.email] : [])] }
}

/** The customer as the document bills it: the legal name when set (the name beside it), e-mail, address, tax number. */
export const billedToOf = (customer: Customer): InvoicePdfParty => {
  const legal = present(customer.legalName) && customer.legalName.trim() !== customer.name.trim() ? customer.legalName : null
  const cityLine = [customer.pincode, customer.city, customer.state].filter(present).join(" ")
  return {
    name: legal ?? customer.name,
    lines: [
      ...(legal === null ? [] : [customer.name]),
      customer.email,
      ...[customer.addressLine1, cityLine, customer.country].filter(present),
      ...(present(customer.taxId) ? [`Tax ID: ${customer.taxId}`] : [])
    ]
  }
}

/** What the PDF of `invoice` shows, from its organisation and customer. */
export const invoicePdfViewOf = (
  invoice: Invoice,
  organization: Organization,
  customer: Customer,
  components: ReadonlyArray<SnapshotComponent> = []
): InvoicePdfView => ({
  invoice,
  unitPrices: invoice.lines.map((line) => unitPriceShown(line, components)),
  dueDate: invoice.dueDate,
  overdue: invoice.overdue,
  creditNotes: invoice.creditNotes.map((note) => ({
    number: note.number,
    issuedAt: note.createdAt,
    amount: note.amount,
    reason: note.reason,
    appliedTo: note.appliedTo
  })),
  // What is left to pay, printed when credit notes lowered it (an OPEN invoice's `amountDue`).
  amountDue: invoice.status === "OPEN" && invoice.creditNotes.some((note) => note.appliedTo === "AMOUNT_DUE")
    ? invoice.amountDue
    : null,
  seller: sellerOf(organization),
  billedTo: billedToOf(customer),
  paymentInstructions: organization.paymentInstructions
})

export class InvoicePdfs extends Effect.Service<InvoicePdfs>()("InvoicePdfs", {
  dependencies: [Invoices.Default, Customers.Default, Organizations.Default, Purchases.Default],
  effect: Effect.gen(function*() {
    const invoices = yield* Invoices
    const customers = yield* Customers
    const organizations = yield* Organizations
    const purchases = yield* Purchases

    /**
     * The PDF of one invoice of the organisation: an unknown id, or another
     * organisation's invoice, is `InvoiceNotFound` (404) like everywhere else.
     * With `customerId` (a hosted link names one customer), an invoice of
     * another customer is not found either.
     */
    const render = Effect.fn("InvoicePdfs.render")(function*(organizationId: OrganizationId, id: string, customerId?: string) {
        const invoice = yield* invoices.get(organizationId, id)
        if (customerId !== undefined && invoice.customerId !== customerId) {
          return yield* new InvoiceNotFound({ message: `Invoice ${id} not found` })
        }
        // An invoice's organisation and customer are never deleted (customers are archived): their absence is a defect.
        const organization = yield* Effect.orDie(organizations.get(organizationId))
        const customer = yield* Effect.orDie(customers.get(organizationId, CustomerId.make(invoice.customerId)))
        // The plan snapshot prices the unit lines that carry no unit price, as on the hosted page.
        const components = invoice.purchaseId === null ? [] : yield* purchases.get(organizationId, invoice.purchaseId as PurchaseId).pipe(
          Effect.map((purchase) => purchase.snapshot.components),
          Effect.orDie
        )
        const bytes = yield* invoicePdf(invoicePdfViewOf(invoice, organization, customer, components))
        return { invoice, fileName: invoicePdfFileName(invoice), bytes } satisfies RenderedInvoicePdf
      })

    return { render } as const
  })
}) {}
