/**
 * The worker's jobs, in the order a pass runs them. Each feature that has
 * background work adds its job here.
 */
import { webhookDeliveryJob } from "../webhooks/Sender.ts"
import { billingCycleJob } from "../billing/CycleJob.ts"
import type { WorkerJob } from "./Worker.ts"
import { signalsJob } from "../signals/SignalProcessor.ts"

export const workerJobs: ReadonlyArray<WorkerJob> = [webhookDeliveryJob, billingCycleJob, signalsJob]
