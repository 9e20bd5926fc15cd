import type { Command } from "commander"
import { Box, Text } from "../ui/ink.ts"
import { Outcome, OutcomeCreate, OutcomeUpdate, OutcomeWithSteps } from "../../src/outcomes/Outcome.ts"
import { Outcomes } from "../../src/outcomes/Outcomes.ts"
import { Money } from "../../src/schema.ts"
import { Details, Table } from "../ui/Table.tsx"
import { registerCatalogue, statusOf } from "../catalogue.tsx"
import { encode, jsonFlag } from "../run.ts"
import { bundleText } from "./credit.tsx"
import { decimalFlag } from "../DecimalFlag.ts"

const outcomeJson = encode(Outcome)
const outcomeWithStepsJson = encode(OutcomeWithSteps)
const moneyJson = encode(Money)

const OutcomeView = (props: { readonly outcome: OutcomeWithSteps; readonly title: string }) => {
  const json = outcomeWithStepsJson(props.outcome)
  return (
    <Box flexDirection="column">
      <Details
        title={props.title}
        fields={[
          ["id", json.id],
          ["name", json.name],
          ["agentKey", json.agentKey],
          ["description", json.description ?? "-"],
          ["base price", `${json.basePrice} USD`],
          ["margin", `${json.marginPercent} %`],
          ["price / outcome", `${json.pricePerOutcome} USD`],
          ["status", statusOf(json)],
          ["created", props.outcome.createdAt.toISOString()]
        ]}
      />
      <Text> </Text>
      <Table
        title="Steps"
        columns={[
          { header: "#", value: (step) => String(step.order), align: "right" },
          { header: "ID", value: (step) => step.id },
          { header: "NAME", value: (step) => step.name },
          { header: "AGENT KEY", value: (step) => step.agentKey },
          { header: "BASE PRICE", value: (step) => String(moneyJson(step.basePrice)), align: "right" },
          { header: "MODEL BUNDLE", value: (step) => bundleText(step.modelBundle) }
        ]}
        rows={props.outcome.steps}
      />
    </Box>
  )
}

export const registerOutcome = (program: Command) =>
  registerCatalogue(program, {
    noun: "outcome",
    plural: "outcomes",
    description: "outcomes: multi-step deliverables billed per completed run",
    operations: Outcomes,
    services: Outcomes.Default,
    createSchema: OutcomeCreate,
    updateSchema: OutcomeUpdate,
    fileHelp: "steps included",
    flags: (command) =>
      command
        .option("--name <name>")
        .option("--agent-key <key>")
        .option("--description <text>")
        .option("--margin <percent>", "marginPercent (at least -100)", decimalFlag)
        .option("--steps <json>", "steps as a JSON array of {id?, name, agentKey, modelBundle}", jsonFlag),
    bodyOf: (options) => ({
      name: options.name,
      agentKey: options.agentKey,
      description: options.description,
      marginPercent: options.margin,
      steps: options.steps
    }),
    json: outcomeWithStepsJson,
    view: (outcome, title) => <OutcomeView outcome={outcome} title={title} />,
    listJson: outcomeJson,
    columns: [
      { header: "ID", value: (o) => o.id },
      { header: "NAME", value: (o) => o.name },
      { header: "AGENT KEY", value: (o) => o.agentKey },
      { header: "PRICE / OUTCOME", value: (o) => String(outcomeJson(o).pricePerOutcome), align: "right" },
      { header: "STATUS", value: statusOf }
    ],
    help: { create: "create an outcome with its steps" }
  })
