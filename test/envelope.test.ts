import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Conflict, Unprocessable } from "../src/http/ApiErrors.ts"
import { renderFailures } from "../src/http/Envelope.ts"

const noRoutes = { hasPath: () => false, methodsOf: () => [] }

const render = <E>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E>) =>
  renderFailures(noRoutes)(app).pipe(
    Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request("http://localhost/x")))
  )

const bodyOf = (response: HttpServerResponse.HttpServerResponse) => {
  const body = response.body
  if (body._tag !== "Uint8Array") throw new Error(`unexpected body ${body._tag}`)
  return JSON.parse(new TextDecoder().decode(body.body))
}

describe("renderFailures", () => {
  it.effect("turns a defect into a 500 that leaks nothing", () =>
    Effect.gen(function*() {
      const response = yield* render(Effect.die(new Error("password=hunter2 at db.internal:5432")))
      expect(response.status).toBe(500)
      const body = bodyOf(response)
      expect(body).toEqual({
        statusCode: 500,
        statusDetail: { status: "ERROR", code: "internal_error", message: "Internal server error" },
        result: {}
      })
      expect(JSON.stringify(body)).not.toContain("hunter2")
    }))

  it.effect("gives each typed error its status and message", () =>
    Effect.gen(function*() {
      const conflict = yield* render(Effect.fail(new Conflict({ message: "run already completed", code: "outcome_run_completed" })))
      expect(conflict.status).toBe(409)
      expect(bodyOf(conflict).statusDetail.message).toBe("run already completed")
      expect(bodyOf(conflict).statusDetail.code).toBe("outcome_run_completed")
      const unprocessable = yield* render(Effect.fail(new Unprocessable({ message: "no active plan", code: "no_active_plan" })))
      expect(unprocessable.status).toBe(422)
      expect(bodyOf(unprocessable).statusCode).toBe(422)
    }))
})
