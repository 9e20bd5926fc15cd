import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { BigDecimal, Effect } from "effect"
import { Customers } from "../customers/Customers.ts"
import { groupApi } from "../http/GroupApi.ts"
import { BalancesApi, InvoicesApi, PurchasesApi } from "./BillingApi.ts"
import { forOrganization } from "../http/Auth.ts"
import type { CustomerId, OrganizationId } from "../ids.ts"
import { toPage } from "../http/Pagination.ts"
import { type AdjustEndpoint, type AdjustInput, Adjustments } from "./Adjustments.ts"
import { Balances } from "./Balances.ts"
import { Invoices } from "./Invoices.ts"
import { type PurchaseRow, toPurchaseJson } from "./Purchase.ts"
import { Purchases } from "./Purchases.ts"
import { Taxes } from "./Taxes.ts"
import { Wallets } from "./Wallets.ts"
import { requestOrigin } from "../links/PublicUrl.ts"

export const PurchasesHttpLive = HttpApiBuilder.group(groupApi(PurchasesApi), "purchases", (handlers) =>
  Effect.gen(function*() {
    const purchases = yield* Purchases
    const one = Effect.map((row: PurchaseRow) => ({ purchase: toPurchaseJson(row) }))
    return handlers
      .handle("create", ({ payload }) =>
        forOrganization((org) => purchases.create(org, payload)).pipe(
          Effect.map((row) => ({ created: true as const, purchase: toPurchaseJson(row) }))
        ))
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => purchases.list(org, { customerId: urlParams.customerId, page: toPage(urlParams) })).pipe(
          Effect.map((rows) => ({ purchases: rows.map(toPurchaseJson) }))
        ))
      .handle("get", ({ path }) => forOrganization((org) => purchases.get(org, path.id)).pipe(one))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => purchases.update(org, path.id, payload)).pipe(
          Effect.map((row) => ({ updated: true as const, purchase: toPurchaseJson(row) }))
        ))
      .handle("cancel", ({ path }) =>
        forOrganization((org) => purchases.cancel(org, path.id)).pipe(
          Effect.map((row) => ({ cancelled: true as const, purchase: toPurchaseJson(row) }))
        ))
      .handle("change", ({ path, payload }) =>
        forOrganization((org) => purchases.change(org, path.id, payload)).pipe(
          Effect.map(({ invoice, purchase, replayed }) => ({
            changed: true as const,
            replayed,
            purchase: toPurchaseJson(purchase),
            invoice
          }))
        ))
      .handle("removeScheduledChange", ({ path }) =>
        forOrganization((org) => purchases.removeScheduledChange(org, path.id)).pipe(
          Effect.map((row) => ({ removed: true as const, purchase: toPurchaseJson(row) }))
        ))
  }))

export const BalancesHttpLive = HttpApiBuilder.group(groupApi(BalancesApi), "balances", (handlers) =>
  Effect.gen(function*() {
    const customers = yield* Customers
    const balances = yield* Balances
    const wallets = yield* Wallets
    const adjustments = yield* Adjustments

    /** The `/customers/ext/{externalId}/...` twins act on the active customer holding that id. */
    const byExternal = <A, E, R>(externalId: string, f: (org: OrganizationId, customerId: CustomerId) => Effect.Effect<A, E, R>) =>
      forOrganization((org) => Effect.flatMap(customers.idOfExternal(org, externalId), (id) => f(org, id)))
    const byId = <A, E, R>(id: CustomerId, f: (org: OrganizationId, customerId: CustomerId) => Effect.Effect<A, E, R>) =>
      forOrganization((org) => f(org, id))

    const setAlert = (threshold: BigDecimal.BigDecimal | null) => (org: OrganizationId, customerId: CustomerId) =>
      Effect.map(wallets.setAlert(org, customerId, threshold), (wallet) => ({
        lowBalanceAlertUsd: wallet.lowBalanceAlertUsd
      }))
    const setGrant = (quantity: BigDecimal.BigDecimal) => (org: OrganizationId, customerId: CustomerId) =>
      Effect.map(
        wallets.setRecurringGrant(org, customerId, BigDecimal.isZero(quantity) ? null : quantity),
        (wallet) => ({
          customerId,
          recurringGrant: { kind: "wallet" as const, quantity: wallet.recurringGrantUsd ?? quantity }
        })
      )
    const adjust = (endpoint: AdjustEndpoint, input: AdjustInput) => (org: OrganizationId, customerId: CustomerId) =>
      adjustments.adjust(org, customerId, endpoint, input)

    return handlers
      .handle("balances", ({ path }) => byId(path.id, balances.balances))
      .handle("balancesByExternalId", ({ path }) => byExternal(path.externalId, balances.balances))
      .handle("plan", ({ path }) => byId(path.id, balances.currentPlan))
      .handle("planByExternalId", ({ path }) => byExternal(path.externalId, balances.currentPlan))
      .handle("walletAlert", ({ path, payload }) => byId(path.id, setAlert(payload.threshold)))
      .handle("walletAlertByExternalId", ({ path, payload }) => byExternal(path.externalId, setAlert(payload.threshold)))
      .handle("walletLedger", ({ path, urlParams }) =>
        forOrganization((org) => wallets.ledger(org, path.id, toPage(urlParams))).pipe(
          Effect.map(({ entries, wallet }) => ({
            customerId: path.id,
            balance: wallet.balance,
            lowBalanceAlertUsd: wallet.lowBalanceAlertUsd,
            entries
          }))
        ))
      .handle("recurringGrant", ({ path, payload }) => byId(path.id, setGrant(payload.quantity)))
      .handle("recurringGrantByExternalId", ({ path, payload }) => byExternal(path.externalId, setGrant(payload.quantity)))
      .handle("adjustCredits", ({ path, payload }) => byId(path.id, adjust("credits", payload)))
      .handle("adjustOutcomes", ({ path, payload }) => byId(path.id, adjust("outcomes", payload)))
      .handle("adjustUnits", ({ path, payload }) => byId(path.id, adjust("units", payload)))
      .handle("adjustComposites", ({ path, payload }) => byId(path.id, adjust("composites", payload)))
      .handle("adjustWallet", ({ path, payload }) => byId(path.id, adjust("wallet", payload)))
      .handle("adjustCreditsByExternalId", ({ path, payload }) => byExternal(path.externalId, adjust("credits", payload)))
      .handle("adjustOutcomesByExternalId", ({ path, payload }) => byExternal(path.externalId, adjust("outcomes", payload)))
      .handle("adjustUnitsByExternalId", ({ path, payload }) => byExternal(path.externalId, adjust("units", payload)))
      .handle("adjustCompositesByExternalId", ({ path, payload }) =>
        byExternal(path.externalId, adjust("composites", payload)))
      .handle("adjustWalletByExternalId", ({ path, payload }) => byExternal(path.externalId, adjust("wallet", payload)))
  }))

export const InvoicesHttpLive = HttpApiBuilder.group(groupApi(InvoicesApi), "invoices", (handlers) =>
  Effect.gen(function*() {
    const invoices = yield* Invoices
    const taxes = yield* Taxes
    const purchases = yield* Purchases
    return handlers
      .handle("upcoming", ({ urlParams }) =>
        forOrganization((org) => purchases.upcoming(org, urlParams)).pipe(Effect.map((list) => ({ invoices: list }))))
      .handle("list", ({ urlParams }) =>
        forOrganization((org) => invoices.list(org, { customerId: urlParams.customerId, page: toPage(urlParams) })).pipe(
          Effect.map((list) => ({ invoices: list }))
        ))
      .handle("get", ({ path }) =>
        forOrganization((org) => invoices.get(org, path.id)).pipe(Effect.map((invoice) => ({ invoice }))))
      .handle("payLink", ({ path }) =>
        Effect.flatMap(requestOrigin, (origin) => forOrganization((org) => invoices.payLink(org, path.id, origin))))
      .handle("recordPayment", ({ path, payload }) => forOrganization((org) => invoices.pay(org, path.id, payload)))
      .handle("listPayments", ({ urlParams }) =>
        forOrganization((org) => invoices.listPayments(org, { customerId: urlParams.customerId, page: toPage(urlParams) }))
          .pipe(Effect.map((payments) => ({ payments }))))
      .handle("getPayment", ({ path }) =>
        forOrganization((org) => invoices.getPayment(org, path.id)).pipe(Effect.map((payment) => ({ payment }))))
      .handle("listTaxes", ({ urlParams }) =>
        forOrganization((org) => taxes.list(org, urlParams.active === "true", toPage(urlParams))).pipe(Effect.map((list) => ({ taxes: list }))))
      .handle("createTax", ({ payload }) =>
        forOrganization((org) => taxes.create(org, payload)).pipe(Effect.map((tax) => ({ created: true as const, tax }))))
      .handle("getTax", ({ path }) => forOrganization((org) => taxes.get(org, path.id)).pipe(Effect.map((tax) => ({ tax }))))
      .handle("updateTax", ({ path, payload }) =>
        forOrganization((org) => taxes.update(org, path.id, payload)).pipe(
          Effect.map((tax) => ({ updated: true as const, tax }))
        ))
  }))
