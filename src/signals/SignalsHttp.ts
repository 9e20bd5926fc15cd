import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { SignalsApi } from "./SignalsApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { Completions } from "./Completions.ts"
import { Intake, type IntakeRefusal, type QueuedRoute, type SignalOf } from "./Intake.ts"
import { awaitAnswer } from "./InboxWriter.ts"
import type { Acknowledgement } from "./Signal.ts"

export const SignalsHttpLive = HttpApiBuilder.group(groupApi(SignalsApi), "signals", (handlers) =>
  Effect.gen(function*() {
    const intake = yield* Intake
    const completions = yield* Completions
    const queued = <R extends QueuedRoute>(route: R) => ({ payload }: { readonly payload: SignalOf<R> }) =>
      forOrganization((org) => awaitAnswer<Acknowledgement, IntakeRefusal>((answer) => intake.accept(org, route, payload, answer)))
    return handlers
      .handle("credit", queued("CREDIT"))
      .handle("outcome", queued("OUTCOME"))
      .handle("outcomeComplete", ({ payload }) => forOrganization((org) => completions.completeOutcome(org, payload)))
      .handle("unit", queued("UNIT"))
      .handle("wallet", queued("WALLET"))
      .handle("batch", ({ payload }) => forOrganization((org) => intake.acceptBatch(org, payload.signals)))
      .handle("compositeComplete", ({ payload }) => forOrganization((org) => completions.completeComposite(org, payload)))
  }))
