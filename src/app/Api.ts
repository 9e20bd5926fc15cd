/**
 * The whole REST API under `/api/v1`. Each feature declares its group in its
 * own folder; they are put together here, in the frame of src/http/GroupApi.ts
 * (each group behind bearer authentication, every client error declared once,
 * at the API level, with its status), the frame each feature's handlers are
 * built in too.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { CustomersApi } from "../customers/CustomersApi.ts"
import { BalancesApi } from "../billing/BalancesApi.ts"
import { InvoicesApi } from "../billing/InvoicesApi.ts"
import { PurchasesApi } from "../billing/PurchasesApi.ts"
import { MembersApi } from "../members/MembersApi.ts"
import { PortalApi } from "../portal/PortalApi.ts"
import { CreditsApi } from "../credits/CreditsApi.ts"
import { OutcomesApi } from "../outcomes/OutcomesApi.ts"
import { ErrorEnvelope } from "../http/Envelope.ts"
import { apiId, apiPrefix, authenticated, withSharedErrors } from "../http/GroupApi.ts"
import { documentApi } from "./OpenApiDoc.ts"
import { SignalsApi } from "../signals/SignalsApi.ts"
import { UsageApi } from "../usage/UsageApi.ts"
import { UnitsApi } from "../units/UnitsApi.ts"
import { CompositesApi } from "../composites/CompositesApi.ts"
import { PlansApi } from "../plans/PlansApi.ts"
import { EntitlementsApi } from "../entitlements/EntitlementsApi.ts"
import { WebhooksApi } from "../webhooks/WebhooksApi.ts"
import { OrganizationApi } from "../http/OrganizationApi.ts"
import { EventsApi } from "../operations/EventsApi.ts"
import { ApiKeysApi } from "../http/ApiKeysApi.ts"

export class Api extends withSharedErrors(HttpApi.make(apiId)
  .add(authenticated(CustomersApi))
  .add(authenticated(PurchasesApi))
  .add(authenticated(BalancesApi))
  .add(authenticated(InvoicesApi))
  .add(authenticated(MembersApi))
  .add(authenticated(PortalApi))
  .add(authenticated(CreditsApi))
  .add(authenticated(OutcomesApi))
  .add(authenticated(UnitsApi))
  .add(authenticated(CompositesApi))
  .add(authenticated(PlansApi))
  .add(authenticated(SignalsApi))
  .add(authenticated(UsageApi))
  .add(authenticated(EntitlementsApi))
  .add(authenticated(WebhooksApi))
  .add(authenticated(OrganizationApi))
  .add(authenticated(EventsApi))
  .add(authenticated(ApiKeysApi)))
  .prefix(apiPrefix)
  .annotate(OpenApi.Title, "Usage metering and billing API")
  .annotate(OpenApi.Version, "1")
  // The statuses no declared error class carries: documented from the same envelope schemas.
  .annotate(HttpApi.AdditionalSchemas, [ErrorEnvelope[405], ErrorEnvelope[415], ErrorEnvelope[500]])
  .annotateContext(documentApi)
{}
