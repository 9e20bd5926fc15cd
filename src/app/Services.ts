/**
 * Every domain service, wired once. The API server, the CLI and the worker all
 * run on this layer; only what they put in front of it differs.
 *
 * Each service declares the services it needs (`dependencies`), so `X.Default`
 * is whole but for the database and the ports it calls up through. Listing a
 * service here that another already names costs nothing: a layer is built once
 * per build however many layers name it (Effect shares layers by reference), so
 * the graph holds one ledger, one outbox, one inbox writer with its fibers.
 * What stays open is filled here: customers' arrivals (a port of the customers
 * floor) by signals; the database by whoever runs the graph.
 */
import { Layer } from "effect"
import { BillingLive } from "./BillingLive.ts"
import { withArrivalsAnswered } from "./CustomersLive.ts"
import { Composites } from "../composites/Composites.ts"
import { Credits } from "../credits/Credits.ts"
import { Entitlements } from "../entitlements/Entitlements.ts"
import { MigratedDatabaseLive } from "../db/Migrations.ts"
import { ReadSqlLive } from "../db/ReadSql.ts"
import { Models } from "../models/Models.ts"
import { OperationsStatus } from "../operations/Status.ts"
import { ApiKeys } from "../organizations/ApiKeys.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { Outcomes } from "../outcomes/Outcomes.ts"
import { PortalView } from "../portal/PortalView.ts"
import { Completions } from "../signals/Completions.ts"
import { InboxView } from "../signals/InboxView.ts"
import { InboxWriter } from "../signals/InboxWriter.ts"
import { Intake } from "../signals/Intake.ts"
import { PricedWaits } from "../signals/PricedWaits.ts"
import { SignalProcessor } from "../signals/SignalProcessor.ts"
import { Units } from "../units/Units.ts"
import { Reversals } from "../usage/Reversals.ts"
import { UsageLog } from "../usage/UsageLog.ts"
import { UsageSummary } from "../usage/UsageSummary.ts"
import { WebhookDeliveries } from "../webhooks/Deliveries.ts"
import { WebhookEndpoints } from "../webhooks/Endpoints.ts"
import { WebhookEvents } from "../webhooks/Events.ts"
import { WebhookListen } from "../webhooks/Listen.ts"
import { WebhookSender } from "../webhooks/Sender.ts"

/** Every service, on the environment's database once it is given one. */
export const ServicesLive = withArrivalsAnswered(Layer.mergeAll(
  BillingLive,
  ApiKeys.Default,
  Organizations.Default,
  Models.Default,
  Credits.Default,
  Outcomes.Default,
  Units.Default,
  Composites.Default,
  WebhookEndpoints.Default,
  WebhookDeliveries.Default,
  WebhookEvents.Default,
  WebhookSender.Default,
  WebhookListen.Default,
  InboxWriter.Default,
  Intake.Default,
  Completions.Default,
  InboxView.Default,
  SignalProcessor.Default,
  PricedWaits.Default,
  UsageLog.Default,
  Reversals.Default,
  UsageSummary.Default,
  OperationsStatus.Default,
  PortalView.Default,
  Entitlements.Default
))

/**
 * The services on the environment's database, with the read pool of
 * `DATABASE_READ_URL` when it is set (src/db/ReadSql.ts): it connects at its
 * first read, so the worker, which reads nothing through it, opens none.
 */
export const AppServicesLive = ServicesLive.pipe(Layer.provide(ReadSqlLive()), Layer.provideMerge(MigratedDatabaseLive))
