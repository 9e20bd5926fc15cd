/**
 * The purchases group: a customer put on a plan, the purchase read, updated
 * and cancelled, and its plan changed (prorated now, or scheduled for the
 * cycle end). Handlers: PurchasesHttp.ts; the service: Purchases.ts.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { CustomerFilter, RecordIdPath } from "./BillingParams.ts"
import { Invoice } from "./Invoice.ts"
import { PurchaseChange, PurchaseCreate, PurchaseJson, PurchaseUpdate } from "./Purchase.ts"

const PurchaseResult = Schema.Struct({ purchase: PurchaseJson })

const ChangeResult = Schema.Struct({
  changed: Schema.Literal(true),
  replayed: Schema.Boolean.annotations({ description: "True when this answers a repeat of an `idempotencyKey`." }),
  purchase: PurchaseJson,
  invoice: Schema.NullOr(Invoice).annotations({
    description: "The PRORATION invoice a change NOW of an ACTIVE purchase issued; null otherwise."
  })
})

export class PurchasesApi extends HttpApiGroup.make("purchases")
  .add(
    HttpApiEndpoint.post("create", "/purchases")
      .setPayload(PurchaseCreate)
      .addSuccess(
        Success(Schema.Struct({ created: Schema.Literal(true), purchase: PurchaseJson }), {
          status: 201,
          message: "Purchase created"
        })
      )
      .annotateContext(documented({
        summary: "Put a customer on a plan",
        description: "Buys an active plan for a customer named by `customerId` or `externalId` (`customerId` wins " +
          "when both are sent). The plan is copied as it is now: later plan changes do not reach this purchase. " +
          "Without a `billingDate` (or with today's) the cycle starts now and prepaid components are charged at " +
          "once; a future `billingDate` schedules it.",
        errors: {
          400: "The body fails its schema (the message names the field), neither `customerId` nor `externalId` is " +
            "sent, the plan is unknown or archived, or `billingDate` is in the past.",
          404: "No customer with this id, or no active customer with this `externalId`.",
          409: "The customer is archived, or already has a SCHEDULED or ACTIVE purchase (cancel it first)."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/purchases")
      .setUrlParams(CustomerFilter)
      .addSuccess(Success(Schema.Struct({ purchases: Schema.Array(PurchaseJson) }), { message: "Purchases" }))
      .annotateContext(documented({
        summary: "List purchases",
        description: "A page of the workspace's purchases in creation order, optionally of one customer."
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/purchases/:id")
      .setPath(RecordIdPath)
      .addSuccess(Success(PurchaseResult, { message: "Purchase" }))
      .annotateContext(documented({
        summary: "Get a purchase",
        description: "One purchase: its plan snapshot, status, billing date and current period.",
        errors: { 404: "No purchase with this id in the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/purchases/:id")
      .setPath(RecordIdPath)
      .setPayload(PurchaseUpdate)
      .addSuccess(
        Success(Schema.Struct({ updated: Schema.Literal(true), purchase: PurchaseJson }), { message: "Purchase updated" })
      )
      .annotateContext(documented({
        summary: "Update a purchase's auto-payment setting",
        description: "Turns automatic payment of the purchase's invoices on or off.",
        errors: { 404: "No purchase with this id in the workspace.", 409: "The purchase is cancelled." }
      }))
  )
  .add(
    HttpApiEndpoint.post("cancel", "/purchases/:id/cancel")
      .setPath(RecordIdPath)
      .addSuccess(
        Success(Schema.Struct({ cancelled: Schema.Literal(true), purchase: PurchaseJson }), {
          message: "Purchase cancelled"
        })
      )
      .annotateContext(documented({
        summary: "Cancel a purchase",
        description: "Ends the purchase now: nothing more is billed on it and the customer has no plan until a new " +
          "purchase. What was already charged stays charged.",
        errors: { 404: "No purchase with this id in the workspace.", 409: "The purchase is already cancelled." }
      }))
  )
  .add(
    HttpApiEndpoint.post("change", "/purchases/:id/change")
      .setPath(RecordIdPath)
      .setPayload(PurchaseChange)
      .addSuccess(
        Success(ChangeResult, {
          message: (result) =>
            result.replayed
              ? "Already processed: this idempotencyKey was used before; nothing was changed again"
              : result.purchase.scheduledChange !== null && result.invoice === null
              ? "Plan change scheduled"
              : "Plan changed"
        })
      )
      .annotateContext(documented({
        summary: "Change a purchase's plan",
        description: "Moves a purchase to another active plan; the billing anchor stays. `when: NOW` changes it at " +
          "once: the unused share of the old plan's price is credited and the new plan's price charged for the rest " +
          "of the cycle, both prorated to the second and rounded to the cent, on one `PRORATION` invoice that also " +
          "bills the old plan's usage in arrears so far (returned as `invoice`; a net credit goes to the wallet). " +
          "Prepaid balances move by the share of the cycle left. `when: CYCLE_END` schedules the change " +
          "(`purchase.scheduledChange`): the cycle job applies it at the renewal, without proration. The new plan is " +
          "copied as it is at the request. With an `idempotencyKey` a repeat changes nothing and answers the first " +
          "change (`replayed: true`).",
        errors: {
          400: "The body fails its schema (the message names the field), or the plan is unknown or archived.",
          404: "No purchase with this id in the workspace.",
          409: "The purchase is cancelled, or its customer is archived.",
          422: "The `idempotencyKey` was used before with a different request. Nothing is changed."
        }
      }))
  )
  .add(
    HttpApiEndpoint.del("removeScheduledChange", "/purchases/:id/scheduled-change")
      .setPath(RecordIdPath)
      .addSuccess(
        Success(Schema.Struct({ removed: Schema.Literal(true), purchase: PurchaseJson }), {
          message: "Scheduled plan change removed"
        })
      )
      .annotateContext(documented({
        summary: "Remove a purchase's scheduled plan change",
        description: "Drops the change waiting for the cycle end (`when: CYCLE_END`): the purchase renews on its " +
          "current plan.",
        errors: {
          404: "No purchase with this id in the workspace, or it has no scheduled plan change.",
          409: "The purchase is cancelled, or its customer is archived."
        }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Purchases: a customer's purchase of a plan, which starts its billing cycle and charges prepaid components; " +
      "plan changes, prorated now or scheduled for the cycle end."
  )
{}
