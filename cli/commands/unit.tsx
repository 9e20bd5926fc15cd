import type { Command } from "commander"
import { Unit, UnitCreate, UnitUpdate } from "../../src/units/Unit.ts"
import { Units } from "../../src/units/Units.ts"
import { Details } from "../ui/Table.tsx"
import { registerCatalogue, statusOf } from "../catalogue.tsx"
import { encode } from "../run.ts"
import { Effect } from "effect"
import { decimalFlag } from "../DecimalFlag.ts"
import type { OrganizationId } from "../../src/ids.ts"

const unitJson = encode(Unit)

const priceText = (unit: Unit) =>
  unit.pricingType === "FLAT"
    ? `${String(unitJson(unit).flatPrice)} each`
    : unitJson(unit).tiers.map((tier) => `${tier.upTo === null ? "rest" : `<=${tier.upTo}`}: ${tier.price}`).join(", ")

const UnitView = (props: { readonly unit: Unit; readonly title: string }) => (
  <Details
    title={props.title}
    fields={[
      ["id", props.unit.id],
      ["name", props.unit.name],
      ["agentKey", props.unit.agentKey],
      ["pricing", `${props.unit.pricingType} ${priceText(props.unit)}`],
      ["status", statusOf(props.unit)],
      ["created by", props.unit.createdByName],
      ["created", props.unit.createdAt.toISOString()]
    ]}
  />
)

export const registerUnit = (program: Command) =>
  registerCatalogue(program, {
    noun: "unit",
    plural: "units",
    description: "units: counted events priced FLAT, SLAB or VOLUME",
    // A unit made from the CLI records "cli" as its creator.
    operations: Effect.map(Units, (units) => ({ ...units, create: (org: OrganizationId, input: UnitCreate) => units.create(org, input, { name: "cli" }) })),
    services: Units.Default,
    createSchema: UnitCreate,
    updateSchema: UnitUpdate,
    fileHelp: "tiers included",
    flags: (command) =>
      command
        .option("--name <name>")
        .option("--agent-key <key>")
        .option("--description <text>")
        .option("--pricing-type <type>", "FLAT, SLAB or VOLUME")
        .option("--flat-price <usd>", "price of one unit (FLAT)", decimalFlag),
    bodyOf: (options) => ({
      name: options.name,
      agentKey: options.agentKey,
      description: options.description,
      pricingType: options.pricingType,
      flatPrice: options.flatPrice
    }),
    json: unitJson,
    view: (unit, title) => <UnitView unit={unit} title={title} />,
    listJson: unitJson,
    columns: [
      { header: "ID", value: (u) => u.id },
      { header: "NAME", value: (u) => u.name },
      { header: "AGENT KEY", value: (u) => u.agentKey },
      { header: "PRICING", value: (u) => `${u.pricingType} ${priceText(u)}` },
      { header: "STATUS", value: statusOf }
    ]
  })
