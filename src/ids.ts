/**
 * Prefixed, time-ordered identifiers (`cus_01hx…`): 10 base-32 characters of
 * milliseconds, then 16 of randomness incremented within one millisecond, so
 * ids sort in creation order and cursor pagination by id is creation order.
 */
import { randomBytes } from "node:crypto"
import { Order, Schema } from "effect"

/**
 * The ids that cross most services, branded so one cannot be passed where
 * another is meant (a customer id as a purchase id). The brand checks no
 * form: an id a client sends that names nothing is a not-found.
 * The doors decode them (the API's path and body schemas, the CLI's `--org`,
 * the key cache's rows); services take them typed.
 */
export const OrganizationId = Schema.String.pipe(Schema.brand("OrganizationId"))
export type OrganizationId = typeof OrganizationId.Type

export const CustomerId = Schema.String.pipe(Schema.brand("CustomerId"))
export type CustomerId = typeof CustomerId.Type

export const PurchaseId = Schema.String.pipe(Schema.brand("PurchaseId"))
export type PurchaseId = typeof PurchaseId.Type

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

const encode = (value: bigint, length: number): string => {
  let out = ""
  for (let i = 0; i < length; i++) {
    out = alphabet[Number(value & 31n)] + out
    value >>= 5n
  }
  return out
}

const HALF = 2 ** 40

/** The 80 bits of randomness as two 40-bit halves. */
export interface RandomPart {
  readonly high: number
  readonly low: number
}

/** The next randomness within one millisecond: plus one, carried into the high half. */
export const incremented = ({ high, low }: RandomPart): RandomPart =>
  low + 1 === HALF ? { high: (high + 1) % HALF, low: 0 } : { high, low: low + 1 }

const alphabetCodes = Uint16Array.from(alphabet, (char) => char.charCodeAt(0))
/** The suffix's characters, written in place: one string per id instead of one per character (2 per signal). */
const suffixCodes = new Uint16Array(26)

/** Writes `length` base-32 characters of `value` (below 2^53) into `suffixCodes`, ending before `end`. */
const writeNumber = (value: number, length: number, end: number) => {
  for (let i = end - 1; i >= end - length; i--) {
    suffixCodes[i] = alphabetCodes[value % 32]!
    value = Math.floor(value / 32)
  }
}

/** What follows the prefix: 10 characters of milliseconds, 16 of randomness. */
export const suffixOf = (time: number, random: RandomPart): string => {
  writeNumber(time, 10, 10)
  writeNumber(random.high, 8, 18)
  writeNumber(random.low, 8, 26)
  return String.fromCharCode.apply(null, suffixCodes as unknown as Array<number>)
}

let lastTime = 0
let lastRandom: RandomPart = { high: 0, low: 0 }

const nextSuffix = (): string => {
  // The system clock, not Effect's: an id's time part only orders ids, and ids are made outside fibers too.
  const now = Date.now()
  if (now <= lastTime) {
    lastRandom = incremented(lastRandom)
  } else {
    lastTime = now
    // 79 random bits: the high half's top bit clear, headroom for increments.
    const bytes = randomBytes(10)
    lastRandom = { high: Math.floor(bytes.readUIntBE(0, 5) / 2), low: bytes.readUIntBE(5, 5) }
  }
  return suffixOf(lastTime, lastRandom)
}

export const makeId = (prefix: string): string => `${prefix}_${nextSuffix()}`

/** A random secret of `bytes` bytes, as base-32 text, for keys and signing secrets. */
export const randomToken = (bytes = 24): string => encode(BigInt(`0x${randomBytes(bytes).toString("hex")}`), Math.ceil(bytes * 8 / 5))

/** Rows in the order of their ids: the order ids were made in (their time part first). */
export const idOrder: Order.Order<{ readonly id: string }> = Order.mapInput(Order.string, (row) => row.id)
