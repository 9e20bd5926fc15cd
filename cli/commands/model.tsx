import type { Command } from "commander"
import { Effect } from "effect"
import { Model, ModelSet } from "../../src/models/Model.ts"
import { Models } from "../../src/models/Models.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { decimalFlag } from "../DecimalFlag.ts"
import type { OrganizationId } from "../../src/ids.ts"

const run = runnerOn(Models.Default)

const modelJson = encode(Model)

const rateText = (rate: string | number | null) => (rate === null ? "-" : String(rate))

const ModelView = (props: { readonly model: Model; readonly title: string }) => {
  const json = modelJson(props.model)
  return (
    <Details
      title={props.title}
      fields={[
        ["id", json.id],
        ["name", json.name],
        ["input", `${json.input} USD / 1M tokens`],
        ["output", `${json.output} USD / 1M tokens`],
        ["cache read", rateText(json.cacheRead)],
        ["cache write", rateText(json.cacheWrite)],
        ["status", json.enabled ? "enabled" : "disabled"],
        ["origin", json.builtIn ? "built-in" : "workspace"]
      ]}
    />
  )
}

const presentOne = (title: string) => ({
  json: (model: Model) => ({ model: modelJson(model) }),
  view: (model: Model) => <ModelView model={model} title={title} />
})

/** A cache rate flag: a number, or `none` to remove the rate. */
const optionalRateFlag = (value: string): string | "none" =>
  value.trim().toLowerCase() === "none" ? "none" : decimalFlag(value)

const optionalRate = (flag: string | "none" | undefined) => (flag === "none" ? null : flag)

interface ModelFlags {
  readonly json?: boolean
  readonly org?: string
  readonly id?: string
  readonly name?: string
  readonly input?: string
  readonly output?: string
  readonly cacheRead?: string | "none"
  readonly cacheWrite?: string | "none"
}

const toggle = (title: string, act: (models: Models, org: OrganizationId, id: string) => Effect.Effect<Model, unknown>) =>
  (id: string, options: ModelFlags) =>
    run(
      options,
      Effect.gen(function*() {
        const organizationId = yield* organizationOf(options)
        return yield* Effect.flatMap(Models, (models) => act(models, organizationId, id))
      }),
      presentOne(title)
    )

export const registerModel = (program: Command) => {
  const model = program.command("model").description("the workspace's models and their rates (USD per million tokens)")

  withOrg(model.command("list").description("list the workspace's models"))
    .action((options: ModelFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(Models, (models) => models.list(organizationId))
        }),
        {
          json: (list) => ({ models: list.map(modelJson), nextCursor: null }),
          view: (list) => (
            <Table
              columns={[
                { header: "ID", value: (m) => m.id },
                { header: "NAME", value: (m) => m.name },
                { header: "INPUT", value: (m) => String(modelJson(m).input), align: "right" },
                { header: "OUTPUT", value: (m) => String(modelJson(m).output), align: "right" },
                { header: "CACHE READ", value: (m) => rateText(modelJson(m).cacheRead), align: "right" },
                { header: "CACHE WRITE", value: (m) => rateText(modelJson(m).cacheWrite), align: "right" },
                { header: "STATUS", value: (m) => (m.enabled ? "enabled" : "disabled") }
              ]}
              rows={list}
              footer={`${list.length} model(s); rates in USD per million tokens`}
            />
          )
        }
      )
    )

  withOrg(model.command("set").description("add a model or change its name and rates (USD per million tokens)"))
    .requiredOption("--id <id>", "model id, e.g. gpt-4o")
    .option("--name <name>", "display name (required for a new model)")
    .option("--input <usd>", "input rate (required for a new model)", decimalFlag)
    .option("--output <usd>", "output rate (required for a new model)", decimalFlag)
    .option("--cache-read <usd>", "cache-read rate, or none", optionalRateFlag)
    .option("--cache-write <usd>", "cache-write rate, or none", optionalRateFlag)
    .action((options: ModelFlags) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const input = yield* decodeInput(
            ModelSet,
            Object.fromEntries(
              Object.entries({
                id: options.id,
                name: options.name,
                input: options.input,
                output: options.output,
                cacheRead: optionalRate(options.cacheRead),
                cacheWrite: optionalRate(options.cacheWrite)
              }).filter(([, value]) => value !== undefined)
            )
          )
          return yield* Effect.flatMap(Models, (models) => models.set(organizationId, input))
        }),
        presentOne("Model saved")
      )
    )

  withOrg(model.command("enable").description("allow a model in bundles and signals").argument("<id>"))
    .action(toggle("Model enabled", (models, org, id) => models.enable(org, id)))

  withOrg(model.command("disable").description("refuse a model in new bundles and signals (422)").argument("<id>"))
    .action(toggle("Model disabled", (models, org, id) => models.disable(org, id)))
}
