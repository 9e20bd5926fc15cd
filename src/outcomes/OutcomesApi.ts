import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { CatalogueListParams } from "../http/Pagination.ts"
import { Outcome, OutcomeCreate, OutcomeUpdate, OutcomeWithSteps } from "./Outcome.ts"

const OutcomeIdPath = Schema.Struct({ id: Schema.String })

export class OutcomesApi extends HttpApiGroup.make("outcomes")
  .add(
    HttpApiEndpoint.get("list", "/outcomes")
      .setUrlParams(CatalogueListParams)
      .addSuccess(Success(Schema.Struct({ outcomes: Schema.Array(Outcome) }), { message: "Outcomes" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/outcomes")
      .setPayload(OutcomeCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), outcome: OutcomeWithSteps }), {
          status: 201,
          message: "Outcome created"
        })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/outcomes/:id")
      .setPath(OutcomeIdPath)
      .setPayload(OutcomeUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), outcome: OutcomeWithSteps }), {
          message: "Outcome updated"
        })
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/outcomes/:id")
      .setPath(OutcomeIdPath)
      .addSuccess(Success(Schema.Struct({ outcome: OutcomeWithSteps }), { message: "Outcome" }))
  )
  .add(
    HttpApiEndpoint.post("archive", "/outcomes/:id/archive")
      .setPath(OutcomeIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), outcome: OutcomeWithSteps }), {
          message: "Outcome archived"
        })
      )
  )
  .add(
    HttpApiEndpoint.post("unarchive", "/outcomes/:id/unarchive")
      .setPath(OutcomeIdPath)
      .addSuccess(
        Success(Schema.Struct({ unarchived: Schema.Literal(true), outcome: OutcomeWithSteps }), {
          message: "Outcome unarchived"
        })
      )
  )
{}
