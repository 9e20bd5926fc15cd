import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { CatalogueListParams } from "../http/Pagination.ts"
import { Credit, CreditCreate, CreditUpdate } from "./Credit.ts"

const CreditIdPath = Schema.Struct({ id: Schema.String })

export class CreditsApi extends HttpApiGroup.make("credits")
  .add(
    HttpApiEndpoint.get("list", "/credits")
      .setUrlParams(CatalogueListParams)
      .addSuccess(Success(Schema.Struct({ credits: Schema.Array(Credit) }), { message: "Credits" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/credits")
      .setPayload(CreditCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), credit: Credit }), {
          status: 201,
          message: "Credit created"
        })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/credits/:id")
      .setPath(CreditIdPath)
      .setPayload(CreditUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), credit: Credit }), { message: "Credit updated" }))
  )
  .add(
    HttpApiEndpoint.get("get", "/credits/:id")
      .setPath(CreditIdPath)
      .addSuccess(Success(Schema.Struct({ credit: Credit }), { message: "Credit" }))
  )
  .add(
    HttpApiEndpoint.post("archive", "/credits/:id/archive")
      .setPath(CreditIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), credit: Credit }), { message: "Credit archived" })
      )
  )
  .add(
    HttpApiEndpoint.post("unarchive", "/credits/:id/unarchive")
      .setPath(CreditIdPath)
      .addSuccess(
        Success(Schema.Struct({ unarchived: Schema.Literal(true), credit: Credit }), { message: "Credit unarchived" })
      )
  )
{}
