/**
 * The HTTP door: the API, its OpenAPI document (`/api/v1/openapi.json`), a
 * browsable reference (`/docs`), request logging with a request id, and the
 * envelope on every failure. `makeHttpServer` takes the listen options so that
 * `billing serve` and the tests start exactly the same server.
 */
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiScalar,
  HttpApp,
  HttpMiddleware,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { CustomersHttpLive } from "../customers/CustomersHttp.ts"
import { BalancesHttpLive, InvoicesHttpLive, PurchasesHttpLive } from "../billing/BillingHttp.ts"
import { MembersHttpLive } from "../members/MembersHttp.ts"
import { PortalHttpLive } from "../portal/PortalHttp.ts"
import { CreditsHttpLive } from "../credits/CreditsHttp.ts"
import { OutcomesHttpLive } from "../outcomes/OutcomesHttp.ts"
import { UnitsHttpLive } from "../units/UnitsHttp.ts"
import { CompositesHttpLive } from "../composites/CompositesHttp.ts"
import { PlansHttpLive } from "../plans/PlansHttp.ts"
import { SignalsHttpLive } from "../signals/SignalsHttp.ts"
import { UsageHttpLive } from "../usage/UsageHttp.ts"
import { Api } from "./Api.ts"
import { AuthenticationLive } from "./Auth.ts"
import { renderFailures, type RouteTable } from "./Envelope.ts"

/** Every path pattern of the API, to answer 405 rather than 404 for a known path. */
const routeTable = (api: HttpApi.HttpApi.Any): RouteTable => {
  const patterns: Array<RegExp> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const source = endpoint.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z]+/g, "[^/]+")
      patterns.push(new RegExp(`^${source}/?$`))
    }
  })
  return { hasPath: (path) => patterns.some((pattern) => pattern.test(path)) }
}

/** Structured request logs, each line of a request carrying its request id. */
const requestLogging = HttpMiddleware.make((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = request.headers["x-request-id"] ?? randomUUID()
    const started = Date.now()
    // The middleware sees the response after it is sent: headers go on before that.
    yield* HttpApp.appendPreResponseHandler((_, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", requestId))
    )
    const response = yield* Effect.annotateLogs(app, { requestId })
    yield* Effect.logInfo("request").pipe(
      Effect.annotateLogs({
        requestId,
        method: request.method,
        url: request.url,
        status: response.status,
        durationMs: Date.now() - started
      })
    )
    return response
  })
)

const RoutesLive = Layer.mergeAll(CustomersHttpLive, PurchasesHttpLive, BalancesHttpLive, InvoicesHttpLive, MembersHttpLive, PortalHttpLive, CreditsHttpLive, OutcomesHttpLive, UnitsHttpLive, CompositesHttpLive, PlansHttpLive, SignalsHttpLive, UsageHttpLive)

export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide(RoutesLive),
  Layer.provide(AuthenticationLive)
)

const EnvelopeLive = HttpApiBuilder.middleware(renderFailures(routeTable(Api)))

export const makeHttpServer = (listen: { readonly port: number; readonly host: string }) =>
  HttpApiBuilder.serve(requestLogging).pipe(
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
    Layer.provide(HttpApiScalar.layer({ path: "/docs" })),
    Layer.provide(EnvelopeLive),
    Layer.provide(ApiLive),
    HttpServer.withLogAddress,
    Layer.provideMerge(NodeHttpServer.layer(createServer, listen))
  )
