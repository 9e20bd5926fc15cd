import type { Command } from "commander"
import { Effect } from "effect"
import { Box, Text } from "../ui/ink.ts"
import { FixtureDocument, type LoadedRecord, loadFixtures } from "../../src/toolkit/Fixtures.ts"
import { DEFAULT_DEMO_WEBHOOK_URL, seedWorkspace } from "../../src/toolkit/Seed.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, organizationOf, readBodyFile, runnerOn, withJson, withOrg } from "../run.ts"
import { progressReporter } from "../ui/Live.tsx"
import { ServicesLive } from "../../src/app/Services.ts"

const run = runnerOn(ServicesLive)

const summary = (records: ReadonlyArray<LoadedRecord>) => ({
  created: records.filter((r) => r.status === "created").length,
  existing: records.filter((r) => r.status === "existing").length
})

const RecordsTable = (props: { readonly title: string; readonly records: ReadonlyArray<LoadedRecord> }) => {
  const { created, existing } = summary(props.records)
  return (
    <Table
      title={props.title}
      columns={[
        { header: "KIND", value: (r) => r.kind },
        { header: "KEY", value: (r) => r.key },
        { header: "ID", value: (r) => r.id },
        { header: "STATUS", value: (r) => r.status },
        { header: "SECRET (shown once)", value: (r) => r.secret ?? "", whole: true }
      ]}
      rows={props.records}
      footer={`${props.records.length} record(s): ${created} created, ${existing} already there`}
    />
  )
}

/** How many records a document names, for the progress bar. */
const recordCount = (document: FixtureDocument) =>
  Object.values(document).reduce((total, list) => total + (Array.isArray(list) ? list.length : 0), 0)

export const registerToolkit = (program: Command) => {
  withJson(program.command("seed").description("create a demo workspace with something of everything"))
    .option("--name <name>", "organisation name", "Demo workspace")
    .option("--webhook-url <url>", "where the demo webhook endpoint points", DEFAULT_DEMO_WEBHOOK_URL)
    .action((options: { json?: boolean; name: string; webhookUrl: string }) =>
      run(options, seedWorkspace({ name: options.name, webhookUrl: options.webhookUrl }), {
        json: ({ organization, apiKey, records }) => ({
          organization: { id: organization.id, name: organization.name },
          apiKey,
          records,
          ...summary(records)
        }),
        view: ({ organization, apiKey, records }) => (
          <Box flexDirection="column">
            <Details
              title="Demo workspace ready. The API key is shown once: keep it now."
              fields={[["organisation", organization.id], ["name", organization.name], ["apiKey", apiKey]]}
            />
            <Text> </Text>
            <RecordsTable title="What was made" records={records} />
            <Text> </Text>
            <Text dimColor>
              Try: BILLING_ORG={organization.id} billing webhook list; billing serve; then call the API with the key.
            </Text>
          </Box>
        )
      }))

  const fixtures = program.command("fixtures").description("scripted workspaces")
  withOrg(fixtures.command("load").description("load catalogue, customers, purchases and webhooks from JSON or YAML").argument("<file>"))
    .action((file: string, options: { json?: boolean; org?: string }) => {
      const progress = progressReporter(options, "records")
      return run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const document = yield* Effect.flatMap(readBodyFile(file), (body) => decodeInput(FixtureDocument, body))
          const total = recordCount(document)
          let done = 0
          progress.update(0, total)
          return yield* loadFixtures(organizationId, document, () => progress.update(++done, total))
        }).pipe(Effect.ensuring(Effect.sync(progress.stop))),
        {
          json: (records) => ({ records, ...summary(records) }),
          view: (records) => <RecordsTable title={`Loaded ${file}`} records={records} />
        }
      )
    })
}
