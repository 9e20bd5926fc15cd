import { catalogueGroup } from "../http/CatalogueApi.ts"
import { Credit, CreditCreate, CreditUpdate } from "./Credit.ts"

export class CreditsApi extends catalogueGroup({
  group: "credits",
  key: "credit",
  label: "Credit",
  listed: Credit,
  record: Credit,
  create: CreditCreate,
  update: CreditUpdate
}) {}
