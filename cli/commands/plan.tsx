import type { Command } from "commander"
import { Plan, PlanCreate, PlanUpdate } from "../../src/plans/Plan.ts"
import { Plans } from "../../src/plans/Plans.ts"
import { Details, Table } from "../ui/Table.tsx"
import { registerCatalogue, statusOf } from "../catalogue.tsx"
import { encode } from "../run.ts"
import { decimalFlag } from "../DecimalFlag.ts"

const planJson = encode(Plan)

const PlanView = (props: { readonly plan: Plan; readonly title: string }) => {
  const json = planJson(props.plan)
  return (
    <>
      <Details
        title={props.title}
        fields={[
          ["id", props.plan.id],
          ["name", props.plan.name],
          ["billing", `${props.plan.billingCycle}, ${json.cost} ${props.plan.currencyCode} per cycle`],
          ["adjustment", String(json.priceAdjustment)],
          ["wallet funds arrears", props.plan.walletFundedArrear ? "yes" : "no"],
          ["status", statusOf(props.plan)]
        ]}
      />
      <Table
        columns={[
          { header: "TYPE", value: (c) => c.type },
          { header: "MODE", value: (c) => c.billingMode },
          { header: "TARGET", value: (c) => `${c.targetName} ${c.creditId || c.outcomeId || c.unitId || c.compositeId}`.trim() },
          { header: "QUANTITY", value: (c) => String(c.quantity), align: "right" },
          { header: "AMOUNT", value: (c) => String(c.amount), align: "right" },
          { header: "ROLLOVER", value: (c) => (c.rollover ? "yes" : "no") }
        ]}
        rows={json.entitlements}
      />
    </>
  )
}

export const registerPlan = (program: Command) =>
  registerCatalogue(program, {
    noun: "plan",
    plural: "plans",
    description: "plans: entitlements sold together, billed in advance or in arrears",
    operations: Plans,
    services: Plans.Default,
    createSchema: PlanCreate,
    updateSchema: PlanUpdate,
    fileHelp: "entitlements included",
    flags: (command) =>
      command
        .option("--name <name>")
        .option("--description <text>")
        .option("--price-adjustment <usd>", "added to the plan cost (negative for a discount)", decimalFlag)
        .option("--wallet-funded-arrear", "debit ARREAR charges from the ADVANCE wallet as they happen")
        .option("--no-wallet-funded-arrear", "invoice ARREAR charges at the cycle end"),
    bodyOf: (options) => ({
      name: options.name,
      description: options.description,
      priceAdjustment: options.priceAdjustment,
      walletFundedArrear: options.walletFundedArrear
    }),
    json: planJson,
    view: (plan, title) => <PlanView plan={plan} title={title} />,
    listJson: planJson,
    columns: [
      { header: "ID", value: (p) => p.id },
      { header: "NAME", value: (p) => p.name },
      { header: "COST", value: (p) => `${planJson(p).cost} ${p.currencyCode}`, align: "right" },
      { header: "COMPONENTS", value: (p) => String(p.entitlements.length), align: "right" },
      { header: "STATUS", value: statusOf }
    ],
    help: {
      create: "create a plan (entitlements come from --file)",
      update: "change a plan; entitlements in --file replace them all",
      archive: "archive a plan: no longer purchasable",
      unarchive: "make an archived plan purchasable again"
    }
  })
