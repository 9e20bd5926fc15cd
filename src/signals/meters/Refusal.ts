/**
 * Why a signal was not billed. The refusals are domain errors of src/errors.ts;
 * a refused signal's row records the status `errorStatus` gives it, the same
 * one the API answers for the same refusal.
 */
import { type DomainError, errorStatus } from "../../errors.ts"

export {
  CustomerArchived,
  CustomerNotFound,
  InvalidUsage,
  isDomainError as isRefusal,
  ModelNotEnabled,
  NoActivePlan,
  NotOnPlan,
  OutOfAllowance,
  UnknownMember,
  UnknownTarget
} from "../../errors.ts"

/** Every domain error a meter or the drain can refuse a signal with (a key reuse never reaches the drain). */
export type Refusal = Exclude<DomainError, { readonly _tag: "IdempotencyKeyReused" }>

export const refusalStatus: Record<Refusal["_tag"], number> = errorStatus
