import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Unit, UnitCreate, UnitUpdate } from "./Unit.ts"

export class UnitsApi extends catalogueGroup({
  group: "units",
  key: "unit",
  label: "Unit",
  listed: Unit,
  record: Unit,
  create: UnitCreate,
  update: UnitUpdate,
  docs: {
    tag: "Units: counted events at a fixed price, FLAT (one price per unit) or tiered (SLAB: each tier prices the " +
      "units that fall in it; VOLUME: the tier the total reaches prices every unit). Recorded by `/signal/unit`.",
    create: "Defines a unit, its `agentKey` and its pricing: a FLAT unit has `flatPrice`; a SLAB or VOLUME unit has " +
      "`tiers` in ascending `upTo`, the last with `upTo` null. The `agentKey` must not be held by another active unit.",
    update: "Changes the fields sent and leaves the others untouched; the result must still be a valid pricing " +
      "(for example a change to FLAT needs a `flatPrice`). Plans already bought keep the price they were bought at.",
    createErrors: { 409: "The `agentKey` is already held by another active unit." },
    updateErrors: { 409: "The new `agentKey` is already held by another active unit." },
    unarchiveConflict: "Another active unit has taken this unit's `agentKey` since it was archived."
  }
}) {}
