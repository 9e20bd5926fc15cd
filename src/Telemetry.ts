/**
 * Tracing, as the process's environment asks for it. Every service method runs
 * in a span named `Service.method` (`Effect.fn`); the HTTP server adds a span
 * per request of the full server, and @effect/sql one per statement.
 *
 * With `OTEL_EXPORTER_OTLP_ENDPOINT` set, those spans are exported over
 * OTLP/HTTP as JSON to `<endpoint>/v1/traces` (the OpenTelemetry convention),
 * in batches every `OTEL_BSP_SCHEDULE_DELAY` ms (5,000) and once more when the
 * process stops. Without it the tracer is switched off: a span is then a
 * shared no-op, and the HTTP server skips its per-request span altogether
 * (`tracingEnabled`), which was a measurable share of a request's time
 * (docs/benchmarks.md, "Spans").
 *
 * The doors provide `TelemetryLive` (`billing serve`, every CLI command, the
 * worker); fibers forked while the layers above it are built inherit the
 * switch and the tracer, as do requests and the worker loop.
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Config, Effect, FiberRef, Layer, Option } from "effect"

/** What the standard OpenTelemetry variables say about exporting traces; `tracesUrl` None: no export. */
export interface TelemetrySettings {
  readonly tracesUrl: Option.Option<string>
  readonly serviceName: string
  readonly headers: Readonly<Record<string, string>>
  readonly exportIntervalMs: number
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs separated by commas, values URL-encoded. */
const parseHeaders = (text: string): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const pair of text.split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim())
  }
  return headers
}

export const telemetrySettings: Config.Config<TelemetrySettings> = Config.all({
  endpoint: Config.option(Config.nonEmptyString("OTEL_EXPORTER_OTLP_ENDPOINT")),
  // The signal-specific variable is the full URL, used as given.
  tracesEndpoint: Config.option(Config.nonEmptyString("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  serviceName: Config.withDefault(Config.nonEmptyString("OTEL_SERVICE_NAME"), "billing"),
  headers: Config.withDefault(Config.string("OTEL_EXPORTER_OTLP_HEADERS"), ""),
  exportIntervalMs: Config.withDefault(Config.integer("OTEL_BSP_SCHEDULE_DELAY"), 5000)
}).pipe(Config.map((env) => ({
  tracesUrl: Option.orElse(
    env.tracesEndpoint,
    () => Option.map(env.endpoint, (base) => `${base.replace(/\/+$/, "")}/v1/traces`)
  ),
  serviceName: env.serviceName,
  headers: parseHeaders(env.headers),
  exportIntervalMs: env.exportIntervalMs
})))

/** The OTLP tracer for `settings`, or the tracer switched off when they name no endpoint. */
export const telemetryLayer = (settings: TelemetrySettings): Layer.Layer<never> =>
  Option.match(settings.tracesUrl, {
    onNone: () => Layer.setTracerEnabled(false),
    onSome: (url) =>
      OtlpTracer.layer({
        url,
        resource: { serviceName: settings.serviceName },
        headers: settings.headers,
        exportInterval: settings.exportIntervalMs
      }).pipe(
        Layer.provide(OtlpSerialization.layerJson),
        Layer.provide(FetchHttpClient.layer)
      )
  })

/** Tracing from the environment (its config provider): exported over OTLP, or off. */
export const TelemetryLive: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.map(Effect.orDie(telemetrySettings), telemetryLayer)
)

/** Whether spans are being made in this fiber: the HTTP server adds its request spans only then. */
export const tracingEnabled: Effect.Effect<boolean> = FiberRef.get(FiberRef.currentTracerEnabled)
