import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { CatalogueListParams } from "../http/Pagination.ts"
import { Composite, CompositeCreate, CompositeUpdate } from "./Composite.ts"

const CompositeIdPath = Schema.Struct({ id: Schema.String })

export class CompositesApi extends HttpApiGroup.make("composites")
  .add(
    HttpApiEndpoint.get("list", "/composites")
      .setUrlParams(CatalogueListParams)
      .addSuccess(Success(Schema.Struct({ composites: Schema.Array(Composite) }), { message: "Composites" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/composites")
      .setPayload(CompositeCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), composite: Composite }), {
          status: 201,
          message: "Composite created"
        })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/composites/:id")
      .setPath(CompositeIdPath)
      .setPayload(CompositeUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), composite: Composite }), { message: "Composite updated" })
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/composites/:id")
      .setPath(CompositeIdPath)
      .addSuccess(Success(Schema.Struct({ composite: Composite }), { message: "Composite" }))
  )
  .add(
    HttpApiEndpoint.post("archive", "/composites/:id/archive")
      .setPath(CompositeIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), composite: Composite }), {
          message: "Composite archived"
        })
      )
  )
  .add(
    HttpApiEndpoint.post("unarchive", "/composites/:id/unarchive")
      .setPath(CompositeIdPath)
      .addSuccess(
        Success(Schema.Struct({ unarchived: Schema.Literal(true), composite: Composite }), {
          message: "Composite unarchived"
        })
      )
  )
{}
