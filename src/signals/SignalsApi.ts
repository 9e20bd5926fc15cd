import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Success } from "../http/Envelope.ts"
import {
  Acknowledgement,
  CompositeCompleted,
  CompositeCompleteSignal,
  CreditSignal,
  OutcomeCompleted,
  OutcomeCompleteSignal,
  OutcomeStepSignal,
  UnitSignal,
  WalletSignal
} from "./Signal.ts"

const Accepted = Success(Acknowledgement, { status: 202, message: "Signal accepted for processing" })

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
    HttpApiEndpoint.post("compositeComplete", "/signal/composite/complete")
      .setPayload(CompositeCompleteSignal)
      .addSuccess(Success(CompositeCompleted, { message: "Composite occurrence completed" }))
  )
{}
