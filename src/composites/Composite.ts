/** A composite: credits, outcomes and units billed together, one `price` per occurrence. */
import { BigDecimal, Schema } from "effect"
import { Description, Money, MoneyInput, Name, RefId, strict, Timestamp } from "../schema.ts"

export class CompositeMember extends Schema.Class<CompositeMember>("CompositeMember")({
  id: Schema.String,
  name: Schema.String,
  agentKey: Schema.String
}) {}

export class CompositeEntitlements extends Schema.Class<CompositeEntitlements>("CompositeEntitlements")({
  credits: Schema.Array(CompositeMember),
  outcomes: Schema.Array(CompositeMember),
  units: Schema.Array(CompositeMember)
}) {}

export class Composite extends Schema.Class<Composite>("Composite")({
  id: Schema.String,
  name: Schema.String,
  refId: Schema.String,
  description: Schema.NullOr(Schema.String),
  price: Money,
  isActive: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  entitlements: CompositeEntitlements
}) {}

export const MAX_COMPOSITE_PRICE = 10_000_000

export const CompositePrice = MoneyInput.pipe(
  Schema.filter(
    (price) =>
      (BigDecimal.greaterThanOrEqualTo(price, BigDecimal.fromBigInt(0n)) &&
        BigDecimal.lessThanOrEqualTo(price, BigDecimal.fromBigInt(BigInt(MAX_COMPOSITE_PRICE)))) ||
      "must be from 0 to 10,000,000",
    { jsonSchema: { type: "number", minimum: 0, maximum: MAX_COMPOSITE_PRICE, description: "USD per completed occurrence." } }
  )
)

/** Members beyond this many per kind are refused; a composite is a small set. */
export const MAX_MEMBERS = 100

const IdList = (kind: string) =>
  Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "ids must not be empty" }))).pipe(
    Schema.maxItems(MAX_MEMBERS, { message: () => `must hold at most ${MAX_MEMBERS} ids` })
  ).annotations({ description: `Ids of active ${kind}s billed together by the composite, at most ${MAX_MEMBERS}.` })

/** What a composite bills together, by id; `outcomeIds` is our name for the list the spec leaves unnamed. */
export const CompositeEntitlementIds = Schema.Struct({
  creditIds: Schema.optional(IdList("credit")),
  outcomeIds: Schema.optional(IdList("outcome")),
  unitIds: Schema.optional(IdList("unit"))
}).annotations({ description: "What the composite bills together, by kind; at least one id in all." })
export type CompositeEntitlementIds = typeof CompositeEntitlementIds.Type

export const CompositeCreate = Schema.Struct({
  name: Name,
  refId: RefId,
  description: Schema.optional(Schema.NullOr(Description)),
  price: CompositePrice,
  entitlements: CompositeEntitlementIds
}).annotations(strict)
export type CompositeCreate = typeof CompositeCreate.Type

/** A PATCH: only the sent fields change; sending `entitlements` replaces the whole set. */
export const CompositeUpdate = Schema.Struct({
  name: Schema.optional(Name),
  refId: Schema.optional(RefId),
  description: Schema.optional(Schema.NullOr(Description)),
  price: Schema.optional(CompositePrice),
  entitlements: Schema.optional(CompositeEntitlementIds)
}).annotations(strict)
export type CompositeUpdate = typeof CompositeUpdate.Type
