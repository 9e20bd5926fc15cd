/**
 * The HTTP door: the API, its OpenAPI document (`/api/v1/openapi.json`), a
 * browsable reference (`/docs`), request logging with a request id, and the
 * envelope on every failure. `makeHttpServer` takes the listen options so that
 * `billing serve` and the tests start exactly the same server.
 *
 * The hot path is kept lean: the request log is buffered and sampled off the
 * event loop (`RequestLog.ts`), and no tracing span is made per request or per
 * statement unless spans are exported (src/Telemetry.ts: the platform's HTTP
 * tracer alone built a URL, a redacted copy of the headers and a dozen span
 * attributes a request).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Cause, Context, Effect, FiberRef, HashMap, Layer } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { CustomersHttpLive } from "../customers/CustomersHttp.ts"
import { BalancesHttpLive } from "../billing/BalancesHttp.ts"
import { InvoicesHttpLive } from "../billing/InvoicesHttp.ts"
import { PurchasesHttpLive } from "../billing/PurchasesHttp.ts"
import { MembersHttpLive } from "../members/MembersHttp.ts"
import { PortalHttpLive } from "../portal/PortalHttp.ts"
import { PortalPagesLive } from "../portal/PortalPages.ts"
import { CreditsHttpLive } from "../credits/CreditsHttp.ts"
import { OutcomesHttpLive } from "../outcomes/OutcomesHttp.ts"
import { tracingEnabled } from "../Telemetry.ts"
import { UnitsHttpLive } from "../units/UnitsHttp.ts"
import { CompositesHttpLive } from "../composites/CompositesHttp.ts"
import { PlansHttpLive } from "../plans/PlansHttp.ts"
import { SignalsHttpLive } from "../signals/SignalsHttp.ts"
import { EntitlementsHttpLive } from "../entitlements/EntitlementsHttp.ts"
import { UsageHttpLive } from "../usage/UsageHttp.ts"
import { WebhooksHttpLive } from "../webhooks/WebhooksHttp.ts"
import { OrganizationHttpLive } from "../http/OrganizationHttp.ts"
import { EventsHttpLive } from "../operations/EventsHttp.ts"
import { ApiKeysHttpLive } from "../http/ApiKeysHttp.ts"
import { Api } from "./Api.ts"
import { AuthenticationLive } from "../http/Auth.ts"
import { strictQueryLayer } from "../http/StrictQuery.ts"
import { guardBodies, keyCheckOf, type RouteMatcher } from "../http/BodyGuard.ts"
import { ApiKeys } from "../organizations/ApiKeys.ts"
import { renderFailures, type RouteTable } from "../http/Envelope.ts"
import { IntakeLane } from "../signals/IntakeLane.ts"
import { CheckLane } from "../entitlements/CheckLane.ts"
import { RateLimiter } from "../http/RateLimit.ts"
import { idempotentPosts } from "../http/IdempotencyKeyHeader.ts"
import { exactDecimals } from "../http/ExactDecimals.ts"
import { KeyedRequests } from "../idempotency/KeyedRequests.ts"
import * as RequestLog from "../http/RequestLog.ts"

/**
 * Every route of the API by method and path pattern: to answer 405 rather than
 * 404 for a known path, and for the body guard, which judges only bodies sent
 * to a route that exists.
 */
const routeTable = (api: HttpApi.HttpApi.Any): RouteTable & RouteMatcher => {
  const routes: Array<{ readonly method: string; readonly pattern: RegExp }> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const source = endpoint.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z]+/g, "[^/]+")
      routes.push({ method: endpoint.method, pattern: new RegExp(`^${source}/?$`) })
    }
  })
  return {
    hasPath: (path) => routes.some((route) => route.pattern.test(path)),
    methodsOf: (path) => [...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))],
    hasRoute: (method, path) => routes.some((route) => route.method === method && route.pattern.test(path))
  }
}

/** The customer pages' links carry a bearer token in the query: the log keeps the path, not the token. */
export const withoutTokens = (url: string) => url.replace(/([?&]token=)[^&#]*/g, "$1[redacted]")

/**
 * A request id on every answer (`x-request-id`, the caller's or a fresh UUID),
 * on every log line of the request, and the request's line in the request log.
 * It runs once per request, so it updates the request fiber's refs (each
 * request has a fiber of its own: nothing to restore) rather than using
 * `Effect.annotateLogs` and `Effect.onExit`, which cost a request more time
 * (docs/benchmarks.md, "Figures that were in code comments").
 */
const requestLogging = (log: RequestLog.RequestLogger) =>
  HttpMiddleware.make(<E, R>(app: HttpApp.Default<E, R>) =>
    Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      const requestId = RequestLog.requestIdOf(request.headers[RequestLog.requestIdHeader])
      const started = performance.now()
      // The middleware sees the response after it is sent: the header goes on before that.
      const setHeader: HttpApp.PreResponseHandler = (_, response) =>
        Effect.succeed(HttpServerResponse.setHeader(response, RequestLog.requestIdHeader, requestId))
      const record = (status: number) => {
        const now = performance.now()
        log.record(requestId, request.method, withoutTokens(request.url), status, now - started, now)
      }
      return FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set("requestId", requestId as unknown)).pipe(
        Effect.zipRight(HttpApp.appendPreResponseHandler(setHeader)),
        Effect.zipRight(Effect.matchCauseEffect(app, {
          onSuccess: (response) => {
            record(response.status)
            return Effect.succeed(response)
          },
          onFailure: (cause) => {
            // A client that went away before its answer has no line: there was no response.
            if (!Cause.isInterruptedOnly(cause)) record(500)
            return Effect.failCause(cause)
          }
        }))
      )
    })
  )

const RoutesLive = Layer.mergeAll(CustomersHttpLive, PurchasesHttpLive, BalancesHttpLive, InvoicesHttpLive, MembersHttpLive, PortalHttpLive, CreditsHttpLive, OutcomesHttpLive, UnitsHttpLive, CompositesHttpLive, PlansHttpLive, SignalsHttpLive, UsageHttpLive, EntitlementsHttpLive, WebhooksHttpLive, OrganizationHttpLive,
  EventsHttpLive, ApiKeysHttpLive)

export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide(RoutesLive),
  Layer.provide(AuthenticationLive),
  Layer.provide(strictQueryLayer(Api))
)

const routes = routeTable(Api)

const EnvelopeLive = Layer.mergeAll(
  HttpApiBuilder.middleware(renderFailures(routes)),
  // Amounts written with their exact digits (src/http/ExactDecimals.ts).
  HttpApiBuilder.middleware(exactDecimals),
  HttpApiBuilder.middleware(Effect.map(ApiKeys, (keys) => guardBodies("/api/v1/", routes, keyCheckOf(keys)))),
  // The Idempotency-Key header on every POST (src/http/IdempotencyKeyHeader.ts).
  HttpApiBuilder.middleware(
    Effect.map(Effect.all({ keys: ApiKeys, limiter: RateLimiter, records: KeyedRequests }), (deps) => idempotentPosts("/api/v1/", routes, deps))
  ).pipe(Layer.provide(KeyedRequests.Default))
)

export interface HttpServerOptions {
  readonly port: number
  readonly host: string
  /** Log "Listening on ..." once listening (the API processes of `serve --processes N` leave it to the primary). */
  readonly logAddress?: boolean
  /** The request log's settings; sampling comes from the environment unless set here. */
  readonly requestLog?: Partial<RequestLog.RequestLogOptions>
}

/** A raw Node door: takes a request it answers (or hands to `fallback`), false for one it leaves alone. */
type LaneTake = (
  request: IncomingMessage,
  response: ServerResponse,
  fallback: (request: IncomingMessage, response: ServerResponse) => void
) => boolean

/**
 * Node's server, with every request offered to the lanes first (the intake
 * lane, the check lane); what no lane takes (or a lane hands back) goes to the
 * full server's listener.
 */
const serverWithLanes = (lanes: ReadonlyArray<LaneTake>): Server => {
  const server = createServer()
  const emit = server.emit.bind(server) as (event: string | symbol, ...args: Array<unknown>) => boolean
  const toFullServer = (request: IncomingMessage, response: ServerResponse) => {
    emit("request", request, response)
  }
  server.emit = ((event: string | symbol, ...args: Array<unknown>) =>
    (event === "request" && lanes.some((take) => take(args[0] as IncomingMessage, args[1] as ServerResponse, toFullServer))) ||
    emit(event, ...args)) as Server["emit"]
  return server
}

export const makeHttpServer = (options: HttpServerOptions) => {
  // Request fibers inherit the serving fiber's tracer and its switch (src/Telemetry.ts): with the tracer
  // off, the platform's request span is skipped before it builds anything.
  const serve = Layer.unwrapEffect(
    Effect.zipWith(RequestLog.RequestLog, tracingEnabled, (log, tracing) =>
      HttpApiBuilder.serve(requestLogging(log)).pipe(HttpMiddleware.withTracerDisabledWhen(() => !tracing)))
  ).pipe(
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
    // The API key preselected on the page (the document's `bearer` scheme), where it showed "No authentication selected".
    Layer.provide(HttpApiScalar.layer({ path: "/docs", scalar: { authentication: { preferredSecurityScheme: "bearer" } } as HttpApiScalar.ScalarConfig })),
    // The customer's HTML pages (the portal, hosted invoices), outside /api/v1.
    Layer.provide(PortalPagesLive),
    Layer.provide(EnvelopeLive),
    Layer.provide(ApiLive)
  )
  return (options.logAddress === false ? serve : HttpServer.withLogAddress(serve)).pipe(
    Layer.provideMerge(Layer.unwrapEffect(Effect.zipWith(IntakeLane, CheckLane, (intake, check) =>
      NodeHttpServer.layer(() => serverWithLanes([intake.take, check.take]), { port: options.port, host: options.host })))),
    // Built before the server and released after it: the lanes' requests in flight end with the server.
    Layer.provideMerge(Layer.merge(IntakeLane.layer(Api), CheckLane.layer(Api))),
    // Built before the HTTP server and released after it: lines of requests that finish while it closes are written.
    Layer.provide(RequestLog.layer(options.requestLog)),
    // One process's token buckets, shared by the lanes and the full server's authentication (src/http/RateLimit.ts).
    Layer.provide(RateLimiter.Default)
  )
}
