import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Schema } from "effect"
import { maxWaitSeconds } from "../http/Prefer.ts"
import { Success } from "../http/Envelope.ts"
import { documented } from "../http/Documented.ts"
import {
  Acknowledgement,
  CompositeCompleted,
  CompositeCompleteSignal,
  CreditSignal,
  OutcomeCompleted,
  OutcomeCompleteSignal,
  OutcomeStepSignal,
  PricedSignal,
  SignalBatch,
  SignalBatchResult,
  SignalStatus,
  SignalView,
  UnitSignal,
  WalletSignal
} from "./Signal.ts"
import { PageParams } from "../http/Pagination.ts"
import { CustomerId } from "../ids.ts"
import type { QueuedRoute } from "./Intake.ts"

/** The message of the queued routes' 202 (also written by src/signals/IntakeLane.ts). */
export const acceptedMessage = "Signal accepted for processing"

/**
 * Marks an endpoint as one of the queued routes, with the route it queues to:
 * the intake lane (IntakeLane.ts) answers exactly the endpoints so marked.
 */
export class QueuedEndpoint extends Context.Tag("signals/QueuedEndpoint")<QueuedEndpoint, QueuedRoute>() {}

/** Marks the batch endpoint, which the intake lane answers too (IntakeLane.ts). */
export class BatchEndpoint extends Context.Tag("signals/BatchEndpoint")<BatchEndpoint, true>() {}

/** The message of the batch's 202 (also written by src/signals/IntakeLane.ts). */
export const batchAcceptedMessage = ({ results }: SignalBatchResult) =>
  `${results.filter((result) => result.queued).length} of ${results.length} signals accepted for processing`

const Accepted = Success(Acknowledgement, { status: 202, message: acceptedMessage })

/** The message of a queued route's 200 (`Prefer: wait=N`, priced within the wait). */
export const pricedMessage = "Signal priced"

const Priced = Success(PricedSignal, { status: 200, message: pricedMessage })

/** The queued routes' one header of their own: `Prefer` (RFC 7240), for `wait` (src/http/Prefer.ts). */
const PreferHeaders = Schema.Struct({
  prefer: Schema.optional(Schema.String.annotations({
    description: `RFC 7240 preferences. \`wait=N\` (seconds, at most ${maxWaitSeconds}; more is taken as ${maxWaitSeconds}) ` +
      "holds the answer until the worker has priced the signal: 200 with its usage-log row and " +
      "`Preference-Applied: wait=N`, or the worker's refusal in the error envelope with the status it recorded " +
      "(422 no active plan, out of allowance, ...). Not priced within N seconds (or held Pending for an unknown " +
      "`externalId`): the usual 202. Anything else, or a malformed value, is ignored."
  }))
})

const BatchAccepted = Success(SignalBatchResult, { status: 202, message: batchAcceptedMessage })

/** The `timestamp` every signal route accepts (docs/signals.md "Usage in its own time"). */
const timestampRule = "An optional `timestamp` (ISO 8601 with a zone offset) says when the usage happened; the " +
  "signal is billed in the purchase cycle that contains it, however late it arrives. Without it the moment is the " +
  "moment of intake."

const intake = "The signal is written to a durable inbox and answered 202 with its `messageId` and `rawId`; it is " +
  "priced a moment later from live rates (a client never sends a price). Name the customer by `customerId` or " +
  "`externalId` (`customerId` wins when both are sent). An `externalId` that matches no customer yet is accepted and " +
  "kept Pending until the customer exists. The same `idempotencyKey` on the same route answers the original signal " +
  "again (202, the same `messageId` and `rawId`) and records nothing new, whatever the repeat's body says: a reused " +
  "key is never refused. " + timestampRule + " With `Prefer: wait=N` (N at most 10 seconds) the answer waits for " +
  "the price: 200 with the signal's usage-log row (`usageLog.customerCost`, `usageLog.balance.remaining`) and " +
  "`Preference-Applied: wait=N` once the worker has priced it, or its refusal (the status and message the worker " +
  "recorded), or the usual 202 when it is not priced within N seconds. A repeat with the same key waits for the " +
  "original signal."


const badBody = "The body fails its schema (the message names the field), neither `customerId` nor `externalId` is " +
  "sent, or `timestamp` has no zone offset or is more than 5 minutes ahead of the service's clock."

const tooOld = "`timestamp` is older than the workspace's late-usage window (`billing org settings --late-usage-days`, 35 days by default; " +
  "the message states it). Nothing is written."

const intakeErrors = {
  400: badBody,
  404: "`customerId` names no customer of the workspace.",
  409: "The customer is archived and receives no more usage.",
  422: `${tooOld} With \`Prefer: wait=N\`: the worker refused the signal (no active plan, not on the plan, ` +
    "unknown agent key or member, model not enabled, out of allowance); a refusal of another status is answered " +
    "with that status."
}

const completionErrors = (conflict: string, unprocessable: string) => ({
  400: badBody,
  404: "No such customer (by `customerId`, or an active one by `externalId`), or nothing to complete under the given name.",
  409: conflict,
  422: `${unprocessable} Or: ${tooOld}`
})

const SignalPath = Schema.Struct({
  rawId: Schema.String.annotations({ description: "The signal's id (`sig_...`), the `rawId` its 202 returned." })
})

const SignalListParams = Schema.Struct({
  ...PageParams,
  customerId: Schema.optional(CustomerId.pipe(Schema.minLength(1, { message: () => "must not be empty" }))).annotations({
    description: "Keeps the signals of this customer (sent with its id, or found by its `externalId` once priced or " +
      "refused). A customer the workspace does not have is a 404."
  }),
  status: Schema.optional(SignalStatus.annotations({ message: () => `must be one of ${SignalStatus.literals.join(", ")}` }))
    .annotations({ description: "Keeps the signals in this state: QUEUED, PROCESSED, PENDING or FAILED." })
})

const lookupWords = "`error` is `{status, code, message}`: the status and code an error answer of the same refusal " +
  "carries (docs/api.md \"Error codes\"), on a FAILED signal (refused: it bills nothing until replayed) and on a " +
  "PENDING one (held until a customer takes its `externalId`). A PROCESSED signal names its `usageLogId`."

export class SignalsApi extends HttpApiGroup.make("signals")
  .add(
    HttpApiEndpoint.post("credit", "/signal/credit").setPayload(CreditSignal).setHeaders(PreferHeaders).addSuccess(Accepted)
      .addSuccess(Priced).annotate(QueuedEndpoint, "CREDIT").annotateContext(
      documented({
        summary: "Send a credit signal",
        description: "Meters one model call against a credit, named by its `agentKey`, from its token counts. The " +
          "key must be sold on the customer's active plan, or covered by a composite that is. " + intake,
        errors: intakeErrors
      })
    )
  )
  .add(
    HttpApiEndpoint.post("outcome", "/signal/outcome").setPayload(OutcomeStepSignal).setHeaders(PreferHeaders).addSuccess(Accepted)
      .addSuccess(Priced).annotate(QueuedEndpoint, "OUTCOME").annotateContext(
      documented({
        summary: "Record an outcome step",
        description: "Records one step of an outcome run (`runId`), named by the step's `agentKey`. Steps never " +
          "bill and may repeat; the run is billed by `/signal/outcome/complete`. " + intake,
        errors: intakeErrors
      })
    )
  )
  .add(
    HttpApiEndpoint.post("outcomeComplete", "/signal/outcome/complete")
      .setPayload(OutcomeCompleteSignal)
      .addSuccess(Success(OutcomeCompleted, { message: "Outcome run completed" }))
      .annotateContext(documented({
        summary: "Complete and bill an outcome run",
        description: "Closes the run named by `runId` and bills the outcome once. It is the only way to close a " +
          "run; a composite carried by a step still needs its own `/signal/composite/complete`. Answered 200 " +
          "once the run is billed. A repeat with the same `idempotencyKey` answers the first result again. " +
          timestampRule,
        errors: completionErrors(
          "The run is already completed, or the customer is archived.",
          "The customer has no active plan, the outcome is not on it, or its prepaid allowance is used up with no " +
            "ARREAR component to take the rest."
        )
      }))
  )
  .add(
    HttpApiEndpoint.post("unit", "/signal/unit").setPayload(UnitSignal).setHeaders(PreferHeaders).addSuccess(Accepted)
      .addSuccess(Priced).annotate(QueuedEndpoint, "UNIT").annotateContext(
      documented({
        summary: "Send a unit signal",
        description: "Records `quantity` units (1 by default) of the unit named by `agentKey`; no model, no " +
          "tokens. " + intake,
        errors: intakeErrors
      })
    )
  )
  .add(
    HttpApiEndpoint.post("wallet", "/signal/wallet").setPayload(WalletSignal).setHeaders(PreferHeaders).addSuccess(Accepted)
      .addSuccess(Priced).annotate(QueuedEndpoint, "WALLET").annotateContext(
      documented({
        summary: "Send a wallet signal",
        description: "Debits the customer's USD wallet at the model's provider cost for the tokens of one call. " +
          "The wallet may go negative: a wallet signal is never refused for lack of funds. " + intake,
        errors: intakeErrors
      })
    )
  )
  .add(
    HttpApiEndpoint.post("batch", "/signal/batch")
      .setPayload(SignalBatch)
      .addSuccess(BatchAccepted)
      .annotate(BatchEndpoint, true)
      .annotateContext(documented({
        summary: "Send up to 1,000 signals at once",
        description: "1 to 1,000 credit, outcome step, unit and wallet signals, each with its `type`. Each item is validated, " +
          "keyed and queued as its own route would do it and gets its own answer, in order: queued (messageId, rawId) " +
          "or refused (the status and message its route would answer). Completions are refused (400). Each item " +
          "may carry its own `timestamp`: one ahead of the clock is that item's 400, one older than the " +
          "workspace's late-usage window that item's 422; the other items are queued.",
        errors: {
          400: "The body is not a list of 1 to 1,000 items, or is not valid JSON. A single item's refusal is " +
            "answered in its own place in the 202 answer, not with a 400."
        }
      }))
  )
  .add(
    HttpApiEndpoint.post("compositeComplete", "/signal/composite/complete")
      .setPayload(CompositeCompleteSignal)
      .addSuccess(Success(CompositeCompleted, { message: "Composite occurrence completed" }))
      .annotateContext(documented({
        summary: "Complete and bill a composite occurrence",
        description: "Closes the occurrence named by the `composite` tag (`{refId: yourCorrelationId}`) and bills " +
          "the composite once, when every credit, outcome and unit it is restricted to has reported under that " +
          "value. Otherwise the answer is 422 and the occurrence is parked: it completes itself once the missing " +
          "signals arrive. `custom` is stored on the occurrence. " + timestampRule,
        errors: completionErrors(
          "The customer is archived, or the occurrence is already completed.",
          "A signal the composite waits for has not arrived yet (the occurrence is parked and completes itself), " +
            "the customer has no active plan, or the plan does not sell the composite."
        )
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/signals/:rawId")
      .setPath(SignalPath)
      .addSuccess(Success(Schema.Struct({ signal: SignalView }), { message: "Signal" }))
      .annotateContext(documented({
        summary: "Look a signal up by its rawId",
        description: "Where an accepted signal is in its life: QUEUED (not priced yet), PROCESSED, PENDING or FAILED, " +
          "with what identifies it (rawId, messageId, route, customer, when it was received and when its usage " +
          "happened). " + lookupWords,
        errors: { 404: "No signal with this rawId in the workspace (another workspace's signal is not found either)." }
      }))
  )
  .add(
    HttpApiEndpoint.get("list", "/signals")
      .setUrlParams(SignalListParams)
      .addSuccess(Success(Schema.Struct({ signals: Schema.Array(SignalView) }), { message: "Signals" }))
      .annotateContext(documented({
        summary: "List signals",
        description: "A page of the workspace's signals in the order they were accepted, optionally of one customer " +
          "and in one state (`status=FAILED`: the usage the worker refused). " + lookupWords,
        errors: { 404: "`customerId` names no customer of the workspace." }
      }))
  )
  .add(
    HttpApiEndpoint.post("replay", "/signals/:rawId/replay")
      .setPath(SignalPath)
      .addSuccess(Success(Schema.Struct({ replayed: Schema.Literal(true), signal: SignalView }), {
        message: "Signal queued again; the worker prices it next"
      }))
      .annotateContext(documented({
        summary: "Replay a refused or held signal",
        description: "Queues a FAILED or PENDING signal again, as `billing signal replay`, once what refused it is " +
          "fixed (a plan bought, an agentKey created, a model enabled): the worker prices it next, and refuses it " +
          "again (a new `signal.refused` event) if it still cannot be billed. A signal without a `timestamp` of " +
          "its own is billed at the replay's moment (`requeuedAt`). A QUEUED signal stays as it is. A refused " +
          "signal moved to the archive comes back to the inbox. " + lookupWords,
        errors: {
          404: "No signal with this rawId in the workspace (another workspace's signal is not found either).",
          409: "The signal is PROCESSED (`signal_already_processed`): it was billed, and replaying it would bill it twice."
        }
      }))
  )
  .annotate(
    OpenApi.Description,
    "Signals: usage intake, and the signals accepted. Each meter has its own route; the route decides the meter, so " +
      "a body has no type field."
  )
{}
