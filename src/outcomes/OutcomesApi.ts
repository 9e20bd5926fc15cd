import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Outcome, OutcomeCreate, OutcomeUpdate, OutcomeWithSteps } from "./Outcome.ts"

export class OutcomesApi extends catalogueGroup({
  group: "outcomes",
  key: "outcome",
  label: "Outcome",
  listed: Outcome,
  record: OutcomeWithSteps,
  create: OutcomeCreate,
  update: OutcomeUpdate,
  docs: {
    tag: "Outcomes: multi-step deliverables billed once per completed run. Each step has its own `agentKey` and " +
      "model bundle; `/signal/outcome` records steps and `/signal/outcome/complete` bills the run.",
    create: "Defines an outcome, its own `agentKey`, its margin and its ordered steps, each with a name, an `agentKey` " +
      "and a model bundle it is priced from. The service computes each step's `basePrice` and the outcome's " +
      "`pricePerOutcome`. The outcome's key and its steps' keys must not be held by another active outcome or step.",
    update: "Changes the fields sent and leaves the others untouched. Sending `steps` replaces the list: a step sent " +
      "with its `id` is kept (and re-priced), one without is added, and one left out is removed.",
    createErrors: {
      409: "The `agentKey` or a step's `agentKey` is already held by another active outcome or step, or two steps share one.",
      422: "A model of a step's bundle is not enabled in the workspace."
    },
    updateErrors: {
      409: "The new `agentKey` or a step's `agentKey` is already held by another active outcome or step, or two steps share one.",
      422: "A model of a step's bundle is not enabled in the workspace."
    },
    unarchiveConflict: "Another active outcome or step has taken one of this outcome's keys since it was archived."
  }
}) {}
