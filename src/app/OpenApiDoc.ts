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
 * codes of the error statuses it declares: the codes it can answer, derived
 * from its statuses (src/http/ApiErrors.ts `codesOfStatus`).
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
  requestBody?: unknown
  parameters?: Array<{ readonly in: string }>
  responses: Record<string, unknown>
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
        for (const status of Object.keys(errors).sort()) responses[status] = errors[status]
        operation.responses = responses
        if (method === "post") documentReplayedHeader(operation)
        operation["x-error-codes"] = Object.keys(errors).sort().flatMap((status) => codesOfStatus(Number(status)))
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
    return { ...spec, webhooks }
  }
})

