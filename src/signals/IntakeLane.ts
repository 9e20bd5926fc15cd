/**
 * The intake lane: the four queued signal routes (`POST /api/v1/signal/credit`,
 * `outcome`, `unit`, `wallet`) and the batch (`POST /api/v1/signal/batch`)
 * answered straight from Node's request, without
 * the platform's per-request machinery (request wrapper, router, middleware
 * chain, schema-driven response). That machinery alone holds a bare endpoint
 * to a small part of what Node answers on this machine (docs/benchmarks.md,
 * "The intake lane"), and these routes carry nearly all of a customer's traffic.
 *
 * The lane is a door, not a second implementation. Its routes are the
 * SignalsApi endpoints annotated `QueuedEndpoint` or `BatchEndpoint`, found in
 * the API it is given (`HttpApi.reflect`), paths and prefix as the full server
 * routes them. It applies the same body rules (BodyGuard's functions), decodes
 * with the route's schema, calls the same services as the HttpApi handler
 * (`ApiKeys`, `Intake.accept`, `Intake.acceptBatch`), answers the same
 * `Accepted` (or batch) envelope with the server kit's
 * request id and answer writing (RequestLog.ts, Envelope.ts), maps failures
 * with the one mapping (`failureAnswer`) and writes the same request-log line.
 * A request whose key is in the key cache (nearly all) runs no fiber at all:
 * the cache answers at once and the inbox writer calls back; a fiber per
 * request was a noticeable share of the lane's time (docs/benchmarks.md,
 * "Intake without fibers").
 * A signal sent with a `Prefer` header (it may ask to wait for its price,
 * `Prefer: wait=N`) is not taken at all: the full server answers it; the
 * lane's own path only looks whether the header is there. A batch ignores
 * `Prefer` and stays in the lane.
 * A request it cannot judge without the full server (no Content-Length, a
 * query string, a body that is not plain valid JSON of the route's schema) is
 * replayed, body and all, into the full HttpApi server before anything is
 * written, and answered there: for these, the documented answer comes from one
 * place only.
 *
 * A batch of 100 signals spent most of its time in the platform's machinery:
 * the body read twice (BodyGuard, then the payload), the `SignalBatch` decode
 * walking every item before `acceptBatch` decodes each again with its route's
 * schema, and the 100 results encoded through a union schema although they
 * are plain JSON already (docs/benchmarks.md, "Batch intake"). The lane checks
 * only the batch's own shape (an object holding just `signals`, 1 to 1,000
 * items) and leaves every item to `acceptBatch`, as the HttpApi handler does.
 *
 * A body's `timestamp` is judged like the rest: its form by the route's schema
 * (a string without a zone offset goes to the full server, which answers the
 * 400), its lead over the clock by `Intake.accept` (400), and the
 * organisation's late-usage window by the inbox insert itself (422): no look-up
 * of its own, no cached setting to go stale.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import { Cause, Context, Effect, Either, Exit, Layer, Option } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { ApiKeys, type Caller } from "../organizations/ApiKeys.ts"
import type { ServiceError } from "../errors.ts"
import { laneSecretOf, type LaneStats, makeLaneContext, parsedBody, readExchange } from "../http/LaneKit.ts"
import { successBody } from "../http/Envelope.ts"
import { RateLimiter, rateLimitHeaders } from "../http/RateLimit.ts"
import { awaitAnswer } from "./InboxWriter.ts"
import { decodeQueued, Intake, type IntakeRefusal, type QueuedRoute } from "./Intake.ts"
import { type Acknowledgement, maxBatchSize, type SignalBatchResult } from "./Signal.ts"
import { acceptedMessage, BatchEndpoint, batchAcceptedMessage, QueuedEndpoint } from "./SignalsApi.ts"

/** What a lane route takes: one signal of a queued route, or a batch. */
export type LaneRoute = QueuedRoute | "BATCH"

/** The lane's routes: each POST endpoint of `api` annotated as queued or as the batch, by its full path. */
export const laneRoutesOf = (api: HttpApi.HttpApi.Any): ReadonlyMap<string, LaneRoute> => {
  const routes = new Map<string, LaneRoute>()
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (endpoint.method !== "POST") return
      const route = Context.getOption(endpoint.annotations, QueuedEndpoint)
      if (Option.isSome(route)) routes.set(endpoint.path, route.value)
      else if (Option.isSome(Context.getOption(endpoint.annotations, BatchEndpoint))) routes.set(endpoint.path, "BATCH")
    }
  })
  return routes
}

/**
 * The largest body the lane reads; a bigger one goes to the full server. A signal is a few
 * hundred bytes; a batch of 1,000 a few hundred kilobytes.
 */
const maxLaneBody = (route: LaneRoute) => route === "BATCH" ? 4 * 1024 * 1024 : 64 * 1024

/**
 * The 202 body. An `Acknowledgement` (strings and a literal) encodes to itself, so the
 * envelope is written directly: the `Accepted` schema's encode was a noticeable share of the lane's
 * allocations (docs/benchmarks.md, "The intake lane"). test/intake-lane.test.ts compares it with the full server's.
 */
const acceptedBody = (acknowledgement: Acknowledgement) => successBody(202, acceptedMessage, acknowledgement)

/** The batch's 202 body: its results are plain JSON already (strings, numbers, literals), written directly too. */
const batchAcceptedBody = (result: SignalBatchResult) => successBody(202, batchAcceptedMessage(result), result)

/**
 * A batch body's items when it has the `SignalBatch` shape: an object of `signals` alone, 1 to
 * 1,000 of them; undefined otherwise (the full server answers its 400). The items are
 * `acceptBatch`'s to judge, one by one, as they are for the HttpApi handler.
 */
const batchItemsOf = (body: unknown): ReadonlyArray<unknown> | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const signals = (body as { readonly signals?: unknown }).signals
  for (const key in body) if (key !== "signals") return undefined
  return Array.isArray(signals) && signals.length >= 1 && signals.length <= maxBatchSize ? signals : undefined
}

/** What the lane did since the server started (tests, diagnostics). */
export type IntakeLaneStats = LaneStats

const make = (api: HttpApi.HttpApi.Any) =>
  Effect.gen(function*() {
    const laneRoutes = laneRoutesOf(api)
    const keys = yield* ApiKeys
    const intake = yield* Intake
    const limiter = yield* RateLimiter
    // For a key not in the cache (its look-up is an effect) and error logs. Released after the server, which
    // finishes its requests in flight first. A request waiting for the inbox writer when that stops is answered 503.
    const { context: lane, runFork, stats } = yield* makeLaneContext

    /**
     * Batches whose body has arrived, each waiting for a turn of the event loop of its own. Node
     * (libuv 1.45 on) accepts ONE new connection per turn of the loop, and a batch is a few
     * milliseconds of work (its JSON, 100 rows, the statement's payload): handled as soon as their
     * bodies arrived, the batches of a busy turn made it last tens of milliseconds, and clients
     * connecting at once to a busy server waited for seconds to be accepted at all (the first wave
     * of bench/outside.ts's batch phase; docs/benchmarks.md, "Purchases, batch intake, billing day",
     * and "Figures that were in code comments"). One batch a
     * turn (`setImmediate` queued from a check phase runs in the next turn, after the loop has polled
     * for I/O) keeps turns short, so a connection waits for one batch, not a turnful.
     */
    const turns: Array<() => void> = []
    let turning = false
    const nextTurn = () => {
      const work = turns.shift()!
      if (turns.length > 0) setImmediate(nextTurn)
      else turning = false
      work()
    }
    const inTurn = (work: () => void) => {
      turns.push(work)
      if (!turning) {
        turning = true
        setImmediate(nextTurn)
      }
    }

    /** The request's signal, decoded by its route's schema; undefined when the full server must judge the body. */
    const decodedSignal = (route: QueuedRoute, text: string) => {
      const body = parsedBody(text)
      if (body === undefined) return undefined
      const decoded = decodeQueued(route, body)
      return Either.isLeft(decoded) ? undefined : decoded.right
    }

    /**
     * Takes `request` if it is one of the lane's and answers it, or hands it
     * to `fallback` (with a replay of its body) when only the full server can;
     * false when the lane does not take it at all.
     */
    const take = (
      request: IncomingMessage,
      response: ServerResponse,
      fallback: (request: IncomingMessage, response: ServerResponse) => void
    ): boolean => {
      if (request.method !== "POST") return false
      const route = laneRoutes.get(request.url ?? "")
      if (route === undefined) return false
      const secret = laneSecretOf(request, maxLaneBody(route))
      if (secret === undefined) return false
      // A request that may ask to wait for its price (`Prefer: wait=N`) is the full server's (SignalsHttp.ts).
      if (request.headers["prefer"] !== undefined && route !== "BATCH") return false

      readExchange(request, response, fallback, lane, ({ body, finished, handOver, limited, refused, requestId }) => {
        /** The rate-limit fields of the answer, once the key's tokens were taken. */
        let headers: Readonly<Record<string, string>> | undefined
        /**
         * Takes the key's `signals` tokens for `cost` signals before anything is written; false
         * (and the 429 answered) when they do not cover it (src/http/RateLimit.ts).
         */
        const admitted = (caller: Caller, cost: number) => {
          const verdict = limiter.take(caller, "signals", cost)
          if (!verdict.allowed) {
            limited(verdict)
            return false
          }
          headers = rateLimitHeaders(verdict)
          return true
        }
        const settled = (exit: Exit.Exit<Acknowledgement, ServiceError>) =>
          Exit.isSuccess(exit) ? finished(202, acceptedBody(exit.value), headers) : refused(exit.cause, headers)

        if (route === "BATCH") return inTurn(() => {
          const items = batchItemsOf(parsedBody(body.toString("utf8")))
          if (items === undefined) return handOver()
          // One fiber for the whole batch (its items share one statement): the key, then acceptBatch.
          const cached = keys.authenticateCached(secret)
          if (cached !== undefined && Either.isLeft(cached)) return refused(Cause.fail(cached.left))
          const caller = cached === undefined ? keys.authenticate(secret) : Effect.succeed(cached.right)
          const fiber = runFork(
            Effect.flatMap(caller, (caller) =>
              admitted(caller, items.length)
                ? intake.acceptBatch(caller.organizationId, items).pipe(
                  Effect.exit,
                  Effect.map((exit) =>
                    Exit.isSuccess(exit) ? finished(202, batchAcceptedBody(exit.value), headers) : refused(exit.cause, headers)
                  )
                )
                : Effect.void).pipe(
                Effect.annotateLogs("requestId", requestId),
                Effect.catchAllCause((cause) => Effect.sync(() => refused(cause)))
              )
          )
          // Its client may have gone while the batch waited for its turn: its rows are taken (as when it is
          // handled on arrival) and nobody is answered.
          if (response.destroyed) fiber.unsafeInterruptAsFork(fiber.id())
          else {
            response.on("close", () => {
              if (!response.writableEnded) fiber.unsafeInterruptAsFork(fiber.id())
            })
          }
        })

        const signal = decodedSignal(route, body.toString("utf8"))
        if (signal === undefined) return handOver()
        // A key in the cache (nearly every request) is answered without a fiber: the writer calls back.
        const cached = keys.authenticateCached(secret)
        let withdraw: () => void
        if (cached === undefined) {
          const fiber = runFork(
            Effect.flatMap(keys.authenticate(secret), (caller) =>
              admitted(caller, 1)
                ? awaitAnswer<Acknowledgement, IntakeRefusal>((answer) => intake.accept(caller.organizationId, route, signal, answer)).pipe(
                  Effect.exit,
                  Effect.map(settled)
                )
                : Effect.void).pipe(Effect.catchAllCause((cause) => Effect.sync(() => refused(cause))))
          )
          withdraw = () => fiber.unsafeInterruptAsFork(fiber.id())
        } else if (Either.isLeft(cached)) {
          return refused(Cause.fail(cached.left))
        } else {
          if (!admitted(cached.right, 1)) return
          withdraw = intake.accept(cached.right.organizationId, route, signal, settled)
        }
        response.on("close", () => {
          if (!response.writableEnded) withdraw()
        })
      })
      return true
    }

    return {
      take,
      stats: Effect.sync(stats).pipe(Effect.withSpan("IntakeLane.stats"))
    } as const
  })

export class IntakeLane extends Context.Tag("IntakeLane")<
  IntakeLane,
  Effect.Effect.Success<ReturnType<typeof make>>
>() {
  /** The lane for `api`'s queued routes. */
  static readonly layer = (api: HttpApi.HttpApi.Any) => Layer.scoped(IntakeLane, make(api))
}
