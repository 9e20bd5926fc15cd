/**
 * A batch's context gets the customers its claimed signals name, and only
 * those (Claim.ts `customersOf`): the context locks each one's
 * purchase and balance rows until the commit, so a candidate whose advisory
 * lock another batch took must not be among them, or side-by-side batches
 * wait on each other's rows. Pure: candidates and signals as the claim reads them.
 */
import { describe, expect, it } from "vitest"
import type { SignalRecord } from "../src/signals/BatchContext.ts"
import { type Candidate, CLAIM_GROWTH, claimStep, CUSTOMERS_PER_CLAIM, customersOf, shareOf, wholeHead } from "../src/signals/Claim.ts"

const candidate = (organizationId: string, customerId: string, externalId: string | null = null): typeof Candidate.Type => ({
  organizationId,
  customerKey: customerId,
  heldExternalId: externalId,
  otherLane: false,
  queued: 1,
  customerId,
  customerExternalId: externalId,
  customerArchivedAt: null
})

const signal = (organizationId: string, customerId: string | null, externalId: string | null = null): SignalRecord => ({
  organizationId,
  id: `sig_${customerId ?? externalId}`,
  messageId: "m",
  route: "CREDIT",
  customerId,
  externalId,
  runId: null,
  compositeRef: null,
  compositeValue: null,
  member: null,
  body: {},
  moment: new Date(0),
  momentSource: "RECEIVED"
})

describe("the customers a batch's context locks", () => {
  it("are the candidates its signals name by id or by a held externalId; not the candidates it did not claim", () => {
    const candidates = [
      candidate("org_a", "cus_1"),
      candidate("org_a", "cus_2"),
      candidate("org_a", "cus_3", "ext-3"),
      candidate("org_b", "cus_1")
    ]
    const claimed = [signal("org_a", "cus_1"), signal("org_a", null, "ext-3"), signal("org_a", "cus_1")]
    expect(customersOf(candidates, claimed).map((customer) => `${customer.organizationId}/${customer.id}`)).toEqual([
      "org_a/cus_1",
      "org_a/cus_3"
    ])
  })

  it("are none when nothing was claimed, and never a customer of another organisation with the same id", () => {
    const candidates = [candidate("org_a", "cus_1"), candidate("org_b", "cus_1")]
    expect(customersOf(candidates, [])).toEqual([])
    expect(customersOf(candidates, [signal("org_b", "cus_1")]).map((customer) => customer.organizationId)).toEqual(["org_b"])
  })
})

describe("a round's batches share out the head's customers (Claim.ts `shareOf`)", () => {
  const head = Array.from({ length: 10 }, (_, i) => candidate("org_a", `cus_${i}`))
  const keys = (share: { index: number; of: number }, candidates = head) =>
    shareOf(candidates, share).map((candidate) => candidate.customerKey)

  it("gives each of n batches every n-th customer, so no two try the same lock, and together all of them", () => {
    const shares = [0, 1, 2, 3].map((index) => keys({ index, of: 4 }))
    expect(shares[1]).toEqual(["cus_1", "cus_5", "cus_9"])
    expect(shares.flat().sort()).toEqual(head.map((candidate) => candidate.customerKey).sort())
    expect(new Set(shares.flat()).size).toBe(head.length)
  })

  it("gives a batch alone every customer, and never the row of an empty lane", () => {
    expect(keys(wholeHead)).toEqual(head.map((candidate) => candidate.customerKey))
    const emptyLane = [{ ...candidate("org_a", "x"), organizationId: null, customerKey: null }]
    expect(keys(wholeHead, emptyLane)).toEqual([])
  })

  it("tries at most CUSTOMERS_PER_CLAIM locks, the oldest customers first", () => {
    const many = Array.from({ length: CUSTOMERS_PER_CLAIM * 2 + 5 }, (_, i) => candidate("org_a", `cus_${i}`))
    const share = keys(wholeHead, many)
    expect(share).toHaveLength(CUSTOMERS_PER_CLAIM)
    expect(share[0]).toBe("cus_0")
    expect(share.at(-1)).toBe(`cus_${CUSTOMERS_PER_CLAIM - 1}`)
  })
})

describe("how many customers the claim's next statement tries (Claim.ts `claimStep`)", () => {
  const counted = (queued: ReadonlyArray<number>) =>
    queued.map((count, i) => ({ ...candidate("org_a", `cus_${i}`), queued: count }))

  it("when the head held the whole lane: as many customers as their counts fill the batch, no more", () => {
    const customers = counted([300, 500, 400, 100])
    expect(claimStep(customers, 0, 1000, true, 0)).toBe(3)
    expect(claimStep(customers, 0, 300, true, 0)).toBe(1)
    expect(claimStep(customers, 3, 1000, true, 1)).toBe(1)
  })

  it("when the lane goes on past the head: one customer, then as many as the signals each gave so far say, growing at most CLAIM_GROWTH times", () => {
    const customers = counted(Array.from({ length: 300 }, () => 1))
    // Whatever the head's counts: the first statement tries one customer.
    expect(claimStep(customers, 0, 1000, false, 0)).toBe(1)
    // It gave 7: 993 more want 142 customers of 7, but no more than 8 times the one tried.
    expect(claimStep(customers, 1, 993, false, 7)).toBe(CLAIM_GROWTH)
    // 9 customers gave 66 (7.3 each): 934 more want 128, capped at 8 × 9.
    expect(claimStep(customers, 9, 934, false, 66)).toBe(72)
    // 81 gave 591: 409 more want 57.
    expect(claimStep(customers, 81, 409, false, 591)).toBe(57)
    // A busy customer that gave 900: one more customer is tried for the last 100.
    expect(claimStep(customers, 1, 100, false, 900)).toBe(1)
    // Customers that gave nothing (held by another worker): twice as many as tried so far.
    expect(claimStep(customers, 3, 1000, false, 0)).toBe(6)
  })
})
