/**
 * When the next round of the drain is one batch (Claim.ts
 * `isShortLane`): the claim's head held the whole lane, or found it empty. A
 * round of several batches is for a long queue; after a batch found the lane
 * empty (its siblings had claimed everything), several batches would only
 * find each other's customers held while a short queue waited. Pure: the
 * head's candidates as the claim reads them.
 */
import { describe, expect, it } from "vitest"
import { type Candidate, CUSTOMERS_PER_SHORT_BATCH, isEmptyLane, isShortLane, isWholeLane, roundSizeOf } from "../src/signals/Claim.ts"

const candidate = (customerKey: string | null, queued: number | null): typeof Candidate.Type => ({
  organizationId: customerKey === null ? null : "org_a",
  customerKey,
  heldExternalId: null,
  otherLane: false,
  queued,
  customerId: customerKey,
  customerExternalId: null,
  customerArchivedAt: null
})

/** What the head's statement answers for an empty lane: one row, naming no customer. */
const emptyLane = [candidate(null, null)]
const head = 250
const limit = 1000

describe("whether the next round is one batch", () => {
  it("is when the head found the lane empty", () => {
    expect(isEmptyLane(emptyLane)).toBe(true)
    expect(isWholeLane(emptyLane, head, limit)).toBe(false)
    expect(isShortLane(emptyLane, head, limit)).toBe(true)
  })

  it("is when the head held the whole lane: fewer rows than it read, and a batch's worth", () => {
    const whole = [candidate("cus_1", 40), candidate("cus_2", 60)]
    expect(isEmptyLane(whole)).toBe(false)
    expect(isShortLane(whole, head, limit)).toBe(true)
  })

  it("is not when the head was full: the lane goes on past it", () => {
    const full = [candidate("cus_1", 200), candidate("cus_2", 50)]
    expect(isShortLane(full, head, limit)).toBe(false)
    // Nor when the head's rows are more than a batch takes.
    expect(isShortLane([candidate("cus_1", 300)], 500, 200)).toBe(false)
  })
})

describe("how many batches the next round runs (Claim.ts `roundSizeOf`)", () => {
  it("runs every batch for a long queue, however few its customers", () => {
    expect(roundSizeOf(4, false, 2)).toBe(4)
  })

  it("runs one batch for a short queue of few customers, more as its customers grow, never more than allowed", () => {
    expect(roundSizeOf(4, true, 0)).toBe(1)
    expect(roundSizeOf(4, true, CUSTOMERS_PER_SHORT_BATCH)).toBe(1)
    expect(roundSizeOf(4, true, CUSTOMERS_PER_SHORT_BATCH + 1)).toBe(2)
    expect(roundSizeOf(4, true, 1000)).toBe(4)
    expect(roundSizeOf(1, true, 1000)).toBe(1)
  })
})
