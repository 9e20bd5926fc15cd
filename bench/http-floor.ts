/**
 * bench/http-floor: what the framework alone answers on this machine, the
 * floor under bench/intake.ts's single-signal figure. Run by hand; results in
 * docs/benchmarks.md.
 *
 *   npx tsx bench/http-floor.ts [--requests 20000] [--connections 64] [--door node|platform|httpapi]
 *
 * A server process with one endpoint, `POST /api/v1/signal/credit`, that
 * reads the body, checks it against the real credit signal schema and answers
 * the real 202 envelope, built from a constant: no authentication, no
 * database, no request log. One server per door, in turn, in the same run:
 *  - `node`: Node's `http` server alone (JSON.parse and the schema check);
 *  - `platform`: @effect/platform's `HttpServer` serving one `HttpApp`
 *    (the request wrapper, a fiber per request, the response conversion);
 *  - `httpapi`: an `HttpApi` endpoint (routing, payload decoding and the
 *    schema-encoded answer on top), the door every other route uses.
 * The same load as bench/intake.ts (`node:http`, keep-alive, 500 warm-up
 * requests, then `--requests` over `--connections`), on the same cores.
 * The intake lane (src/signals/IntakeLane.ts) stands on the `node` floor; the
 * other routes on the `httpapi` one.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer, Schema } from "effect"
import { spawn } from "node:child_process"
import * as http from "node:http"
import { createServer } from "node:http"
import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { Success } from "../src/http/Envelope.ts"
import { Acknowledgement, CreditSignal } from "../src/signals/Signal.ts"
import { acceptedMessage } from "../src/signals/SignalsApi.ts"
import { benchPort, flag, load } from "./support.ts"


const Accepted = Success(Acknowledgement, { status: 202, message: acceptedMessage })
const answer = { queued: true, messageId: "msg_floor", rawId: "sig_floor" } as const
const acceptedText = JSON.stringify(Schema.encodeSync(Accepted)(answer))

const serveNode = (port: number) => {
  const check = Schema.decodeUnknownSync(CreditSignal)
  createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      check(JSON.parse(Buffer.concat(chunks).toString("utf8")))
      response.writeHead(202, { "content-type": "application/json", "content-length": Buffer.byteLength(acceptedText) })
      response.end(acceptedText)
    })
  }).listen(port, "127.0.0.1")
}

const servePlatform = (port: number) => {
  const check = Schema.decodeUnknown(CreditSignal)
  const app = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => request.json).pipe(
    Effect.flatMap(check),
    Effect.as(HttpServerResponse.text(acceptedText, { status: 202, contentType: "application/json" })),
    Effect.orDie
  )
  HttpServer.serve(app).pipe(
    Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
    Layer.launch,
    NodeRuntime.runMain
  )
}

const serveHttpApi = (port: number) => {
  const Floor = HttpApi.make("floor").add(
    HttpApiGroup.make("signals").add(HttpApiEndpoint.post("credit", "/signal/credit").setPayload(CreditSignal).addSuccess(Accepted))
  ).prefix("/api/v1")
  const SignalsLive = HttpApiBuilder.group(Floor, "signals", (handlers) => handlers.handle("credit", () => Effect.succeed(answer)))
  const ApiLive = HttpApiBuilder.api(Floor).pipe(Layer.provide(SignalsLive))
  HttpApiBuilder.serve().pipe(
    Layer.provide(ApiLive),
    Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
    Layer.launch,
    NodeRuntime.runMain
  )
}

const doors = { node: serveNode, platform: servePlatform, httpapi: serveHttpApi } as const
type Door = keyof typeof doors
const doorNames: Record<Door, string> = {
  node: "Node `http` alone",
  platform: "@effect/platform `HttpServer`, one `HttpApp`",
  httpapi: "`HttpApi` endpoint"
}

/** A server of `door` on a random port, once it answers (another port when that one was taken). */
const started = async (door: Door, post: (port: number) => Promise<number>) => {
  for (;;) {
    const port = benchPort()
    const server = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--serve", String(port), door], { stdio: "inherit" })
    while (server.exitCode === null) {
      try {
        if ((await post(port)) === 202) return { server, port }
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  }
}

const measure = async (door: Door, requests: number, connections: number) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  const body = JSON.stringify({ customerId: "cus_floor", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1000, outputTokens: 200 } })
  const postTo = (port: number) =>
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
  const { port, server } = await started(door, postTo)
  const post = () => postTo(port)
  await load(500, connections, () => post().then(() => undefined))
  let refused = 0
  const measured = await load(requests, connections, async () => {
    if ((await post()) !== 202) refused++
  })
  agent.destroy()
  server.kill("SIGTERM")
  await new Promise((resolve) => server.on("exit", resolve))
  process.stderr.write(`${JSON.stringify({ door, date: new Date().toISOString(), cpus: os.cpus().length, load: os.loadavg(), refused, ...measured })}\n`)
  return `| ${doorNames[door]} (credit schema, no auth, no database), ${connections} connections | ${measured.rate}/s | ${measured.p50.toFixed(1)} ms | ${measured.p99.toFixed(1)} ms |`
}

const main = async () => {
  const requests = flag("requests", 20_000)
  const connections = flag("connections", 64)
  const doorIndex = process.argv.indexOf("--door")
  const chosen = doorIndex >= 0 ? [process.argv[doorIndex + 1] as Door] : (Object.keys(doors) as Array<Door>)
  const lines = []
  for (const door of chosen) lines.push(await measure(door, requests, connections))
  process.stdout.write(`| Door | Rate | p50 | p99 |\n|---|---:|---:|---:|\n${lines.join("\n")}\n`)
}

const serveIndex = process.argv.indexOf("--serve")
if (serveIndex >= 0) doors[process.argv[serveIndex + 2] as Door](Number(process.argv[serveIndex + 1]))
else await main()
