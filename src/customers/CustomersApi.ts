import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { PageParams } from "../http/Pagination.ts"
import { CustomerId } from "../ids.ts"
import { ExternalId } from "../schema.ts"
import { Customer, CustomerCreate, CustomerUpdate } from "./Customer.ts"

export const CustomerIdPath = Schema.Struct({
  id: CustomerId.annotations({ description: "The service's customer id (`cus_...`)." })
})
export const ExternalIdPath = Schema.Struct({
  externalId: ExternalId.annotations({
    description: "The caller's own id of an active customer: 1 to 32 characters from `A-Z a-z 0-9 -`, matched exactly."
  })
})

/** The 404 of a route that names its customer in the path, by id or by externalId. */
export const customerNotFound = {
  byId: "No customer with this id in the workspace (another organisation's customers are not found either).",
  byExternalId: "No active customer has this `externalId` in the workspace."
} as const

/**
 * The text of a route's `/customers/ext/{externalId}` twin: the same operation,
 * its customer named by the caller's own id.
 */
export const byExternalId = (doc: Parameters<typeof documented>[0]) =>
  documented({
    summary: `${doc.summary} (by externalId)`,
    description: `${doc.description} The customer is named by its \`externalId\` instead of its id; a malformed ` +
      "`externalId` is a 400.",
    errors: { ...doc.errors, 404: customerNotFound.byExternalId }
  })

const CustomerResult = Schema.Struct({ customer: Customer })

const getDoc = {
  summary: "Get a customer",
  description: "One customer, archived or not, with its profile fields (null when unset).",
  errors: { 404: customerNotFound.byId }
}

const updateDoc = {
  summary: "Update a customer",
  description: "Changes the fields sent: a field sent as null clears it (the `externalId` too), a field left out " +
    "is untouched. An archived customer is read-only.",
  errors: {
    404: customerNotFound.byId,
    409: "The customer is archived, or the new `externalId` is already held by another active customer."
  }
}

const archiveDoc = {
  summary: "Archive a customer",
  description: "Archives the customer: nothing is deleted, the customer becomes read-only, signals and wallet " +
    "changes against it are refused (409), and its `externalId` may be reused by another customer. Archiving an " +
    "archived customer answers it again and keeps its first `archivedAt`.",
  errors: { 404: customerNotFound.byId }
}

export class CustomersApi extends HttpApiGroup.make("customers")
  .add(
    HttpApiEndpoint.get("list", "/customers")
      .setUrlParams(Schema.Struct({
        ...PageParams,
        q: Schema.optional(Schema.String).annotations({
          description: "Keeps customers whose name or e-mail contains this text, case-insensitively."
        }),
        includeArchived: Schema.optional(Schema.Literal("true", "false")).annotations({
          description: "`true` lists archived customers too; by default only active ones are listed."
        })
      }))
      .addSuccess(Success(Schema.Struct({ customers: Schema.Array(Customer) }), { message: "Customers" }))
      .annotateContext(documented({
        summary: "List customers",
        description: "A page of the workspace's customers in creation order, optionally filtered by `q`. Page with " +
          "`limit` and `cursor`: a page shorter than `limit` is the last."
      }))
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
      .annotateContext(documented({
        summary: "Create a customer",
        description: "Creates the billing identity of one of your customers: a name, an e-mail, optionally your own " +
          "id for it (`externalId`), profile fields and a currency (the workspace's primary currency by default). " +
          "A retried create may make a second customer: look the customer up before retrying.",
        errors: { 409: "The `externalId` is already held by another active customer." }
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/customers/:id")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CustomerResult, { message: "Customer" }))
      .annotateContext(documented(getDoc))
  )
  .add(
    HttpApiEndpoint.patch("update", "/customers/:id")
      .setPath(CustomerIdPath)
      .setPayload(CustomerUpdate)
      .addSuccess(Success(CustomerResult, { message: "Customer updated" }))
      .annotateContext(documented(updateDoc))
  )
  .add(
    HttpApiEndpoint.del("archive", "/customers/:id")
      .setPath(CustomerIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), customer: Customer }), { message: "Customer archived" })
      )
      .annotateContext(documented(archiveDoc))
  )
  .add(
    HttpApiEndpoint.get("getByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .addSuccess(Success(CustomerResult, { message: "Customer" }))
      .annotateContext(byExternalId(getDoc))
  )
  .add(
    HttpApiEndpoint.patch("updateByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .setPayload(CustomerUpdate)
      .addSuccess(Success(CustomerResult, { message: "Customer updated" }))
      .annotateContext(byExternalId({
        ...updateDoc,
        description: `${updateDoc.description} A new \`externalId\` in the body changes it; the customer is then ` +
          "addressed by the new value."
      }))
  )
  .add(
    HttpApiEndpoint.del("archiveByExternalId", "/customers/ext/:externalId")
      .setPath(ExternalIdPath)
      .addSuccess(
        Success(Schema.Struct({ archived: Schema.Literal(true), customer: Customer }), { message: "Customer archived" })
      )
      .annotateContext(byExternalId(archiveDoc))
  )
  .annotate(
    OpenApi.Description,
    "Customers: the billing identities of your own customers, addressed by the service's id or by your own " +
      "`externalId` (the `/customers/ext/{externalId}` routes)."
  )
{}
