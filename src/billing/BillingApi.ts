import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { BigDecimal, Schema } from "effect"
import { byExternalId, CustomerIdPath, customerNotFound, ExternalIdPath } from "../customers/CustomersApi.ts"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { ActiveParam, PageParams } from "../http/Pagination.ts"
import { ExternalId, Money, MoneyInput, strict, Timestamp } from "../schema.ts"
import { AdjustResult, FractionAdjust, WalletAdjust, WholeAdjust } from "./Adjustments.ts"
import { CurrentPlan, CustomerBalances } from "./Balances.ts"
import { Invoice, Payment, PaymentCreate, PaymentRecorded } from "./Invoices.ts"
import { PurchaseChange, PurchaseCreate, PurchaseJson, PurchaseUpdate } from "./Purchase.ts"
import { Tax, TaxCreate, TaxUpdate } from "./Taxes.ts"
import { LedgerEntry } from "./Wallets.ts"
import { CustomerId, PurchaseId } from "../ids.ts"

const PurchaseIdPath = Schema.Struct({
  id: PurchaseId.annotations({ description: "The record's id, as returned on create." })
})

const CustomerFilter = Schema.Struct({
  ...PageParams,
  customerId: Schema.optional(CustomerId).annotations({
    description: "Keeps the rows of this customer (the service's customer id); all customers' rows by default."
  })
})

const archivedCustomer = "The customer is archived: archived customers are read-only."

/** Documents a customer route and its `/customers/ext/{externalId}` twin from one text. */
const customerRoute = (doc: { summary: string; description: string; errors?: Record<number, string> }) => ({
  byId: documented({ ...doc, errors: { 404: customerNotFound.byId, ...doc.errors } }),
  byExternalId: byExternalId(doc)
})

const balancesDoc = customerRoute({
  summary: "Read a customer's balances",
  description: "What the customer holds now: the ordinary Wallet's USD balance (always present), the Reserved " +
    "Wallet's (only where the workspace enabled it), and for each credit, outcome, unit and composite of the " +
    "current plan what was granted, used and remains. Without a plan (`hasPlan` false) the collections are empty."
})

const planDoc = customerRoute({
  summary: "Read a customer's current plan",
  description: "The customer's SCHEDULED or ACTIVE purchase as a plan summary (cost, status, billing date, spending " +
    "limit, which meters it has), or `plan: null` when there is none."
})

const alertDoc = customerRoute({
  summary: "Set a customer's low-balance alert",
  description: "The USD level of the ordinary Wallet below which `wallet.balance.drop` is sent: the event fires when " +
    "a charge takes the balance from above the level to at or below it. `threshold: null` removes the level, and " +
    "each webhook endpoint's own threshold applies again.",
  errors: { 409: archivedCustomer }
})

const grantDoc = customerRoute({
  summary: "Set a customer's recurring wallet grant",
  description: "A USD amount added to the customer's ordinary Wallet at the start of every billing cycle of its " +
    "purchase; 0 removes the grant. Only `kind: wallet` exists.",
  errors: { 409: archivedCustomer }
})

const adjustErrors = {
  404: customerNotFound.byId,
  409: archivedCustomer,
  422: "The customer has no active plan, the `agentKey` names nothing the plan sells prepaid (ADVANCE), or the " +
    "`idempotencyKey` was used before with a different request. Nothing is adjusted."
}

const adjustDoc = (what: string, key: string) =>
  customerRoute({
    summary: `Adjust a customer's ${what} balance`,
    description: `Grants (positive \`delta\`) or claws back (negative) the customer's prepaid balance of one ${what}` +
      `, named by ${key}, in the current billing cycle; the balance is floored at zero. With an \`idempotencyKey\` ` +
      "a repeat of the same request adjusts nothing and answers `replayed: true`; without one a repeat adjusts again.",
    errors: adjustErrors
  })

const creditAdjust = adjustDoc("credit", "the credit's `agentKey`")
const outcomeAdjust = adjustDoc("outcome", "an outcome step's `agentKey` (not the outcome's own key)")
const unitAdjust = adjustDoc("unit", "the unit's `agentKey`; `delta` may be a fraction")
const compositeAdjust = adjustDoc("composite", "the composite's `refId`")
const walletAdjust = customerRoute({
  summary: "Adjust a customer's wallet balance",
  description: "Credits (positive `delta`) or debits (negative) the customer's ordinary Wallet in USD, or its " +
    "Reserved Wallet with `wallet: RESERVED`. The ordinary Wallet may go negative and each change sends " +
    "`wallet.balance.update`; the Reserved Wallet is floored at zero and sends no event. With an `idempotencyKey` " +
    "a repeat of the same request adjusts nothing and answers `replayed: true`.",
  errors: {
    404: customerNotFound.byId,
    409: archivedCustomer,
    422: "The Reserved Wallet is not enabled in the workspace, or the `idempotencyKey` was used before with a " +
      "different request. Nothing is adjusted."
  }
})

const PurchaseResult = Schema.Struct({ purchase: PurchaseJson })

const ChangeResult = Schema.Struct({
  changed: Schema.Literal(true),
  replayed: Schema.Boolean.annotations({ description: "True when this answers a repeat of an `idempotencyKey`." }),
  purchase: PurchaseJson,
  invoice: Schema.NullOr(Invoice).annotations({
    description: "The PRORATION invoice a change NOW of an ACTIVE purchase issued; null otherwise."
  })
})

/** An invoice the cycle job would issue, computed and never stored: it has no id yet. */
export const UpcomingInvoice = Schema.Struct({
  ...Invoice.fields,
  id: Schema.Null.annotations({ description: "Always null: the invoice is not issued yet." }),
  number: Schema.Null.annotations({ description: "Always null: a number is given when an invoice is issued final." })
})

const UpcomingParams = Schema.Struct({
  customerId: Schema.optional(CustomerId).annotations({
    description: "The service's customer id. Required unless `externalId` is sent; wins when both are."
  }),
  externalId: Schema.optional(ExternalId).annotations({
    description: "Your own id of an active customer, used when `customerId` is not sent."
  })
})

export class PurchasesApi extends HttpApiGroup.make("purchases")
  .add(
    HttpApiEndpoint.post("create", "/purchases")
      .setPayload(PurchaseCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), purchase: PurchaseJson }), {
          status: 201,
          message: "Purchase created"
        })
      )
      .annotateContext(documented({
        summary: "Put a customer on a plan",
        description: "Buys an active plan for a customer named by `customerId` or `externalId` (`customerId` wins " +
          "when both are sent). The plan is copied as it is now: later plan changes do not reach this purchase. " +
          "Without a `billingDate` (or with today's) the cycle starts now and prepaid components are charged at " +
          "once; a future `billingDate` schedules it.",
        errors: {
          400: "The body fails its schema (the message names the field), neither `customerId` nor `externalId` is " +
            "sent, the plan is unknown or archived, or `billingDate` is in the past.",
          404: "No customer with this id, or no active customer with this `externalId`.",
          409: "The customer is archived, or already has a SCHEDULED or ACTIVE purchase (cancel it first)."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/purchases")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ purchases: Schema.Array(PurchaseJson) }), { message: "Purchases" }))
      .annotateContext(documented({
        summary: "List purchases",
        description: "A page of the workspace's purchases in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/purchases/:id")
      .setPath(PurchaseIdPath)
      .addSuccess(Success(PurchaseResult, { message: "Purchase" }))
      .annotateContext(documented({
        summary: "Get a purchase",
        description: "One purchase: its plan snapshot, status, billing date and current period.",
        errors: { 404: "No purchase with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/purchases/:id")
      .setPath(PurchaseIdPath)
      .setPayload(PurchaseUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), purchase: PurchaseJson }), { message: "Purchase updated" })
      )
      .annotateContext(documented({
        summary: "Update a purchase's auto-payment setting",
        description: "Turns automatic payment of the purchase's invoices on or off.",
        errors: { 404: "No purchase with this id in the workspace.", 409: "The purchase is cancelled." }
      }))
  )
  .add(
    HttpApiEndpoint.post("cancel", "/purchases/:id/cancel")
      .setPath(PurchaseIdPath)
      .addSuccess(
        Success(Schema.Struct({ cancelled: Schema.Literal(true), purchase: PurchaseJson }), {
          message: "Purchase cancelled"
        })
      )
      .annotateContext(documented({
        summary: "Cancel a purchase",
        description: "Ends the purchase now: nothing more is billed on it and the customer has no plan until a new " +
          "purchase. What was already charged stays charged.",
        errors: { 404: "No purchase with this id in the workspace.", 409: "The purchase is already cancelled." }
      }))
  )
  .add(
    HttpApiEndpoint.post("change", "/purchases/:id/change")
      .setPath(PurchaseIdPath)
      .setPayload(PurchaseChange)
      .addSuccess(
        Success(ChangeResult, {
          message: (result) =>
            result.replayed
              ? "Already processed: this idempotencyKey was used before; nothing was changed again"
              : result.purchase.scheduledChange !== null && result.invoice === null
              ? "Plan change scheduled"
              : "Plan changed"
        })
      )
      .annotateContext(documented({
        summary: "Change a purchase's plan",
        description: "Moves a purchase to another active plan; the billing anchor stays. `when: NOW` changes it at " +
          "once: the unused share of the old plan's price is credited and the new plan's price charged for the rest " +
          "of the cycle, both prorated to the second and rounded to the cent, on one `PRORATION` invoice that also " +
          "bills the old plan's usage in arrears so far (returned as `invoice`; a net credit goes to the wallet). " +
          "Prepaid balances move by the share of the cycle left. `when: CYCLE_END` schedules the change " +
          "(`purchase.scheduledChange`): the cycle job applies it at the renewal, without proration. The new plan is " +
          "copied as it is at the request. With an `idempotencyKey` a repeat changes nothing and answers the first " +
          "change (`replayed: true`).",
        errors: {
          400: "The body fails its schema (the message names the field), or the plan is unknown or archived.",
          404: "No purchase with this id in the workspace.",
          409: "The purchase is cancelled, or its customer is archived.",
          422: "The `idempotencyKey` was used before with a different request. Nothing is changed."
        }
      }))
  )
  .add(
    HttpApiEndpoint.del("removeScheduledChange", "/purchases/:id/scheduled-change")
      .setPath(PurchaseIdPath)
      .addSuccess(
        Success(Schema.Struct({ removed: Schema.Literal(true), purchase: PurchaseJson }), {
          message: "Scheduled plan change removed"
        })
      )
      .annotateContext(documented({
        summary: "Remove a purchase's scheduled plan change",
        description: "Drops the change waiting for the cycle end (`when: CYCLE_END`): the purchase renews on its " +
          "current plan.",
        errors: {
          404: "No purchase with this id in the workspace, or it has no scheduled plan change.",
          409: "The purchase is cancelled, or its customer is archived."
        }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Purchases: a customer's purchase of a plan, which starts its billing cycle and charges prepaid components; " +
      "plan changes, prorated now or scheduled for the cycle end."
  )
{}

const NonNegative = MoneyInput.pipe(
  Schema.filter((value) => !BigDecimal.isNegative(value) || "must be 0 or more", {
    jsonSchema: { type: "number", minimum: 0, description: "USD, 0 or more; fractions allowed." }
  })
)

export const WalletAlertBody = Schema.Struct({
  threshold: Schema.NullOr(NonNegative).annotations({
    description: "The alert level in USD, 0 or more (fractions allowed), or null to remove it."
  })
}).annotations(strict)

export const RecurringGrantBody = Schema.Struct({
  kind: Schema.Literal("wallet").annotations({ description: "What is granted: `wallet`, the only kind." }),
  quantity: NonNegative.annotations({ description: "USD added each cycle, 0 or more; 0 removes the grant." })
}).annotations(strict)

const AlertResult = Schema.Struct({ lowBalanceAlertUsd: Schema.NullOr(Money) })
const RecurringGrantResult = Schema.Struct({
  customerId: Schema.String,
  recurringGrant: Schema.Struct({ kind: Schema.Literal("wallet"), quantity: Money })
})

export const WalletLedger = Schema.Struct({
  customerId: Schema.String,
  balance: Money,
  lowBalanceAlertUsd: Schema.NullOr(Money),
  entries: Schema.Array(LedgerEntry)
})

const adjustSuccess = Success(AdjustResult, {
  message: (result) =>
    result.replayed ? "Already processed: this idempotencyKey was used before; nothing was adjusted again" : "Balance adjusted"
})

export class BalancesApi extends HttpApiGroup.make("balances")
  .add(
    HttpApiEndpoint.get("balances", "/customers/:id/balances")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CustomerBalances, { message: "Customer balances" }))
      .annotateContext(balancesDoc.byId)
  )
  .add(
    HttpApiEndpoint.get("balancesByExternalId", "/customers/ext/:externalId/balances")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CustomerBalances, { message: "Customer balances" }))
      .annotateContext(balancesDoc.byExternalId)
  )
  .add(
    HttpApiEndpoint.get("plan", "/customers/:id/plan")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CurrentPlan, { message: "Current plan" }))
      .annotateContext(planDoc.byId)
  )
  .add(
    HttpApiEndpoint.get("planByExternalId", "/customers/ext/:externalId/plan")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CurrentPlan, { message: "Current plan" }))
      .annotateContext(planDoc.byExternalId)
  )
  .add(
    HttpApiEndpoint.put("walletAlert", "/customers/:id/wallet/alert")
      .setPath(CustomerIdPath)
      .setPayload(WalletAlertBody)
      .addSuccess(Success(AlertResult, { message: "Low balance alert set." }))
      .annotateContext(alertDoc.byId)
  )
  .add(
    HttpApiEndpoint.put("walletAlertByExternalId", "/customers/ext/:externalId/wallet/alert")
      .setPath(ExternalIdPath)
      .setPayload(WalletAlertBody)
      .addSuccess(Success(AlertResult, { message: "Low balance alert set." }))
      .annotateContext(alertDoc.byExternalId)
  )
  .add(
    HttpApiEndpoint.get("walletLedger", "/customers/:id/wallet/ledger")
      .setPath(CustomerIdPath)
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Success(WalletLedger, { message: "Wallet ledger" }))
      .annotateContext(documented({
        summary: "Read a customer's wallet ledger",
        description: "The ordinary Wallet's balance, its low-balance alert level and a page of its ledger entries " +
          "in creation order: every credit and debit, usage charges carrying their `usageLogId`. By the service's " +
          "customer id only.",
        errors: { 404: customerNotFound.byId }
      }))
  )
  .add(
    HttpApiEndpoint.put("recurringGrant", "/customers/:id/recurring-grant")
      .setPath(CustomerIdPath)
      .setPayload(RecurringGrantBody)
      .addSuccess(Success(RecurringGrantResult, { message: "Recurring grant set." }))
      .annotateContext(grantDoc.byId)
  )
  .add(
    HttpApiEndpoint.put("recurringGrantByExternalId", "/customers/ext/:externalId/recurring-grant")
      .setPath(ExternalIdPath)
      .setPayload(RecurringGrantBody)
      .addSuccess(Success(RecurringGrantResult, { message: "Recurring grant set." }))
      .annotateContext(grantDoc.byExternalId)
  )
  .add(
    HttpApiEndpoint.post("adjustCredits", "/customers/:id/credits/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(creditAdjust.byId)
  )
  .add(
    HttpApiEndpoint.post("adjustOutcomes", "/customers/:id/outcomes/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(outcomeAdjust.byId)
  )
  .add(
    HttpApiEndpoint.post("adjustUnits", "/customers/:id/units/adjust")
      .setPath(CustomerIdPath)
      .setPayload(FractionAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(unitAdjust.byId)
  )
  .add(
    HttpApiEndpoint.post("adjustComposites", "/customers/:id/composites/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(compositeAdjust.byId)
  )
  .add(
    HttpApiEndpoint.post("adjustWallet", "/customers/:id/wallet/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WalletAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(walletAdjust.byId)
  )
  .add(
    HttpApiEndpoint.post("adjustCreditsByExternalId", "/customers/ext/:externalId/credits/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(creditAdjust.byExternalId)
  )
  .add(
    HttpApiEndpoint.post("adjustOutcomesByExternalId", "/customers/ext/:externalId/outcomes/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(outcomeAdjust.byExternalId)
  )
  .add(
    HttpApiEndpoint.post("adjustUnitsByExternalId", "/customers/ext/:externalId/units/adjust")
      .setPath(ExternalIdPath)
      .setPayload(FractionAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(unitAdjust.byExternalId)
  )
  .add(
    HttpApiEndpoint.post("adjustCompositesByExternalId", "/customers/ext/:externalId/composites/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(compositeAdjust.byExternalId)
  )
  .add(
    HttpApiEndpoint.post("adjustWalletByExternalId", "/customers/ext/:externalId/wallet/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WalletAdjust)
      .addSuccess(adjustSuccess)
      .annotateContext(walletAdjust.byExternalId)
  )
  .annotate(
    OpenApi.Description,
    "Balances: what a customer holds (wallets, credits, outcomes, units, composites), its current plan, its " +
      "wallet settings and ledger, and manual adjustments of its prepaid balances."
  )
{}

export const PayLink = Schema.Struct({ invoiceId: Schema.String, url: Schema.String, expiresAt: Timestamp })

export class InvoicesApi extends HttpApiGroup.make("invoices")
  .add(
    HttpApiEndpoint.get("upcoming", "/invoices/upcoming")
      .setUrlParams(UpcomingParams)
      .addSuccess(Success(Schema.Struct({ invoices: Schema.Array(UpcomingInvoice) }), { message: "Upcoming invoices" }))
      .annotateContext(documented({
        summary: "Preview a customer's upcoming invoices",
        description: "What the cycle job would issue at the end of the current cycle if no more usage arrived, " +
          "computed by the cycle job's own code and never stored (`id` and `number` null): the ending cycle's USAGE " +
          "invoice (when it bills anything) and the next cycle's PLAN invoice, a scheduled plan change applied, with " +
          "the active taxes and the auto-payment the wallet would make now. A SCHEDULED purchase: its first PLAN " +
          "invoice. No live purchase: an empty list.",
        errors: {
          400: "Neither `customerId` nor `externalId` is sent, or the `externalId` is malformed.",
          404: "No customer with this id, or no active customer with this `externalId`."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/invoices")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ invoices: Schema.Array(Invoice) }), { message: "Invoices" }))
      .annotateContext(documented({
        summary: "List invoices",
        description: "A page of the workspace's invoices in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/invoices/:id")
      .setPath(PurchaseIdPath)
      .addSuccess(Success(Schema.Struct({ invoice: Invoice }), { message: "Invoice" }))
      .annotateContext(documented({
        summary: "Get an invoice",
        description: "One invoice with its lines, taxes and totals.",
        errors: { 404: "No invoice with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("payLink", "/invoices/:id/pay-link")
      .setPath(PurchaseIdPath)
      .addSuccess(Success(PayLink, { message: "Pay link created" }))
      .annotateContext(documented({
        summary: "Mint a hosted pay link for an invoice",
        description: "A short-lived URL of the invoice's hosted payment page, for an OPEN invoice only.",
        errors: {
          404: "No invoice with this id in the workspace.",
          409: "The invoice is not OPEN: a DRAFT (inside its grace period) is never payable, PAID and VOID owe nothing."
        }
      }))
  )
  .add(
    HttpApiEndpoint.post("recordPayment", "/invoices/:id/payments")
      .setPath(PurchaseIdPath)
      .setPayload(PaymentCreate)
      .addSuccess(
        Success(PaymentRecorded, {
          status: 201,
          message: (result) =>
            result.replayed
              ? "Already processed: this idempotencyKey was used before; nothing was recorded again"
              : "Payment recorded"
        })
      )
      .annotateContext(documented({
        summary: "Record a payment of an invoice",
        description: "Records a payment received outside the service (a bank transfer, a cheque) for an OPEN " +
          "invoice: the whole `total`, method `MANUAL`, with an optional `reference`; the invoice becomes PAID. " +
          "The same rules as `billing invoice pay`. Send an `idempotencyKey` to make a retry safe: a repeat of the " +
          "same request (same invoice, same reference) records nothing and answers the first payment again with " +
          "`replayed: true`, even though the invoice is PAID by then.",
        errors: {
          404: "No invoice with this id in the workspace.",
          409: "The invoice is not OPEN: a DRAFT (inside its grace period) is never payable, PAID and VOID owe nothing.",
          422: "The `idempotencyKey` was used before with a different request (another invoice or reference). " +
            "Nothing is recorded."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("listPayments", "/payments")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ payments: Schema.Array(Payment) }), { message: "Payments" }))
      .annotateContext(documented({
        summary: "List payments",
        description: "A page of the workspace's payments in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("getPayment", "/payments/:id")
      .setPath(PurchaseIdPath)
      .addSuccess(Success(Schema.Struct({ payment: Payment }), { message: "Payment" }))
      .annotateContext(documented({
        summary: "Get a payment",
        description: "One payment and the invoice it paid.",
        errors: { 404: "No payment with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.get("listTaxes", "/taxes")
      .setUrlParams(Schema.Struct({ ...PageParams, ...ActiveParam }))
      .addSuccess(Success(Schema.Struct({ taxes: Schema.Array(Tax) }), { message: "Taxes" }))
      .annotateContext(documented({
        summary: "List taxes",
        description: "The workspace's taxes, oldest first, archived ones included; `active=true` keeps the taxes " +
          "that apply to new invoices."
      }))
  )
  .add(
    HttpApiEndpoint.post("createTax", "/taxes")
      .setPayload(TaxCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), tax: Tax }), { status: 201, message: "Tax created" })
      )
      .annotateContext(documented({
        summary: "Create a tax",
        description: "A tax rate applied to the invoices created from now on while it is active."
      }))
  )
  .add(
    HttpApiEndpoint.get("getTax", "/taxes/:id")
      .setPath(PurchaseIdPath)
      .addSuccess(Success(Schema.Struct({ tax: Tax }), { message: "Tax" }))
      .annotateContext(documented({
        summary: "Get a tax",
        description: "One tax by id, active or not.",
        errors: { 404: "No tax with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.patch("updateTax", "/taxes/:id")
      .setPath(PurchaseIdPath)
      .setPayload(TaxUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), tax: Tax }), { message: "Tax updated" }))
      .annotateContext(documented({
        summary: "Update a tax",
        description: "Changes the fields sent; invoices already created keep the tax they were created with.",
        errors: { 404: "No tax with this id in the workspace." }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Invoices, payments and taxes: the documents billing produces, hosted pay links, and the tax rates applied."
  )
{}
