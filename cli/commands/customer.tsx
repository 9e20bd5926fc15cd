import type { Command } from "commander"
import { Effect } from "effect"
import { Customer, CustomerCreate, CustomerUpdate } from "../../src/customers/Customer.ts"
import { Customers } from "../../src/customers/Customers.ts"
import { toPage } from "../../src/http/Pagination.ts"
import { customerIdOf } from "../customerRef.ts"
import { listFooter, nextCursorOf, limitOption } from "../lists.ts"
import { Details, Table } from "../ui/Table.tsx"
import { bodyOf, decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { writeErr } from "../Output.ts"
import { CustomersLive } from "../../src/app/CustomersLive.ts"
import { CustomerId } from "../../src/ids.ts"

const run = runnerOn(CustomersLive)

const customerJson = encode(Customer)

const CustomerView = (props: { readonly customer: Customer; readonly title?: string }) => (
  <Details
    {...(props.title ? { title: props.title } : {})}
    fields={[
      ["id", props.customer.id],
      ["externalId", props.customer.externalId ?? "-"],
      ["name", props.customer.name],
      ["email", props.customer.email],
      ["currency", props.customer.currencyCode],
      ["payment terms", props.customer.paymentTermsDays === null ? "the workspace's" : `${props.customer.paymentTermsDays} day(s)`],
      ["status", props.customer.archivedAt ? `archived ${props.customer.archivedAt.toISOString()}` : "active"],
      ["created", props.customer.createdAt.toISOString()]
    ]}
  />
)

const presentOne = (title: string) => ({
  json: (customer: Customer) => ({ customer: customerJson(customer) }),
  view: (customer: Customer) => <CustomerView customer={customer} title={title} />
})

interface CustomerFlags {
  readonly json?: boolean
  readonly org?: string
  readonly file?: string
  readonly name?: string
  readonly email?: string
  readonly externalId?: string
  readonly currency?: string
  readonly paymentTermsDays?: string
}

/**
 * `--payment-terms-days N` as the body's `paymentTermsDays`: a number (the
 * schema takes whole days in range, else 400), `default` null (the
 * workspace's terms); anything else is sent as written, for the schema to
 * refuse with the field's name.
 */
const termsFlag = (value: string | undefined): number | string | null | undefined =>
  value === undefined
    ? undefined
    : value.trim() === "default"
    ? null
    : /^\s*[+-]?\d+(\.\d+)?\s*$/.test(value)
    ? Number(value)
    : value

const flagsOf = (options: CustomerFlags) => ({
  name: options.name,
  email: options.email,
  externalId: options.externalId,
  currencyCode: options.currency,
  paymentTermsDays: termsFlag(options.paymentTermsDays)
})

/** The profile's flags; `--external-id` sets it on create, and finds the customer on every other command. */
const withProfileFlags = (command: Command, externalId: "--external-id" | "--set-external-id" = "--external-id") =>
  command
    .option("--file <path>", "request body as JSON or YAML (flags override it)")
    .option("--name <name>")
    .option("--email <email>")
    .option(`${externalId} <id>`, "your own id for the customer")
    .option("--currency <code>")
    .option(
      "--payment-terms-days <n>",
      "days after the customer's invoices become final that they are due (0 to 365), or default for the workspace's"
    )

export const registerCustomer = (program: Command) => {
  const customer = program.command("customer").description("customers")

  withProfileFlags(withOrg(customer.command("create").description("create a customer")))
    .action((options: CustomerFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* Effect.flatMap(bodyOf(options, flagsOf(options)), (body) => decodeInput(CustomerCreate, body))
          return yield* Effect.flatMap(Customers, (customers) => customers.create(organizationId, input))
        }),
        presentOne("Customer created")
      )
    )

  withOrg(customer.command("list").description("list customers"))
    .option("--q <text>", "filter on name or e-mail, case-insensitive")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .option("--include-archived", "list archived customers too")
    .action((options: { json?: boolean; org?: string; q?: string; limit?: number; cursor?: string; includeArchived?: boolean }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(Customers, (customers) =>
            customers.list(organizationId, {
              page: toPage(options),
              q: options.q,
              includeArchived: options.includeArchived
            }))
        }),
        {
          json: (list) => ({ customers: list.map(customerJson), nextCursor: nextCursorOf(list, options) }),
          view: (list) => (
            <Table
              columns={[
                { header: "ID", value: (c) => c.id },
                { header: "EXTERNAL ID", value: (c) => c.externalId ?? "-" },
                { header: "NAME", value: (c) => c.name },
                { header: "EMAIL", value: (c) => c.email },
                { header: "STATUS", value: (c) => (c.archivedAt ? "archived" : "active") }
              ]}
              rows={list}
              footer={listFooter(`${list.length} customer(s)`, list, options)}
            />
          )
        }
      )
    )

  withOrg(customer.command("get").description("show a customer").argument("[id]"))
    .option("--external-id <id>", "find the active customer with this external id")
    .action((id: string | undefined, options: CustomerFlags, command: Command) => {
      // Neither names a customer: that is a mistake in the command, not a malformed external id.
      if (id === undefined && options.externalId === undefined) command.error("error: give the customer's id, or --external-id ID")
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          return yield* Effect.flatMap(Customers, (customers) => customers.get(organizationId, customerId))
        }),
        presentOne("Customer")
      )
    })

  // `--external-id` finds the customer, as on `get` and `archive`; `--set-external-id` sets it (issue 37: update
  // took --external-id to set, get to find). The old form, an id and --external-id, still sets, and says so.
  withProfileFlags(withOrg(customer.command("update").description("change a customer").argument("[id]")), "--set-external-id")
    .option("--external-id <id>", "find the active customer with this external id (to set one: --set-external-id)")
    .option("--clear-external-id", "remove the external id")
    .action((id: string | undefined, options: CustomerFlags & { setExternalId?: string; clearExternalId?: boolean }, command: Command) => {
      if (id === undefined && options.externalId === undefined) command.error("error: give the customer's id, or --external-id ID")
      if (options.setExternalId !== undefined && options.clearExternalId) {
        command.error("error: --set-external-id and --clear-external-id cannot both be given")
      }
      // The form before issue 37: `update ID --external-id X` set X. It still does, with a note, while
      // scripts move to --set-external-id.
      const oldForm = id !== undefined && options.externalId !== undefined
      if (oldForm && (options.setExternalId !== undefined || options.clearExternalId)) {
        command.error("error: with the customer's id, --external-id is the old way to set it: give --set-external-id alone")
      }
      if (oldForm) {
        writeErr(
          "warning: `customer update ID --external-id X` sets the external id as it always did; write " +
            "--set-external-id X instead: --external-id alone finds the customer, as in customer get\n"
        )
      }
      const newExternalId = oldForm ? options.externalId : options.setExternalId
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = oldForm ? CustomerId.make(id!) : yield* customerIdOf(organizationId, id, options.externalId)
          const flags = {
            ...flagsOf({ ...options, externalId: newExternalId }),
            ...(options.clearExternalId ? { externalId: null } : {})
          }
          const patch = yield* Effect.flatMap(bodyOf(options, flags), (body) => decodeInput(CustomerUpdate, body))
          return yield* Effect.flatMap(Customers, (customers) => customers.update(organizationId, customerId, patch))
        }),
        presentOne("Customer updated")
      )
    })

  withOrg(customer.command("archive").description("archive a customer (nothing is deleted)").argument("[id]"))
    .option("--external-id <id>", "archive the active customer with this external id")
    .action((id: string | undefined, options: CustomerFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const customerId = yield* customerIdOf(organizationId, id, options.externalId)
          return yield* Effect.flatMap(Customers, (customers) => customers.archive(organizationId, customerId))
        }),
        presentOne("Customer archived")
      )
    )
}

