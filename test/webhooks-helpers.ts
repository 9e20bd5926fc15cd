/** Shared by the webhook test files: a real receiver on loopback and ways to drive the outbox and the sender. */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { decimal } from "../src/money.ts"
import { type WalletChange, WebhookOutbox } from "../src/webhooks/Outbox.ts"
import { WebhookSender } from "../src/webhooks/Sender.ts"
import { eventually, HANG_GUARD_MS } from "./support/Eventually.ts"
import { afterAll, afterEach, beforeAll } from "vitest"
import type { Client } from "./support/Http.ts"
import { startTestApp, type TestApp } from "./support/TestApp.ts"

export interface Received {
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** Date.now() when the request arrived. */
  readonly at: number
}

export interface Reply {
  readonly status: number
  /** Wait this long before answering. */
  readonly delayMs?: number
  /**
   * Do not answer until the test calls `release()`: a receiver slower than any
   * timeout, however slow the machine is.
   */
  readonly hold?: boolean
}

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** How request number n (0-based) is answered; default 200. */
  reply: (n: number) => Reply
  /** Requests held (see `Reply.hold`) and not yet released, including any whose sender has given up. */
  readonly held: () => number
  /** Answers every request held so far with its status; returns how many were still connected. */
  readonly release: () => number
  readonly close: () => Promise<void>
}

export const startReceiver = async (reply: (n: number) => Reply = () => ({ status: 200 })): Promise<Receiver> => {
  const received: Array<Received> = []
  const held: Array<{ readonly response: ServerResponse; readonly status: number }> = []
  const receiver: Receiver = {
    url: "",
    received,
    reply,
    held: () => held.length,
    release: () => {
      let answered = 0
      for (const { response, status } of held.splice(0)) {
        if (response.destroyed) continue
        response.writeHead(status).end()
        answered++
      }
      return answered
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const n = received.length
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() })
      const { status, delayMs = 0, hold = false } = receiver.reply(n)
      if (hold) {
        held.push({ response, status })
        return
      }
      setTimeout(() => {
        if (!response.destroyed) response.writeHead(status).end()
      }, delayMs)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  Object.assign(receiver, { url: `http://127.0.0.1:${port}/hooks` })
  return receiver
}

/** A wallet change as the billing engine reports it, committed in its own transaction. */
export const changeWallet = (
  app: TestApp,
  change: Pick<WalletChange, "organizationId" | "customerId"> & {
    readonly from: string
    readonly to: string
    readonly alertLevel?: string | null
    readonly at?: Date
    readonly usageLogId?: string | null
  }
) =>
  app.run(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const outbox = yield* WebhookOutbox
      const previousBalance = decimal(change.from)
      const currentBalance = decimal(change.to)
      yield* outbox.walletChanged({
        organizationId: change.organizationId,
        customerId: change.customerId,
        externalId: null,
        previousBalance,
        currentBalance,
        delta: BigDecimal.subtract(currentBalance, previousBalance),
        source: "ADJUSTMENT",
        usageLogId: change.usageLogId ?? null,
        alertLevel: change.alertLevel == null ? null : decimal(change.alertLevel),
        at: change.at ?? new Date()
      }).pipe(sql.withTransaction)
    })
  )

/** One batch of the worker's webhook job at `now`. */
export const runSender = (app: TestApp, now = new Date()) =>
  app.run(Effect.flatMap(WebhookSender, (sender) => sender.runDue(now)))

/**
 * Runs the webhook job, as `billing worker --once` does, until it is idle:
 * until a batch neither starts nor sees the end of a delivery and none is in
 * flight. Every batch runs at `now` when given (a chosen clock: retries become
 * due by moving it, not by sleeping), else at the current time. Fails after
 * `timeoutMs` rather than spinning for ever on a delivery that never ends.
 */
export const drainSender = (app: TestApp, now?: Date, { timeoutMs = HANG_GUARD_MS }: { readonly timeoutMs?: number } = {}) =>
  eventually(async () => {
    const handled = await runSender(app, now ?? new Date())
    if (handled > 0) throw new Error(`the webhook job is not idle yet: its last batch handled ${handled}`)
  }, { timeoutMs, intervalMs: 0 })

/**
 * A test file of webhook endpoints made over HTTP: its app (handed to `started`), with a retry schedule of
 * 30 s so a failed delivery waits in the outbox, and what each test makes, closed and removed after it, so that
 * none of its deliveries waits for another test's sender. Push every receiver and endpoint a test makes.
 */
export const webhookEndpointsFile = (started: (app: TestApp) => void) => {
  let app: TestApp | undefined
  const receivers: Array<Receiver> = []
  const endpoints: Array<{ readonly api: Client; readonly id: string }> = []
  beforeAll(async () => {
    process.env.BILLING_WEBHOOK_RETRY_SCHEDULE = "30,30"
    app = await startTestApp()
    started(app)
  })
  afterAll(() => app?.close())
  afterEach(async () => {
    for (const { api, id } of endpoints.splice(0)) await api.del(`/webhook-endpoints/${id}`)
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()))
  })
  return { receivers, endpoints }
}
