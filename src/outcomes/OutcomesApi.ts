import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Outcome, OutcomeCreate, OutcomeUpdate, OutcomeWithSteps } from "./Outcome.ts"

export class OutcomesApi extends catalogueGroup({
  group: "outcomes",
  key: "outcome",
  label: "Outcome",
  listed: Outcome,
  record: OutcomeWithSteps,
  create: OutcomeCreate,
  update: OutcomeUpdate
}) {}
