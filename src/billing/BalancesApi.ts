/**
 * The balances group: what a customer holds and its current plan, its
 * wallet's alert level, recurring grant and ledger, and manual adjustments of
 * its prepaid balances; each customer route with its `/customers/ext/{externalId}`
 * twin. Handlers: BalancesHttp.ts; the services: Balances.ts, Wallets.ts,
 * Adjustments.ts.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { BigDecimal, Schema } from "effect"
import { byExternalId, CustomerIdPath, customerNotFound, ExternalIdPath } from "../customers/CustomersApi.ts"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { PageParams } from "../http/Pagination.ts"
import { Money, MoneyInput, strict } from "../schema.ts"
import { AdjustResult, FractionAdjust, WalletAdjust, WholeAdjust } from "./Adjustments.ts"
import { CurrentPlan, CustomerBalances } from "./Balances.ts"
import { LedgerEntry } from "./Wallets.ts"

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
