/**
 * The words and error statuses of one operation in the OpenAPI document. Each
 * endpoint says, next to its declaration, its summary, its description and the
 * error statuses it can answer beyond the ones every route shares
 * (`documented`); the API document (src/app/OpenApiDoc.ts) adds the shared ones.
 *
 * Every error response references `ErrorEnvelope[status]` (src/http/Envelope.ts),
 * the schema every error answer is encoded through.
 */
import * as OpenApi from "@effect/platform/OpenApi"
import type { ErrorStatus } from "./Envelope.ts"

/** The error responses written by `errorResponse`, told apart from the ones the framework generates. */
const written = new WeakSet<object>()

/** Whether a response is one `errorResponse` wrote (the framework's generated ones are dropped). */
export const isWrittenResponse = (response: object) => written.has(response)

export type ErrorDescriptions = Partial<Record<ErrorStatus, string>>

export const errorResponse = (status: ErrorStatus, description: string) => {
  const response = {
    description,
    content: { "application/json": { schema: { $ref: `#/components/schemas/Error${status}` } } }
  }
  written.add(response)
  return response
}

export const isError = (status: string) => Number(status) >= 400

/**
 * Summary, description and the operation's own error statuses, each with when
 * it happens. 401, 405 and 500 are on every operation; 400 is on every one (a
 * path that is not valid percent-encoding), described from the inputs the
 * operation has unless `errors[400]` says more; 415 on every operation with a body.
 */
export const documented = (doc: {
  readonly summary: string
  readonly description: string
  readonly errors?: ErrorDescriptions
}) =>
  OpenApi.annotations({
    summary: doc.summary,
    description: doc.description,
    transform: (operation) => {
      const responses: Record<string, unknown> = {}
      for (const [status, response] of Object.entries(operation.responses as Record<string, unknown>)) {
        if (!isError(status)) responses[status] = response
      }
      for (const [status, description] of Object.entries(doc.errors ?? {})) {
        responses[status] = errorResponse(Number(status) as ErrorStatus, description)
      }
      return { ...operation, responses }
    }
  })
