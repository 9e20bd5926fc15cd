/**
 * Webhooks as a receiver meets them (docs/webhooks.md, "Receiving webhooks"):
 * the signature check and the typed event.
 *
 * The signature rule is the service's (src/webhooks/Signature.ts, the spec's
 * "Signature verification"): HMAC-SHA256 keyed with the endpoint's whole secret
 * (`whsec_` included) over `<t>.<raw body>`, sent as
 * `X-Service-Signature: t=<unix seconds>,v1=<lowercase hex>`. This file has the
 * rule again rather than importing the service: the package is separate and
 * depends on nothing. test/client-package.test.ts checks it against the
 * service's own signer.
 *
 * `node:crypto` (Node.js, Deno and Bun have it) because the check must be
 * synchronous and in constant time; an API key, and so this client, belongs on
 * a server.
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import type { webhooks } from "./generated/openapi.ts"
import { webhookEventTable, type WebhookEventType } from "./generated/operations.ts"
import { type DecimalShape, parseJson, type WithDecimalStrings } from "./decimals.ts"

export type { WebhookEventType }
export { webhookEventTable }

export interface VerifyOptions {
  /** How far `t` may be from now, in seconds, either way; default 300 (five minutes). */
  readonly toleranceSeconds?: number
  /** The receiver's clock; default now. */
  readonly now?: Date
}

const bytesOf = (body: string | Uint8Array): Uint8Array => (typeof body === "string" ? new TextEncoder().encode(body) : body)

const signatureOf = (secret: string, timestamp: number, rawBody: string | Uint8Array): Uint8Array =>
  createHmac("sha256", secret).update(`${timestamp}.`).update(bytesOf(rawBody)).digest()

const hexBytes = (hex: string): Uint8Array => {
  const bytes = new Uint8Array(hex.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16)
  return bytes
}

/**
 * Whether `header` (the `X-Service-Signature` value) is a valid signature of `rawBody` by `secret`, made within
 * the tolerance. Pass the body exactly as received (its bytes, or its text): a parsed and re-serialised body does
 * not verify. False for a missing or malformed header, a wrong signature or a stale one; every `v1` of the header
 * is tried (an endpoint's secret rotation), each compared in constant time.
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
  const expected = signatureOf(secret, timestamp, rawBody)
  return signatures.some((signature) => timingSafeEqual(expected, hexBytes(signature)))
}

type EventBody<T extends WebhookEventType> = webhooks[T] extends
  { post: { requestBody: { content: { "application/json": infer B } } } } ? B : never
type EventShape<T extends WebhookEventType> = (typeof webhookEventTable)[T] extends { decimals: infer S } ? S : never

/**
 * A webhook event's body, typed from the document's webhooks: narrow it by `event_type`. With `"string"`, its exact
 * decimals (balances, amounts) are decimal strings, as `verifiedWebhookEvent(..., { decimals: "string" })` reads them.
 */
export type WebhookEvent<D extends "number" | "string" = "number", T extends WebhookEventType = WebhookEventType> = {
  [K in T]: D extends "string" ? WithDecimalStrings<EventBody<K>, EventShape<K>> : EventBody<K>
}[T]

/** A webhook whose signature did not verify (missing, malformed, wrong or stale): answer it 400 and do nothing. */
export class WebhookSignatureError extends Error {
  override readonly name = "WebhookSignatureError"
}

/**
 * The event of a webhook, once its signature verifies (`verifyWebhookSignature`, same arguments); throws
 * `WebhookSignatureError` when it does not. `decimals: "string"` reads its exact decimals as decimal strings, digit
 * for digit, as the client option of that name does.
 */
export const verifiedWebhookEvent = <D extends "number" | "string" = "number">(
  secret: string,
  header: string | null | undefined,
  rawBody: string | Uint8Array,
  options: VerifyOptions & { readonly decimals?: D } = {}
): WebhookEvent<D> => {
  if (!verifyWebhookSignature(secret, header, rawBody, options)) {
    throw new WebhookSignatureError("The webhook's X-Service-Signature does not verify with this secret (or is stale)")
  }
  const text = typeof rawBody === "string" ? rawBody : new TextDecoder().decode(rawBody)
  const event = JSON.parse(text) as { readonly event_type?: unknown }
  if (options.decimals !== "string") return event as WebhookEvent<D>
  // Read again, knowing the type: its decimals are taken from the text, never from the floats just made.
  const type = String(event.event_type)
  const shape = Object.prototype.hasOwnProperty.call(webhookEventTable, type)
    ? (webhookEventTable[type as WebhookEventType] as { readonly decimals?: DecimalShape }).decimals
    : undefined
  return (shape === undefined ? event : parseJson(text, shape)) as WebhookEvent<D>
}
