/**
 * Talking to the test server as a tenant, and the two assertions every HTTP
 * test makes: a success with its status, or an error in the spec's envelope.
 */
import { expect } from "vitest"
import type { Response, TestApp, Tenant } from "./TestApp.ts"
import { codesOfStatus, type ErrorCode } from "../../src/http/ApiErrors.ts"

export interface Client {
  readonly get: (path: string) => Promise<Response>
  readonly post: (path: string, body?: unknown) => Promise<Response>
  readonly put: (path: string, body?: unknown) => Promise<Response>
  readonly patch: (path: string, body: unknown) => Promise<Response>
  readonly del: (path: string) => Promise<Response>
}

export const clientOf = (app: TestApp, tenant: Tenant): Client => ({
  get: (path) => app.request("GET", path, { key: tenant.apiKey }),
  post: (path, body) => app.request("POST", path, { key: tenant.apiKey, body }),
  put: (path, body) => app.request("PUT", path, { key: tenant.apiKey, body }),
  patch: (path, body) => app.request("PATCH", path, { key: tenant.apiKey, body }),
  del: (path) => app.request("DELETE", path, { key: tenant.apiKey })
})

/**
 * An error answer: the status, and the envelope with an empty result and
 * `code` (docs/api.md "Error codes"), which must be one of that status's codes.
 * The code is required: a status alone lets a refusal for the wrong reason pass.
 * A `validation_failed` answer names its problems (`statusDetail.errors`, each
 * `{field, message}`); no other answer has them.
 */
export const expectError = (response: Pick<Response, "status" | "body">, status: number, code: ErrorCode) => {
  expect(response.status, JSON.stringify(response.body)).toBe(status)
  const problems = code === "validation_failed"
    ? { errors: expect.arrayContaining([{ field: expect.toBeOneOf([expect.any(String), null]), message: expect.any(String) }]) }
    : {}
  expect(response.body).toEqual({
    statusCode: status,
    statusDetail: { status: "ERROR", code: expect.any(String), message: expect.any(String), ...problems },
    result: {}
  })
  expect(codesOfStatus(status), `${code} is not a code of ${status}`).toContain(code)
  expect(response.body.statusDetail.code, JSON.stringify(response.body)).toBe(code)
}

/** The result of a success, after checking its status. */
export const ok = (response: Response, status = 200): any => {
  expect(response.status, JSON.stringify(response.body)).toBe(status)
  expect(response.body.statusDetail.status).toBe("SUCCESS")
  return response.body.result
}
