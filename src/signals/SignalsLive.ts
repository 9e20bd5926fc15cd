/**
 * The signal pipeline's services: intake of queued signals (Intake, writing
 * through the InboxWriter), completions (Completions), the operator's view of
 * the inbox (InboxView) and the worker's pricing (SignalProcessor).
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { Completions } from "./Completions.ts"
import { InboxView } from "./InboxView.ts"
import { InboxWriter } from "./InboxWriter.ts"
import { Intake } from "./Intake.ts"
import { SignalProcessor } from "./SignalProcessor.ts"
import { Reversals } from "../usage/Reversals.ts"
import { UsageLog } from "../usage/UsageLog.ts"

export const SignalsLive = Layer.mergeAll(
  Intake.Default,
  Completions.Default,
  InboxView.Default,
  SignalProcessor.Default,
  UsageLog.Default,
  Reversals.Default.pipe(Layer.provide(UsageLog.Default))
).pipe(
  Layer.provideMerge(InboxWriter.Default),
  Layer.provide(Customers.Default)
)
