/** A credit: token-tracked entitlement drawn down by its agentKey, priced from a model bundle. */
import { Schema } from "effect"
import { BundleItem, MarginPercent, ModelBundleInput } from "../models/Model.ts"
import { AgentKey, Description, Money, Name, strict, Timestamp } from "../schema.ts"

export class Credit extends Schema.Class<Credit>("Credit")({
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String,
  description: Schema.NullOr(Schema.String),
  tokensPerCredit: Money,
  basePrice: Money,
  modelBundle: Schema.Array(BundleItem),
  marginPercent: Money,
  pricePerCredit: Money,
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

export const CreditCreate = Schema.Struct({
  name: Name,
  agentKey: AgentKey,
  description: Schema.optional(Schema.NullOr(Description)),
  marginPercent: MarginPercent,
  modelBundle: ModelBundleInput
}).annotations(strict)
export type CreditCreate = typeof CreditCreate.Type

/** A PATCH: only the fields sent change; null clears the description. */
export const CreditUpdate = Schema.Struct({
  name: Schema.optional(Name),
  agentKey: Schema.optional(AgentKey),
  description: Schema.optional(Schema.NullOr(Description)),
  marginPercent: Schema.optional(MarginPercent),
  modelBundle: Schema.optional(ModelBundleInput)
}).annotations(strict)
export type CreditUpdate = typeof CreditUpdate.Type
