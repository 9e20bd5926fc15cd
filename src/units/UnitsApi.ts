import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { CatalogueListParams } from "../http/Pagination.ts"
import { Unit, UnitCreate, UnitUpdate } from "./Unit.ts"

const UnitIdPath = Schema.Struct({ id: Schema.String })

export class UnitsApi extends HttpApiGroup.make("units")
  .add(
    HttpApiEndpoint.get("list", "/units")
      .setUrlParams(CatalogueListParams)
      .addSuccess(Success(Schema.Struct({ units: Schema.Array(Unit) }), { message: "Units" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/units")
      .setPayload(UnitCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), unit: Unit }), { status: 201, message: "Unit created" })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/units/:id")
      .setPath(UnitIdPath)
      .setPayload(UnitUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), unit: Unit }), { message: "Unit updated" }))
  )
  .add(
    HttpApiEndpoint.get("get", "/units/:id")
      .setPath(UnitIdPath)
      .addSuccess(Success(Schema.Struct({ unit: Unit }), { message: "Unit" }))
  )
  .add(
    HttpApiEndpoint.post("archive", "/units/:id/archive")
      .setPath(UnitIdPath)
      .addSuccess(Success(Schema.Struct({ archived: Schema.Literal(true), unit: Unit }), { message: "Unit archived" }))
  )
  .add(
    HttpApiEndpoint.post("unarchive", "/units/:id/unarchive")
      .setPath(UnitIdPath)
      .addSuccess(
        Success(Schema.Struct({ unarchived: Schema.Literal(true), unit: Unit }), { message: "Unit unarchived" })
      )
  )
{}
