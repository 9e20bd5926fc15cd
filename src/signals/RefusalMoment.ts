/**
 * What the worker's refusal of a signal says about time: the signal's moment
 * (and where it comes from), and the cycle whose plan or balances refused it.
 * A signal is billed in the cycle that contains its moment, so "no active
 * plan" for a customer who holds one now, or "out of allowance" in a cycle
 * that has ended, only makes sense once the message says which moment and
 * which cycle (docs/signals.md "A signal that waited"). The code and the
 * status stay the refusal's own; only the message grows. Pure.
 */
import type { Refusal } from "../errors.ts"
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
 * The message a refused signal keeps: the refusal's own, plus when. A refusal
 * that does not depend on time (an unknown key, a model not enabled, a member
 * of another customer, bad usage) keeps its message as it is.
 */
export const refusalMessage = (refusal: Refusal, at: RefusedAt): string => {
  const moment = `the signal's moment: ${at.moment.toISOString()}, ${sourceText[at.source]}`
  switch (refusal._tag) {
    case "NoActivePlan": {
      const base = `${refusal.message} at ${at.moment.toISOString()} (the signal's moment: ${sourceText[at.source]})`
      const current = at.activeCycle === null ? "" : `; its plan's current cycle is ${periodText(at.activeCycle)}`
      // Usage sent without a timestamp is usage "now" each time it is submitted: a replay is billed at its own moment.
      const retry = at.source === "TIMESTAMP"
        ? ""
        : at.activeCycle === null
        ? "; replay it once the customer has a plan: a signal without a timestamp of its own is billed at the moment of its replay"
        : "; replay it to bill it in that cycle: a signal without a timestamp of its own is billed at the moment of its replay"
      return `${base}${current}${retry}`
    }
    case "NotOnPlan":
    case "OutOfAllowance":
      return at.period === null ? refusal.message : `${refusal.message}, in the cycle ${periodText(at.period)} (${moment})`
    default:
      return refusal.message
  }
}
