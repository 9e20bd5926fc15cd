import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option } from "effect"
import { groupApi } from "../http/GroupApi.ts"
import { SignalsApi } from "./SignalsApi.ts"
import { forCaller, forOrganization } from "../http/Auth.ts"
import { codesOfStatus, edgeCode, type ErrorCode } from "../http/ApiErrors.ts"
import { RateLimiter } from "../http/RateLimit.ts"
import { type ErrorStatus, errorResponse, errorStatuses } from "../http/Envelope.ts"
import { preferenceAppliedHeader, waitPreference } from "../http/Prefer.ts"
import type { OrganizationId } from "../ids.ts"
import { Completions } from "./Completions.ts"
import { Intake, type IntakeRefusal, type QueuedRoute, type SignalOf } from "./Intake.ts"
import { awaitAnswer } from "./InboxWriter.ts"
import { PricedWaits } from "./PricedWaits.ts"
import { type Acknowledgement, type PricedSignal, toSignalView } from "./Signal.ts"
import { InboxView } from "./InboxView.ts"
import { toPage } from "../http/Pagination.ts"

/**
 * The answer of a refusal the worker recorded: its status and code, as the
 * envelope knows them (a status it has no envelope for, or a code not of that
 * status, is a 500).
 */
const recordedAnswer = (status: number, code: string, message: string) =>
  (errorStatuses as ReadonlyArray<number>).includes(status) && (codesOfStatus(status) as ReadonlyArray<string>).includes(code)
    ? errorResponse(status as ErrorStatus, message, code as ErrorCode)
    : errorResponse(500, message, edgeCode("InternalError"))

export const SignalsHttpLive = HttpApiBuilder.group(groupApi(SignalsApi), "signals", (handlers) =>
  Effect.gen(function*() {
    const intake = yield* Intake
    const completions = yield* Completions
    const waits = yield* PricedWaits
    const inbox = yield* InboxView
    const limiter = yield* RateLimiter

    /**
     * `Prefer: wait=N`: the signal's end within N seconds, answered with
     * `Preference-Applied`; the 202 when it has none by then (or is held PENDING).
     */
    const waitForEnd = (organizationId: OrganizationId, acknowledgement: Acknowledgement, seconds: number) =>
      Effect.flatMap(waits.awaitEnd(organizationId, acknowledgement.rawId, seconds * 1000), (end) => {
        if (Option.isNone(end) || end.value._tag === "Held") {
          return Effect.succeed<Acknowledgement | PricedSignal | HttpServerResponse.HttpServerResponse>(acknowledgement)
        }
        const applied = `wait=${seconds}`
        if (end.value._tag === "Refused") {
          return Effect.succeed(HttpServerResponse.setHeader(
            recordedAnswer(end.value.status, end.value.code, end.value.message),
            preferenceAppliedHeader,
            applied
          ))
        }
        const priced: PricedSignal = { usageLog: end.value.usageLog, messageId: acknowledgement.messageId, rawId: acknowledgement.rawId }
        return Effect.as(
          HttpApp.appendPreResponseHandler((_request, response) =>
            Effect.succeed(HttpServerResponse.setHeader(response, preferenceAppliedHeader, applied))
          ),
          priced
        )
      })

    const queued = <R extends QueuedRoute>(route: R) =>
    ({ headers, payload }: { readonly payload: SignalOf<R>; readonly headers: { readonly prefer?: string | undefined } }) =>
      forOrganization((org) =>
        Effect.flatMap(
          awaitAnswer<Acknowledgement, IntakeRefusal>((answer) => intake.accept(org, route, payload, answer)),
          (acknowledgement) => {
            const seconds = waitPreference(headers.prefer)
            return seconds === undefined ? Effect.succeed(acknowledgement) : waitForEnd(org, acknowledgement, seconds)
          }
        )
      )
    return handlers
      .handle("credit", queued("CREDIT"))
      .handle("outcome", queued("OUTCOME"))
      .handle("outcomeComplete", ({ payload }) => forOrganization((org) => completions.completeOutcome(org, payload)))
      .handle("unit", queued("UNIT"))
      .handle("wallet", queued("WALLET"))
      // A batch costs one `signals` token a signal (authentication took none for it), taken before anything is written.
      .handle("batch", ({ payload }) =>
        forCaller((caller) =>
          Effect.zipRight(
            limiter.limit(caller, "signals", payload.signals.length),
            intake.acceptBatch(caller.organizationId, payload.signals)
          )
        ))
      .handle("compositeComplete", ({ payload }) => forOrganization((org) => completions.completeComposite(org, payload)))
      .handle("get", ({ path }) =>
        forOrganization((org) => inbox.get(org, path.rawId)).pipe(Effect.map((signal) => ({ signal: toSignalView(signal) }))))
      .handle("list", ({ urlParams }) =>
        forOrganization((org) =>
          inbox.list(org, { page: toPage(urlParams), customerId: urlParams.customerId, status: urlParams.status, customerMustExist: true })
        ).pipe(Effect.map((signals) => ({ signals: signals.map(toSignalView) }))))
      .handle("replay", ({ path }) =>
        forOrganization((org) => inbox.replay(org, path.rawId)).pipe(
          Effect.map((signal) => ({ replayed: true as const, signal: toSignalView(signal) }))
        ))
  }))
