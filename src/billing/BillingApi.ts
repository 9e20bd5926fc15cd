import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { BigDecimal, Schema } from "effect"
import { CustomerIdPath, ExternalIdPath } from "../customers/CustomersApi.ts"
import { Success } from "../http/Envelope.ts"
import { ActiveParam, PageParams } from "../http/Pagination.ts"
import { Money, MoneyInput, strict, Timestamp } from "../schema.ts"
import { AdjustResult, FractionAdjust, WalletAdjust, WholeAdjust } from "./Adjustments.ts"
import { CurrentPlan, CustomerBalances } from "./Balances.ts"
import { Invoice, Payment } from "./Invoices.ts"
import { PurchaseCreate, PurchaseJson, PurchaseUpdate } from "./Purchase.ts"
import { Tax, TaxCreate, TaxUpdate } from "./Taxes.ts"
import { LedgerEntry } from "./Wallets.ts"

const IdPath = Schema.Struct({ id: Schema.String })

const CustomerFilter = Schema.Struct({
  ...PageParams,
  customerId: Schema.optional(Schema.String)
})

const PurchaseResult = Schema.Struct({ purchase: PurchaseJson })

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
  )
  .add(
    HttpApiEndpoint.get("list", "/purchases")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ purchases: Schema.Array(PurchaseJson) }), { message: "Purchases" }))
  )
  .add(
    HttpApiEndpoint.get("get", "/purchases/:id")
      .setPath(IdPath)
      .addSuccess(Success(PurchaseResult, { message: "Purchase" }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/purchases/:id")
      .setPath(IdPath)
      .setPayload(PurchaseUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), purchase: PurchaseJson }), { message: "Purchase updated" })
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/purchases/:id/cancel")
      .setPath(IdPath)
      .addSuccess(
        Success(Schema.Struct({ cancelled: Schema.Literal(true), purchase: PurchaseJson }), {
          message: "Purchase cancelled"
        })
      )
  )
{}

const NonNegative = MoneyInput.pipe(
  Schema.filter((value) => !BigDecimal.isNegative(value) || "must be 0 or more")
)

export const WalletAlertBody = Schema.Struct({ threshold: Schema.NullOr(NonNegative) }).annotations(strict)

export const RecurringGrantBody = Schema.Struct({
  kind: Schema.Literal("wallet"),
  quantity: NonNegative
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
  )
  .add(
    HttpApiEndpoint.get("balancesByExternalId", "/customers/ext/:externalId/balances")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CustomerBalances, { message: "Customer balances" }))
  )
  .add(
    HttpApiEndpoint.get("plan", "/customers/:id/plan")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CurrentPlan, { message: "Current plan" }))
  )
  .add(
    HttpApiEndpoint.get("planByExternalId", "/customers/ext/:externalId/plan")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CurrentPlan, { message: "Current plan" }))
  )
  .add(
    HttpApiEndpoint.put("walletAlert", "/customers/:id/wallet/alert")
      .setPath(CustomerIdPath)
      .setPayload(WalletAlertBody)
      .addSuccess(Success(AlertResult, { message: "Low balance alert set." }))
  )
  .add(
    HttpApiEndpoint.put("walletAlertByExternalId", "/customers/ext/:externalId/wallet/alert")
      .setPath(ExternalIdPath)
      .setPayload(WalletAlertBody)
      .addSuccess(Success(AlertResult, { message: "Low balance alert set." }))
  )
  .add(
    HttpApiEndpoint.get("walletLedger", "/customers/:id/wallet/ledger")
      .setPath(CustomerIdPath)
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Success(WalletLedger, { message: "Wallet ledger" }))
  )
  .add(
    HttpApiEndpoint.put("recurringGrant", "/customers/:id/recurring-grant")
      .setPath(CustomerIdPath)
      .setPayload(RecurringGrantBody)
      .addSuccess(Success(RecurringGrantResult, { message: "Recurring grant set." }))
  )
  .add(
    HttpApiEndpoint.put("recurringGrantByExternalId", "/customers/ext/:externalId/recurring-grant")
      .setPath(ExternalIdPath)
      .setPayload(RecurringGrantBody)
      .addSuccess(Success(RecurringGrantResult, { message: "Recurring grant set." }))
  )
  .add(
    HttpApiEndpoint.post("adjustCredits", "/customers/:id/credits/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustOutcomes", "/customers/:id/outcomes/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustUnits", "/customers/:id/units/adjust")
      .setPath(CustomerIdPath)
      .setPayload(FractionAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustComposites", "/customers/:id/composites/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustWallet", "/customers/:id/wallet/adjust")
      .setPath(CustomerIdPath)
      .setPayload(WalletAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustCreditsByExternalId", "/customers/ext/:externalId/credits/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustOutcomesByExternalId", "/customers/ext/:externalId/outcomes/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustUnitsByExternalId", "/customers/ext/:externalId/units/adjust")
      .setPath(ExternalIdPath)
      .setPayload(FractionAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustCompositesByExternalId", "/customers/ext/:externalId/composites/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WholeAdjust)
      .addSuccess(adjustSuccess)
  )
  .add(
    HttpApiEndpoint.post("adjustWalletByExternalId", "/customers/ext/:externalId/wallet/adjust")
      .setPath(ExternalIdPath)
      .setPayload(WalletAdjust)
      .addSuccess(adjustSuccess)
  )
{}

export const PayLink = Schema.Struct({ invoiceId: Schema.String, url: Schema.String, expiresAt: Timestamp })

export class InvoicesApi extends HttpApiGroup.make("invoices")
  .add(
    HttpApiEndpoint.get("list", "/invoices")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ invoices: Schema.Array(Invoice) }), { message: "Invoices" }))
  )
  .add(
    HttpApiEndpoint.get("get", "/invoices/:id")
      .setPath(IdPath)
      .addSuccess(Success(Schema.Struct({ invoice: Invoice }), { message: "Invoice" }))
  )
  .add(
    HttpApiEndpoint.post("payLink", "/invoices/:id/pay-link")
      .setPath(IdPath)
      .addSuccess(Success(PayLink, { message: "Pay link created" }))
  )
  .add(
    HttpApiEndpoint.get("listPayments", "/payments")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ payments: Schema.Array(Payment) }), { message: "Payments" }))
  )
  .add(
    HttpApiEndpoint.get("getPayment", "/payments/:id")
      .setPath(IdPath)
      .addSuccess(Success(Schema.Struct({ payment: Payment }), { message: "Payment" }))
  )
  .add(
    HttpApiEndpoint.get("listTaxes", "/taxes")
      .setUrlParams(Schema.Struct({ ...PageParams, ...ActiveParam }))
      .addSuccess(Success(Schema.Struct({ taxes: Schema.Array(Tax) }), { message: "Taxes" }))
  )
  .add(
    HttpApiEndpoint.post("createTax", "/taxes")
      .setPayload(TaxCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), tax: Tax }), { status: 201, message: "Tax created" })
      )
  )
  .add(
    HttpApiEndpoint.get("getTax", "/taxes/:id")
      .setPath(IdPath)
      .addSuccess(Success(Schema.Struct({ tax: Tax }), { message: "Tax" }))
  )
  .add(
    HttpApiEndpoint.patch("updateTax", "/taxes/:id")
      .setPath(IdPath)
      .setPayload(TaxUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), tax: Tax }), { message: "Tax updated" }))
  )
{}
