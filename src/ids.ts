/**
 * Prefixed, time-ordered identifiers (`cus_01hx…`): 10 base-32 characters of
 * milliseconds, then 16 of randomness incremented within one millisecond, so
 * ids sort in creation order and cursor pagination by id is creation order.
 */
import { randomBytes } from "node:crypto"

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

const encode = (value: bigint, length: number): string => {
  let out = ""
  for (let i = 0; i < length; i++) {
    out = alphabet[Number(value & 31n)] + out
    value >>= 5n
  }
  return out
}

let lastTime = 0
let lastRandom = 0n
const randomMask = (1n << 80n) - 1n

const nextSuffix = (): string => {
  const now = Date.now()
  if (now <= lastTime) {
    lastRandom = (lastRandom + 1n) & randomMask
  } else {
    lastTime = now
    lastRandom = BigInt(`0x${randomBytes(10).toString("hex")}`) >> 1n // headroom for increments
  }
  return encode(BigInt(lastTime), 10) + encode(lastRandom, 16)
}

export const makeId = (prefix: string): string => `${prefix}_${nextSuffix()}`

/** A random secret of `bytes` bytes, as base-32 text, for keys and signing secrets. */
export const randomToken = (bytes = 24): string => encode(BigInt(`0x${randomBytes(bytes).toString("hex")}`), Math.ceil(bytes * 8 / 5))
