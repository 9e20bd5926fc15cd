/**
 * What a refused signal's message says about time (src/signals/RefusalMoment.ts):
 * the signal's moment and where it comes from, the cycle whose plan or
 * balances refused it, and, for usage sent without a timestamp, that a replay
 * bills it at the replay's moment. Pure.
 */
import { describe, expect, it } from "vitest"
import { ModelNotEnabled, NoActivePlan, NotOnPlan, OutOfAllowance } from "../../src/errors.ts"
import { refusalAt, refusalMessage } from "../../src/signals/RefusalMoment.ts"

const moment = new Date("2026-09-15T10:00:00.250Z")
const september = { start: new Date("2026-09-01T00:00:00.000Z"), end: new Date("2026-10-01T00:00:00.000Z") }
const october = { start: new Date("2026-10-01T00:00:00.000Z"), end: new Date("2026-11-01T00:00:00.000Z") }
const noPlan = new NoActivePlan({ message: "Customer has no active plan" })

describe("a refusal's message names the moment and the cycle", () => {
  /** The message a signal refused by `refusal` at `at` keeps, as the worker writes it (PriceSignal.ts). */
  const ended = (refusal: NoActivePlan, at: Parameters<typeof refusalAt>[1]) => {
    const refused = refusalAt(refusal, at)
    return { tag: refused._tag, message: refusalMessage(refused, at) }
  }

  it("no active plan: the moment and its source, no replay hint for a timestamp", () => {
    expect(ended(noPlan, { moment, source: "TIMESTAMP", period: null, activeCycle: null })).toEqual({
      tag: "NoActivePlan",
      message: "Customer has no active plan at 2026-09-15T10:00:00.250Z (the signal's moment: its timestamp)"
    })
  })

  it("a plan held now but none at the signal's moment: no_plan_at_signal_time, naming the moment and the plan's cycle", () => {
    expect(ended(noPlan, { moment, source: "TIMESTAMP", period: null, activeCycle: october })).toEqual({
      tag: "NoPlanAtSignalTime",
      message: "No plan of the customer was active at the signal's moment, 2026-09-15T10:00:00.250Z (its timestamp): " +
        "its plan's current cycle is 2026-10-01T00:00:00.000Z to 2026-11-01T00:00:00.000Z; " +
        "usage from before the plan is not billed by it"
    })
    expect(ended(noPlan, { moment, source: "RECEIVED", period: null, activeCycle: october })).toEqual({
      tag: "NoPlanAtSignalTime",
      message: "No plan of the customer was active at the signal's moment, 2026-09-15T10:00:00.250Z (when it was received): " +
        "its plan's current cycle is 2026-10-01T00:00:00.000Z to 2026-11-01T00:00:00.000Z; " +
        "replay it to bill it in that cycle: a signal without a timestamp of its own is billed at the moment of its replay"
    })
  })

  it("no active plan for usage without a timestamp: says a replay bills it at the replay's moment", () => {
    expect(ended(noPlan, { moment, source: "REQUEUED", period: null, activeCycle: null })).toEqual({
      tag: "NoActivePlan",
      message: "Customer has no active plan at 2026-09-15T10:00:00.250Z (the signal's moment: when it was last queued again); " +
        "replay it once the customer has a plan: a signal without a timestamp of its own is billed at the moment of its replay"
    })
  })

  it("out of allowance and not on the plan: the cycle that refused, and the moment it holds", () => {
    const out = new OutOfAllowance({ message: "Out of allowance: unit unt_1 has no prepaid balance left for this usage" })
    expect(refusalMessage(out, { moment, source: "RECEIVED", period: september, activeCycle: october })).toBe(
      "Out of allowance: unit unt_1 has no prepaid balance left for this usage, in the cycle " +
        "2026-09-01T00:00:00.000Z to 2026-10-01T00:00:00.000Z (the signal's moment: 2026-09-15T10:00:00.250Z, when it was received)"
    )
    const notSold = new NotOnPlan({ message: "unit unt_1 is not on the customer's plan" })
    expect(refusalMessage(notSold, { moment, source: "TIMESTAMP", period: september, activeCycle: september })).toBe(
      "unit unt_1 is not on the customer's plan, in the cycle 2026-09-01T00:00:00.000Z to 2026-10-01T00:00:00.000Z " +
        "(the signal's moment: 2026-09-15T10:00:00.250Z, its timestamp)"
    )
    // Without a cycle (none loaded), the refusal's own words.
    expect(refusalMessage(out, { moment, source: "RECEIVED", period: null, activeCycle: null })).toBe(out.message)
  })

  it("a refusal that does not depend on time keeps its message", () => {
    const model = new ModelNotEnabled({ message: "model gpt-99 is not enabled in this workspace" })
    expect(refusalMessage(model, { moment, source: "REQUEUED", period: september, activeCycle: september })).toBe(
      "model gpt-99 is not enabled in this workspace"
    )
  })
})
