/**
 * Why a signal was not billed, named for what happened. These are domain
 * facts, not HTTP answers: the status each one is reported with (on the
 * signal's row, and by the API where a route refuses the same thing) comes
 * from `refusalStatus` below, the one mapping both doors use.
 */
import { Data } from "effect"

/** The signal names a customer id that does not exist in the workspace. */
export class CustomerNotFound extends Data.TaggedError("CustomerNotFound")<{ readonly message: string }> {}

/** The customer is archived: it receives no more usage. */
export class CustomerArchived extends Data.TaggedError("CustomerArchived")<{ readonly message: string }> {}

/** The signal's member is not a member of its customer. */
export class UnknownMember extends Data.TaggedError("UnknownMember")<{ readonly message: string }> {}

/** The customer has no ACTIVE purchase to meter against. */
export class NoActivePlan extends Data.TaggedError("NoActivePlan")<{ readonly message: string }> {}

/** The agentKey (or composite refId, or run) names nothing live in the workspace. */
export class UnknownTarget extends Data.TaggedError("UnknownTarget")<{ readonly message: string }> {}

/** The usage's model is not enabled in the workspace. */
export class ModelNotEnabled extends Data.TaggedError("ModelNotEnabled")<{ readonly message: string }> {}

/** The target exists but the customer's plan neither sells it nor covers it by a composite it sells. */
export class NotOnPlan extends Data.TaggedError("NotOnPlan")<{ readonly message: string }> {}

/** The ADVANCE allowance cannot cover the usage and the plan has no ARREAR component to overflow to. */
export class OutOfAllowance extends Data.TaggedError("OutOfAllowance")<{ readonly message: string }> {}

/** The usage itself cannot be metered (a quantity not above zero). */
export class InvalidUsage extends Data.TaggedError("InvalidUsage")<{ readonly message: string }> {}

export type Refusal =
  | CustomerNotFound
  | CustomerArchived
  | UnknownMember
  | NoActivePlan
  | UnknownTarget
  | ModelNotEnabled
  | NotOnPlan
  | OutOfAllowance
  | InvalidUsage

/** The status a refusal is reported with, as the spec gives it for the synchronous routes. */
export const refusalStatus: Record<Refusal["_tag"], number> = {
  InvalidUsage: 400,
  CustomerNotFound: 404,
  CustomerArchived: 409,
  UnknownMember: 422,
  NoActivePlan: 422,
  UnknownTarget: 422,
  ModelNotEnabled: 422,
  NotOnPlan: 422,
  OutOfAllowance: 422
}

export const isRefusal = (u: unknown): u is Refusal =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in refusalStatus
