/**
 * What the worker's refusal of a signal says about time: the signal's moment
 * (and where it comes from), and the cycle whose plan or balances refused it.
 * A signal is billed in the cycle that contains its moment, so "no active
 * plan" for a customer who holds one now, or "out of allowance" in a cycle
 * that has ended, only makes sense once the message says which moment and
 * which cycle (docs/signals.md "A signal that waited"). The status and code
 * stay the refusal's own, but one: "no active plan" for a customer who holds
 * one now is `no_plan_at_signal_time` (`refusalAt`), the plan having begun
 * after the signal's moment. Pure.
 */
import { NoPlanAtSignalTime, type Refusal } from "../errors.ts"
import type { CyclePeriod } from "./BatchContext.ts"

/** Where a signal's moment comes from: its own `timestamp`, its last requeue, or its intake. */
export type MomentSource = "TIMESTAMP" | "REQUEUED" | "RECEIVED"

const sourceText: Record<MomentSource, string> = {
  TIMESTAMP: "its timestamp",
  REQUEUED: "when it was last queued again",
  RECEIVED: "when it was received"
}

const periodText = (period: CyclePeriod) => `${period.start.toISOString()} to ${period.end.toISOString()}`

export interface RefusedAt {
  readonly moment: Date
  readonly source: MomentSource
  /** The cycle the signal was priced in; null when no cycle of the customer contains its moment. */
  readonly period: CyclePeriod | null
  /** The customer's ACTIVE purchase's current cycle, if it has one. */
  readonly activeCycle: CyclePeriod | null
}

/**
 * The refusal a signal ends with, at its moment: the meters' own, but "no
 * active plan" when the customer has an ACTIVE purchase now says so: no plan
 * was active at the signal's moment (`NoPlanAtSignalTime`), a refusal that a
 * plan bought later cannot lift (a signal with a timestamp keeps it).
 */
export const refusalAt = (refusal: Refusal, at: RefusedAt): Refusal => {
  if (refusal._tag !== "NoActivePlan" || at.activeCycle === null) return refusal
  const retry = at.source === "TIMESTAMP"
    ? "; usage from before the plan is not billed by it"
    : "; replay it to bill it in that cycle: a signal without a timestamp of its own is billed at the moment of its replay"
  return new NoPlanAtSignalTime({
    message: `No plan of the customer was active at the signal's moment, ${at.moment.toISOString()} ` +
      `(${sourceText[at.source]}): its plan's current cycle is ${periodText(at.activeCycle)}${retry}`
  })
}

/**
 * The message a refused signal keeps: the refusal's own, plus when. A refusal
 * that does not depend on time (an unknown key, a model not enabled, a member
 * of another customer, bad usage) keeps its message as it is.
 */
export const refusalMessage = (refusal: Refusal, at: RefusedAt): string => {
  const moment = `the signal's moment: ${at.moment.toISOString()}, ${sourceText[at.source]}`
  switch (refusal._tag) {
    case "NoActivePlan": {
      const base = `${refusal.message} at ${at.moment.toISOString()} (the signal's moment: ${sourceText[at.source]})`
      // Usage sent without a timestamp is usage "now" each time it is submitted: a replay is billed at its own moment.
      const retry = at.source === "TIMESTAMP"
        ? ""
        : "; replay it once the customer has a plan: a signal without a timestamp of its own is billed at the moment of its replay"
      return `${base}${retry}`
    }
    case "NoPlanAtSignalTime":
      // Made by `refusalAt`, with the moment and the cycle in its words already.
      return refusal.message
    case "NotOnPlan":
    case "OutOfAllowance":
      return at.period === null ? refusal.message : `${refusal.message}, in the cycle ${periodText(at.period)} (${moment})`
    default:
      return refusal.message
  }
}
