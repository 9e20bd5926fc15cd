import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Plan, PlanCreate, PlanUpdate } from "./Plan.ts"

export class PlansApi extends catalogueGroup({
  group: "plans",
  key: "plan",
  label: "Plan",
  listed: Plan,
  record: Plan,
  create: PlanCreate,
  update: PlanUpdate
}) {}
