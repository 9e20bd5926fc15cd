/**
 * Services that several command modules call, with what they need (cli/run.ts
 * `runnerOn`): a billing command builds the billing engine, not the signal
 * pipeline, the webhook sender or the customer's pages.
 */
import { Layer } from "effect"
import { BillingLive } from "../src/app/BillingLive.ts"
import { CustomersLive } from "../src/app/Services.ts"
import { Plans } from "../src/plans/Plans.ts"
import { RequeueOnArrivalLive } from "../src/signals/Requeue.ts"
import { WebhookOutbox } from "../src/webhooks/Outbox.ts"

/** Purchases, balances, wallets, adjustments, invoices, taxes, members and portal tokens, and the customers they name. */
export const BillingCommandServices = BillingLive.pipe(
  Layer.provideMerge(Layer.mergeAll(WebhookOutbox.Default, Plans.Default, CustomersLive, RequeueOnArrivalLive))
)
