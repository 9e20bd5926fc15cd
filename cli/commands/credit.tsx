import type { Command } from "commander"
import { Credit, CreditCreate, CreditUpdate } from "../../src/credits/Credit.ts"
import { Credits } from "../../src/credits/Credits.ts"
import { BundleItem } from "../../src/models/Model.ts"
import { Details } from "../ui/Table.tsx"
import { registerCatalogue, statusOf } from "../catalogue.tsx"
import { encode, jsonFlag } from "../run.ts"
import { decimalFlag } from "../DecimalFlag.ts"

const creditJson = encode(Credit)
const bundleItemJson = encode(BundleItem)

/** `gpt-4o x1000 (in 60 / out 30 / cache 10 / write 0)` per item. */
export const bundleText = (items: ReadonlyArray<BundleItem>) =>
  items.map((item) => {
    const json = bundleItemJson(item)
    return `${json.modelId} x${json.averageTokensPerLLMCall} (in ${json.input} / out ${json.output} / cache ${json.cache} / write ${json.cacheWrite})`
  }).join("; ")

const CreditView = (props: { readonly credit: Credit; readonly title: string }) => {
  const json = creditJson(props.credit)
  return (
    <Details
      title={props.title}
      fields={[
        ["id", json.id],
        ["name", json.name],
        ["agentKey", json.agentKey],
        ["description", json.description ?? "-"],
        ["model bundle", bundleText(props.credit.modelBundle)],
        ["tokens / credit", String(json.tokensPerCredit)],
        ["base price", `${json.basePrice} USD`],
        ["margin", `${json.marginPercent} %`],
        ["price / credit", `${json.pricePerCredit} USD`],
        ["status", statusOf(json)],
        ["created", props.credit.createdAt.toISOString()]
      ]}
    />
  )
}

export const registerCredit = (program: Command) =>
  registerCatalogue(program, {
    noun: "credit",
    plural: "credits",
    description: "credits: token-tracked entitlements priced from a model bundle",
    operations: Credits,
    services: Credits.Default,
    createSchema: CreditCreate,
    updateSchema: CreditUpdate,
    flags: (command) =>
      command
        .option("--name <name>")
        .option("--agent-key <key>")
        .option("--description <text>")
        .option("--margin <percent>", "marginPercent (at least -100)", decimalFlag)
        .option("--model-bundle <json>", "model bundle items as a JSON array", jsonFlag),
    bodyOf: (options) => ({
      name: options.name,
      agentKey: options.agentKey,
      description: options.description,
      marginPercent: options.margin,
      modelBundle: options.modelBundle
    }),
    json: creditJson,
    listJson: creditJson,
    view: (credit, title) => <CreditView credit={credit} title={title} />,
    columns: [
      { header: "ID", value: (c) => c.id },
      { header: "NAME", value: (c) => c.name },
      { header: "AGENT KEY", value: (c) => c.agentKey },
      { header: "PRICE / CREDIT", value: (c) => String(creditJson(c).pricePerCredit), align: "right" },
      { header: "STATUS", value: statusOf }
    ]
  })
