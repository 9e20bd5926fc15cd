/**
 * Strict queries (docs/api.md, "Strict queries"): a query parameter a route
 * does not take is 400 `validation_failed`, naming it, on every route of the
 * API, as a body field it does not take is. `GET /invoices?externalId=acme-1`
 * used to answer every invoice of every customer.
 *
 * One check for every route, with nothing written per route: the parameters a
 * route takes are read from its endpoint's declared `urlParams` schema in the
 * API definition (`acceptedQueryOf`), so a new route, or a new parameter of
 * one, is strict as soon as it is declared. The check is an API middleware
 * on every group (src/http/GroupApi.ts `authenticated`), run right after
 * authentication and the rate limit, where the framework decodes the query
 * too: a wrong key is still 401 whatever the query.
 *
 * What lies outside the API's routes is not touched: the customer's pages
 * (`/portal?token=`, `/pay/{id}?token=`), the OpenAPI document and `/docs`.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Layer, Option, Schema, SchemaAST } from "effect"
import { BadRequest } from "./ApiErrors.ts"
import { declaredError } from "./Envelope.ts"

export class StrictQuery extends HttpApiMiddleware.Tag<StrictQuery>()("StrictQuery", {
  failure: declaredError(BadRequest, 400)
}) {}

/** Whether a query parameter named `name` is one the encoded side of `ast` takes. */
const takes = (ast: SchemaAST.AST, name: string): boolean => {
  switch (ast._tag) {
    case "TypeLiteral":
      return ast.propertySignatures.some((property) => property.name === name) ||
        ast.indexSignatures.some((index) => Schema.is(Schema.make(index.parameter))(name))
    case "Union":
      return ast.types.some((member) => takes(member, name))
    case "Suspend":
      return takes(ast.f(), name)
    case "Refinement":
      return takes(ast.from, name)
    case "Transformation":
      return takes(ast.from, name)
    default:
      // A schema of no fixed shape (Unknown, a record of anything) takes any name.
      return true
  }
}

/** The names a route takes, for the message: its declared properties. */
const namesOf = (ast: SchemaAST.AST): ReadonlyArray<string> => {
  switch (ast._tag) {
    case "TypeLiteral":
      return ast.propertySignatures.map((property) => String(property.name))
    case "Union":
      return [...new Set(ast.types.flatMap(namesOf))]
    case "Suspend":
      return namesOf(ast.f())
    case "Refinement":
    case "Transformation":
      return namesOf(ast.from)
    default:
      return []
  }
}

/** What one route takes: whether a name is one of its parameters, and their names. */
export interface AcceptedQuery {
  readonly takes: (name: string) => boolean
  readonly names: ReadonlyArray<string>
}

const noQuery: AcceptedQuery = { takes: () => false, names: [] }

/** The query each route of `api` takes, by `METHOD path` as the router knows the route (`/api/v1/customers/:id`). */
export const acceptedQueryOf = (api: HttpApi.HttpApi.Any): ReadonlyMap<string, AcceptedQuery> => {
  const routes = new Map<string, AcceptedQuery>()
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const accepted = Option.match(endpoint.urlParamsSchema, {
        onNone: () => noQuery,
        onSome: (schema): AcceptedQuery => {
          const encoded = SchemaAST.encodedAST(schema.ast)
          return { takes: (name) => takes(encoded, name), names: namesOf(encoded) }
        }
      })
      routes.set(`${endpoint.method} ${endpoint.path}`, accepted)
    }
  })
  return routes
}

/** The refusal of the parameters a route does not take, naming them and what it takes. */
export const unknownParametersMessage = (unknown: ReadonlyArray<string>, accepted: AcceptedQuery) => {
  const named = unknown.map((name) => JSON.stringify(name)).join(", ")
  const takes = accepted.names.length === 0
    ? "this route takes no query parameters"
    : `this route takes ${accepted.names.join(", ")}`
  return `Invalid request: unknown query parameter${unknown.length > 1 ? "s" : ""} ${named} (${takes})`
}

/** The middleware's implementation for the routes of `api`. */
export const strictQueryLayer = (api: HttpApi.HttpApi.Any) => {
  const accepted = acceptedQueryOf(api)
  return Layer.succeed(
    StrictQuery,
    Effect.gen(function*() {
      const query = yield* HttpServerRequest.ParsedSearchParams
      const names = Object.keys(query)
      if (names.length === 0) return
      const route = yield* HttpRouter.RouteContext
      // A route of another API (none today) is left to its own schema.
      const takesOf = accepted.get(`${route.route.method} ${route.route.path}`)
      if (takesOf === undefined) return
      const unknown = names.filter((name) => !takesOf.takes(name))
      if (unknown.length > 0) {
        return yield* new BadRequest({
          message: unknownParametersMessage(unknown, takesOf),
          errors: unknown.map((name) => ({ field: name, message: "is not a query parameter of this route" }))
        })
      }
    })
  )
}
