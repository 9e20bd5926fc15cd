/**
 * The signal pipeline's services: intake of queued signals (Intake, writing
 * through the InboxWriter), completions (Completions), the operator's view of
 * the inbox (InboxView) and the worker's pricing (SignalProcessor).
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { Completions } from "../signals/Completions.ts"
import { InboxView } from "../signals/InboxView.ts"
import { InboxWriter } from "../signals/InboxWriter.ts"
import { Intake } from "../signals/Intake.ts"
import { SignalProcessor } from "../signals/SignalProcessor.ts"
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
