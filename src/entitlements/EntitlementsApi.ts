import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Schema } from "effect"
import { CustomerIdPath, customerNotFound } from "../customers/CustomersApi.ts"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import { CheckRequest, CheckResult, CustomerEntitlements, Hold, ReleaseResult } from "./Entitlement.ts"

const HoldIdPath = Schema.Struct({
  id: Schema.String.annotations({ description: "The hold's id (`rsv_...`), as the reserving check answered it." })
})

/** Marks the check endpoint: the check lane (CheckLane.ts) answers exactly the endpoint so marked. */
export class CheckEndpoint extends Context.Tag("entitlements/CheckEndpoint")<CheckEndpoint, true>() {}

/** The message of the check's 200 (also written by src/entitlements/CheckLane.ts). */
export const checkedMessage = "Entitlement checked"

const holdNotFound = "No reservation with this id in the workspace."

export class EntitlementsApi extends HttpApiGroup.make("entitlements")
  .add(
    HttpApiEndpoint.post("check", "/entitlements/check")
      .setPayload(CheckRequest)
      .addSuccess(Success(CheckResult, { message: checkedMessage }))
      .annotate(CheckEndpoint, true)
      .annotateContext(documented({
        summary: "Check a customer's spend before spending, and optionally hold it",
        description: "Whether the customer may spend `usage` (CREDIT, WALLET) or `quantity` (OUTCOME, UNIT) now, by " +
          "the rules the signal's pricing applies: `remaining` is the committed prepaid balance (or the Wallet's), " +
          "`pending` what the customer's queued, not yet priced signals will take, `held` what its active holds keep " +
          "back, `estimatedCost` what this request takes, all in the balance's unit (credits, outcomes, units, " +
          "USD). `allowed` is true when the meters price the request against what is left after `pending` and " +
          "`held`: for a prepaid balance without an ARREAR component, remaining - pending - held >= estimatedCost. " +
          "`reason` is null when allowed, else NO_ACTIVE_PLAN, NOT_ON_PLAN, OUT_OF_ALLOWANCE, CUSTOMER_ARCHIVED or " +
          "MODEL_NOT_ENABLED. A WALLET is never refused for lack of funds. Without `reserve` nothing is written. " +
          "With `reserve` an allowed check holds the amount (`reservationId`, until `expiresAt`); concurrent reserving " +
          "checks of one customer are serialised and see each other's holds. A signal carrying the `reservationId` " +
          "settles the hold; `POST /reservations/{id}/release` releases it early; an expired hold releases itself.",
        errors: {
          400: "The body fails its schema (the message names the field): a field the meter does not take, a missing " +
            "`agentKey` or `usage`, `reserve` with more than one amount or a `ttlSeconds` outside 1 to 3600, or " +
            "neither `customerId` nor `externalId`. Nothing is written.",
          404: "No customer with this id, or no active customer with this `externalId`.",
          422: "The `agentKey` names no live credit, outcome step or unit of the workspace."
        }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/customers/:id/entitlements")
      .setPath(CustomerIdPath)
      .addSuccess(Success(CustomerEntitlements, { message: "Customer entitlements" }))
      .annotateContext(documented({
        summary: "List a customer's entitlements with what is pending and held",
        description: "Every credit, outcome, unit and composite of the active plan, and the ordinary Wallet, with " +
          "`granted`, `used` (this cycle), `remaining` (the committed prepaid balance), `pending` (what queued, not " +
          "yet priced signals will take) and `held` (active holds); and the active holds themselves. Only reads.",
        errors: { 404: customerNotFound.byId }
      }))
  )
  .add(
    HttpApiEndpoint.get("reservation", "/reservations/:id")
      .setPath(HoldIdPath)
      .addSuccess(Success(Hold, { message: "Reservation" }))
      .annotateContext(documented({
        summary: "Read a spend hold",
        description: "A hold as it stands: HELD, SETTLED (with the signal and usage-log row that settled it), " +
          "RELEASED, or EXPIRED (its time passed: it released itself).",
        errors: { 404: holdNotFound }
      }))
  )
  .add(
    HttpApiEndpoint.post("release", "/reservations/:id/release")
      .setPath(HoldIdPath)
      .addSuccess(Success(ReleaseResult, { message: "Reservation released" }))
      .annotateContext(documented({
        summary: "Release a spend hold early",
        description: "Ends a HELD hold now (`released: true`). A hold that has ended already (settled, released or " +
          "expired) is answered as it is with `released: false`, and nothing changes.",
        errors: { 404: holdNotFound }
      }))
  )  .annotate(
    OpenApi.Description,
    "Spend control: a check before spending (with queued signals and holds counted), a customer's entitlements with " +
      "what is pending and held, and spend holds (reservations)."
  )
{}
