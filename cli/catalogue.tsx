/**
 * The six commands every catalogue record has (create, list, get, update,
 * archive, unarchive), once. Each record's file says only what is its own:
 * its flags, how a record looks, its list columns.
 */
import type { Command } from "commander"
import { Effect, type Layer, type Schema } from "effect"
import type { ReactElement } from "react"
import { type CatalogueListQuery, toPage } from "../src/http/Pagination.ts"
import { type Column, Table } from "./ui/Table.tsx"
import { listFooter, nextCursorOf, limitOption } from "./lists.ts"
import { bodyOf, type CommandBase, decodeInput, organizationOf, runnerOn, withOrg } from "./run.ts"
import type { OrganizationId } from "../src/ids.ts"

/** `A` is a record as one command shows it; `L` as a list row (an outcome lists without its steps). */
export interface CatalogueOperations<A, C, U, L = A> {
  readonly create: (organizationId: OrganizationId, input: C) => Effect.Effect<A, unknown>
  readonly list: (organizationId: OrganizationId, query: CatalogueListQuery) => Effect.Effect<ReadonlyArray<L>, unknown>
  readonly get: (organizationId: OrganizationId, id: string) => Effect.Effect<A, unknown>
  readonly update: (organizationId: OrganizationId, id: string, patch: U) => Effect.Effect<A, unknown>
  readonly archive: (organizationId: OrganizationId, id: string) => Effect.Effect<A, unknown>
  readonly unarchive: (organizationId: OrganizationId, id: string) => Effect.Effect<A, unknown>
}

export interface CatalogueCommands<A, C, CI, U, UI, L = A, R = never> {
  /** The command name and the JSON key of one record (`credit`). */
  readonly noun: string
  /** The JSON key of a list (`credits`). */
  readonly plural: string
  readonly description: string
  readonly operations: Effect.Effect<CatalogueOperations<A, C, U, L>, never, R>
  /** What a run of these commands builds: the record's service (cli/run.ts `runnerOn`). */
  readonly services: Layer.Layer<R, unknown, CommandBase>
  readonly createSchema: Schema.Schema<C, CI>
  readonly updateSchema: Schema.Schema<U, UI>
  /** What `--file` may hold beyond the flags, for the help text. */
  readonly fileHelp?: string
  /** The record's own flags, and the body fields they set. */
  readonly flags: (command: Command) => Command
  readonly bodyOf: (options: Record<string, unknown>) => Record<string, unknown>
  readonly json: (record: A) => unknown
  readonly view: (record: A, title: string) => ReactElement
  readonly listJson: (row: L) => unknown
  readonly columns: ReadonlyArray<Column<L>>
  readonly help?: {
    readonly create?: string
    readonly update?: string
    readonly archive?: string
    readonly unarchive?: string
  }
}

export interface CatalogueListFlags extends Record<string, unknown> {
  readonly json?: boolean
  readonly org?: string
  readonly active?: boolean
  readonly archived?: boolean
  readonly limit?: number
  readonly cursor?: string
}

export const statusOf = (record: { readonly isActive: boolean }) => (record.isActive ? "active" : "archived")

const catalogueQueryOf = (options: CatalogueListFlags): CatalogueListQuery => ({
  page: toPage(options),
  active: options.active ? true : options.archived ? false : undefined
})

type Flags = Record<string, unknown> & { readonly json?: boolean; readonly org?: string; readonly file?: string }

export const registerCatalogue = <A, C, CI, U, UI, L extends { readonly id: string } = A & { readonly id: string }, R = never>(
  program: Command,
  spec: CatalogueCommands<A, C, CI, U, UI, L, R>
) => {
  const run = runnerOn(spec.services)
  const title = spec.noun.charAt(0).toUpperCase() + spec.noun.slice(1)
  const aNoun = `${/^[aeiou]/.test(spec.noun) ? "an" : "a"} ${spec.noun}`
  const present = (heading: string, wrap: Record<string, true> = {}) => ({
    json: (record: A) => ({ ...wrap, [spec.noun]: spec.json(record) }),
    view: (record: A) => spec.view(record, heading)
  })
  const withRecordFlags = (command: Command) =>
    spec.flags(
      withOrg(command).option(
        "--file <path>",
        `request body as JSON or YAML${spec.fileHelp ? `, ${spec.fileHelp}` : ""} (flags override it)`
      )
    )
  const inOrganization = <B,>(options: { readonly org?: string }, f: (operations: CatalogueOperations<A, C, U, L>, org: OrganizationId) => Effect.Effect<B, unknown>) =>
    Effect.flatMap(organizationOf(options), (organizationId) =>
      Effect.flatMap(spec.operations, (operations) => f(operations, organizationId)))
  const byId = (
    heading: string,
    wrap: Record<string, true>,
    act: (operations: CatalogueOperations<A, C, U, L>, org: OrganizationId, id: string) => Effect.Effect<A, unknown>
  ) =>
  (id: string, options: Flags) => run(options, inOrganization(options, (operations, org) => act(operations, org, id)), present(heading, wrap))

  const command = program.command(spec.noun).description(spec.description)

  withRecordFlags(command.command("create").description(spec.help?.create ?? `create ${aNoun}`))
    .action((options: Flags) =>
      run(
        options,
        inOrganization(options, (operations, org) =>
          Effect.flatMap(
            Effect.flatMap(bodyOf(options, spec.bodyOf(options)), (body) => decodeInput(spec.createSchema, body)),
            (input) => operations.create(org, input)
          )),
        present(`${title} created`, { created: true })
      )
    )

  withOrg(command.command("list").description(`list ${spec.plural}, oldest first`))
    .option("--active", "active records only")
    .option("--archived", "archived records only")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: CatalogueListFlags) =>
      run(
        options,
        inOrganization(options, (operations, org) => operations.list(org, catalogueQueryOf(options))),
        {
          json: (list) => ({ [spec.plural]: list.map(spec.listJson), nextCursor: nextCursorOf(list, options) }),
          view: (list) => (
            <Table columns={spec.columns} rows={list} footer={listFooter(`${list.length} ${spec.noun}(s)`, list, options)} />
          )
        }
      )
    )

  withOrg(command.command("get").description(`show ${aNoun}`).argument("<id>"))
    .action(byId(title, {}, (operations, org, id) => operations.get(org, id)))

  withRecordFlags(
    command.command("update").description(spec.help?.update ?? `change ${aNoun}; only the given fields change`)
      .argument("<id>")
  )
    .action((id: string, options: Flags) =>
      run(
        options,
        inOrganization(options, (operations, org) =>
          Effect.flatMap(
            Effect.flatMap(bodyOf(options, spec.bodyOf(options)), (body) => decodeInput(spec.updateSchema, body)),
            (patch) => operations.update(org, id, patch)
          )),
        present(`${title} updated`, { updated: true })
      )
    )

  withOrg(
    command.command("archive").description(spec.help?.archive ?? `archive ${aNoun} (nothing is deleted)`).argument("<id>")
  )
    .action(byId(`${title} archived`, { archived: true }, (operations, org, id) => operations.archive(org, id)))

  withOrg(
    command.command("unarchive").description(spec.help?.unarchive ?? `make an archived ${spec.noun} active again`)
      .argument("<id>")
  )
    .action(byId(`${title} unarchived`, { unarchived: true }, (operations, org, id) => operations.unarchive(org, id)))
}
