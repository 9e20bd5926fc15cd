/**
 * The worker's jobs, in the order a pass runs them. Each feature that has
 * background work builds its job from its own services (the webhook sender
 * and the signal processor offer theirs, the cycle job is `jobOf` what it
 * needs), so the worker kit (src/worker/Worker.ts) runs them knowing none.
 */
import { Effect, Layer } from "effect"
import { billingCycleJob, billingCycleJobName } from "../billing/CycleJob.ts"
import { Purchases } from "../billing/Purchases.ts"
import { historyJob, historyJobName } from "../history/HistoryJob.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { SignalProcessor, signalsJobName } from "../signals/SignalProcessor.ts"
import { webhookDeliveryJobName, WebhookSender } from "../webhooks/Sender.ts"
import { withArrivalsAnswered } from "./CustomersLive.ts"

export const workerJobs = Effect.all([
  Effect.map(WebhookSender, (sender) => sender.job),
  billingCycleJob,
  Effect.map(SignalProcessor, (processor) => processor.job),
  historyJob
])

/**
 * The services the jobs are built from, and only those: a worker does not
 * build the API's services (the inbox writer's fibers, the key cache, the
 * portal) nor load their modules, so it prices its first signal sooner.
 */
export const WorkerJobsLive = withArrivalsAnswered(Layer.mergeAll(
  SignalProcessor.Default,
  WebhookSender.Default,
  Purchases.Default,
  Ledger.Default
))

/** The same jobs' names, for a view drawn before the services are built. */
export const workerJobNames: ReadonlyArray<string> = [webhookDeliveryJobName, billingCycleJobName, signalsJobName, historyJobName]
