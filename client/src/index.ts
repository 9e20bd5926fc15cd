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
 * (`status`, `code` from `statusDetail.code`, `message`, `requestId`). Beside
 * the groups of methods:
 *
 * - `billing.withResponse.<group>.<method>(...)`: the same call, answering
 *   `{ result, status, headers, requestId, replayed, rateLimit }` (a signal's
 *   202 or priced 200, `Preference-Applied`, `Idempotent-Replayed`, the
 *   `RateLimit` fields).
 * - `billing.paginate.<group>.<list>(params)`: every row of a list, page after
 *   page by cursor, as an async iterable (`for await (const c of ...)`).
 * - `createBillingClient({ ..., decimals: "string" })`: amounts (the document's
 *   `format: decimal` fields) arrive as exact decimal strings, read from the
 *   answer's text, never through a float.
 * - `verifyWebhookSignature` and `verifiedWebhookEvent` (./webhooks.ts) for a
 *   webhook receiver.
 *
 * Retries: an answer of 429 or 5xx, and a request that never got an answer
 * (network error), are tried again with exponential back-off (full jitter), or
 * after the `Retry-After` the server sent. Only where a repeat cannot do a thing
 * twice: reads, PUT and DELETE; writes that carry an idempotency key, which the
 * client adds itself before the first attempt, so every attempt carries the
 * same key: in the body where the operation takes one (signals, adjustments,
 * payments; each signal of a batch), else in the `Idempotency-Key` header of
 * every POST that takes it (a customer's create, a purchase, ...); and any
 * write refused 429, which the server answers before doing anything. A write
 * without any key (a PATCH) is not retried on 5xx or a lost answer: it may have
 * been done.
 *
 * No dependency: the platform's `fetch` and `node:crypto` (Node.js 20 or later,
 * Deno, Bun).
 */
import type { operations } from "./generated/openapi.ts"
import { type OperationId, operationTable } from "./generated/operations.ts"
import { type DecimalShape, parseJson, type WithDecimalStrings } from "./decimals.ts"

export type { components, operations, paths, webhooks } from "./generated/openapi.ts"
export { type OperationId, operationTable }
export { type DecimalShape, parseJson, plainDecimal, type WithDecimalStrings } from "./decimals.ts"
export {
  verifiedWebhookEvent,
  verifyWebhookSignature,
  type VerifyOptions,
  type WebhookEvent,
  webhookEventTable,
  type WebhookEventType,
  WebhookSignatureError
} from "./webhooks.ts"

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
/** The success statuses an operation answers (`201`; `200 | 202` for a signal). */
export type SuccessStatusOf<K extends OperationId> = Extract<keyof Responses<K>, SuccessStatus>
type ResultOf<E> = E extends { result: infer R } ? R : never

/** What a success of status `S` carries: its envelope's `result`, or the bytes of a file. */
type ResultAt<K extends OperationId, S> = S extends keyof Responses<K>
  ? Responses<K>[S] extends { content: infer C }
    ? C extends { "application/json": infer E } ? ResultOf<E> : Uint8Array
  : undefined
  : never

/** How amounts arrive: JSON numbers (the default), or exact decimal strings (`decimals: "string"`). */
export type DecimalMode = "number" | "string"

type Entry<K extends OperationId> = (typeof operationTable)[K]
type DecimalsOf<K extends OperationId> = Entry<K> extends { decimals: infer S } ? S : never
type InMode<T, K extends OperationId, D extends DecimalMode> = D extends "string" ? WithDecimalStrings<T, DecimalsOf<K>> : T

/**
 * What an operation answers: its envelope's `result` (a union where it has several successes, as a signal's 202 or
 * priced 200), or the bytes of a file it answers instead of the envelope (an invoice's PDF, `invoices.pdf`). With
 * `D` `"string"`, its exact decimals are decimal strings.
 */
export type Result<K extends OperationId, D extends DecimalMode = "number"> = InMode<ResultAt<K, SuccessStatusOf<K>>, K, D>

/** A `RateLimit` field (`"reads";r=9;t=1`) with its `RateLimit-Policy` (`"reads";q=10;w=1`), read. */
export interface RateLimitInfo {
  /** The route family whose tokens the request took: `signals`, `reads` or `writes`. */
  readonly policy: string
  /** Tokens left. */
  readonly remaining: number
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number
  /** The bucket's size (its burst); undefined when the policy field is missing. */
  readonly limit: number | undefined
  /** Seconds to fill the bucket from empty; undefined when the policy field is missing. */
  readonly windowSeconds: number | undefined
}

/**
 * A success with its HTTP details, as `billing.withResponse...` answers it: one member per success status of the
 * operation, so `status` narrows `result` (a signal: 202 queued, 200 priced under `Prefer: wait`).
 */
export type WithResponse<K extends OperationId, D extends DecimalMode = "number"> = {
  [S in SuccessStatusOf<K>]: {
    readonly status: S
    readonly result: InMode<ResultAt<K, S>, K, D>
    readonly headers: Headers
    /** The answer's `x-request-id`. */
    readonly requestId: string | undefined
    /** `Idempotent-Replayed: true`: the first answer to the same `Idempotency-Key`, given again; nothing was done. */
    readonly replayed: boolean
    /** The `RateLimit` and `RateLimit-Policy` fields, read; undefined when the answer has none. */
    readonly rateLimit: RateLimitInfo | undefined
  }
}[SuccessStatusOf<K>]

/** Per call: extra headers (`prefer: "wait=5"` on a signal, your own `Idempotency-Key`), an abort signal, retries. */
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

export type Method<K extends OperationId, D extends DecimalMode = "number"> = (...args: Arguments<K>) => Promise<Result<K, D>>
export type MethodWithResponse<K extends OperationId, D extends DecimalMode = "number"> = (
  ...args: Arguments<K>
) => Promise<WithResponse<K, D>>

/** The operations that page by cursor (`limit` and `cursor`): every list. */
export type PagedOperationId = { [K in OperationId]: Entry<K> extends { page: object } ? K : never }[OperationId]
type ItemsField<K extends OperationId> = Entry<K> extends { page: { items: infer F extends string } } ? F : never

/** A row of a paged list (`customers.list`: a customer). */
export type Item<K extends PagedOperationId, D extends DecimalMode = "number"> = Result<K, D> extends infer R
  ? R extends { readonly [F in ItemsField<K>]: ReadonlyArray<infer I> } ? I : never
  : never

/**
 * Every row of a list, page after page: `params` as the list's own (its filters; `limit` is the page size, at
 * most 200; `cursor` starts after that row), options for each page's request.
 */
export type Paginator<K extends PagedOperationId, D extends DecimalMode = "number"> = (
  ...args: [...ParamsArgument<K>, options?: CallOptions]
) => AsyncIterableIterator<Item<K, D>>

type GroupOf<K> = K extends `${infer G}.${string}` ? G : never
/**
 * The client: a method per operation, grouped as the document's tags (`customers`, `signals`, `invoices`, ...);
 * `withResponse`, the same methods answering status and headers too; `paginate`, an iterator per list.
 */
export type BillingClient<D extends DecimalMode = "number"> =
  & {
    readonly [G in GroupOf<OperationId>]: {
      readonly [K in OperationId as K extends `${G}.${infer N}` ? N : never]: Method<K, D>
    }
  }
  & {
    readonly withResponse: {
      readonly [G in GroupOf<OperationId>]: {
        readonly [K in OperationId as K extends `${G}.${infer N}` ? N : never]: MethodWithResponse<K, D>
      }
    }
    readonly paginate: {
      readonly [G in GroupOf<PagedOperationId>]: {
        readonly [K in PagedOperationId as K extends `${G}.${infer N}` ? N : never]: Paginator<K, D>
      }
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
    readonly body: unknown,
    /** The answer's headers (`RateLimit`, `Retry-After`, ...); undefined for an error made without an answer. */
    readonly headers?: Headers
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

export interface BillingClientOptions<D extends DecimalMode = "number"> {
  /** The service's origin (`http://127.0.0.1:8787`); a trailing `/api/v1` is accepted too. */
  readonly baseUrl: string
  readonly apiKey: string
  readonly retry?: RetryOptions
  /** Makes the idempotency keys added to writes (bodies and `Idempotency-Key` headers); default `crypto.randomUUID()`. */
  readonly idempotencyKey?: () => string
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>
  /**
   * `"string"`: every exact decimal of an answer (the document's `format: decimal` fields: amounts, balances,
   * prices, quantities) is a decimal string of its exact digits (`"0.0000025"`, `"1234567.123456789012"`), read
   * from the answer's text; `"number"` (default): JSON numbers, as `JSON.parse` makes them.
   */
  readonly decimals?: D
  /** Defaults to the platform's `fetch`. */
  readonly fetch?: typeof fetch
  /** How the client waits between attempts; defaults to a timer (tests pass their own). */
  readonly sleep?: (ms: number) => Promise<void>
  /** Defaults to `Math.random`: the jitter of the back-off. */
  readonly random?: () => number
}

/** The API's largest page (docs/api.md "Pagination"): a larger `limit` is clamped to it. */
export const MAX_PAGE_SIZE = 200

/** What one page request of a paginator asks for when its `limit` is not given: the largest page. */
export const DEFAULT_PAGE_SIZE = MAX_PAGE_SIZE

interface TableEntry {
  readonly method: string
  readonly path: string
  readonly pathParams: ReadonlyArray<string>
  readonly queryParams: ReadonlyArray<string>
  readonly body: boolean
  readonly idempotencyKey: "body" | "signals" | null
  readonly file?: string
  readonly idempotencyHeader: boolean
  readonly page?: { readonly items: string; readonly cursor: string }
  readonly decimals?: DecimalShape
}

const retriableStatus = (status: number) => status === 429 || status >= 500

/** `Retry-After` as seconds from now: a number of seconds or an HTTP date; undefined when absent or unreadable. */
const retryAfterOf = (header: string | null): number | undefined => {
  if (header === null) return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000)
}

/** The first item of a structured field (`"reads";r=9;t=1`): its name and numeric parameters. */
const fieldItem = (value: string | null): { readonly name: string; readonly params: Record<string, number> } | undefined => {
  const match = value === null ? null : /^\s*"([^"]*)"((?:\s*;\s*[a-z][a-z0-9_.*-]*=-?\d+(?:\.\d+)?)*)/.exec(value)
  if (match === null) return undefined
  const params: Record<string, number> = {}
  for (const [, key, number] of match[2]!.matchAll(/;\s*([a-z][a-z0-9_.*-]*)=(-?\d+(?:\.\d+)?)/g)) params[key!] = Number(number)
  return { name: match[1]!, params }
}

const rateLimitOf = (headers: Headers): RateLimitInfo | undefined => {
  const field = fieldItem(headers.get("ratelimit"))
  if (field === undefined || field.params.r === undefined || field.params.t === undefined) return undefined
  const policy = fieldItem(headers.get("ratelimit-policy"))
  const same = policy?.name === field.name ? policy : undefined
  return {
    policy: field.name,
    remaining: field.params.r,
    resetSeconds: field.params.t,
    limit: same?.params.q,
    windowSeconds: same?.params.w
  }
}

const withKeys = (entry: TableEntry, body: unknown, newKey: () => string): unknown => {
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

const urlOf = (origin: string, entry: TableEntry, params: Record<string, unknown>) => {
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

const hasHeader = (headers: Readonly<Record<string, string>> | undefined, name: string) =>
  headers !== undefined && Object.keys(headers).some((key) => key.toLowerCase() === name)

interface Answer {
  readonly status: number
  readonly result: unknown
  readonly headers: Headers
  readonly requestId: string | undefined
  readonly replayed: boolean
  readonly rateLimit: RateLimitInfo | undefined
}

/** A client of the API at `options.baseUrl` acting with `options.apiKey`; `decimals: "string"` for exact amounts. */
export function createBillingClient<D extends DecimalMode = "number">(options: BillingClientOptions<D>): BillingClient<D>
export function createBillingClient(options: BillingClientOptions<DecimalMode>): BillingClient<DecimalMode> {
  const origin = options.baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "")
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis)
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const random = options.random ?? Math.random
  const newKey = options.idempotencyKey ?? (() => globalThis.crypto.randomUUID())
  const retries = options.retry?.retries ?? 3
  const baseDelayMs = options.retry?.baseDelayMs ?? 250
  const maxDelayMs = options.retry?.maxDelayMs ?? 8_000
  const maxRetryAfterMs = options.retry?.maxRetryAfterMs ?? 60_000
  const exactDecimals = options.decimals === "string"

  const call = async (id: OperationId, params: Record<string, unknown>, body: unknown, callOptions: CallOptions = {}): Promise<Answer> => {
    const entry = operationTable[id] as TableEntry
    const url = urlOf(origin, entry, params)
    const payload = entry.body ? JSON.stringify(withKeys(entry, body ?? {}, newKey)) : undefined
    const file = entry.file
    const headers: Record<string, string> = {
      accept: file === undefined ? "application/json" : `${file}, application/json`,
      ...options.headers,
      ...callOptions.headers,
      authorization: `Bearer ${options.apiKey}`,
      ...(payload === undefined ? {} : { "content-type": "application/json" })
    }
    // A POST that takes the header and has no key in its body gets one there, made once: every attempt carries
    // it. A body key is enough (and keeps a signal on the server's fast lane, which leaves keyed headers to the
    // full server).
    let keyedByHeader = entry.method === "POST" && entry.idempotencyHeader && hasHeader(headers, "idempotency-key")
    if (entry.method === "POST" && entry.idempotencyHeader && !keyedByHeader && entry.idempotencyKey === null) {
      headers["Idempotency-Key"] = newKey()
      keyedByHeader = true
    }
    // A repeat cannot do a thing twice: a read, PUT or DELETE, or a write carrying idempotency keys.
    const repeatable = entry.method === "GET" || entry.method === "PUT" || entry.method === "DELETE" ||
      entry.idempotencyKey !== null || keyedByHeader
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
      const answer = (result: unknown): Answer => ({
        status: response.status,
        result,
        headers: response.headers,
        requestId: response.headers.get("x-request-id") ?? undefined,
        replayed: response.headers.get("idempotent-replayed") === "true",
        rateLimit: rateLimitOf(response.headers)
      })
      // A file (an invoice's PDF) is its bytes; a refusal of the same operation is the envelope, read below.
      if (response.ok && file !== undefined) return answer(new Uint8Array(await response.arrayBuffer()))
      const text = await response.text()
      if (response.ok) {
        if (text === "") return answer(undefined)
        const envelope = parseJson(text, exactDecimals && entry.decimals !== undefined ? { result: entry.decimals } : undefined)
        return answer((envelope as { readonly result?: unknown } | undefined)?.result)
      }
      let parsed: unknown = text
      try {
        parsed = text === "" ? undefined : JSON.parse(text)
      } catch {
        // not JSON: keep the text
      }
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
        parsed,
        response.headers
      )
    }
  }

  /** A method's arguments as the call takes them: parameters (when it has any), body (when it takes one), options. */
  const argumentsOf = (entry: TableEntry, args: Array<unknown>) => {
    const hasParams = entry.pathParams.length > 0 || entry.queryParams.length > 0
    const params = (hasParams ? args.shift() : undefined) as Record<string, unknown> | undefined
    const body = entry.body ? args.shift() : undefined
    return { params: params ?? {}, body, options: args.shift() as CallOptions | undefined }
  }

  async function* rows(id: OperationId, page: NonNullable<TableEntry["page"]>, params: Record<string, unknown>, callOptions?: CallOptions) {
    const requested = typeof params.limit === "number" ? Math.floor(params.limit) : DEFAULT_PAGE_SIZE
    // A page shorter than the limit is the last (the spec's rule); the limit asked is one the API does not clamp.
    const limit = Math.max(1, Math.min(requested, MAX_PAGE_SIZE))
    let cursor = params.cursor
    for (;;) {
      const { result } = await call(id, { ...params, limit, cursor }, undefined, callOptions)
      const items = (result as Record<string, unknown> | undefined)?.[page.items]
      if (!Array.isArray(items)) throw new TypeError(`${id}: the answer has no ${page.items} to page through`)
      yield* items
      if (items.length < limit) return
      cursor = (items[items.length - 1] as Record<string, unknown>)[page.cursor]
    }
  }

  type Methods = Record<string, Record<string, (...args: Array<unknown>) => unknown>>
  const methods: Methods = {}
  const withResponse: Methods = {}
  const paginate: Methods = {}
  for (const id of Object.keys(operationTable) as Array<OperationId>) {
    const entry = operationTable[id] as TableEntry
    const [group, name] = id.split(".") as [string, string]
    ;(methods[group] ??= {})[name] = (...args: Array<unknown>) => {
      const { params, body, options: callOptions } = argumentsOf(entry, args)
      return call(id, params, body, callOptions).then((answer) => answer.result)
    }
    ;(withResponse[group] ??= {})[name] = (...args: Array<unknown>) => {
      const { params, body, options: callOptions } = argumentsOf(entry, args)
      return call(id, params, body, callOptions)
    }
    const page = entry.page
    if (page !== undefined) {
      ;(paginate[group] ??= {})[name] = (...args: Array<unknown>) => {
        const { params, options: callOptions } = argumentsOf(entry, args)
        return rows(id, page, params, callOptions)
      }
    }
  }
  return { ...methods, withResponse, paginate } as unknown as BillingClient<DecimalMode>
}
