/**
 * The whole REST API under `/api/v1`. Each feature declares its group in its
 * own folder; they are put together here, each behind bearer authentication.
 * Every client error is declared once, at the API level, with its status.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { CustomersApi } from "../customers/CustomersApi.ts"
import { BalancesApi, InvoicesApi, PurchasesApi } from "../billing/BillingApi.ts"
import { MembersApi } from "../members/MembersApi.ts"
import { PortalApi } from "../portal/PortalApi.ts"
import { CreditsApi } from "../credits/CreditsApi.ts"
import { OutcomesApi } from "../outcomes/OutcomesApi.ts"
import { BadRequest, Conflict, Forbidden, NotFound, Unauthorized, Unprocessable } from "./ApiErrors.ts"
import { Authentication } from "./Auth.ts"
import { declaredError, ErrorEnvelope } from "./Envelope.ts"
import { documentApi } from "./OpenApiDoc.ts"
import { SignalsApi } from "../signals/SignalsApi.ts"
import { UsageApi } from "../usage/UsageApi.ts"
import { UnitsApi } from "../units/UnitsApi.ts"
import { CompositesApi } from "../composites/CompositesApi.ts"
import { PlansApi } from "../plans/PlansApi.ts"

export class Api extends HttpApi.make("billing")
  .add(CustomersApi.middleware(Authentication))
  .add(PurchasesApi.middleware(Authentication))
  .add(BalancesApi.middleware(Authentication))
  .add(InvoicesApi.middleware(Authentication))
  .add(MembersApi.middleware(Authentication))
  .add(PortalApi.middleware(Authentication))
  .add(CreditsApi.middleware(Authentication))
  .add(OutcomesApi.middleware(Authentication))
  .add(UnitsApi.middleware(Authentication))
  .add(CompositesApi.middleware(Authentication))
  .add(PlansApi.middleware(Authentication))
  .add(SignalsApi.middleware(Authentication))
  .add(UsageApi.middleware(Authentication))
  .addError(declaredError(BadRequest, 400))
  .addError(declaredError(Unauthorized, 401))
  .addError(declaredError(Forbidden, 403))
  .addError(declaredError(NotFound, 404))
  .addError(declaredError(Conflict, 409))
  .addError(declaredError(Unprocessable, 422))
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Usage metering and billing API")
  .annotate(OpenApi.Version, "1")
  // The statuses no declared error class carries: documented from the same envelope schemas.
  .annotate(HttpApi.AdditionalSchemas, [ErrorEnvelope[405], ErrorEnvelope[415], ErrorEnvelope[500]])
  .annotateContext(documentApi)
{}
