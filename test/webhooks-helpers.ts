/** Shared by the webhook test files: a real receiver on loopback and ways to drive the outbox and the sender. */
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { decimal } from "../src/money.ts"
import { type WalletChange, WebhookOutbox } from "../src/webhooks/Outbox.ts"
import { WebhookSender } from "../src/webhooks/Sender.ts"
import type { TestApp } from "./support/TestApp.ts"

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
}

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** How request number n (0-based) is answered; default 200. */
  reply: (n: number) => Reply
  readonly close: () => Promise<void>
}

export const startReceiver = async (reply: (n: number) => Reply = () => ({ status: 200 })): Promise<Receiver> => {
  const received: Array<Received> = []
  const receiver: Receiver = {
    url: "",
    received,
    reply,
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
      const { status, delayMs = 0 } = receiver.reply(n)
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

/** Runs the webhook job, as `billing worker --once` does, until it is idle. */
export const drainSender = async (app: TestApp) => {
  while ((await runSender(app)) > 0) {
    // keep going: something was sent or is still in flight
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
