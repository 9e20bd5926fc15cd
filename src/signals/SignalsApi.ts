import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Success } from "../http/Envelope.ts"
import {
  Acknowledgement,
  CompositeCompleted,
  CompositeCompleteSignal,
  CreditSignal,
  OutcomeCompleted,
  OutcomeCompleteSignal,
  OutcomeStepSignal,
  SignalBatch,
  SignalBatchResult,
  UnitSignal,
  WalletSignal
} from "./Signal.ts"

const Accepted = Success(Acknowledgement, { status: 202, message: "Signal accepted for processing" })

const BatchAccepted = Success(SignalBatchResult, {
  status: 202,
  message: ({ results }) => {
    const queued = results.filter((result) => result.queued).length
    return `${queued} of ${results.length} signals accepted for processing`
  }
})

export class SignalsApi extends HttpApiGroup.make("signals")
  .add(HttpApiEndpoint.post("credit", "/signal/credit").setPayload(CreditSignal).addSuccess(Accepted))
  .add(HttpApiEndpoint.post("outcome", "/signal/outcome").setPayload(OutcomeStepSignal).addSuccess(Accepted))
  .add(
    HttpApiEndpoint.post("outcomeComplete", "/signal/outcome/complete")
      .setPayload(OutcomeCompleteSignal)
      .addSuccess(Success(OutcomeCompleted, { message: "Outcome run completed" }))
  )
  .add(HttpApiEndpoint.post("unit", "/signal/unit").setPayload(UnitSignal).addSuccess(Accepted))
  .add(HttpApiEndpoint.post("wallet", "/signal/wallet").setPayload(WalletSignal).addSuccess(Accepted))
  .add(
    HttpApiEndpoint.post("batch", "/signal/batch")
      .setPayload(SignalBatch)
      .addSuccess(BatchAccepted)
      .annotate(
        OpenApi.Description,
        "1 to 1,000 credit, outcome step, unit and wallet signals, each with its `type`. Each item is validated, " +
          "keyed and queued as its own route would do it and gets its own answer, in order: queued (messageId, rawId) " +
          "or refused (the status and message its route would answer). Completions are refused (400)."
      )
  )
  .add(
    HttpApiEndpoint.post("compositeComplete", "/signal/composite/complete")
      .setPayload(CompositeCompleteSignal)
      .addSuccess(Success(CompositeCompleted, { message: "Composite occurrence completed" }))
  )
{}
