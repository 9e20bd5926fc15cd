import type { Command } from "commander"
import { writeFile } from "node:fs/promises"
import { resolve } from "node:path"
import { listFooter, newestFirstPage, nextCursorOf, withOldest, limitOption } from "../lists.ts"
import { BigDecimal, Effect } from "effect"
import { PayLink, UpcomingInvoice } from "../../src/billing/InvoicesApi.ts"
import { Purchases } from "../../src/billing/Purchases.ts"
import { withCustomer } from "../customerRef.ts"
import { CreditNote, CreditNoteCreate } from "../../src/billing/CreditNote.ts"
import { CreditNoteCreated, Invoice, Payment, PaymentCreate } from "../../src/billing/Invoice.ts"
import { Invoices } from "../../src/billing/Invoices.ts"
import { InvoicePdfs } from "../../src/billing/InvoicePdfs.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { toPage } from "../../src/http/Pagination.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { linkOrigin } from "../linkOrigin.ts"
import { Box, Text } from "../ui/ink.ts"
import { UrlLine } from "../ui/Url.tsx"
import { BillingCommandServices } from "../commandServices.ts"
import type { OrganizationId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

const invoiceJson = encode(Invoice)
const paymentJson = encode(Payment)
const creditNoteJson = encode(CreditNote)

const periodText = (start: Date, end: Date) => `${start.toISOString()} to ${end.toISOString()}`

/** A line's own period when it is not the invoice's: a late line of an earlier cycle. */
const linePeriod = (invoice: Invoice, line: Invoice["lines"][number]) =>
  line.periodStart === null || line.periodEnd === null ||
    (line.periodStart.getTime() === invoice.periodStart?.getTime() && line.periodEnd.getTime() === invoice.periodEnd?.getTime())
    ? ""
    : ` (period ${periodText(line.periodStart, line.periodEnd)})`

/** When the invoice is due, and whether it is overdue (or was, when paid late). */
const dueText = (invoice: Invoice) =>
  invoice.dueDate === null
    ? invoice.status === "DRAFT" ? "(none while DRAFT: due dates are given when final)" : "(none: not issued yet)"
    : `${invoice.dueDate.toISOString()}${
      invoice.overdue
        ? ` (OVERDUE since ${invoice.overdueAt!.toISOString()})`
        : invoice.overdueAt !== null
        ? ` (was overdue from ${invoice.overdueAt.toISOString()})`
        : ""
    }`

/** A credit note in a line: its amount taken off, where it went, when, why. */
const creditNoteText = (note: CreditNote, currency: string) =>
  `-${BigDecimal.format(note.amount)} ${currency} ${note.appliedTo === "WALLET" ? "to the wallet" : "off the amount due"}, ${
    note.createdAt.toISOString()
  }${note.lines.length === 0 ? "" : ` (line${note.lines.length === 1 ? "" : "s"} ${note.lines.map((line) => line.line).join(", ")})`}: ${note.reason}`

const InvoiceView = (props: { readonly invoice: Invoice; readonly title: string }) => (
  <Details
    title={props.title}
    fields={[
      ["number", props.invoice.number ?? (props.invoice.status === "DRAFT" ? "(none while DRAFT: numbered when final)" : "(none: not issued yet)")],
      ["id", props.invoice.id],
      ["customer", props.invoice.customerId],
      ["kind", props.invoice.kind],
      ["status", props.invoice.status],
      ...(props.invoice.periodStart === null || props.invoice.periodEnd === null
        ? []
        : [["period", periodText(props.invoice.periodStart, props.invoice.periodEnd)] as const]),
      ...props.invoice.lines.map((line, i) => [`line ${i + 1}`, `${line.description}: ${BigDecimal.format(line.amount)}${linePeriod(props.invoice, line)}`] as const),
      ...props.invoice.taxLines.map((tax) => [`tax ${tax.name}`, `${BigDecimal.format(tax.ratePercent)}%: ${BigDecimal.format(tax.amount)}`] as const),
      ["total", `${BigDecimal.format(props.invoice.total)} ${props.invoice.currencyCode}`],
      ...props.invoice.creditNotes.map((note) => [`credit note ${note.number}`, creditNoteText(note, props.invoice.currencyCode)] as const),
      ["amount due", `${BigDecimal.format(props.invoice.amountDue)} ${props.invoice.currencyCode}`],
      ["due", dueText(props.invoice)]
    ]}
  />
)

const presentInvoice = (title: string) => ({
  json: (invoice: Invoice) => ({ invoice: invoiceJson(invoice) }),
  view: (invoice: Invoice) => <InvoiceView invoice={invoice} title={title} />
})

interface ListOptions {
  readonly json?: boolean
  readonly org?: string
  readonly customer?: string
  readonly limit?: number
  readonly cursor?: string
}

/** `--line N[=USD]`, once a line, collected in order. */
const collectLine = (line: string, lines: Array<string> | undefined) => [...(lines ?? []), line]

/** `--line 2` or `--line 2=5.50` as a credit note's line: its place, and the amount (text, taken exactly) when given. */
const lineOfFlag = (flag: string) => {
  const [place, amount] = flag.split("=", 2)
  const line = /^\d+$/.test(place!.trim()) ? Number(place!.trim()) : place
  return amount === undefined ? { line } : { line, amount: amount.trim() }
}

const withListOptions = (command: Command) =>
  withOrg(command)
    .option("--customer <id>", "only this customer's")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")

const withInvoices = <A, E>(options: { readonly org?: string }, f: (invoices: Invoices, organizationId: OrganizationId) => Effect.Effect<A, E>) =>
  Effect.flatMap(organizationOf(options), (organizationId) => Effect.flatMap(Invoices, (invoices) => f(invoices, organizationId)))

export const registerInvoice = (program: Command) => {
  const invoice = program.command("invoice").description("invoices")

  withOldest(withListOptions(invoice.command("list").description("list invoices, newest first"))).action((options: ListOptions & { oldest?: boolean }) =>
    run(options, withInvoices(options, (invoices, org) => invoices.list(org, { customerId: options.customer, page: newestFirstPage(options) })), {
      json: (list) => ({ invoices: list.map(invoiceJson), nextCursor: nextCursorOf(list, options) }),
      view: (list) => (
        <Table
          columns={[
            { header: "NUMBER", value: (i) => i.number ?? "-" },
            { header: "ID", value: (i) => i.id },
            { header: "CUSTOMER", value: (i) => i.customerId },
            { header: "KIND", value: (i) => i.kind },
            { header: "STATUS", value: (i) => i.status },
            { header: "TOTAL", value: (i) => BigDecimal.format(i.total), align: "right" },
            { header: "DUE", value: (i) => `${i.dueDate?.toISOString().slice(0, 10) ?? "-"}${i.overdue ? " overdue" : ""}` }
          ]}
          rows={list}
          footer={listFooter(`${list.length} invoice(s)`, list, options)}
        />
      )
    }))

  withCustomer(
    invoice.command("upcoming").description("what the cycle job would issue at the current cycle's end (never stored)")
  ).action((id: string | undefined, options: { json?: boolean; org?: string; externalId?: string }) =>
    run(
      options,
      Effect.gen(function*() {
        const organizationId = yield* organizationOf(options)
        const ref = id !== undefined ? { customerId: id } : { externalId: options.externalId ?? "" }
        return yield* Effect.flatMap(Purchases, (purchases) => purchases.upcoming(organizationId, ref))
      }),
      {
        json: (list) => ({ invoices: list.map(encode(UpcomingInvoice)) }),
        view: (list) => (
          <Box flexDirection="column">
            {list.length === 0 ? <Text>No upcoming invoice: the customer has no live purchase.</Text> : null}
            {list.map((upcoming, i) => (
              <InvoiceView key={i} invoice={{ ...upcoming, id: "(upcoming)" }} title={`Upcoming ${upcoming.kind} invoice`} />
            ))}
          </Box>
        )
      }
    ))

  withOrg(invoice.command("show").description("show an invoice").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(options, withInvoices(options, (invoices, org) => invoices.get(org, id)), presentInvoice("Invoice")))

  withOrg(invoice.command("pdf").description("write an invoice as a PDF file (as GET /invoices/{id}/pdf)").argument("<id>"))
    .requiredOption("--out <file>", "the file to write, e.g. INV-000042.pdf (replaced if it exists)")
    .action((id: string, options: { json?: boolean; org?: string; out: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const pdf = yield* Effect.flatMap(InvoicePdfs, (pdfs) => pdfs.render(organizationId, id))
          const file = resolve(options.out)
          yield* Effect.tryPromise({
            try: () => writeFile(file, pdf.bytes),
            catch: (error) => new BadRequest({ message: `cannot write ${options.out}: ${(error as Error).message}` })
          })
          return { invoice: pdf.invoice, file, bytes: pdf.bytes.byteLength }
        }),
        {
          json: (written) => ({
            invoiceId: written.invoice.id,
            number: written.invoice.number,
            status: written.invoice.status,
            file: written.file,
            bytes: written.bytes
          }),
          view: (written) => (
            <Box flexDirection="column">
              <Text bold>Invoice {written.invoice.number ?? `${written.invoice.id} (DRAFT: no number yet)`} written as a PDF</Text>
              <Text>file   {written.file}</Text>
              <Text>size   {written.bytes} bytes</Text>
              <Text>status {written.invoice.status}, total {BigDecimal.format(written.invoice.total)} {written.invoice.currencyCode}</Text>
            </Box>
          )
        }
      ))

  withOrg(invoice.command("pay").description("record a payment received for an OPEN invoice (all that is due)").argument("<id>"))
    .option("--reference <text>", "the payment's reference (bank transfer id, ...)")
    .option("--idempotency-key <key>", "makes a retry safe: the same key and request records nothing again")
    .action((id: string, options: { json?: boolean; org?: string; reference?: string; idempotencyKey?: string }) =>
      run(
        options,
        withInvoices(options, (invoices, org) =>
          Effect.flatMap(
            decodeInput(PaymentCreate, {
              ...(options.reference !== undefined ? { reference: options.reference } : {}),
              ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {})
            }),
            (input) => invoices.pay(org, id, input)
          )),
        {
          json: (paid) => ({ invoice: invoiceJson(paid.invoice), payment: paymentJson(paid.payment), replayed: paid.replayed }),
          view: (paid) => (
            <InvoiceView
              invoice={paid.invoice}
              title={paid.replayed ? `Already paid by ${paid.payment.id} (same idempotency key): nothing recorded again` : `Invoice paid (${paid.payment.id})`}
            />
          )
        }
      ))

  withOrg(
    invoice.command("credit").description(
      "credit an OPEN or PAID invoice with a credit note: an amount of its total, or named lines (with their tax)"
    ).argument("<id>")
  )
    .option("--amount <usd>", "credit this much of the invoice's total, taxes included (at most 2 decimals)")
    .option(
      "--line <n[=usd]>",
      "credit line n (as `invoice show` numbers them), all that remains of it or usd of it; repeat for more lines",
      collectLine
    )
    .requiredOption("--reason <text>", "why the invoice is credited (printed on its pages and PDF)")
    .option("--idempotency-key <key>", "makes a retry safe: the same key and request creates nothing again")
    .action((id: string, options: { json?: boolean; org?: string; amount?: string; line?: Array<string>; reason: string; idempotencyKey?: string }) =>
      run(
        options,
        withInvoices(options, (invoices, org) =>
          Effect.flatMap(
            decodeInput(CreditNoteCreate, {
              ...(options.amount !== undefined ? { amount: options.amount } : {}),
              ...(options.line !== undefined ? { lines: options.line.map(lineOfFlag) } : {}),
              reason: options.reason,
              ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {})
            }),
            (input) => invoices.credit(org, id, input)
          )),
        {
          json: encode(CreditNoteCreated),
          view: (created) => (
            <InvoiceView
              invoice={created.invoice}
              title={created.replayed
                ? `Already credited by ${created.creditNote.number} (same idempotency key): nothing created again`
                : `Credit note ${created.creditNote.number} created`}
            />
          )
        }
      ))

  withOrg(invoice.command("credit-notes").description("list an invoice's credit notes, oldest first").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(options, withInvoices(options, (invoices, org) => invoices.get(org, id)), {
        json: (found) => ({ creditNotes: found.creditNotes.map(creditNoteJson) }),
        view: (found) => (
          <Table
            columns={[
              { header: "NUMBER", value: (n) => n.number },
              { header: "CREATED", value: (n) => n.createdAt.toISOString() },
              { header: "AMOUNT", value: (n) => BigDecimal.format(n.amount), align: "right" },
              { header: "APPLIED TO", value: (n) => n.appliedTo },
              { header: "REASON", value: (n) => n.reason }
            ]}
            rows={found.creditNotes}
            footer={`${found.creditNotes.length} credit note(s) of ${found.number ?? found.id}; amount due ${
              BigDecimal.format(found.amountDue)
            } ${found.currencyCode}`}
          />
        )
      }))

  withOrg(invoice.command("void").description("void an OPEN invoice (a DRAFT cannot be voided until it is final)").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(options, withInvoices(options, (invoices, org) => invoices.voidInvoice(org, id)), presentInvoice("Invoice voided")))

  withOrg(invoice.command("pay-link").description("mint a hosted pay link for an OPEN invoice").argument("<id>"))
    .option("--base-url <url>", "the origin of the link (default: $BILLING_PUBLIC_URL, else the running billing serve's address)")
    .action((id: string, options: { json?: boolean; org?: string; baseUrl?: string }) =>
      run(options, withInvoices(options, (invoices, org) => Effect.flatMap(linkOrigin(options.baseUrl), (origin) => invoices.payLink(org, id, origin))), {
        json: encode(PayLink),
        view: (link) => (
          <Box flexDirection="column">
            <Text bold>Hosted invoice page of {link.invoiceId}</Text>
            <UrlLine label="url    " url={link.url} />
            <UrlLine label="expires" url={link.expiresAt.toISOString()} />
          </Box>
        )
      }))

  const payment = program.command("payment").description("payments")

  withListOptions(payment.command("list").description("list payments")).action((options: ListOptions) =>
    run(options, withInvoices(options, (invoices, org) => invoices.listPayments(org, { customerId: options.customer, page: toPage(options) })), {
      json: (list) => ({ payments: list.map(paymentJson), nextCursor: nextCursorOf(list, options) }),
      view: (list) => (
        <Table
          columns={[
            { header: "ID", value: (p) => p.id },
            { header: "INVOICE", value: (p) => p.invoiceId },
            { header: "METHOD", value: (p) => p.method },
            { header: "AMOUNT", value: (p) => BigDecimal.format(p.amount), align: "right" }
          ]}
          rows={list}
          footer={listFooter(`${list.length} payment(s)`, list, options)}
        />
      )
    }))

  withOrg(payment.command("show").description("show a payment").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(options, withInvoices(options, (invoices, org) => invoices.getPayment(org, id)), {
        json: (p) => ({ payment: paymentJson(p) }),
        view: (p) => (
          <Details
            title="Payment"
            fields={[["id", p.id], ["invoice", p.invoiceId], ["method", p.method], ["amount", BigDecimal.format(p.amount)]]}
          />
        )
      }))
}
