/**
 * @billing/client: a typed client of the billing API, one method per operation
 * of its OpenAPI document (`client.customers.create(...)`, `client.signals.credit(...)`,
 * `client.invoices.recordPayment(...)`), typed from the document
 * (./generated/openapi.ts, ./generated/operations.ts).
 *
 *   const billing = createBillingClient({ baseUrl: "http://127.0.0.1:8787", apiKey: "sk_..." })
 *   const { customer } = await billing.customers.create({ name: "Jo", email: "jo@example.com" })
 *   await billing.signals.credit({ customerId: customer.id, agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 900 } })
 *
 * A method answers the envelope's `result`; a failure throws `BillingApiError`
 * (`status`, `code` from `statusDetail.code`, `message`, `requestId`).
 *
 * Retries: an answer of 429 or 5xx, and a request that never got an answer
 * (network error), are tried again with exponential back-off (full jitter), or
 * after the `Retry-After` the server sent. Only where a repeat cannot do a thing
 * twice: reads, PUT and DELETE; writes that carry an idempotency key, which the
 * client adds itself when the operation takes one and none was given (signals,
 * adjustments, payments; each signal of a batch), so every attempt carries the
 * same key; any write refused 429, which the server answers before doing
 * anything. A write without a key (create a customer, say) is not retried on
 * 5xx or a lost answer: it may have been done.
 *
 * No dependency: the platform's `fetch` (Node.js 20 or later, browsers, Deno, Bun).
 */
import type { operations } from "./generated/openapi.ts"
import { type OperationId, operationTable } from "./generated/operations.ts"

export type { components, operations, paths } from "./generated/openapi.ts"
export { type OperationId, operationTable }

// Types of one operation, read from the generated `operations`.

type Operation<K extends OperationId> = operations[K]
type Parameters<K extends OperationId> = Operation<K> extends { parameters: infer P } ? P : never
type PathParams<K extends OperationId> = Parameters<K> extends { path: infer X } ? X : {}
type QueryParams<K extends OperationId> = Parameters<K> extends { query?: infer Q } ? [NonNullable<Q>] extends [never] ? {} : NonNullable<Q>
  : {}

/** The path and query parameters of an operation, in one object (`{ id }`, `{ customerId, limit, cursor }`). */
export type Params<K extends OperationId> = PathParams<K> & QueryParams<K>

/** The JSON body of an operation; never when it takes none. */
export type Body<K extends OperationId> = [NonNullable<Operation<K>["requestBody"]>] extends [never] ? never
  : NonNullable<Operation<K>["requestBody"]> extends { content: { "application/json": infer B } } ? B
  : never

type Responses<K extends OperationId> = Operation<K> extends { responses: infer R } ? R : never
type SuccessStatus = 200 | 201 | 202 | 204
type ResultOf<E> = E extends { result: infer R } ? R : never
type Envelopes<K extends OperationId> = {
  [S in keyof Responses<K>]: S extends SuccessStatus
    ? Responses<K>[S] extends { content: { "application/json": infer E } } ? E : never
    : never
}[keyof Responses<K>]

type Files<K extends OperationId> = {
  [S in keyof Responses<K>]: S extends SuccessStatus
    ? Responses<K>[S] extends { content: infer C } ? "application/json" extends keyof C ? never : Uint8Array : never
    : never
}[keyof Responses<K>]

/**
 * What an operation answers: its envelope's `result` (a union where it has several successes, as a signal's 202 or
 * priced 200), or the bytes of a file it answers instead of the envelope (an invoice's PDF, `invoices.pdf`).
 */
export type Result<K extends OperationId> = ResultOf<Envelopes<K>> | Files<K>

/** Per call: extra headers (`prefer: "wait=5"` on a signal), an abort signal, no retries. */
export interface CallOptions {
  readonly headers?: Readonly<Record<string, string>>
  readonly signal?: AbortSignal
  /** Overrides the client's retry count for this call (0: a single attempt). */
  readonly retries?: number
}

type HasParams<K extends OperationId> = keyof Params<K> extends never ? false : true
type HasBody<K extends OperationId> = [Body<K>] extends [never] ? false : true
type ParamsArgument<K extends OperationId> = {} extends Params<K> ? [params?: Params<K>] : [params: Params<K>]

/** The arguments of an operation's method: its parameters (when it has any), its body (when it takes one), options. */
export type Arguments<K extends OperationId> = HasParams<K> extends true
  ? HasBody<K> extends true ? [params: Params<K>, body: Body<K>, options?: CallOptions]
  : [...ParamsArgument<K>, options?: CallOptions]
  : HasBody<K> extends true ? [body: Body<K>, options?: CallOptions]
  : [options?: CallOptions]

export type Method<K extends OperationId> = (...args: Arguments<K>) => Promise<Result<K>>

type GroupOf<K> = K extends `${infer G}.${string}` ? G : never

/** The client: a method per operation, grouped as the document's tags (`customers`, `signals`, `invoices`, ...). */
export type BillingClient = {
  readonly [G in GroupOf<OperationId>]: {
    readonly [K in OperationId as K extends `${G}.${infer N}` ? N : never]: Method<K>
  }
}

// Errors

/** An error answer of the API: its HTTP status, its machine-readable code when the server sends one, its message. */
export class BillingApiError extends Error {
  override readonly name = "BillingApiError"
  constructor(
    /** The HTTP status (400, 401, 404, 409, 422, 429, 500, ...). */
    readonly status: number,
    /** `statusDetail.code` (`customer_archived`, `rate_limited`, ...); undefined when the server sent none. */
    readonly code: string | undefined,
    message: string,
    /** The operation that failed (`customers.create`). */
    readonly operation: OperationId,
    /** The answer's `x-request-id`, to find the request in the server's log. */
    readonly requestId: string | undefined,
    /** Seconds the server asked to wait (`Retry-After`), on a 429 or 503. */
    readonly retryAfterSeconds: number | undefined,
    /** The answer's body as parsed, or its text. */
    readonly body: unknown
  ) {
    super(message)
  }
}

/** The request got no answer (refused connection, reset, timeout) after every attempt it was allowed. */
export class BillingNetworkError extends Error {
  override readonly name = "BillingNetworkError"
  constructor(message: string, readonly operation: OperationId, override readonly cause: unknown) {
    super(message)
  }
}

export const isBillingApiError = (u: unknown): u is BillingApiError => u instanceof BillingApiError

// The client

export interface RetryOptions {
  /** Attempts after the first; default 3. */
  readonly retries?: number
  /** The first back-off, in milliseconds; doubled each attempt; default 250. */
  readonly baseDelayMs?: number
  /** The longest back-off, in milliseconds; default 8,000. */
  readonly maxDelayMs?: number
  /** A `Retry-After` longer than this (milliseconds) is not waited for: the error is thrown; default 60,000. */
  readonly maxRetryAfterMs?: number
}

export interface BillingClientOptions {
  /** The service's origin (`http://127.0.0.1:8787`); a trailing `/api/v1` is accepted too. */
  readonly baseUrl: string
  readonly apiKey: string
  readonly retry?: RetryOptions
  /** Makes the idempotency keys added to writes that take one; default `crypto.randomUUID()`. */
  readonly idempotencyKey?: () => string
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>
  /** Defaults to the platform's `fetch`. */
  readonly fetch?: typeof fetch
  /** How the client waits between attempts; defaults to a timer (tests pass their own). */
  readonly sleep?: (ms: number) => Promise<void>
  /** Defaults to `Math.random`: the jitter of the back-off. */
  readonly random?: () => number
}

type Entry = (typeof operationTable)[OperationId]

const retriableStatus = (status: number) => status === 429 || status >= 500

/** `Retry-After` as seconds from now: a number of seconds or an HTTP date; undefined when absent or unreadable. */
const retryAfterOf = (header: string | null): number | undefined => {
  if (header === null) return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000)
}

const withKeys = (entry: Entry, body: unknown, newKey: () => string): unknown => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return body
  const record = body as Record<string, unknown>
  if (entry.idempotencyKey === "body") {
    return record.idempotencyKey === undefined ? { ...record, idempotencyKey: newKey() } : body
  }
  if (entry.idempotencyKey === "signals" && Array.isArray(record.signals)) {
    return {
      ...record,
      signals: record.signals.map((signal: unknown) =>
        typeof signal === "object" && signal !== null && (signal as Record<string, unknown>).idempotencyKey === undefined
          ? { ...signal, idempotencyKey: newKey() }
          : signal
      )
    }
  }
  return body
}

const urlOf = (origin: string, entry: Entry, params: Record<string, unknown>) => {
  let path: string = entry.path
  for (const name of entry.pathParams) {
    const value = params[name]
    if (value === undefined || value === null) throw new TypeError(`${name} is required`)
    path = path.replace(`{${name}}`, encodeURIComponent(String(value)))
  }
  const query = new URLSearchParams()
  for (const name of entry.queryParams) {
    const value = params[name]
    if (value !== undefined && value !== null) query.set(name, String(value))
  }
  const search = query.toString()
  return `${origin}${path}${search === "" ? "" : `?${search}`}`
}

export const createBillingClient = (options: BillingClientOptions): BillingClient => {
  const origin = options.baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "")
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis)
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const random = options.random ?? Math.random
  const newKey = options.idempotencyKey ?? (() => globalThis.crypto.randomUUID())
  const retries = options.retry?.retries ?? 3
  const baseDelayMs = options.retry?.baseDelayMs ?? 250
  const maxDelayMs = options.retry?.maxDelayMs ?? 8_000
  const maxRetryAfterMs = options.retry?.maxRetryAfterMs ?? 60_000

  const call = async (id: OperationId, params: Record<string, unknown>, body: unknown, callOptions: CallOptions = {}) => {
    const entry = operationTable[id] as Entry
    const url = urlOf(origin, entry, params)
    const payload = entry.body ? JSON.stringify(withKeys(entry, body ?? {}, newKey)) : undefined
    // A repeat cannot do a thing twice: a read, PUT or DELETE, or a write carrying idempotency keys.
    const repeatable = entry.method === "GET" || entry.method === "PUT" || entry.method === "DELETE" || entry.idempotencyKey !== null
    const file = "file" in entry ? entry.file : undefined
    const headers: Record<string, string> = {
      accept: file === undefined ? "application/json" : `${file}, application/json`,
      ...options.headers,
      ...callOptions.headers,
      authorization: `Bearer ${options.apiKey}`,
      ...(payload === undefined ? {} : { "content-type": "application/json" })
    }
    const allowed = callOptions.retries ?? retries
    for (let attempt = 0;; attempt++) {
      const backOff = Math.min(maxDelayMs, baseDelayMs * 2 ** attempt) * random()
      let response: Response
      try {
        response = await doFetch(url, {
          method: entry.method,
          headers,
          ...(payload === undefined ? {} : { body: payload }),
          ...(callOptions.signal === undefined ? {} : { signal: callOptions.signal })
        })
      } catch (error) {
        if (callOptions.signal?.aborted || !repeatable || attempt >= allowed) {
          throw new BillingNetworkError(`${id}: ${error instanceof Error ? error.message : String(error)}`, id, error)
        }
        await sleep(backOff)
        continue
      }
      // A file (an invoice's PDF) is its bytes; a refusal of the same operation is the envelope, read below.
      if (response.ok && file !== undefined) return new Uint8Array(await response.arrayBuffer())
      const text = await response.text()
      let parsed: unknown = text
      try {
        parsed = text === "" ? undefined : JSON.parse(text)
      } catch {
        // not JSON: keep the text
      }
      if (response.ok) return (parsed as { readonly result?: unknown } | undefined)?.result
      const retryAfter = retryAfterOf(response.headers.get("retry-after"))
      const canRetry = retriableStatus(response.status) && (repeatable || response.status === 429) && attempt < allowed &&
        (retryAfter === undefined || retryAfter * 1000 <= maxRetryAfterMs)
      if (canRetry) {
        await sleep(retryAfter === undefined ? backOff : retryAfter * 1000)
        continue
      }
      const detail = (parsed as { readonly statusDetail?: { readonly message?: unknown; readonly code?: unknown } } | undefined)
        ?.statusDetail
      throw new BillingApiError(
        response.status,
        typeof detail?.code === "string" ? detail.code : undefined,
        typeof detail?.message === "string" ? detail.message : `HTTP ${response.status}`,
        id,
        response.headers.get("x-request-id") ?? undefined,
        retryAfter,
        parsed
      )
    }
  }

  const client: Record<string, Record<string, (...args: Array<unknown>) => Promise<unknown>>> = {}
  for (const id of Object.keys(operationTable) as Array<OperationId>) {
    const entry = operationTable[id] as Entry
    const [group, name] = id.split(".") as [string, string]
    const hasParams = entry.pathParams.length > 0 || entry.queryParams.length > 0
    client[group] ??= {}
    client[group][name] = (...args: Array<unknown>) => {
      const params = (hasParams ? args.shift() : undefined) as Record<string, unknown> | undefined
      const body = entry.body ? args.shift() : undefined
      return call(id, params ?? {}, body, args.shift() as CallOptions | undefined)
    }
  }
  return client as unknown as BillingClient
}
