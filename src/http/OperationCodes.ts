/**
 * The codes one operation can answer, for its `x-error-codes` in the OpenAPI
 * document (docs/api.md "Error codes"): those the edge answers on such an
 * operation, and those of the service errors its handler can fail with
 * (src/http/OperationErrors.ts, generated from the handlers' types by
 * scripts/operation-errors.ts). It listed every code of every status the
 * operation declares: a `GET /customers/{id}` read as if it could answer
 * `plan_not_found` or `invalid_tax_rate`.
 */
import { codeOf } from "../errors.ts"
import { edgeCode, type ErrorCode, errorCodes } from "./ApiErrors.ts"
import { operationServiceErrors, workerRefusals } from "./OperationErrors.ts"

/** What the document says of an operation that decides which edge codes it can answer. */
export interface OperationShape {
  /** `group.endpoint`. */
  readonly operationId: string
  readonly method: string
  readonly hasBody: boolean
  /** It takes `Prefer: wait=N`: it may answer the worker's refusal of the signal (docs/api.md). */
  readonly waitsForWorker: boolean
}

/** In the order of the document's table: by status, then code. */
const order = new Map(errorCodes.map((entry, index) => [entry.code as string, index]))

/**
 * The operation's codes; undefined for an operation the generated table does
 * not know yet (a route added since scripts/operation-errors.ts last ran).
 */
export const operationCodes = (operation: OperationShape): ReadonlyArray<ErrorCode> | undefined => {
  const own = operationServiceErrors[operation.operationId]
  if (own === undefined) return undefined
  const codes = new Set<ErrorCode>([
    // Every operation: a query or path it does not take, the key, its rate limit, a method the path does not take,
    // and a failure of ours.
    codeOf("ValidationFailed"),
    codeOf("ApiKeyRefused"),
    codeOf("RateLimited"),
    edgeCode("MethodNotAllowed"),
    edgeCode("InternalError"),
    ...own.map((tag) => codeOf(tag))
  ])
  if (operation.hasBody) {
    codes.add(edgeCode("InvalidJson"))
    codes.add(edgeCode("UnsupportedMediaType"))
  }
  // The Idempotency-Key header of every POST (src/http/IdempotencyKeyHeader.ts).
  if (operation.method === "post") {
    codes.add(codeOf("IdempotencyKeyReused"))
    codes.add(codeOf("IdempotencyKeyInUse"))
  }
  if (operation.waitsForWorker) for (const tag of workerRefusals) codes.add(codeOf(tag))
  return [...codes].sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))
}
