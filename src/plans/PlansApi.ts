import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Plan, PlanCreate, PlanUpdate } from "./Plan.ts"

export class PlansApi extends catalogueGroup({
  group: "plans",
  key: "plan",
  label: "Plan",
  listed: Plan,
  record: Plan,
  create: PlanCreate,
  update: PlanUpdate,
  docs: {
    tag: "Plans: bundles of entitlements a customer buys. Each component is billed in advance (ADVANCE, prepaid at " +
      "the start of each cycle) or in arrears (ARREAR, billed on usage). Only active plans can be bought.",
    create: "Defines a plan in the workspace's primary currency: its components (a wallet amount, or a credit, outcome, " +
      "unit or composite with a quantity), each ADVANCE or ARREAR, and an optional price adjustment. The service " +
      "computes `cost`. Every component must name an active record of the workspace.",
    update: "Changes the fields sent and leaves the others untouched. Sending `entitlements` replaces every component. " +
      "A change applies to new purchases only; customers already on the plan keep what they bought.",
    createErrors: {
      400: "The body fails its schema (the message names the field), a component names no record of the workspace " +
        "or does not fit its type, or a target is listed twice.",
      409: "A component names an archived record."
    },
    updateErrors: {
      400: "The body fails its schema (the message names the field), a component names no record of the workspace " +
        "or does not fit its type, or a target is listed twice.",
      409: "A component names an archived record."
    }
  }
}) {}
