/**
 * The six routes every catalogue resource has (credits, outcomes, units,
 * composites, plans): list, create, update, get, archive, unarchive, with the
 * spec's result shapes (`{credits: [...]}`, `{created: true, credit}`, ...).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "./Envelope.ts"
import { documented } from "./Documented.ts"
import { CatalogueListParams } from "./Pagination.ts"

const IdPath = Schema.Struct({ id: Schema.String.annotations({ description: "The record's id, as returned on create." }) })

type ErrorDescriptions = Parameters<typeof documented>[0]["errors"]

/** `{ [key]: schema }` plus `fields`, with the key kept in the type. */
const keyed = <K extends string, S extends Schema.Schema.Any, F extends Schema.Struct.Fields = {}>(
  key: K,
  schema: S,
  fields?: F
) => Schema.Struct({ ...fields, [key]: schema } as F & { readonly [P in K]: S })

const flag = <K extends string>(key: K) => ({ [key]: Schema.Literal(true) }) as { readonly [P in K]: Schema.Literal<[true]> }

export const catalogueGroup = <
  const Group extends string,
  const Key extends string,
  Listed extends Schema.Schema.Any,
  Record extends Schema.Schema.Any,
  Create extends Schema.Schema.Any,
  Update extends Schema.Schema.Any
>(resource: {
  /** The group and path name, plural: `credits`. */
  readonly group: Group
  /** The result key of one record: `credit`. */
  readonly key: Key
  /** The name in messages: `Credit`, as in "Credit created". */
  readonly label: string
  /** Records as listed (outcomes are listed without their steps). */
  readonly listed: Listed
  readonly record: Record
  readonly create: Create
  readonly update: Update
  /** For people: the group's tag description, then what each operation adds to the shared text. */
  readonly docs: {
    readonly tag: string
    readonly create: string
    readonly update: string
    readonly createErrors: ErrorDescriptions
    readonly updateErrors: ErrorDescriptions
    /** 409 of unarchive: the key a record gets back may be held by an active twin. */
    readonly unarchiveConflict?: string
  }
}) => {
  const { docs, group, key, label, record } = resource
  const lower = label.toLowerCase()
  // "an outcome", "a unit": the article by the sound, which for our nouns is their first letter's.
  const one = `${/^[aeio]/.test(lower) ? "an" : "a"} ${lower}`
  const outOfSale: { readonly [group: string]: string } = {
    plans: "cannot be bought by a new purchase",
    composites: "cannot be put on a new plan"
  }
  const notFound = `No ${lower} with this id in the workspace (another organisation's ${lower}s are not found either).`
  return HttpApiGroup.make(group)
    .add(
      HttpApiEndpoint.get("list", `/${group}`)
        .setUrlParams(CatalogueListParams)
        .addSuccess(Success(keyed(group, Schema.Array(resource.listed)), { message: `${label}s` }))
        .annotateContext(documented({
          summary: `List ${lower}s`,
          description: `A page of the workspace's ${lower}s, oldest first. \`active=true\` lists active ones only, ` +
            `\`active=false\` archived ones only, and no \`active\` lists both. Page with \`limit\` and \`cursor\`: ` +
            `a page shorter than \`limit\` is the last.`
        }))
    )
    .add(
      HttpApiEndpoint.post("create", `/${group}`)
        .setPayload(resource.create)
        .addSuccess(Success(keyed(key, record, flag("created")), { status: 201, message: `${label} created` }))
        .annotateContext(documented({ summary: `Create ${one}`, description: docs.create, errors: docs.createErrors }))
    )
    .add(
      HttpApiEndpoint.patch("update", `/${group}/:id`)
        .setPath(IdPath)
        .setPayload(resource.update)
        .addSuccess(Success(keyed(key, record, flag("updated")), { message: `${label} updated` }))
        .annotateContext(documented({
          summary: `Update ${one}`,
          description: docs.update,
          errors: { 404: notFound, ...docs.updateErrors }
        }))
    )
    .add(
      HttpApiEndpoint.get("get", `/${group}/:id`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record), { message: label }))
        .annotateContext(documented({
          summary: `Get ${one}`,
          description: `One ${lower} by id, archived or not.`,
          errors: { 404: notFound }
        }))
    )
    .add(
      HttpApiEndpoint.post("archive", `/${group}/:id/archive`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record, flag("archived")), { message: `${label} archived` }))
        .annotateContext(documented({
          summary: `Archive ${one}`,
          description: `Takes the ${lower} out of sale: nothing is deleted, it drops out of \`active=true\` lists and ` +
            `${outOfSale[group] ?? "cannot be put on a new plan or composite"}. What customers already hold is kept. ` +
            `Archiving an archived ` +
            `${lower} answers it again, still archived.`,
          errors: { 404: notFound }
        }))
    )
    .add(
      HttpApiEndpoint.post("unarchive", `/${group}/:id/unarchive`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record, flag("unarchived")), { message: `${label} unarchived` }))
        .annotateContext(documented({
          summary: `Unarchive ${one}`,
          description: `Makes an archived ${lower} active again. Unarchiving an active ${lower} answers it again, still active.`,
          errors: { 404: notFound, ...(docs.unarchiveConflict ? { 409: docs.unarchiveConflict } : {}) }
        }))
    )
    .annotate(OpenApi.Description, docs.tag)
}
