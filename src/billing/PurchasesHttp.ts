/** The purchases group's handlers (PurchasesApi.ts) over the Purchases service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { forOrganization } from "../http/Auth.ts"
import { groupApi } from "../http/GroupApi.ts"
import { toPage } from "../http/Pagination.ts"
import { type PurchaseRow, toPurchaseJson } from "./Purchase.ts"
import { Purchases } from "./Purchases.ts"
import { PurchasesApi } from "./PurchasesApi.ts"

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
