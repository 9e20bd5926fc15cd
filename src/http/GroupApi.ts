/**
 * The frame every group of the REST API is served in: the API's id, bearer
 * authentication on each group, the client errors every route may answer
 * (declared once, with their statuses) and the `/api/v1` prefix. The full API
 * (src/app/Api.ts) is built in this frame, and so is each feature's handler
 * layer, against an API of its own group alone:
 * `HttpApiBuilder.group(groupApi(CustomersApi), "customers", ...)`. A handler
 * layer is keyed by the API's id and the group's name and routes the group's
 * own endpoints, so it serves in the full API unchanged, and a feature never
 * imports the composition that imports every feature.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Option, SchemaAST } from "effect"
import { BadRequest, Conflict, Forbidden, NotFound, TooManyRequests, Unauthorized, Unprocessable } from "./ApiErrors.ts"
import { Authentication } from "./Auth.ts"
import { StrictQuery } from "./StrictQuery.ts"
import { apiPrefix } from "./ApiPrefix.ts"
import { declaredError } from "./Envelope.ts"

export const apiId = "billing"

export { apiPrefix }

/**
 * The group with each endpoint's query decoded with every problem reported
 * (`errors: "all"`), as request bodies are (src/schema.ts `strict`): one
 * answer names them all (docs/api.md "Every problem, with its field").
 */
const reportingEveryProblem = <G>(group: G): G => {
  let reporting = group as unknown as HttpApiGroup.HttpApiGroup.AnyWithProps
  for (const endpoint of Object.values(reporting.endpoints)) {
    if (Option.isNone(endpoint.urlParamsSchema)) continue
    const schema = endpoint.urlParamsSchema.value
    const own = Option.getOrElse(SchemaAST.getParseOptionsAnnotation(schema.ast), () => ({}))
    const everyProblem = schema.annotations({ parseOptions: { ...own, errors: "all" } }) as never
    reporting = reporting.add(endpoint.setUrlParams(everyProblem)) as HttpApiGroup.HttpApiGroup.AnyWithProps
  }
  return reporting as unknown as G
}

/**
 * A feature's group behind bearer authentication, as the API serves every group, and with strict queries
 * (src/http/StrictQuery.ts), checked after authentication (the last middleware added runs first).
 */
export const authenticated = <
  Id extends string,
  Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any,
  E,
  R,
  TopLevel extends true | false
>(group: HttpApiGroup.HttpApiGroup<Id, Endpoints, E, R, TopLevel>) =>
  reportingEveryProblem(group).middleware(StrictQuery).middleware(Authentication)

/** The client errors every route may answer, each declared once with its status. */
export const withSharedErrors = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>
) =>
  api
    .addError(declaredError(BadRequest, 400))
    .addError(declaredError(Unauthorized, 401))
    .addError(declaredError(Forbidden, 403))
    .addError(declaredError(NotFound, 404))
    .addError(declaredError(Conflict, 409))
    .addError(declaredError(Unprocessable, 422))
    .addError(declaredError(TooManyRequests, 429))

/** One feature's group framed as the full API frames it: what its handler layer is built against. */
export const groupApi = <
  Id extends string,
  Endpoints extends HttpApiEndpoint.HttpApiEndpoint.Any,
  E,
  R,
  TopLevel extends true | false
>(group: HttpApiGroup.HttpApiGroup<Id, Endpoints, E, R, TopLevel>) =>
  withSharedErrors(HttpApi.make(apiId).add(authenticated(group))).prefix(apiPrefix)
