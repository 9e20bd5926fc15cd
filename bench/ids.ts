/**
 * bench/ids: the cost of an id (`src/ids.ts`), next to the BigInt encoding it
 * replaced, measured in the same run (the yardstick). Run by hand; results in
 * docs/benchmarks.md.
 *
 *   npx tsx bench/ids.ts [--ids 300000]
 */
import { randomBytes } from "node:crypto"
import { makeId } from "../src/ids.ts"

const index = process.argv.indexOf("--ids")
const count = index >= 0 ? Number(process.argv[index + 1]) : 300_000

// The BigInt encoding of src/ids.ts before 2026-11-25, kept here as the yardstick.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
const encode = (value: bigint, length: number) => {
  let out = ""
  for (let i = 0; i < length; i++) {
    out = alphabet[Number(value & 31n)] + out
    value >>= 5n
  }
  return out
}
let lastTime = 0
let lastRandom = 0n
const bigIntId = (prefix: string) => {
  const now = Date.now()
  if (now <= lastTime) lastRandom = (lastRandom + 1n) & ((1n << 80n) - 1n)
  else {
    lastTime = now
    lastRandom = BigInt(`0x${randomBytes(10).toString("hex")}`) >> 1n
  }
  return `${prefix}_${encode(BigInt(lastTime), 10)}${encode(lastRandom, 16)}`
}

const microseconds = (make: (prefix: string) => string) => {
  const started = performance.now()
  for (let i = 0; i < count; i++) make("sig")
  return ((performance.now() - started) * 1000) / count
}

// Alternated, twice each after a warm-up, so both see the same machine.
microseconds(bigIntId)
microseconds(makeId)
const rows = [1, 2].flatMap(() => [["BigInt (yardstick)", microseconds(bigIntId)], ["src/ids.ts", microseconds(makeId)]] as const)
for (const [name, us] of rows) process.stdout.write(`| ${name} | ${us.toFixed(2)} µs an id |\n`)
