import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { CustomersApi } from "./CustomersApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { toPage } from "../http/Pagination.ts"
import type { Customer } from "./Customer.ts"
import { Customers } from "./Customers.ts"

export const CustomersHttpLive = HttpApiBuilder.group(groupApi(CustomersApi), "customers", (handlers) =>
  Effect.gen(function*() {
    const customers = yield* Customers
    const one = Effect.map((customer: Customer) => ({ customer }))
    const archived = Effect.map((customer: Customer) => ({ archived: true as const, customer }))
    return handlers
      .handle("list", ({ urlParams }) =>
        forOrganization((org) =>
          customers.list(org, {
            page: toPage(urlParams),
            q: urlParams.q,
            includeArchived: urlParams.includeArchived === "true"
          })
        ).pipe(Effect.map((list) => ({ customers: list }))))
      .handle("create", ({ payload }) =>
        forOrganization((org) => customers.create(org, payload)).pipe(
          Effect.map((customer) => ({ created: true as const, customer }))
        ))
      .handle("get", ({ path }) => forOrganization((org) => customers.get(org, path.id)).pipe(one))
      .handle("update", ({ path, payload }) =>
        forOrganization((org) => customers.update(org, path.id, payload)).pipe(one))
      .handle("archive", ({ path }) => forOrganization((org) => customers.archive(org, path.id)).pipe(archived))
      .handle("getByExternalId", ({ path }) =>
        forOrganization((org) => customers.getByExternalId(org, path.externalId)).pipe(one))
      .handle("updateByExternalId", ({ path, payload }) =>
        forOrganization((org) =>
          Effect.flatMap(customers.idOfExternal(org, path.externalId), (id) => customers.update(org, id, payload))
        ).pipe(one))
      .handle("archiveByExternalId", ({ path }) =>
        forOrganization((org) =>
          Effect.flatMap(customers.idOfExternal(org, path.externalId), (id) => customers.archive(org, id))
        ).pipe(archived))
  }))
