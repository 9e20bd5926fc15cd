import type { Command } from "commander"
import { listFooter, nextCursorOf, limitOption } from "../lists.ts"
import { BigDecimal, Effect } from "effect"
import { PurchaseChange, PurchaseCreate, PurchaseJson, type PurchaseRow, PurchaseUpdate, toPurchaseJson } from "../../src/billing/Purchase.ts"
import { Invoice } from "../../src/billing/Invoice.ts"
import { Purchases } from "../../src/billing/Purchases.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { toPage } from "../../src/http/Pagination.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { BillingCommandServices } from "../commandServices.ts"
import { CustomerId, PurchaseId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

const purchaseJson = (row: PurchaseRow) => encode(PurchaseJson)(toPurchaseJson(row))

const PurchaseView = (props: { readonly purchase: PurchaseRow; readonly title: string }) => {
  const p = toPurchaseJson(props.purchase)
  return (
    <Details
      title={props.title}
      fields={[
        ["id", p.id],
        ["customer", p.customerId],
        ["plan", `${p.planName} (${p.planId})`],
        ["status", p.status],
        ["cost", `${BigDecimal.format(p.cost)} ${p.currencyCode}`],
        ["billing date", p.billingDate.toISOString()],
        ["current cycle", p.currentPeriodStart ? `${p.currentPeriodStart.toISOString()} .. ${p.currentPeriodEnd?.toISOString()}` : "-"],
        ["auto-payment", p.autoPayment ? "on" : "off"],
        ...(p.scheduledChange === null
          ? []
          : [["scheduled change", `to ${p.scheduledChange.planId} at ${p.scheduledChange.at.toISOString()}`] as const])
      ]}
    />
  )
}

const presentOne = (title: string) => ({
  json: (purchase: PurchaseRow) => ({ purchase: purchaseJson(purchase) }),
  view: (purchase: PurchaseRow) => <PurchaseView purchase={purchase} title={title} />
})

const onOff = (value: string) =>
  value === "on" ? Effect.succeed(true) : value === "off" ? Effect.succeed(false) : Effect.fail(
    new BadRequest({ message: `--auto-payment must be on or off, not ${value}` })
  )

export const registerPurchase = (program: Command) => {
  const purchase = program.command("purchase").description("purchases: put customers on plans")

  withOrg(purchase.command("create").description("put a customer on a plan"))
    .option("--customer <id>", "the customer's id")
    .option("--external-id <id>", "the customer's external id (when --customer is not given)")
    .requiredOption("--plan <id>", "the plan to buy")
    .option("--billing-date <iso>", "a future start date (the purchase is SCHEDULED until then)")
    .action((options: { json?: boolean; org?: string; customer?: string; externalId?: string; plan: string; billingDate?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(PurchaseCreate, {
            ...(options.customer ? { customerId: options.customer } : {}),
            ...(options.externalId ? { externalId: options.externalId } : {}),
            planId: options.plan,
            ...(options.billingDate ? { billingDate: options.billingDate } : {})
          })
          return yield* Effect.flatMap(Purchases, (purchases) => purchases.create(organizationId, input))
        }),
        presentOne("Purchase created")
      )
    )

  withOrg(purchase.command("list").description("list purchases"))
    .option("--customer <id>", "only this customer's")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: { json?: boolean; org?: string; customer?: string; limit?: number; cursor?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(Purchases, (purchases) =>
            purchases.list(organizationId, { customerId: options.customer === undefined ? undefined : CustomerId.make(options.customer), page: toPage(options) }))
        }),
        {
          json: (list) => ({ purchases: list.map(purchaseJson), nextCursor: nextCursorOf(list, options) }),
          view: (list) => (
            <Table
              columns={[
                { header: "ID", value: (p) => p.id },
                { header: "CUSTOMER", value: (p) => p.customerId },
                { header: "PLAN", value: (p) => p.snapshot.name },
                { header: "STATUS", value: (p) => p.status },
                { header: "COST", value: (p) => BigDecimal.format(p.snapshot.cost), align: "right" }
              ]}
              rows={list}
              footer={listFooter(`${list.length} purchase(s)`, list, options)}
            />
          )
        }
      )
    )

  withOrg(purchase.command("get").description("show a purchase").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.flatMap(organizationOf(options), (organizationId) =>
          Effect.flatMap(Purchases, (purchases) => purchases.get(organizationId, PurchaseId.make(id)))),
        presentOne("Purchase")
      )
    )

  withOrg(purchase.command("update").description("change a purchase's auto-payment setting").argument("<id>"))
    .requiredOption("--auto-payment <on|off>", "pay new invoices from the wallet when it holds the total")
    .action((id: string, options: { json?: boolean; org?: string; autoPayment: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const patch = yield* Effect.flatMap(onOff(options.autoPayment), (autoPayment) =>
            decodeInput(PurchaseUpdate, { autoPayment }))
          return yield* Effect.flatMap(Purchases, (purchases) => purchases.update(organizationId, PurchaseId.make(id), patch))
        }),
        presentOne("Purchase updated")
      )
    )

  withOrg(purchase.command("cancel").description(
    "cancel a purchase: ends its cycle now and invoices its usage in arrears; its invoices stay as they are " +
      "(void one with billing invoice void)"
  ).argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.flatMap(organizationOf(options), (organizationId) =>
          Effect.flatMap(Purchases, (purchases) => purchases.cancel(organizationId, PurchaseId.make(id)))),
        presentOne("Purchase cancelled")
      )
    )

  withOrg(
    purchase.command("change")
      .description("change a purchase's plan: now, prorated on a PRORATION invoice, or at the cycle end")
      .argument("<id>")
  )
    .requiredOption("--plan <id>", "the active plan to move to")
    .option("--at-cycle-end", "schedule the change for the current cycle's end (no proration)")
    .option("--idempotency-key <key>", "a repeat with the same key changes nothing again")
    .action((id: string, options: { json?: boolean; org?: string; plan: string; atCycleEnd?: boolean; idempotencyKey?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(PurchaseChange, {
            planId: options.plan,
            when: options.atCycleEnd === true ? "CYCLE_END" : "NOW",
            ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey })
          })
          return yield* Effect.flatMap(Purchases, (purchases) => purchases.change(organizationId, PurchaseId.make(id), input))
        }),
        {
          json: (result) => ({
            changed: true,
            replayed: result.replayed,
            purchase: purchaseJson(result.purchase),
            invoice: result.invoice === null ? null : encode(Invoice)(result.invoice)
          }),
          view: (result) => (
            <Details
              title={result.replayed ? "Plan change (already made)" : result.invoice === null && result.purchase.scheduledPlanId !== null
                ? "Plan change scheduled"
                : "Plan changed"}
              fields={[
                ["purchase", result.purchase.id],
                ["plan", `${result.purchase.snapshot.name} (${result.purchase.planId})`],
                ...(result.purchase.scheduledPlanId === null
                  ? []
                  : [["scheduled change", `to ${result.purchase.scheduledPlanId}`] as const]),
                ...(result.invoice === null ? [] : [
                  ["invoice", `${result.invoice.kind} ${result.invoice.id} (${result.invoice.status})`] as const,
                  ...result.invoice.lines.map((line, i) => [`line ${i + 1}`, `${line.description}: ${BigDecimal.format(line.amount)}`] as const),
                  ...result.invoice.taxLines.map((tax) => [`tax ${tax.name}`, BigDecimal.format(tax.amount)] as const),
                  ["total", `${BigDecimal.format(result.invoice.total)} ${result.invoice.currencyCode}`] as const
                ])
              ]}
            />
          )
        }
      )
    )

  withOrg(purchase.command("remove-scheduled-change").description("drop the plan change waiting for the cycle end").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.flatMap(organizationOf(options), (organizationId) =>
          Effect.flatMap(Purchases, (purchases) => purchases.removeScheduledChange(organizationId, PurchaseId.make(id)))),
        presentOne("Scheduled plan change removed")
      )
    )
}
