import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { ExternalId } from "../schema.ts"
import { Customer, CustomerCreate, CustomerUpdate } from "./Customer.ts"

export const CustomerIdPath = Schema.Struct({ id: Schema.String })
export const ExternalIdPath = Schema.Struct({ externalId: ExternalId })

const CustomerResult = Schema.Struct({ customer: Customer })

export class CustomersApi extends HttpApiGroup.make("customers")
  .add(
    HttpApiEndpoint.get("list", "/customers")
      .setUrlParams(Schema.Struct({
        ...PageParams,
        q: Schema.optional(Schema.String),
        includeArchived: Schema.optional(Schema.Literal("true", "false"))
      }))
      .addSuccess(Success(Schema.Struct({ customers: Schema.Array(Customer) }), { message: "Customers" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/customers")
      .setPayload(CustomerCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), customer: Customer }), {
          status: 201,
          message: "Customer created"
        })
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/customers/:id")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CustomerResult, { message: "Customer" }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/customers/:id")
      .setPath(CustomerIdPath)
      .setPayload(CustomerUpdate)
      .addSuccess(Success(CustomerResult, { message: "Customer updated" }))
  )
  .add(
    HttpApiEndpoint.del("archive", "/customers/:id")
      .setPath(CustomerIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), customer: Customer }), { message: "Customer archived" })
      )
  )
  .add(
    HttpApiEndpoint.get("getByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CustomerResult, { message: "Customer" }))
  )
  .add(
    HttpApiEndpoint.patch("updateByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .setPayload(CustomerUpdate)
      .addSuccess(Success(CustomerResult, { message: "Customer updated" }))
  )
  .add(
    HttpApiEndpoint.del("archiveByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), customer: Customer }), { message: "Customer archived" })
      )
  )
{}
