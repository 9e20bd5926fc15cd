/**
 * A customer named on the command line: by id, or by `--external-id` when the
 * id is omitted (balance, wallet, adjust, listen, customer show/archive).
 */
import type { Command } from "commander"
import { Effect } from "effect"
import { Customers } from "../src/customers/Customers.ts"
import { withOrg } from "./run.ts"
import { CustomerId, type OrganizationId } from "../src/ids.ts"

/** The customer's id: `id` when given, else the active customer with `externalId`. */
export const customerIdOf = (organizationId: OrganizationId, id: string | undefined, externalId: string | undefined) =>
  Effect.flatMap(Customers, (customers) =>
    id !== undefined ? Effect.succeed(CustomerId.make(id)) : customers.idOfExternal(organizationId, externalId ?? ""))

/** `[customerId]`, `--external-id` and `--org` on a command about one customer. */
export const withCustomer = (command: Command) =>
  withOrg(command.argument("[customerId]")).option("--external-id <id>", "the active customer with this external id")
