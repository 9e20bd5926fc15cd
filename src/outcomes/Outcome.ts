/**
 * An outcome: a multi-step deliverable billed once per completed run. Each step
 * has its own agentKey and model bundle; the outcome's basePrice is the sum of
 * its steps' and pricePerOutcome adds the margin.
 */
import { Schema } from "effect"
import { BundleItem, MarginPercent, ModelBundleInput } from "../models/Model.ts"
import { AgentKey, Description, Money, Name, strict, Timestamp } from "../schema.ts"

/** An outcome as lists show it: without its steps. */
export class Outcome extends Schema.Class<Outcome>("Outcome")({
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String,
  description: Schema.NullOr(Schema.String),
  isActive: Schema.Boolean,
  basePrice: Money,
  marginPercent: Money,
  pricePerOutcome: Money,
  createdAt: Timestamp,
  updatedAt: Timestamp
}) {}

/** A live step of an outcome; `order` counts from 1. */
export class OutcomeStep extends Schema.Class<OutcomeStep>("OutcomeStep")({
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String,
  order: Schema.Int,
  basePrice: Money,
  modelBundle: Schema.Array(BundleItem)
}) {}

/** An outcome with its live steps in order, as get-one and the write routes return it. */
export class OutcomeWithSteps extends Outcome.extend<OutcomeWithSteps>("OutcomeWithSteps")({
  steps: Schema.Array(OutcomeStep)
}) {}

const MAX_STEPS = 50

const stepCount = {
  min: { message: () => "must hold at least 1 step" },
  max: { message: () => `must hold at most ${MAX_STEPS} steps` }
} as const

export const StepCreate = Schema.Struct({
  name: Name,
  agentKey: AgentKey,
  modelBundle: ModelBundleInput
}).annotations(strict)
export type StepCreate = typeof StepCreate.Type

/**
 * A step in a PATCH: with `id` it is a step the outcome keeps (only the fields
 * sent change); without `id` it is a new step and needs every field.
 */
export const StepUpdate = Schema.Struct({
  id: Schema.optional(Schema.String).annotations({
    description: "The id of a step the outcome keeps; left out for a new step."
  }),
  name: Schema.optional(Name),
  agentKey: Schema.optional(AgentKey),
  modelBundle: Schema.optional(ModelBundleInput)
}).annotations(strict)
export type StepUpdate = typeof StepUpdate.Type

export const OutcomeCreate = Schema.Struct({
  name: Name,
  agentKey: AgentKey,
  description: Schema.optional(Schema.NullOr(Description)),
  marginPercent: MarginPercent,
  steps: Schema.Array(StepCreate).pipe(
    Schema.minItems(1, stepCount.min),
    Schema.maxItems(MAX_STEPS, stepCount.max)
  ).annotations({ description: `The run's steps in order, 1 to ${MAX_STEPS}, each priced from its own model bundle.` })
}).annotations(strict)
export type OutcomeCreate = typeof OutcomeCreate.Type

/** A PATCH: only the fields sent change; `steps`, when sent, is the outcome's whole new step list. */
export const OutcomeUpdate = Schema.Struct({
  name: Schema.optional(Name),
  agentKey: Schema.optional(AgentKey),
  description: Schema.optional(Schema.NullOr(Description)),
  marginPercent: Schema.optional(MarginPercent),
  steps: Schema.optional(
    Schema.Array(StepUpdate).pipe(Schema.minItems(1, stepCount.min), Schema.maxItems(MAX_STEPS, stepCount.max))
  ).annotations({ description: "The whole new step list: steps with an `id` are kept, others are added, missing ones removed." })
}).annotations(strict)
export type OutcomeUpdate = typeof OutcomeUpdate.Type
