import type { Command } from "commander"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import { Box, Text } from "../ui/ink.ts"
import * as fs from "node:fs"
import * as readline from "node:readline"
import { maxBatchSize, SignalRecord, SignalStatus } from "../../src/signals/Signal.ts"
import { InboxView } from "../../src/signals/InboxView.ts"
import { Intake } from "../../src/signals/Intake.ts"
import { BadRequest } from "../../src/http/ApiErrors.ts"
import { listFooter, newestFirstPage, nextCursorOf, withOldest, limitOption } from "../lists.ts"
import { isInteractive } from "../Output.ts"
import { progressReporter } from "../ui/Live.tsx"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { CustomerId, type OrganizationId } from "../../src/ids.ts"
import { withArrivalsAnswered } from "../../src/app/CustomersLive.ts"

const run = runnerOn(withArrivalsAnswered(Layer.merge(Intake.Default, InboxView.Default)))

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
      ["error", props.signal.errorStatus ? `${props.signal.errorStatus} ${props.signal.errorCode ?? ""} ${props.signal.errorMessage}` : "-"],
      ["usageLogId", props.signal.usageLogId ?? "-"],
      ["attempts", String(props.signal.attempts)],
      ["occurred", props.signal.occurredAt === null
        ? props.signal.requeuedAt === null ? "- (at intake)" : "- (when queued again)"
        : `${props.signal.occurredAt.toISOString()}${props.signal.late ? " (late: backfill lane)" : ""}`],
      ["received", props.signal.receivedAt.toISOString()],
      ["queued again", props.signal.requeuedAt?.toISOString() ?? "-"],
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
      // An id, or the externalId a held signal waits for: either is copied into the next command, never cut.
      { header: "CUSTOMER", value: (s) => s.customerId ?? `ext:${s.externalId}`, whole: true },
      { header: "AGENT KEY", value: (s) => s.agentKey ?? "-" },
      { header: "ERROR", value: (s) => (s.errorStatus ? `${s.errorStatus} ${s.errorCode ?? ""} ${s.errorMessage}` : "") }
    ]}
    rows={props.signals}
    footer={props.footer}
  />
)

/** A line of the file that was not queued, and why (the status, code and message the API would answer). */
interface RefusedLine {
  readonly line: number
  readonly statusCode: number
  readonly code: string
  readonly message: string
}

interface SendSummary {
  /** Lines that held something (blank lines are skipped). */
  readonly signals: number
  readonly queued: number
  readonly refused: ReadonlyArray<RefusedLine>
}

const lineReader = (file: string) =>
  readline.createInterface({ input: fs.createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity })

const unreadable = (file: string) => (error: unknown) =>
  new BadRequest({ message: `cannot read ${file}: ${error instanceof Error ? error.message : String(error)}` })

/** The non-blank lines of the file, for the progress bar's total. */
const countSignals = (file: string) =>
  Effect.tryPromise({
    try: async () => {
      let count = 0
      for await (const line of lineReader(file)) if (line.trim() !== "") count++
      return count
    },
    catch: unreadable(file)
  })

/**
 * Streams a JSON-lines file through `Intake.acceptBatch`, up to 1,000 lines
 * a batch, in order; a line that is not JSON is refused here (400) and never sent.
 */
const sendFile = (
  intake: Intake,
  organizationId: OrganizationId,
  file: string,
  onBatch: (done: number) => void
) =>
  Effect.gen(function*() {
    yield* Effect.try({ try: () => fs.accessSync(file, fs.constants.R_OK), catch: unreadable(file) })
    return yield* Stream.fromAsyncIterable(lineReader(file), unreadable(file)).pipe(
      Stream.zipWithIndex,
      Stream.filter(([text]) => text.trim() !== ""),
      Stream.grouped(maxBatchSize),
      Stream.runFoldEffect(
        { signals: 0, queued: 0, refused: [] as Array<RefusedLine> },
        (summary, chunk) =>
          Effect.gen(function*() {
            const lines = Chunk.toReadonlyArray(chunk)
            const items: Array<{ readonly line: number; readonly item: unknown }> = []
            for (const [text, index] of lines) {
              try {
                items.push({ line: index + 1, item: JSON.parse(text) })
              } catch (error) {
                summary.refused.push({
                  line: index + 1,
                  statusCode: 400,
                  code: "invalid_json",
                  message: `not valid JSON: ${(error as Error).message}`
                })
              }
            }
            if (items.length > 0) {
              const { results } = yield* intake.acceptBatch(organizationId, items.map((i) => i.item))
              for (const result of results) {
                if (result.queued) summary.queued++
                else summary.refused.push({ line: items[result.index]!.line, ...result.error })
              }
            }
            summary.signals += lines.length
            onBatch(summary.signals)
            return summary
          })
      ),
      Effect.map((summary): SendSummary => ({ ...summary, refused: summary.refused.sort((a, b) => a.line - b.line) }))
    )
  })

const byStatus = (refused: ReadonlyArray<RefusedLine>) => {
  const counts: Record<string, number> = {}
  for (const item of refused) counts[item.statusCode] = (counts[item.statusCode] ?? 0) + 1
  return counts
}

const shownRefusals = 50

const SendView = (props: { readonly summary: SendSummary; readonly file: string }) => {
  const { summary } = props
  const statuses = Object.entries(byStatus(summary.refused)).map(([status, count]) => `${status}: ${count}`).join(", ")
  return (
    <Box flexDirection="column">
      <Text>
        {props.file}: <Text color="green">{summary.queued} queued</Text>
        {", "}
        <Text color={summary.refused.length > 0 ? "red" : undefined}>
          {summary.refused.length} refused{statuses ? ` (${statuses})` : ""}
        </Text>
        {` of ${summary.signals} signal(s)`}
      </Text>
      {summary.refused.length > 0
        ? (
          <Table
            columns={[
              { header: "LINE", value: (r: RefusedLine) => String(r.line), align: "right" },
              { header: "STATUS", value: (r: RefusedLine) => String(r.statusCode) },
              { header: "REASON", value: (r: RefusedLine) => r.message }
            ]}
            rows={summary.refused.slice(0, shownRefusals)}
            footer={summary.refused.length > shownRefusals
              ? `... and ${summary.refused.length - shownRefusals} more (--json lists them all)`
              : undefined}
          />
        )
        : null}
    </Box>
  )
}

export const registerSignal = (program: Command) => {
  const signal = program.command("signal").description("the signal inbox: list, show and replay signals; send signals from a file")

  withOrg(
    signal.command("send")
      .description("send signals from a JSON-lines file (one signal a line, with its type), in batches of up to 1,000")
  )
    .requiredOption("--file <path>", "JSON lines: {\"type\": \"credit\"|\"outcome\"|\"unit\"|\"wallet\", ...the route's body}")
    .action((options: { json?: boolean; org?: string; file: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const intake = yield* Intake
          const total = isInteractive(options) ? yield* countSignals(options.file) : 0
          const progress = progressReporter(options, "signals sent")
          return yield* sendFile(intake, organizationId, options.file, (done) => progress.update(done, total)).pipe(
            Effect.ensuring(Effect.sync(progress.stop))
          )
        }),
        {
          json: (summary) => ({
            signals: summary.signals,
            queued: summary.queued,
            refused: summary.refused.length,
            refusedByStatus: byStatus(summary.refused),
            refusedItems: summary.refused
          }),
          view: (summary) => <SendView summary={summary} file={options.file} />
        }
      )
    )

  withOldest(withOrg(signal.command("list").description("list signals, newest first")))
    .option("--customer <id>", "only this customer's signals")
    .option("--status <status>", "QUEUED, PROCESSED, PENDING or FAILED")
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((options: { json?: boolean; org?: string; customer?: string; status?: string; limit?: number; cursor?: string; oldest?: boolean }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          const status = options.status === undefined
            ? undefined
            : yield* decodeInput(Schema.Struct({ status: SignalStatus }), { status: options.status.toUpperCase() })
          return yield* Effect.flatMap(InboxView, (inbox) =>
            inbox.list(organizationId, { page: newestFirstPage(options), customerId: options.customer, status: status?.status }))
        }),
        {
          json: (list) => ({ signals: list.map(signalJson), nextCursor: nextCursorOf(list, options) }),
          view: (list) => <SignalTable signals={list} footer={listFooter(`${list.length} signal(s)`, list, options)} />
        }
      )
    )

  withOrg(signal.command("show").description("show one signal, its status and reason").argument("<id>"))
    .action((id: string, options: { json?: boolean; org?: string }) =>
      run(
        options,
        Effect.gen(function*() {
          const organizationId = yield* organizationOf(options)
          return yield* Effect.flatMap(InboxView, (inbox) => inbox.get(organizationId, id))
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
          const inbox = yield* InboxView
          if ((id === undefined) === (options.customer === undefined)) {
            return yield* new BadRequest({ message: "give either a signal id or --customer ID" })
          }
          const ids = id !== undefined ? [id] : yield* inbox.replayable(organizationId, CustomerId.make(options.customer!))
          const progress = progressReporter(options, "replayed")
          return yield* Effect.forEach(ids, (signalId, index) =>
            Effect.tap(inbox.replay(organizationId, signalId), () => progress.update(index + 1, ids.length))).pipe(
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
