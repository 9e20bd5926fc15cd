import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { SignalsApi } from "./SignalsApi.ts"
import { forOrganization } from "../http/Auth.ts"
import { Signals } from "./Signals.ts"

export const SignalsHttpLive = HttpApiBuilder.group(groupApi(SignalsApi), "signals", (handlers) =>
  Effect.gen(function*() {
    const signals = yield* Signals
    return handlers
      .handle("credit", ({ payload }) => forOrganization((org) => signals.accept(org, "CREDIT", payload)))
      .handle("outcome", ({ payload }) => forOrganization((org) => signals.accept(org, "OUTCOME", payload)))
      .handle("outcomeComplete", ({ payload }) => forOrganization((org) => signals.completeOutcome(org, payload)))
      .handle("unit", ({ payload }) => forOrganization((org) => signals.accept(org, "UNIT", payload)))
      .handle("wallet", ({ payload }) => forOrganization((org) => signals.accept(org, "WALLET", payload)))
      .handle("batch", ({ payload }) => forOrganization((org) => signals.acceptBatch(org, payload.signals)))
      .handle("compositeComplete", ({ payload }) => forOrganization((org) => signals.completeComposite(org, payload)))
  }))
