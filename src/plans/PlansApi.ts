import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { CatalogueListParams } from "../http/Pagination.ts"
import { Plan, PlanCreate, PlanUpdate } from "./Plan.ts"

const PlanIdPath = Schema.Struct({ id: Schema.String })

export class PlansApi extends HttpApiGroup.make("plans")
  .add(
    HttpApiEndpoint.get("list", "/plans")
      .setUrlParams(CatalogueListParams)
      .addSuccess(Success(Schema.Struct({ plans: Schema.Array(Plan) }), { message: "Plans" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/plans")
      .setPayload(PlanCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), plan: Plan }), { status: 201, message: "Plan created" })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/plans/:id")
      .setPath(PlanIdPath)
      .setPayload(PlanUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), plan: Plan }), { message: "Plan updated" }))
  )
  .add(
    HttpApiEndpoint.get("get", "/plans/:id")
      .setPath(PlanIdPath)
      .addSuccess(Success(Schema.Struct({ plan: Plan }), { message: "Plan" }))
  )
  .add(
    HttpApiEndpoint.post("archive", "/plans/:id/archive")
      .setPath(PlanIdPath)
      .addSuccess(Success(Schema.Struct({ archived: Schema.Literal(true), plan: Plan }), { message: "Plan archived" }))
  )
  .add(
    HttpApiEndpoint.post("unarchive", "/plans/:id/unarchive")
      .setPath(PlanIdPath)
      .addSuccess(
        Success(Schema.Struct({ unarchived: Schema.Literal(true), plan: Plan }), { message: "Plan unarchived" })
      )
  )
{}
