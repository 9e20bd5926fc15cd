import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { CustomerIdPath, customerNotFound } from "../customers/CustomersApi.ts"
import { documented } from "../http/Documented.ts"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { Member, MemberCreate, MemberUpdate } from "./Members.ts"

const MemberPath = Schema.Struct({
  ...CustomerIdPath.fields,
  memberId: Schema.String.annotations({ description: "The member's id, as returned when it was added." })
})

const memberNotFound = "No customer with this id in the workspace, or no member with this id on the customer."

export class MembersApi extends HttpApiGroup.make("members")
  .add(
    HttpApiEndpoint.get("list", "/customers/:id/members")
      .setPath(CustomerIdPath)
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Success(Schema.Struct({ members: Schema.Array(Member) }), { message: "Members" }))
      .annotateContext(documented({
        summary: "List a customer's members",
        description: "A page of the people of a customer that signals can be attributed to, in the order they were added.",
        errors: { 404: customerNotFound.byId }
      }))
  )
  .add(
    HttpApiEndpoint.post("create", "/customers/:id/members")
      .setPath(CustomerIdPath)
      .setPayload(MemberCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), member: Member }), { status: 201, message: "Member added" })
      )
      .annotateContext(documented({
        summary: "Add a member to a customer",
        description: "Adds a person, by e-mail, to the customer; a signal's `member` names one of them (matched " +
          "case-insensitively) to attribute the usage.",
        errors: {
          404: customerNotFound.byId,
          409: "The customer already has a member with this e-mail, or the customer is archived."
        }
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/customers/:id/members/:memberId")
      .setPath(MemberPath)
      .setPayload(MemberUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), member: Member }), { message: "Member updated" }))
      .annotateContext(documented({
        summary: "Update a member",
        description: "Changes the fields sent and leaves the others untouched.",
        errors: {
          404: memberNotFound,
          409: "Another member of the customer has this e-mail, or the customer is archived."
        }
      }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/customers/:id/members/:memberId")
      .setPath(MemberPath)
      .addSuccess(Success(Schema.Struct({ removed: Schema.Literal(true), member: Member }), { message: "Member removed" }))
      .annotateContext(documented({
        summary: "Remove a member",
        description: "Removes the person from the customer; usage already attributed to it keeps its attribution.",
        errors: { 404: memberNotFound, 409: "The customer is archived." }
      }))
  )
  .annotate(OpenApi.Description, "Members: the people of a customer that usage can be attributed to.")
{}
