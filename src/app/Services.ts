/**
 * Every domain service, wired once. The API server, the CLI and the worker all
 * run on this layer; only what they put in front of it differs.
 */
import { Layer } from "effect"
import { BillingLive } from "./BillingLive.ts"
import { Customers } from "../customers/Customers.ts"
import { Credits } from "../credits/Credits.ts"
import { Models } from "../models/Models.ts"
import { Outcomes } from "../outcomes/Outcomes.ts"
import { Units } from "../units/Units.ts"
import { Composites } from "../composites/Composites.ts"
import { Plans } from "../plans/Plans.ts"
import { DatabaseLive } from "../db/Database.ts"
import { MigrationsLive } from "../db/Migrations.ts"
import { ApiKeys } from "../organizations/ApiKeys.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { OperationsStatus } from "../operations/Status.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { SignalsLive } from "./SignalsLive.ts"
import { RequeueOnArrivalLive } from "../signals/Requeue.ts"
import { WebhookDeliveries } from "../webhooks/Deliveries.ts"
import { WebhookEndpoints } from "../webhooks/Endpoints.ts"
import { WebhookListen } from "../webhooks/Listen.ts"
import { WebhookSender } from "../webhooks/Sender.ts"
import { PortalView } from "../portal/PortalView.ts"

// Services that others depend on sit in the lower layer; customers' arrivals are answered by signals.
const FoundationLive = Layer.mergeAll(RequeueOnArrivalLive, ApiKeys.Default, WebhookOutbox.Default, Models.Default, Credits.Default, Outcomes.Default, Units.Default, Composites.Default, Plans.Default)

// The billing engine (Metering, Wallets, Members, ...) sits below the features that meter usage.
const BillingFoundationLive = BillingLive.pipe(Layer.provideMerge(FoundationLive))

const FeaturesLive = Layer.mergeAll(
  Organizations.Default,
  Customers.Default,
  WebhookEndpoints.Default,
  WebhookDeliveries.Default,
  WebhookSender.Default,
  WebhookListen.Default,
  SignalsLive,
  OperationsStatus.Default
).pipe(Layer.provideMerge(BillingFoundationLive))

/** Customers with signals answering its arrivals: what a door that needs Customers alone builds. */
export const CustomersLive = Customers.Default.pipe(Layer.provide(RequeueOnArrivalLive))

/** The customer's pages read through most services: they sit on top. */
export const ServicesLive = PortalView.Default.pipe(Layer.provideMerge(FeaturesLive))

/** The database of the environment, migrated before anything uses it. */
export const MigratedDatabaseLive = Layer.provideMerge(MigrationsLive, DatabaseLive)

/** The services on the environment's database. */
export const AppServicesLive = ServicesLive.pipe(Layer.provideMerge(MigratedDatabaseLive))
