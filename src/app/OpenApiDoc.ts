/**
 * The OpenAPI document as a whole. Each endpoint says, next to its declaration,
 * its summary, its description and the error statuses it can answer beyond the
 * ones every route shares (`documented`, in the kit: src/http/Documented.ts);
 * the API adds the shared ones and drops what the framework documents that is
 * never sent (`documentApi`).
 *
 * The `webhooks` section describes every event body the service POSTs to
 * endpoints (src/webhooks/EventSchemas.ts; the lifecycle events' records are
 * billing's, src/billing/LifecycleEventSchemas.ts).
 *
 * Error codes: each status's envelope enumerates the codes of that status
 * (`statusDetail.code`), and each operation lists, in `x-error-codes`, the
 * codes it can answer: the edge's for such an operation and its handler's
 * service errors (src/http/OperationCodes.ts).
 *
 * Every error response references `ErrorEnvelope[status]` (src/http/Envelope.ts),
 * the schema every error answer is encoded through.
 *
 * The framework documents each declared error class on every operation and its
 * own `HttpApiDecodeError` as a 400; neither is what is sent (every failure is
 * answered with the envelope by `renderFailures`), so an operation's error
 * responses are written here from its own list.
 */
import * as OpenApi from "@effect/platform/OpenApi"
import type { JSONSchema } from "effect"
import type { ErrorStatus } from "../http/Envelope.ts"
import { codesOfStatus } from "../http/ApiErrors.ts"
import { operationCodes } from "../http/OperationCodes.ts"
import { type ErrorDescriptions, errorResponse, isError, isWrittenResponse } from "../http/Documented.ts"
import { LifecycleEventBodySchemas } from "../billing/LifecycleEventSchemas.ts"
import { webhooksDocument } from "../webhooks/EventSchemas.ts"
import { documentIdempotencyKey, documentReplayedHeader } from "../http/IdempotencyKeyHeader.ts"

const bodyRefusals =
  "The body is not valid JSON, nests deeper than 64 levels, holds a string with a lone surrogate or a NUL " +
  "character, or fails the schema: a missing or mistyped field, a value out of range, or a field the operation " +
  "does not take (unknown fields are refused, never ignored). The message names the field. A query parameter the " +
  "operation does not take is refused too, naming it."

const parameterRefusals =
  "A path or query parameter fails its schema, or a query parameter the operation does not take is sent (the message " +
  "names it), or the path is not valid percent-encoding."

const pathRefusal = "The path is not valid percent-encoding, or a query parameter is sent (the operation takes none; " +
  "the message names it)."

const keyRefusal = " Or the `Idempotency-Key` header is not 1 to 255 printable ASCII characters."

type Operation = {
  "x-error-codes"?: ReadonlyArray<string>
  operationId?: string
  requestBody?: unknown
  parameters?: Array<{ readonly in: string; readonly name?: string }>
  responses: Record<string, unknown>
}

/** The document's own words: what the API is and the rules every operation shares. */
const apiDescription = [
  "Usage metering and billing for AI products: customers, a catalogue (models, credits, outcomes, units, composites), " +
  "plans and purchases, balances, signals of usage priced exactly, invoices, spend control and webhooks.",
  "",
  "- **Authentication**: every operation takes `Authorization: Bearer <API_KEY>`, the key of one organisation " +
  "(the `bearer` scheme); a missing, unknown, revoked or expired key is 401.",
  "- **The envelope**: every answer is `{statusCode, statusDetail: {status, message}, result}`; an error's " +
  "`statusDetail` has `code`, a stable snake_case code to program against (each operation lists its codes in " +
  "`x-error-codes`), and a request that fails validation names every problem with its field in " +
  "`statusDetail.errors`.",
  "- **Retries**: every POST takes an `Idempotency-Key` header; a repeat with the same key and body answers the " +
  "first answer again (`Idempotent-Replayed: true`).",
  "- **Lists** page by `limit` (1 to 200) and `cursor` (the last row's id); a page shorter than `limit` is the last. " +
  "A query parameter an operation does not take is 400.",
  "- **Money** is an exact decimal: read it with a decimal type.",
  "- **Rate limits** per key and route family: 429 with `Retry-After` and the `RateLimit` headers.",
  "",
  "The events the service POSTs to your endpoints are in this document's `webhooks`."
].join("\n")

const allowHeader = {
  Allow: {
    description: "The methods this path takes (RFC 9110), e.g. `GET, POST`.",
    schema: { type: "string" }
  }
}

const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const

const collectRefs = (value: unknown, refs: Set<string>) => {
  if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, refs)
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === "$ref" && typeof item === "string") refs.add(item.replace("#/components/schemas/", ""))
      else collectRefs(item, refs)
    }
  }
}

/** Effect's generated wording: a refinement's name as a title ("maxLength(80)"), its text as a description. */
const generatedTitle = /^[A-Za-z]+\(.*\)$/
const generatedDescription = /^(an? (string|number|integer)\b|Expected )/

/** Drops the generated words, which say nothing the constraints beside them do not; a person's words stay. */
const dropGeneratedWords = (value: unknown): void => {
  if (Array.isArray(value)) {
    for (const item of value) dropGeneratedWords(item)
  } else if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    if (typeof record.title === "string" && generatedTitle.test(record.title)) delete record.title
    if (typeof record.description === "string" && generatedDescription.test(record.description)) delete record.description
    for (const item of Object.values(record)) dropGeneratedWords(item)
  }
}

/**
 * The errors every operation shares, then only the component schemas something
 * references (the framework's own `HttpApiDecodeError`, `Issue`, ... are never
 * sent), without the generated words.
 */
export const documentApi = OpenApi.annotations({
  transform: (spec) => {
    const paths = spec.paths as Record<string, Record<string, Operation>>
    for (const item of Object.values(paths)) {
      const allowed = methods.filter((method) => item[method] !== undefined)
      for (const method of allowed) {
        const operation = item[method]!
        // The Idempotency-Key header of every POST, and its 409 and 422 (src/http/IdempotencyKeyHeader.ts).
        if (method === "post") documentIdempotencyKey(operation, { make: errorResponse, is: isWrittenResponse })
        const own = operation.responses
        const hasParameters = (operation.parameters ?? []).some((parameter) => parameter.in === "path" || parameter.in === "query")
        const shared: ErrorDescriptions = {
          400: (operation.requestBody !== undefined ? bodyRefusals : hasParameters ? parameterRefusals : pathRefusal) +
            (method === "post" ? keyRefusal : ""),
          401: "The Authorization header is missing or not `Bearer <API_KEY>`, or the key is unknown, revoked or expired.",
          405: `This path does not take the method used; it takes ${allowed.map((m) => m.toUpperCase()).join(", ")}.`,
          ...(operation.requestBody !== undefined
            ? { 415: "The body's Content-Type is not JSON (a body sent with no Content-Type is read as JSON)." }
            : {}),
          429: "The API key has spent its rate limit for this route's family (signals, reads or writes): nothing of " +
            "the request was done. Retry after the `Retry-After` seconds; the `RateLimit-Policy` and `RateLimit` " +
            "headers give the policy and what is left (docs/api.md, \"Rate limits\").",
          500: "A failure inside the service; the message discloses nothing internal. Retry with backoff."
        }
        const responses: Record<string, unknown> = {}
        for (const [status, response] of Object.entries(own)) {
          if (!isError(status)) responses[status] = response
        }
        const errors: Record<string, unknown> = {}
        for (const [status, description] of Object.entries(shared)) {
          errors[status] = errorResponse(Number(status) as ErrorStatus, description)
        }
        for (const [status, response] of Object.entries(own)) {
          if (isError(status) && isWrittenResponse(response as object)) errors[status] = response
        }
        // A 405 names the path's methods in its Allow header (src/http/Envelope.ts).
        errors[405] = { ...(errors[405] as object), headers: allowHeader }
        for (const status of Object.keys(errors).sort()) responses[status] = errors[status]
        operation.responses = responses
        if (method === "post") documentReplayedHeader(operation)
        operation["x-error-codes"] = operationCodes({
          operationId: operation.operationId ?? "",
          method,
          hasBody: operation.requestBody !== undefined,
          waitsForWorker: (operation.parameters ?? []).some((parameter) =>
            parameter.in === "header" && parameter.name?.toLowerCase() === "prefer"
          )
        }) ??
          // A route the generated table does not know yet (scripts/operation-errors.ts): every code of its statuses.
          Object.keys(errors).sort().flatMap((status) => codesOfStatus(Number(status)))
      }
    }
    const schemas = spec.components.schemas as Record<string, unknown>
    const referenced = new Set<string>()
    collectRefs(spec.paths, referenced)
    // Schemas referenced only from other schemas count too: follow until nothing new.
    let size = -1
    while (size !== referenced.size) {
      size = referenced.size
      for (const name of [...referenced]) collectRefs(schemas[name], referenced)
    }
    for (const name of Object.keys(schemas)) if (!referenced.has(name)) delete schemas[name]
    dropGeneratedWords(spec.paths)
    dropGeneratedWords(spec.components)
    // The events the service POSTs to subscribed endpoints (OpenAPI 3.1 `webhooks`); the lifecycle events
    // with their records whole, whose named schemas (Money, Timestamp, ...) join the components.
    const definitions: Record<string, JSONSchema.JsonSchema7> = {}
    const webhooks = webhooksDocument(LifecycleEventBodySchemas, definitions)
    for (const [name, definition] of Object.entries(definitions)) {
      if (schemas[name] === undefined) schemas[name] = definition
    }
    // The key on every operation, said once for the whole API too: a reader (the /docs page) selects it.
    return { ...spec, info: { ...spec.info, description: apiDescription }, security: [{ bearer: [] }], webhooks }
  }
})

