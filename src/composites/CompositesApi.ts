import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Composite, CompositeCreate, CompositeUpdate } from "./Composite.ts"

export class CompositesApi extends catalogueGroup({
  group: "composites",
  key: "composite",
  label: "Composite",
  listed: Composite,
  record: Composite,
  create: CompositeCreate,
  update: CompositeUpdate
}) {}
