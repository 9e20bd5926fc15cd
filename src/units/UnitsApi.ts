import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Unit, UnitCreate, UnitUpdate } from "./Unit.ts"

export class UnitsApi extends catalogueGroup({
  group: "units",
  key: "unit",
  label: "Unit",
  listed: Unit,
  record: Unit,
  create: UnitCreate,
  update: UnitUpdate
}) {}
