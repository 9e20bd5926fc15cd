/** The signal pipeline's services: intake (Signals) and the worker's pricing (SignalProcessor). */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { SignalProcessor } from "./SignalProcessor.ts"
import { Signals } from "./Signals.ts"
import { UsageLog } from "../usage/UsageLog.ts"

export const SignalsLive = Layer.mergeAll(Signals.Default, SignalProcessor.Default, UsageLog.Default).pipe(
  Layer.provide(Customers.Default)
)
