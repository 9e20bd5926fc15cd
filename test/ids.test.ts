/**
 * Ids: 10 base-32 characters of milliseconds, then 16 of randomness, so that
 * they sort in creation order. The encoding is checked against a BigInt
 * reference written here (the 80-bit number the 16 characters stand for), and
 * the increment within one millisecond across its carry.
 */
import { describe, expect, it } from "vitest"
import { incremented, makeId, suffixOf } from "../src/ids.ts"

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
const reference = (value: bigint, length: number) => {
  let out = ""
  for (let i = 0; i < length; i++) {
    out = alphabet[Number(value % 32n)] + out
    value /= 32n
  }
  return out
}
const referenceSuffix = (time: number, high: number, low: number) =>
  reference(BigInt(time), 10) + reference((BigInt(high) << 40n) + BigInt(low), 16)

const HALF = 2 ** 40

describe("ids", () => {
  it("encode milliseconds and 80 bits of randomness as the BigInt reference does", () => {
    const cases: Array<[number, number, number]> = [
      [0, 0, 0],
      [Date.now(), HALF / 2 - 1, HALF - 1],
      [2 ** 48 - 1, HALF - 1, HALF - 1],
      [1_764_000_000_000, 1, 0]
    ]
    for (let i = 0; i < 200; i++) {
      cases.push([Math.floor(Math.random() * 2 ** 45), Math.floor(Math.random() * HALF), Math.floor(Math.random() * HALF)])
    }
    for (const [time, high, low] of cases) expect(suffixOf(time, { high, low })).toBe(referenceSuffix(time, high, low))
  })

  it("increment within a millisecond, carrying the low half into the high one", () => {
    expect(incremented({ high: 5, low: 7 })).toEqual({ high: 5, low: 8 })
    expect(incremented({ high: 5, low: HALF - 1 })).toEqual({ high: 6, low: 0 })
    const before = suffixOf(1, { high: 5, low: HALF - 1 })
    const after = suffixOf(1, incremented({ high: 5, low: HALF - 1 }))
    expect(after > before).toBe(true)
  })

  it("are unique and strictly increasing when made in a burst", () => {
    const ids = Array.from({ length: 20_000 }, () => makeId("sig"))
    for (const id of ids) expect(id).toMatch(/^sig_[0-9a-hjkmnp-tv-z]{26}$/)
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
  })
})
