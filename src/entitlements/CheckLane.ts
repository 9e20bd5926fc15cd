/**
 * The check lane: `POST /api/v1/entitlements/check` (with or without
 * `reserve`) answered straight from Node's request, without the platform's
 * per-request machinery (request wrapper, router, middleware chain,
 * schema-driven payload and response): for a bare HttpApi endpoint that
 * machinery cost more than the check's own work (docs/benchmarks.md, "The
 * check before spending").
 *
 * The lane is a door, not a second implementation, built as the intake lane
 * (src/signals/IntakeLane.ts) is: its route is the endpoint annotated
 * `CheckEndpoint`, found in the API it is given (`HttpApi.reflect`), path and
 * prefix as the full server routes it. It applies the same body rules
 * (BodyGuard's functions), decodes with the route's schema (`CheckRequest`),
 * authenticates with the same key cache (`ApiKeys.authenticateCached`, no
 * look-up for a known key), calls the same service as the HttpApi handler
 * (`Entitlements.checkNow`, the callback door of `Entitlements.check`: the same
 * rules, judged from one coalesced read without a fiber), encodes the result with the route's schema
 * (`CheckResult`) into the same envelope, maps failures with the one mapping
 * (`failureAnswer`), and writes the same request id and request-log line.
 * A request it cannot judge without the full server (no Content-Length, a
 * query string, a body that is not plain valid JSON of `CheckRequest`, no
 * bearer key) is replayed, body and all, into the full HttpApi server before
 * anything is written, and answered there: every 400 comes from one place.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import { Cause, Context, Effect, Either, Exit, Layer, Option, Schema } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { ApiKeys } from "../organizations/ApiKeys.ts"
import { successBody } from "../http/Envelope.ts"
import { exactJsonText } from "../WireDecimals.ts"
import { RateLimiter, rateLimitHeaders, type RateVerdict } from "../http/RateLimit.ts"
import { laneSecretOf, type LaneStats, makeLaneContext, parsedBody, readExchange } from "../http/LaneKit.ts"
import { CheckRequest, CheckResult } from "./Entitlement.ts"
import type { ServiceError } from "../errors.ts"
import { CheckEndpoint, checkedMessage } from "./EntitlementsApi.ts"
import { Entitlements } from "./Entitlements.ts"

/** The lane's paths: each POST endpoint of `api` annotated `CheckEndpoint`, by its full path. */
export const checkRoutesOf = (api: HttpApi.HttpApi.Any): ReadonlySet<string> => {
  const routes = new Set<string>()
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (endpoint.method === "POST" && Option.isSome(Context.getOption(endpoint.annotations, CheckEndpoint))) {
        routes.add(endpoint.path)
      }
    }
  })
  return routes
}

/** A check's body is a few hundred bytes; a bigger one is the full server's to judge. */
const maxCheckBody = 64 * 1024

/** The route's payload decoder, as the HttpApi route decodes it (defaults: excess fields ignored). */
const decodeCheck = Schema.decodeUnknownEither(CheckRequest)
const encodeResult = Schema.encodeSync(CheckResult)

/** What the lane did since the server started (tests, diagnostics). */
export type CheckLaneStats = LaneStats

const make = (api: HttpApi.HttpApi.Any) =>
  Effect.gen(function*() {
    const routes = checkRoutesOf(api)
    const keys = yield* ApiKeys
    const entitlements = yield* Entitlements
    const limiter = yield* RateLimiter
    // Released after the server, which finishes its requests in flight first.
    const { context: lane, runFork, stats } = yield* makeLaneContext

    /**
     * Takes `request` if it is the lane's and answers it, or hands it to
     * `fallback` (with a replay of its body) when only the full server can;
     * false when the lane does not take it at all.
     */
    const take = (
      request: IncomingMessage,
      response: ServerResponse,
      fallback: (request: IncomingMessage, response: ServerResponse) => void
    ): boolean => {
      if (request.method !== "POST" || !routes.has(request.url ?? "")) return false
      const secret = laneSecretOf(request, maxCheckBody)
      if (secret === undefined) return false

      readExchange(request, response, fallback, lane, ({ body, finished, handOver, limited, refused, requestId }) => {
        const json = parsedBody(body.toString("utf8"))
        if (json === undefined) return handOver()
        const decoded = decodeCheck(json)
        if (Either.isLeft(decoded)) return handOver()
        const checkRequest = decoded.right
        /** The answer of a check whose key's tokens were taken (`verdict`). */
        const settled = (verdict: RateVerdict) => (exit: Exit.Exit<CheckResult, ServiceError>) => {
          const headers = rateLimitHeaders(verdict)
          if (Exit.isFailure(exit)) return refused(exit.cause, headers)
          let body: string
          try {
            body = exactJsonText(() => successBody(200, checkedMessage, encodeResult(exit.value)))
          } catch (defect) {
            return refused(Cause.die(defect), headers)
          }
          finished(200, body, headers)
        }
        // The key's tokens (the `signals` family) are taken before the check reads or holds anything.
        const cached = keys.authenticateCached(secret)
        let withdraw: () => void
        if (cached === undefined) {
          const fiber = runFork(
            Effect.flatMap(keys.authenticate(secret), (caller) => {
              const verdict = limiter.take(caller, "signals")
              if (!verdict.allowed) return Effect.sync(() => limited(verdict))
              return entitlements.check(caller.organizationId, checkRequest).pipe(Effect.exit, Effect.map(settled(verdict)))
            }).pipe(
              Effect.annotateLogs("requestId", requestId),
              Effect.catchAllCause((cause) => Effect.sync(() => refused(cause)))
            )
          )
          withdraw = () => fiber.unsafeInterruptAsFork(fiber.id())
        } else if (Either.isLeft(cached)) {
          return refused(Cause.fail(cached.left))
        } else {
          // A known key (nearly every check) is answered without a fiber: the service calls back.
          const verdict = limiter.take(cached.right, "signals")
          if (!verdict.allowed) return limited(verdict)
          withdraw = entitlements.checkNow(cached.right.organizationId, checkRequest, settled(verdict))
        }
        response.on("close", () => {
          if (!response.writableEnded) withdraw()
        })
      })
      return true
    }

    return {
      take,
      stats: Effect.sync(stats).pipe(Effect.withSpan("CheckLane.stats"))
    } as const
  })

export class CheckLane extends Context.Tag("CheckLane")<
  CheckLane,
  Effect.Effect.Success<ReturnType<typeof make>>
>() {
  /** The lane for `api`'s check route. */
  static readonly layer = (api: HttpApi.HttpApi.Any) => Layer.scoped(CheckLane, make(api))
}
