/**
 * Webhook signatures (the spec's "Signature verification"): HMAC-SHA256 keyed
 * with the endpoint's whole secret (`whsec_` included) over `<t>.<raw body>`,
 * sent as `X-Service-Signature: t=<unix seconds>,v1=<lowercase hex>`.
 *
 * This module depends on node:crypto only, so a receiver can import it from the
 * package without pulling in the service.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

export const signaturePayload = (timestamp: number, rawBody: string | Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(`${timestamp}.`), typeof rawBody === "string" ? Buffer.from(rawBody) : rawBody])

export const computeSignature = (secret: string, timestamp: number, rawBody: string | Uint8Array): string =>
  createHmac("sha256", secret).update(signaturePayload(timestamp, rawBody)).digest("hex")

/** The `X-Service-Signature` header for a body sent at `at`. */
export const signatureHeader = (secret: string, rawBody: string, at: Date): string => {
  const timestamp = Math.floor(at.getTime() / 1000)
  return `t=${timestamp},v1=${computeSignature(secret, timestamp, rawBody)}`
}

export interface VerifyOptions {
  /** How old `t` may be, in seconds; default 300 (five minutes). */
  readonly toleranceSeconds?: number
  /** The receiver's clock; default now. */
  readonly now?: Date
}

/**
 * Whether `header` is a valid signature of `rawBody` by `secret`, made within
 * the tolerance. Pass the body bytes exactly as received: a re-serialised body
 * does not verify. Every `v1` in the header is tried, in constant time.
 */
export const verifyWebhookSignature = (
  secret: string,
  header: string | null | undefined,
  rawBody: string | Uint8Array,
  options: VerifyOptions = {}
): boolean => {
  if (!header) return false
  let timestamp: number | undefined
  const signatures: Array<string> = []
  for (const part of header.split(",")) {
    const separator = part.indexOf("=")
    if (separator < 0) continue
    const key = part.slice(0, separator).trim()
    const value = part.slice(separator + 1).trim()
    if (key === "t" && /^\d+$/.test(value)) timestamp = Number(value)
    else if (key === "v1" && /^[0-9a-f]{64}$/.test(value)) signatures.push(value)
  }
  if (timestamp === undefined || signatures.length === 0) return false
  const tolerance = options.toleranceSeconds ?? 300
  const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000)
  if (Math.abs(nowSeconds - timestamp) > tolerance) return false
  const expected = Buffer.from(computeSignature(secret, timestamp, rawBody), "hex")
  return signatures.some((signature) => timingSafeEqual(expected, Buffer.from(signature, "hex")))
}
