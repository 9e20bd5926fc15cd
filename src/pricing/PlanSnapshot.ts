/**
 * The plan snapshot a purchase freezes (docs/billing.md): the plan, its components
 * and the catalogue prices they had at purchase time, so later plan or
 * catalogue edits change new purchases only. Stored as jsonb with every
 * decimal written as a string, so nothing passes through a float.
 */
import { Schema } from "effect"
import type { UnitPricing } from "./Pricing.ts"

/** A decimal kept as a string in jsonb. */
const JsonDecimal = Schema.BigDecimal

export const ComponentType = Schema.Literal("WALLET", "CREDIT", "OUTCOME", "UNIT", "PRICING_METRIC")
export type ComponentType = typeof ComponentType.Type

export const BillingMode = Schema.Literal("ADVANCE", "ARREAR")
export type BillingMode = typeof BillingMode.Type

/**
 * What a credit signal is priced from at the sale (Pricing.chargeCredit): the
 * credit's margin and its bundle's basePrice and tokensPerCredit. Snapshots
 * written before these were frozen got the credit's terms of the upgrade
 * (migration 0010); a snapshot without them (tests' hand-built ones) prices
 * from the live credit.
 */
export const SnapshotCreditTerms = Schema.Struct({
  basePrice: JsonDecimal,
  tokensPerCredit: JsonDecimal,
  marginPercent: JsonDecimal
})

const SnapshotTier = Schema.Struct({ upTo: Schema.NullOr(JsonDecimal), price: JsonDecimal })

export const SnapshotStep = Schema.Struct({ id: Schema.String, name: Schema.String, agentKey: Schema.String })
export type SnapshotStep = typeof SnapshotStep.Type

export const SnapshotComponent = Schema.Struct({
  id: Schema.String,
  type: ComponentType,
  billingMode: BillingMode,
  /** The credit, outcome, unit or composite id; null for the wallet. */
  targetId: Schema.NullOr(Schema.String),
  targetName: Schema.String,
  /** The credit's, outcome's or unit's agentKey; the composite's refId. */
  agentKey: Schema.NullOr(Schema.String),
  quantity: Schema.NullOr(JsonDecimal),
  amount: Schema.NullOr(JsonDecimal),
  rollover: Schema.Boolean,
  /** pricePerCredit, pricePerOutcome or the composite's price per occurrence. */
  unitPrice: Schema.NullOr(JsonDecimal),
  /** A credit's pricing terms. */
  creditTerms: Schema.optional(Schema.NullOr(SnapshotCreditTerms)),
  /** A unit's pricing. */
  pricingType: Schema.NullOr(Schema.Literal("FLAT", "SLAB", "VOLUME")),
  flatPrice: Schema.NullOr(JsonDecimal),
  tiers: Schema.Array(SnapshotTier),
  /** What the component adds to the plan cost at each cycle start (zero for ARREAR). */
  charge: JsonDecimal,
  /** An outcome's steps. */
  steps: Schema.Array(SnapshotStep),
  /** What a composite bills together. */
  covers: Schema.Struct({
    credits: Schema.Array(Schema.String),
    outcomes: Schema.Array(Schema.String),
    units: Schema.Array(Schema.String)
  })
})
export type SnapshotComponent = typeof SnapshotComponent.Type

export const PlanSnapshot = Schema.Struct({
  planId: Schema.String,
  name: Schema.String,
  description: Schema.String,
  billingCycle: Schema.String,
  currencyCode: Schema.String,
  priceAdjustment: JsonDecimal,
  walletFundedArrear: Schema.Boolean,
  /** Sum of the ADVANCE charges plus priceAdjustment, charged at each cycle start. */
  cost: JsonDecimal,
  components: Schema.Array(SnapshotComponent)
})
export type PlanSnapshot = typeof PlanSnapshot.Type

/**
 * Decoded snapshots by their text: the purchases of one plan (and version)
 * share the same snapshot, so a cycle batch of hundreds decodes a handful and
 * a check (src/entitlements/QuickRead.ts) decodes its customer's once.
 * Snapshots are immutable; the cache is dropped when it grows past a bound.
 */
const snapshotCache = new Map<string, PlanSnapshot>()
const SNAPSHOT_CACHE_SIZE = 1000
const decodeSnapshotText = Schema.decodeUnknownSync(Schema.parseJson(PlanSnapshot))

/** A snapshot from its jsonb text; a text that does not decode throws (a defect, as a row that does not). */
export const snapshotOfText = (text: string): PlanSnapshot => {
  let snapshot = snapshotCache.get(text)
  if (snapshot === undefined) {
    snapshot = decodeSnapshotText(text)
    if (snapshotCache.size >= SNAPSHOT_CACHE_SIZE) snapshotCache.clear()
    snapshotCache.set(text, snapshot)
  }
  return snapshot
}

export const unitPricingOf = (component: SnapshotComponent): UnitPricing => ({
  pricingType: component.pricingType ?? "FLAT",
  flatPrice: component.flatPrice,
  tiers: component.tiers
})

/** Which catalogue kind a metered target is. */
export type TargetKind = "CREDIT" | "OUTCOME" | "UNIT"

/** The composite components of the plan that bill a target of this kind. */
export const compositesCovering = (snapshot: PlanSnapshot, kind: TargetKind, targetId: string) =>
  snapshot.components.filter((component) => {
    if (component.type !== "PRICING_METRIC") return false
    const list = kind === "CREDIT"
      ? component.covers.credits
      : kind === "OUTCOME"
      ? component.covers.outcomes
      : component.covers.units
    return list.includes(targetId)
  })
