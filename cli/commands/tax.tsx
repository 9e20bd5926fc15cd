import type { Command } from "commander"
import { BigDecimal, Effect } from "effect"
import { Tax, TaxCreate, Taxes, TaxUpdate } from "../../src/billing/Taxes.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { toPage } from "../../src/http/Pagination.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { listFooter, nextCursorOf, limitOption } from "../lists.ts"
import { decimalFlag } from "../DecimalFlag.ts"
import { BillingCommandServices } from "../commandServices.ts"
import type { OrganizationId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

const taxJson = encode(Tax)

const presentOne = (title: string) => ({
  json: (tax: Tax) => ({ tax: taxJson(tax) }),
  view: (tax: Tax) => (
    <Details
      title={title}
      fields={[["id", tax.id], ["name", tax.name], ["rate", `${BigDecimal.format(tax.ratePercent)}%`], ["active", tax.active ? "yes" : "no"]]}
    />
  )
})

const onOff = (value: string | undefined) =>
  value === undefined
    ? Effect.succeed(undefined)
    : value === "on" || value === "off"
    ? Effect.succeed(value === "on")
    : Effect.fail(new BadRequest({ message: `--active must be on or off, not ${value}` }))

const withTaxes = <A, E>(options: { readonly org?: string }, f: (taxes: Taxes, organizationId: OrganizationId) => Effect.Effect<A, E>) =>
  Effect.flatMap(organizationOf(options), (organizationId) => Effect.flatMap(Taxes, (taxes) => f(taxes, organizationId)))

export const registerTax = (program: Command) => {
  const tax = program.command("tax").description("taxes added to new invoices")

  withOrg(tax.command("list").description("list taxes, oldest first"))
    .option("--active", "only those that apply to new invoices")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: { json?: boolean; org?: string; active?: boolean; limit?: number; cursor?: string }) =>
      run(options, withTaxes(options, (taxes, org) => taxes.list(org, options.active ?? false, toPage(options))), {
        json: (list) => ({ taxes: list.map(taxJson), nextCursor: nextCursorOf(list, options) }),
        view: (list) => (
          <Table
            columns={[
              { header: "ID", value: (t) => t.id },
              { header: "NAME", value: (t) => t.name },
              { header: "RATE %", value: (t) => BigDecimal.format(t.ratePercent), align: "right" },
              { header: "ACTIVE", value: (t) => (t.active ? "yes" : "no") }
            ]}
            rows={list}
            footer={listFooter(`${list.length} tax(es)`, list, options)}
          />
        )
      }))

  withOrg(tax.command("create").description("create a tax"))
    .requiredOption("--name <name>")
    .requiredOption("--rate <percent>", "0 to 100", decimalFlag)
    .action((options: { json?: boolean; org?: string; name: string; rate: string }) =>
      run(
        options,
        withTaxes(options, (taxes, org) =>
          Effect.flatMap(decodeInput(TaxCreate, { name: options.name, ratePercent: options.rate }), (input) =>
            taxes.create(org, input))),
        presentOne("Tax created")
      ))

  withOrg(tax.command("show").description("show a tax").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(options, withTaxes(options, (taxes, org) => taxes.get(org, id)), presentOne("Tax")))

  withOrg(tax.command("update").description("change a tax").argument("<id>"))
    .option("--name <name>")
    .option("--rate <percent>", "0 to 100", decimalFlag)
    .option("--active <on|off>", "off: no longer applied to new invoices")
    .action((id: string, options: { json?: boolean; org?: string; name?: string; rate?: string; active?: string }) =>
      run(
        options,
        withTaxes(options, (taxes, org) =>
          Effect.gen(function*() {
            const active = yield* onOff(options.active)
            const patch = yield* decodeInput(TaxUpdate, {
              ...(options.name !== undefined ? { name: options.name } : {}),
              ...(options.rate !== undefined ? { ratePercent: options.rate } : {}),
              ...(active !== undefined ? { active } : {})
            })
            return yield* taxes.update(org, id, patch)
          })),
        presentOne("Tax updated")
      ))
}
