/**
 * The path and query parameters the billing groups share (purchases,
 * invoices, payments and taxes): a record's id in the path, and a list's
 * page narrowed to one customer.
 */
import { Schema } from "effect"
import { PageParams } from "../http/Pagination.ts"
import { CustomerId, PurchaseId } from "../ids.ts"

/** A record's id in the path; branded as a purchase's, which is the one id whose service takes a brand. */
export const RecordIdPath = Schema.Struct({
  id: PurchaseId.annotations({ description: "The record's id, as returned on create." })
})

/** A page of a list, optionally of one customer. */
export const CustomerFilter = Schema.Struct({
  ...PageParams,
  customerId: Schema.optional(CustomerId).annotations({
    description: "Keeps the rows of this customer (the service's customer id); all customers' rows by default."
  })
})
