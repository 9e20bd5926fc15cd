import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { CustomerIdPath } from "../customers/CustomersApi.ts"
import { Success } from "../http/Envelope.ts"
import { PageParams } from "../http/Pagination.ts"
import { Member, MemberCreate, MemberUpdate } from "./Members.ts"

const MemberPath = Schema.Struct({ id: Schema.String, memberId: Schema.String })

export class MembersApi extends HttpApiGroup.make("members")
  .add(
    HttpApiEndpoint.get("list", "/customers/:id/members")
      .setPath(CustomerIdPath)
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Success(Schema.Struct({ members: Schema.Array(Member) }), { message: "Members" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/customers/:id/members")
      .setPath(CustomerIdPath)
      .setPayload(MemberCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), member: Member }), { status: 201, message: "Member added" })
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/customers/:id/members/:memberId")
      .setPath(MemberPath)
      .setPayload(MemberUpdate)
      .addSuccess(Success(Schema.Struct({ updated: Schema.Literal(true), member: Member }), { message: "Member updated" }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/customers/:id/members/:memberId")
      .setPath(MemberPath)
      .addSuccess(Success(Schema.Struct({ removed: Schema.Literal(true), member: Member }), { message: "Member removed" }))
  )
{}
