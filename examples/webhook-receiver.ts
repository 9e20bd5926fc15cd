/**
 * A webhook receiver that does everything a receiver must (docs/webhooks.md):
 * verifies the signature over the raw body, answers 2xx quickly, ignores
 * duplicates by event id, and orders events by `triggered_at` so that a late
 * or replayed event never overwrites newer state.
 *
 *   WEBHOOK_SECRET=whsec_... PORT=4000 npx tsx examples/webhook-receiver.ts
 */
import { createServer, type Server } from "node:http"
import { pathToFileURL } from "node:url"
// In your project: \`from "@billing/client"\` (the package in client/, installed with \`npm install /path/to/billing/client\`).
import { verifyWebhookSignature, type WebhookEvent } from "../client/src/index.ts"

/** The latest wallet balance of each customer, as far as the events tell. */
export class WalletMirror {
  private readonly seen = new Set<string>()
  private readonly latest = new Map<string, { readonly triggeredAt: number; readonly balance: number }>()

  /** Applies an event; false when it is a duplicate or older than what is already known. */
  apply(event: WebhookEvent): boolean {
    if (this.seen.has(event.id)) return false
    this.seen.add(event.id)
    if (event.event_type !== "wallet.balance.update") return true
    const triggeredAt = Date.parse(event.triggered_at)
    const known = this.latest.get(event.data.customer_id)
    if (known && known.triggeredAt > triggeredAt) return false
    this.latest.set(event.data.customer_id, { triggeredAt, balance: event.data.current_balance })
    return true
  }

  balanceOf(customerId: string): number | undefined {
    return this.latest.get(customerId)?.balance
  }
}

export const startReceiver = (options: {
  readonly secret: string
  readonly port: number
  readonly onEvent: (event: WebhookEvent) => void
}): Server => {
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      // Verify the bytes as received: parsing and re-serialising the body would break the signature.
      const rawBody = Buffer.concat(chunks)
      const signature = request.headers["x-service-signature"]
      if (!verifyWebhookSignature(options.secret, typeof signature === "string" ? signature : undefined, rawBody)) {
        response.writeHead(400).end("bad signature")
        return
      }
      response.writeHead(204).end()
      // Acknowledge first, then work: the sender waits at most 5 seconds.
      options.onEvent(JSON.parse(rawBody.toString("utf8")) as WebhookEvent)
    })
  })
  return server.listen(options.port)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secret = process.env.WEBHOOK_SECRET
  if (!secret) {
    process.stderr.write("set WEBHOOK_SECRET to the endpoint's whsec_ secret\n")
    process.exit(2)
  }
  const port = Number(process.env.PORT ?? 4000)
  const mirror = new WalletMirror()
  startReceiver({
    secret,
    port,
    onEvent: (event) => {
      const applied = mirror.apply(event)
      const what = event.event_type === "balance.threshold.crossed"
        ? `${event.data.balance_type} ${event.data.balance_id} ${event.data.threshold}% used`
        : event.event_type === "signal.refused"
        ? `signal ${event.data.raw_id} refused: ${event.data.error.code} (${event.data.error.message})`
        : "purchase" in event.data
        ? `purchase ${event.data.purchase.id} ${event.data.purchase.status}`
        : "invoice" in event.data
        ? `invoice ${event.data.invoice.id} ${event.data.invoice.status}`
        : `balance=${event.data.current_balance}`
      process.stdout.write(
        `${event.triggered_at} ${event.event_type} ${event.id} customer=${event.data.customer_id} ` +
          `${what}${applied ? "" : " (ignored: duplicate or stale)"}\n`
      )
    }
  })
  process.stdout.write(`listening on http://127.0.0.1:${port}/\n`)
}
