/**
 * The signal pipeline's services: intake (Signals, writing through the
 * InboxWriter) and the worker's pricing (SignalProcessor).
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { InboxWriter } from "../signals/InboxWriter.ts"
import { SignalProcessor } from "../signals/SignalProcessor.ts"
import { Signals } from "../signals/Signals.ts"
import { Reversals } from "../usage/Reversals.ts"
import { UsageLog } from "../usage/UsageLog.ts"

export const SignalsLive = Layer.mergeAll(
  Signals.Default,
  SignalProcessor.Default,
  UsageLog.Default,
  Reversals.Default.pipe(Layer.provide(UsageLog.Default))
).pipe(
  Layer.provideMerge(InboxWriter.Default),
  Layer.provide(Customers.Default)
)
