/**
 * How a claimed signal leaves a batch: the end it is written with (`Ended`),
 * or the renewal it waits for (`Waiting`). Pricing decides it, the batch's
 * writes record it, isolation and the worker's stats read it; it sits apart
 * so that none of those imports another for its vocabulary.
 */
import { codeOf, errorStatus, type Refusal } from "../errors.ts"

export type Ended =
  | { readonly _tag: "Processed"; readonly customerId: string; readonly usageLogId: string }
  | { readonly _tag: "Pending"; readonly message: string }
  | {
    readonly _tag: "Failed"
    readonly status: number
    /** The refusal's code (`statusDetail.code` of the same refusal answered by the API). */
    readonly code: string
    readonly message: string
    /** The customer the signal was found to be for, when it was resolved before the refusal. */
    readonly customerId: string | null
  }

/**
 * A signal whose moment is at or after its customer's ACTIVE purchase's
 * period_end: the renewal has not run yet. It stays QUEUED (nothing written)
 * and its customer is left out of this process's claims until the purchase
 * renews (src/signals/Deferrals.ts).
 */
export interface Waiting {
  readonly _tag: "Waiting"
  readonly organizationId: string
  readonly customerId: string
  readonly externalId: string | null
  readonly purchaseId: string
  readonly periodEnd: Date
}

/** A refused signal ends FAILED with the status and code the API answers the same refusal with. */
export const refused = (refusal: Refusal, customerId: string | null = null, message: string = refusal.message): Ended => ({
  _tag: "Failed",
  status: errorStatus[refusal._tag],
  code: codeOf(refusal._tag),
  message,
  customerId
})

export const internalError = {
  _tag: "Failed",
  status: 500,
  code: "internal_error",
  message: "Internal error while pricing this signal; replay it once fixed",
  customerId: null
} as const

/** What a signal's end is called in the worker's stats. */
export const counterOf: Record<Ended["_tag"], string> = { Processed: "priced", Pending: "pending", Failed: "failed" }
