import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Composite, CompositeCreate, CompositeUpdate } from "./Composite.ts"

export class CompositesApi extends catalogueGroup({
  group: "composites",
  key: "composite",
  label: "Composite",
  listed: Composite,
  record: Composite,
  create: CompositeCreate,
  update: CompositeUpdate,
  docs: {
    tag: "Composites: credits, outcomes and units billed together as one thing, at one price per completed " +
      "occurrence. Signals tag an occurrence with the composite's `refId`; `/signal/composite/complete` bills it.",
    create: "Defines a composite: its `refId`, its price and the credits, outcomes and units it bills together (at " +
      "least one id in all). Every id must be an active record of the workspace. A composite bills only once a plan " +
      "sells it.",
    update: "Changes the fields sent and leaves the others untouched. Sending `entitlements` replaces the whole set.",
    createErrors: {
      400: "The body fails its schema (the message names the field), no entitlement id is given, or an id names no " +
        "record of the workspace.",
      409: "The `refId` is already held by another active composite, or a named record is archived."
    },
    updateErrors: {
      400: "The body fails its schema (the message names the field), or an id names no record of the workspace.",
      409: "The new `refId` is already held by another active composite, or a named record is archived."
    },
    unarchiveConflict: "Another active composite has taken this composite's `refId` since it was archived."
  }
}) {}
