/**
 * bench/http-floor: what the framework alone answers on this machine, the
 * floor under bench/intake.ts's single-signal figure. Run by hand; results in
 * docs/benchmarks.md.
 *
 *   npx tsx bench/http-floor.ts [--requests 20000] [--connections 64]
 *
 * A server process with one Effect `HttpApi` endpoint, `POST /api/v1/signal/credit`,
 * whose payload is the real credit signal schema and whose answer is the real
 * 202 envelope, built from a constant: no authentication, no database, no
 * request log. The same load as bench/intake.ts (`node:http`, keep-alive,
 * 500 warm-up requests, then `--requests` over `--connections`), on the same
 * cores. What intake answers beyond this floor is ours.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import * as http from "node:http"
import { createServer } from "node:http"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { Success } from "../src/http/Envelope.ts"
import { Acknowledgement, CreditSignal } from "../src/signals/Signal.ts"
import { load } from "./support.ts"

const flag = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? Number(process.argv[index + 1]) : fallback
}

const serve = (port: number) => {
  const Accepted = Success(Acknowledgement, { status: 202, message: "Signal accepted for processing" })
  const Floor = HttpApi.make("floor").add(
    HttpApiGroup.make("signals").add(HttpApiEndpoint.post("credit", "/signal/credit").setPayload(CreditSignal).addSuccess(Accepted))
  ).prefix("/api/v1")
  const answer = { queued: true, messageId: "msg_floor", rawId: "sig_floor" } as const
  const SignalsLive = HttpApiBuilder.group(Floor, "signals", (handlers) => handlers.handle("credit", () => Effect.succeed(answer)))
  const ApiLive = HttpApiBuilder.api(Floor).pipe(Layer.provide(SignalsLive))
  HttpApiBuilder.serve().pipe(
    Layer.provide(ApiLive),
    Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
    Layer.launch,
    NodeRuntime.runMain
  )
}

const main = async () => {
  const requests = flag("requests", 20_000)
  const connections = flag("connections", 64)
  const port = 20000 + Math.floor(Math.random() * 20000)
  const server = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--serve", String(port)], { stdio: "inherit" })
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  const body = JSON.stringify({ customerId: "cus_floor", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } })
  const post = () =>
    new Promise<number>((resolve, reject) => {
      const req = http.request({
        host: "127.0.0.1", port, path: "/api/v1/signal/credit", method: "POST", agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
      }, (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      })
      req.on("error", reject)
      req.end(body)
    })
  for (;;) {
    try {
      if ((await post()) === 202) break
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  await load(500, connections, () => post().then(() => undefined))
  let refused = 0
  const measured = await load(requests, connections, async () => {
    if ((await post()) !== 202) refused++
  })
  server.kill("SIGTERM")
  const line = `| Bare HttpApi endpoint (credit schema, no auth, no database), ${connections} connections | ${measured.rate}/s, p50 ${measured.p50.toFixed(1)} ms, p99 ${measured.p99.toFixed(1)} ms |`
  process.stdout.write(`${JSON.stringify({ date: new Date().toISOString(), cpus: os.cpus().length, load: os.loadavg(), refused, ...measured })}\n${line}\n`)
}

const serveIndex = process.argv.indexOf("--serve")
if (serveIndex >= 0) serve(Number(process.argv[serveIndex + 1]))
else await main()
