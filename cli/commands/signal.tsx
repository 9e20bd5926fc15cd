import type { Command } from "commander"
import { Effect, Schema } from "effect"
import { toPage } from "../../src/http/Pagination.ts"
import { SignalRecord, SignalStatus } from "../../src/signals/Signal.ts"
import { Signals } from "../../src/signals/Signals.ts"
import { BadRequest } from "../../src/errors.ts"
import { progressReporter } from "../ui/Live.tsx"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, numberFlag, organizationOf, run, withOrg } from "../run.ts"

const signalJson = encode(SignalRecord)

const SignalView = (props: { readonly signal: SignalRecord; readonly title: string }) => (
  <Details
    title={props.title}
    fields={[
      ["id (rawId)", props.signal.id],
      ["messageId", props.signal.messageId],
      ["route", props.signal.route],
      ["status", props.signal.status],
      ["customer", props.signal.customerId ?? `externalId ${props.signal.externalId}`],
      ["agentKey", props.signal.agentKey ?? "-"],
      ["runId", props.signal.runId ?? "-"],
      ["composite", props.signal.compositeRef ? `${props.signal.compositeRef}=${props.signal.compositeValue}` : "-"],
      ["error", props.signal.errorStatus ? `${props.signal.errorStatus} ${props.signal.errorMessage}` : "-"],
      ["usageLogId", props.signal.usageLogId ?? "-"],
      ["attempts", String(props.signal.attempts)],
      ["received", props.signal.receivedAt.toISOString()],
      ["processed", props.signal.processedAt?.toISOString() ?? "-"],
      ["body", JSON.stringify(props.signal.body)]
    ]}
  />
)

const SignalTable = (props: { readonly signals: ReadonlyArray<SignalRecord>; readonly footer: string }) => (
  <Table
    columns={[
      { header: "ID", value: (s) => s.id },
      { header: "ROUTE", value: (s) => s.route },
      { header: "STATUS", value: (s) => s.status },
      { header: "CUSTOMER", value: (s) => s.customerId ?? `ext:${s.externalId}` },
      { header: "AGENT KEY", value: (s) => s.agentKey ?? "-" },
      { header: "ERROR", value: (s) => (s.errorStatus ? `${s.errorStatus} ${s.errorMessage}` : "") }
    ]}
    rows={props.signals}
    footer={props.footer}
  />
)

export const registerSignal = (program: Command) => {
  const signal = program.command("signal").description("the signal inbox: list, show and replay signals")

  withOrg(signal.command("list").description("list signals, newest last"))
    .option("--customer <id>", "only this customer's signals")
    .option("--status <status>", "QUEUED, PROCESSED, PENDING or FAILED")
    .option("--limit <n>", "page size (max 200)", numberFlag)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: { json?: boolean; org?: string; customer?: string; status?: string; limit?: number; cursor?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const status = options.status === undefined
            ? undefined
            : yield* decodeInput(Schema.Struct({ status: SignalStatus }), { status: options.status.toUpperCase() })
          return yield* Effect.flatMap(Signals, (signals) =>
            signals.list(organizationId, { page: toPage(options), customerId: options.customer, status: status?.status }))
        }),
        {
          json: (list) => ({ signals: list.map(signalJson) }),
          view: (list) => <SignalTable signals={list} footer={`${list.length} signal(s)`} />
        }
      )
    )

  withOrg(signal.command("show").description("show one signal, its status and reason").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(Signals, (signals) => signals.get(organizationId, id))
        }),
        {
          json: (found) => ({ signal: signalJson(found) }),
          view: (found) => <SignalView signal={found} title="Signal" />
        }
      )
    )

  withOrg(
    signal.command("replay")
      .description("queue a PENDING or FAILED signal again, or every one of a customer (--customer)")
      .argument("[id]")
  )
    .option("--customer <id>", "replay every PENDING and FAILED signal of this customer")
    .action((id: string | undefined, options: { json?: boolean; org?: string; customer?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const signals = yield* Signals
          if ((id === undefined) === (options.customer === undefined)) {
            return yield* new BadRequest({ message: "give either a signal id or --customer ID" })
          }
          const ids = id !== undefined ? [id] : yield* signals.replayable(organizationId, options.customer!)
          const progress = progressReporter(options.json || !process.stdout.isTTY, "replayed")
          return yield* Effect.forEach(ids, (signalId, index) =>
            Effect.tap(signals.replay(organizationId, signalId), () => progress.update(index + 1, ids.length))).pipe(
              Effect.ensuring(Effect.sync(progress.stop))
            )
        }),
        {
          json: (replayed) => ({ replayed: replayed.map(signalJson) }),
          view: (replayed) => <SignalTable signals={replayed} footer={`${replayed.length} signal(s) queued again`} />
        }
      )
    )
}
