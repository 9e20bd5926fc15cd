/**
 * The six routes every catalogue resource has (credits, outcomes, units,
 * composites, plans): list, create, update, get, archive, unarchive, with the
 * spec's result shapes (`{credits: [...]}`, `{created: true, credit}`, ...).
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "./Envelope.ts"
import { CatalogueListParams } from "./Pagination.ts"

const IdPath = Schema.Struct({ id: Schema.String })

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
}) => {
  const { group, key, label, record } = resource
  return HttpApiGroup.make(group)
    .add(
      HttpApiEndpoint.get("list", `/${group}`)
        .setUrlParams(CatalogueListParams)
        .addSuccess(Success(keyed(group, Schema.Array(resource.listed)), { message: `${label}s` }))
    )
    .add(
      HttpApiEndpoint.post("create", `/${group}`)
        .setPayload(resource.create)
        .addSuccess(Success(keyed(key, record, flag("created")), { status: 201, message: `${label} created` }))
    )
    .add(
      HttpApiEndpoint.patch("update", `/${group}/:id`)
        .setPath(IdPath)
        .setPayload(resource.update)
        .addSuccess(Success(keyed(key, record, flag("updated")), { message: `${label} updated` }))
    )
    .add(
      HttpApiEndpoint.get("get", `/${group}/:id`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record), { message: label }))
    )
    .add(
      HttpApiEndpoint.post("archive", `/${group}/:id/archive`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record, flag("archived")), { message: `${label} archived` }))
    )
    .add(
      HttpApiEndpoint.post("unarchive", `/${group}/:id/unarchive`)
        .setPath(IdPath)
        .addSuccess(Success(keyed(key, record, flag("unarchived")), { message: `${label} unarchived` }))
    )
}
