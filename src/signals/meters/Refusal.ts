/**
 * Why a signal was not billed. The refusals are domain errors of src/errors.ts;
 * a refused signal's row records the status `errorStatus` gives it, the same
 * one the API answers for the same refusal.
 */
import {
  type CustomerArchived,
  type CustomerNotFound,
  errorStatus,
  type InvalidUsage,
  type ModelNotEnabled,
  type NoActivePlan,
  type NotOnPlan,
  type OutOfAllowance,
  type UnknownMember,
  type UnknownTarget
} from "../../errors.ts"

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

export const refusalStatus: Record<Refusal["_tag"], number> = errorStatus
