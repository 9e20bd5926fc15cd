import type { Command } from "commander"
import { Composite, CompositeCreate, CompositeUpdate } from "../../src/composites/Composite.ts"
import { Composites } from "../../src/composites/Composites.ts"
import { Details } from "../ui/Table.tsx"
import { registerCatalogue, statusOf } from "../catalogue.tsx"
import { encode } from "../run.ts"
import { decimalFlag } from "../DecimalFlag.ts"

const compositeJson = encode(Composite)

const membersText = (composite: Composite) =>
  [
    ...composite.entitlements.credits.map((m) => `credit ${m.agentKey}`),
    ...composite.entitlements.outcomes.map((m) => `outcome ${m.agentKey}`),
    ...composite.entitlements.units.map((m) => `unit ${m.agentKey}`)
  ].join(", ")

const CompositeView = (props: { readonly composite: Composite; readonly title: string }) => (
  <Details
    title={props.title}
    fields={[
      ["id", props.composite.id],
      ["name", props.composite.name],
      ["refId", props.composite.refId],
      ["price", String(compositeJson(props.composite).price)],
      ["bills together", membersText(props.composite)],
      ["status", statusOf(props.composite)],
      ["created", props.composite.createdAt.toISOString()]
    ]}
  />
)

interface CompositeFlags {
  readonly name?: string
  readonly refId?: string
  readonly description?: string
  readonly price?: string
  readonly creditIds?: string
  readonly outcomeIds?: string
  readonly unitIds?: string
}

const idList = (value: string | undefined) =>
  value === undefined ? undefined : value.split(",").map((id) => id.trim()).filter((id) => id !== "")

/** The flags as a body; id flags, when any is given, make up the whole entitlements set. */
const flagsOf = (options: CompositeFlags) => {
  const entitlements = {
    creditIds: idList(options.creditIds),
    outcomeIds: idList(options.outcomeIds),
    unitIds: idList(options.unitIds)
  }
  const anyIds = Object.values(entitlements).some((ids) => ids !== undefined)
  return {
    name: options.name,
    refId: options.refId,
    description: options.description,
    price: options.price,
    entitlements: anyIds
      ? Object.fromEntries(Object.entries(entitlements).filter(([, ids]) => ids !== undefined))
      : undefined
  }
}

export const registerComposite = (program: Command) =>
  registerCatalogue(program, {
    noun: "composite",
    plural: "composites",
    description: "composites: credits, outcomes and units billed together",
    operations: Composites,
    services: Composites.Default,
    createSchema: CompositeCreate,
    updateSchema: CompositeUpdate,
    flags: (command) =>
      command
        .option("--name <name>")
        .option("--ref-id <refId>", "the property name used in composite tags on signals")
        .option("--description <text>")
        .option("--price <usd>", "price per occurrence (0 to 10,000,000)", decimalFlag)
        .option("--credit-ids <ids>", "comma-separated credit ids")
        .option("--outcome-ids <ids>", "comma-separated outcome ids")
        .option("--unit-ids <ids>", "comma-separated unit ids"),
    bodyOf: (options) => flagsOf(options as CompositeFlags),
    json: compositeJson,
    view: (composite, title) => <CompositeView composite={composite} title={title} />,
    listJson: compositeJson,
    columns: [
      { header: "ID", value: (c) => c.id },
      { header: "NAME", value: (c) => c.name },
      { header: "REF ID", value: (c) => c.refId },
      { header: "PRICE", value: (c) => String(compositeJson(c).price), align: "right" },
      { header: "BILLS TOGETHER", value: membersText },
      { header: "STATUS", value: statusOf }
    ],
    help: { update: "change a composite; id flags replace the whole set" }
  })
