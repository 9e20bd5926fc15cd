/**
 * The worker's jobs, in the order a pass runs them. Each feature that has
 * background work builds its job from its own services (the webhook sender
 * and the signal processor offer theirs, the cycle job is `jobOf` what it
 * needs), so the worker kit (src/worker/Worker.ts) runs them knowing none.
 */
import { Effect } from "effect"
import { billingCycleJob, billingCycleJobName } from "../billing/CycleJob.ts"
import { SignalProcessor, signalsJobName } from "../signals/SignalProcessor.ts"
import { webhookDeliveryJobName, WebhookSender } from "../webhooks/Sender.ts"

export const workerJobs = Effect.all([
  Effect.map(WebhookSender, (sender) => sender.job),
  billingCycleJob,
  Effect.map(SignalProcessor, (processor) => processor.job)
])

/** The same jobs' names, for a view drawn before the services are built. */
export const workerJobNames: ReadonlyArray<string> = [webhookDeliveryJobName, billingCycleJobName, signalsJobName]
