/** The worker job that activates scheduled purchases and renews ended cycles (see Purchases.renewOne). */
import { Effect } from "effect"
import type { WorkerJob } from "../worker/Worker.ts"
import { Purchases } from "./Purchases.ts"

export const billingCycleJob: WorkerJob = {
  name: "billing-cycles",
  runOnce: (now) => Effect.flatMap(Purchases, (purchases) => purchases.renewOne(now))
}
