/**
 * Which meter prices a queued signal, and with what: the one dispatch from a
 * decoded signal to the pure meters (src/pricing/meters/), shared by the drain
 * (SignalProcessor) and the spend check (src/entitlements/), which prices a
 * customer's queued signals in memory to tell what they will take.
 */
import { BigDecimal, Either } from "effect"
import { type Decimal, ZERO } from "../money.ts"
import { UnknownTarget } from "../errors.ts"
import type { CustomerContext } from "../pricing/meters/Context.ts"
import {
  meterCompositeOccurrence,
  meterCredit,
  type Metered,
  meterOutcomeCompletion,
  meterOutcomeStep,
  meterUnit,
  meterWallet,
  type ResolvedTag
} from "../pricing/meters/Meters.ts"
import type { BatchContext, DecodedSignal, SignalRecord } from "./BatchContext.ts"

/** Step costs priced earlier in this batch, by `org/customerId/runId`, for the completions that follow them. */
export type RunCosts = Map<string, Decimal>

/** The signal's composite tag, resolved to a live composite of the workspace; undefined when it names none. */
export const tagOf = (signal: SignalRecord, context: BatchContext): ResolvedTag | undefined => {
  if (signal.compositeRef === null || signal.compositeValue === null) return undefined
  const composite = context.catalogue(signal.organizationId).composite(signal.compositeRef)
  return composite === undefined ? undefined : { composite, value: signal.compositeValue }
}

/** Prices one decoded signal against its customer's in-memory state; moves nothing. */
export const meterSignal = (
  { body, record: signal }: DecodedSignal,
  customer: CustomerContext,
  context: BatchContext,
  runCosts: RunCosts
): Metered => {
  const catalogue = context.catalogue(signal.organizationId)
  const tag = tagOf(signal, context)
  switch (signal.route) {
    case "CREDIT":
      return meterCredit({ agentKey: body.agentKey!, usage: body.usage!, runId: signal.runId, tag }, customer, catalogue)
    case "OUTCOME":
      return meterOutcomeStep({ agentKey: body.agentKey!, usage: body.usage ?? null, tag }, customer, catalogue)
    case "OUTCOME_COMPLETE": {
      const runId = signal.runId ?? ""
      const earlier = runCosts.get(`${customer.organizationId}/${customer.customerId}/${runId}`) ?? ZERO
      return meterOutcomeCompletion({
        runId,
        outcome: context.run(signal.organizationId, runId),
        stepsCost: BigDecimal.sum(context.runCost(signal.organizationId, customer.customerId, runId), earlier)
      }, customer)
    }
    case "UNIT":
      return meterUnit({ agentKey: body.agentKey!, quantity: body.quantity, tag }, customer, catalogue)
    case "WALLET":
      return meterWallet({ usage: body.usage!, tag }, customer, catalogue)
    case "COMPOSITE_COMPLETE": {
      const occurrence = context.occurrence(signal.organizationId, signal.id)
      if (occurrence === undefined) {
        return Either.left(new UnknownTarget({ message: `Composite occurrence of signal ${signal.id} not found` }))
      }
      return meterCompositeOccurrence({
        composite: { id: occurrence.compositeId, name: occurrence.compositeName, refId: occurrence.refId },
        value: occurrence.value,
        custom: occurrence.custom
      }, customer)
    }
  }
}
