/**
 * The balances group's handlers (BalancesApi.ts): each `/customers/ext/{externalId}`
 * twin resolves the customer, then does what its by-id route does.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { BigDecimal, Effect } from "effect"
import { Customers } from "../customers/Customers.ts"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { toPage } from "../http/Pagination.ts"
import type { CustomerId, OrganizationId } from "../ids.ts"
import { type AdjustEndpoint, type AdjustInput, Adjustments } from "./Adjustments.ts"
import { Balances } from "./Balances.ts"
import { BalancesApi } from "./BalancesApi.ts"
import { Wallets } from "./Wallets.ts"

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
