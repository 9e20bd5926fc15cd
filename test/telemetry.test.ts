/**
 * Spans (src/Telemetry.ts): with OTEL_EXPORTER_OTLP_ENDPOINT set, the API and
 * the worker export their spans over OTLP/HTTP, service methods as
 * `Service.method` inside the request's HTTP span; without it, the tracer is
 * off and nothing is sent. The collector is a stub in this process that keeps
 * every POST /v1/traces body.
 */
import { Effect } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tracingEnabled } from "../src/Telemetry.ts"
import { eventually } from "./support/Eventually.ts"
import { startTestApp, type TestApp, type Tenant } from "./support/TestApp.ts"

interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
}

interface Export {
  readonly path: string
  readonly serviceName: unknown
  readonly spans: ReadonlyArray<ExportedSpan>
}

/** OTLP's span kind SERVER. */
const serverKind = 2

const startCollector = async () => {
  const exports: Array<Export> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      for (const resourceSpans of body.resourceSpans ?? []) {
        exports.push({
          path: request.url ?? "",
          serviceName: resourceSpans.resource.attributes.find((a: { key: string }) => a.key === "service.name")?.value
            .stringValue,
          spans: resourceSpans.scopeSpans.flatMap((scope: { spans: Array<ExportedSpan> }) => scope.spans)
        })
      }
      response.writeHead(200, { "content-type": "application/json" })
      response.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans: () => exports.flatMap((e) => e.spans),
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

let collector: Awaited<ReturnType<typeof startCollector>>

beforeAll(async () => {
  collector = await startCollector()
})
afterAll(() => collector.close())

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let app: TestApp

  beforeAll(async () => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    app = await startTestApp()
  })
  afterAll(() => app.close())

  it("switches the tracer off and installs none of its own", async () => {
    expect(await app.run(tracingEnabled)).toBe(false)
    // The default tracer, never called: with the switch off a span is a no-op that goes nowhere.
    expect(await app.run(Effect.tracer)).toBe(Effect.runSync(Effect.tracer))
    const probe = await app.run(Effect.withSpan(Effect.currentSpan, "probe"))
    expect(probe.sampled).toBe(false)
  })

  it("serves requests and runs the worker without sending anything", async () => {
    const tenant = await app.tenant()
    const created = await app.request("POST", "/customers", { key: tenant.apiKey, body: { name: "Quiet", email: "q@example.com" } })
    expect(created.status).toBe(201)
    // A CLI command's runtime flushes an exporter when it closes: after the command, anything sent has arrived.
    const drained = await app.cli(["worker", "--once", "--json"], { OTEL_SERVICE_NAME: "billing-quiet" })
    expect(drained.code).toBe(0)
    expect(collector.exports).toEqual([])
  })
})

describe("with OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let app: TestApp
  let tenant: Tenant

  beforeAll(async () => {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.url
    process.env.OTEL_BSP_SCHEDULE_DELAY = "50"
    app = await startTestApp()
    tenant = await app.tenant()
  })
  afterAll(async () => {
    await app.close()
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    delete process.env.OTEL_BSP_SCHEDULE_DELAY
  })

  it("exports a request's service spans inside its HTTP span, in the caller's trace", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const created = await app.request("POST", "/customers", {
      key: tenant.apiKey,
      body: { name: "Traced", email: "t@example.com" },
      headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }
    })
    expect(created.status).toBe(201)

    const { create, http } = await eventually(() => {
      const inTrace = collector.spans().filter((span) => span.traceId === traceId)
      const create = inTrace.find((span) => span.name === "Customers.create")
      const http = inTrace.find((span) => span.kind === serverKind)
      expect(create).toBeDefined()
      expect(http).toBeDefined()
      return { create: create!, http: http! }
    })
    expect(http.parentSpanId).toBe("00f067aa0ba902b7")
    expect(http.name).toBe("http.server POST")
    // Customers.create sits under the HTTP span (through the handler's own spans, if any).
    const byId = new Map(collector.spans().map((span) => [span.spanId, span]))
    const ancestors: Array<string> = []
    for (let span = byId.get(create.parentSpanId ?? ""); span; span = byId.get(span.parentSpanId ?? "")) {
      ancestors.push(span.spanId)
    }
    expect(ancestors).toContain(http.spanId)
    expect(collector.exports.every((e) => e.path === "/v1/traces" && e.serviceName === "billing")).toBe(true)
  })

  it("exports the worker's spans from a CLI run, under OTEL_SERVICE_NAME", async () => {
    const drained = await app.cli(["worker", "--once", "--json"], {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: "billing-worker"
    })
    expect(drained.code).toBe(0)
    // The command's runtime flushed the exporter before the command returned.
    const worker = collector.exports.filter((e) => e.serviceName === "billing-worker").flatMap((e) => e.spans)
    expect(worker.map((span) => span.name)).toContain("SignalProcessor.runOnce")
  })
})
