/**
 * The request log, kept off the hot path.
 *
 * A line per request written to stdout as the request finished cost every
 * request a system call on the event loop (stdout writes to files and pipes are
 * synchronous in Node.js). Here lines are collected and written in chunks, at
 * most every 100 ms or once 64 KB wait, after the request's answer has gone:
 *
 * - to a file (or /dev/null) through the thread pool (`fs.write`): the event
 *   loop never waits for the disk;
 * - to a pipe or a terminal through `process.stdout`, in pieces of at most
 *   4 KB cut at line ends: a pipe write that small is atomic, so the API
 *   processes of `billing serve --processes N`, which share one stdout, never
 *   cut into each other's lines.
 *
 * At most 1 MB waits to be written; beyond that, lines are dropped and
 * counted, and the next chunk starts with a line saying how many.
 *
 * Sampling: up to `sampleRate` successful requests a second are logged in
 * full (`BILLING_LOG_SAMPLE`, default 100); above that, 1 in `sampleEvery`
 * (`BILLING_LOG_SAMPLE_EVERY`, default 100), marked `"sampled": N`, and a
 * summary line (`"message":"requests"`) every 10 s gives the counts by status
 * class and the latencies (p50, p90, p99, max) of every request of the period.
 * Error responses (4xx and 5xx) are always logged; the cause of a 5xx is logged
 * by `renderFailures` (src/http/Envelope.ts) through the Effect logger.
 *
 * Shutdown: the layer's finalizer writes the last summary and waits until
 * every line is written; lines recorded after that are written at once.
 *
 * Lines keep the shape of the Effect JSON logger's (`message`, `logLevel`,
 * `timestamp`, `annotations`), or with `format: "pretty"` (a terminal:
 * src/http/LogFormat.ts) one short line for a person; they respect the
 * minimum log level in force where the layer is built: request lines are INFO
 * (ERROR for a 5xx).
 */
import { Config, Context, Effect, FiberRef, Layer, LogLevel } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as tty from "node:tty"
import { type LogFormat, prettyLine, prettyRequestLine } from "./LogFormat.ts"

/** The header that carries a request's id, in and out. */
export const requestIdHeader = "x-request-id"

/**
 * A request's id: the caller's `x-request-id`, or a fresh UUID. Every answer
 * carries it back and every line of the request names it, whichever door
 * answered (the full server's middleware, or the intake lane).
 */
export const requestIdOf = (header: string | ReadonlyArray<string> | undefined): string =>
  typeof header === "string" ? header : header?.[0] ?? randomUUID()

/** Where chunks of lines go. `done` is called once the chunk is out of our hands. */
export interface LogSink {
  readonly write: (chunk: string, done: () => void) => void
}

/** A pipe write of at most PIPE_BUF (4096 on Linux) bytes is atomic. */
const pipeAtomicBytes = 4096

const writeFully = (fd: number, buffer: Buffer, done: () => void) => {
  const step = (offset: number) =>
    fs.write(fd, buffer, offset, buffer.length - offset, null, (error, written) => {
      if (error || offset + written >= buffer.length) return done()
      step(offset + written)
    })
  step(0)
}

/** Cuts `chunk` (whole lines) into pieces of at most `limit` bytes, at line ends. */
const cutAtLines = (chunk: string, limit: number): Array<string> => {
  if (Buffer.byteLength(chunk) <= limit) return [chunk]
  const pieces: Array<string> = []
  let piece = ""
  let pieceBytes = 0
  for (const line of chunk.split(/(?<=\n)/)) {
    const bytes = Buffer.byteLength(line)
    if (pieceBytes > 0 && pieceBytes + bytes > limit) {
      pieces.push(piece)
      piece = ""
      pieceBytes = 0
    }
    piece += line
    pieceBytes += bytes
  }
  if (pieceBytes > 0) pieces.push(piece)
  return pieces
}

/** The process's stdout, written without blocking the event loop (see the module comment). */
export const stdoutSink = (): LogSink => {
  let stream = true
  try {
    const stat = fs.fstatSync(1)
    stream = stat.isFIFO() || stat.isSocket() || tty.isatty(1)
  } catch {
    // stdout is closed or unknown: let process.stdout deal with it
  }
  if (!stream) return { write: (chunk, done) => writeFully(1, Buffer.from(chunk), done) }
  return {
    write: (chunk, done) => {
      const pieces = cutAtLines(chunk, pipeAtomicBytes)
      for (let i = 0; i < pieces.length - 1; i++) process.stdout.write(pieces[i]!)
      process.stdout.write(pieces[pieces.length - 1]!, () => done())
    }
  }
}

export interface RequestLogOptions {
  /** Successful requests a second logged in full; above it, 1 in `sampleEvery`. */
  readonly sampleRate: number
  readonly sampleEvery: number
  /** The longest a line waits before it is written. */
  readonly flushMs: number
  /** Waiting lines are written as soon as they reach this size. */
  readonly flushBytes: number
  /** At most this much waits; beyond it lines are dropped and counted. */
  readonly maxBufferBytes: number
  /** How often a summary is written (when some successes were not logged). */
  readonly summaryMs: number
  /** Lines below this level are not written. */
  readonly minimumLevel: LogLevel.LogLevel
  readonly sink: LogSink
  /** JSON lines (the default), or one short line a request for a person at a terminal. */
  readonly format?: LogFormat
}

export const defaultOptions = {
  sampleRate: 100,
  sampleEvery: 100,
  flushMs: 100,
  flushBytes: 64 * 1024,
  maxBufferBytes: 1024 * 1024,
  summaryMs: 10_000,
  minimumLevel: LogLevel.Info,
  format: "json"
} as const

/**
 * Latencies in buckets: 1 ms up to 100 ms, 10 ms up to 1 s, 100 ms up to 10 s,
 * then one bucket. A bucket's value is its upper bound.
 */
const bucketCount = 100 + 90 + 90 + 1
const bucketOf = (ms: number) =>
  ms < 100 ? Math.floor(ms) : ms < 1000 ? 100 + Math.floor((ms - 100) / 10) : ms < 10_000 ? 190 + Math.floor((ms - 1000) / 100) : 280
const bucketUpper = (bucket: number) =>
  bucket < 100 ? bucket + 1 : bucket < 190 ? 100 + (bucket - 99) * 10 : bucket < 280 ? 1000 + (bucket - 189) * 100 : Infinity

const round1 = (ms: number) => Math.round(ms * 10) / 10

export class RequestLogger {
  private readonly options: RequestLogOptions
  private readonly pid = process.pid
  private readonly infoEnabled: boolean
  private readonly errorEnabled: boolean
  private readonly warnEnabled: boolean

  // the waiting lines
  private lines: Array<string> = []
  private bytes = 0
  private dropped = 0
  private writing = false
  private flushTimer: ReturnType<typeof setTimeout> | undefined
  private closing = false
  private closed = false
  private idle: Array<() => void> = []

  // sampling: successes in the current one-second window, and a running count above the rate
  private windowStart = 0
  private windowCount = 0
  private aboveRate = 0

  // the summary period
  private readonly summaryTimer: ReturnType<typeof setInterval>
  private periodStart = performance.now()
  private requests = 0
  private logged = 0
  private notLogged = 0
  private readonly byClass = [0, 0, 0, 0, 0, 0]
  private readonly histogram = new Uint32Array(bucketCount)
  private maxMs = 0

  constructor(options: RequestLogOptions) {
    this.options = options
    this.infoEnabled = LogLevel.greaterThanEqual(LogLevel.Info, options.minimumLevel)
    this.warnEnabled = LogLevel.greaterThanEqual(LogLevel.Warning, options.minimumLevel)
    this.errorEnabled = LogLevel.greaterThanEqual(LogLevel.Error, options.minimumLevel)
    this.summaryTimer = setInterval(() => this.summarize(), options.summaryMs)
    this.summaryTimer.unref()
  }

  /** Records a finished request; `now` and `durationMs` from `performance.now()`. */
  record(requestId: string, method: string, url: string, status: number, durationMs: number, now: number): void {
    this.requests++
    this.byClass[Math.min(5, Math.floor(status / 100))]!++
    this.histogram[bucketOf(durationMs)]!++
    if (durationMs > this.maxMs) this.maxMs = durationMs
    if (status >= 400) {
      if (status >= 500 ? this.errorEnabled : this.infoEnabled) {
        this.logged++
        this.push(this.requestLine(status >= 500 ? "ERROR" : "INFO", requestId, method, url, status, durationMs, 0))
      }
      return
    }
    if (!this.infoEnabled) return
    if (now - this.windowStart >= 1000) {
      this.windowStart = now
      this.windowCount = 0
    }
    if (++this.windowCount <= this.options.sampleRate) {
      this.logged++
      this.push(this.requestLine("INFO", requestId, method, url, status, durationMs, 0))
    } else if (++this.aboveRate % this.options.sampleEvery === 0) {
      this.logged++
      this.push(this.requestLine("INFO", requestId, method, url, status, durationMs, this.options.sampleEvery))
    } else {
      this.notLogged++
    }
  }

  private requestLine(
    level: string,
    requestId: string,
    method: string,
    url: string,
    status: number,
    durationMs: number,
    sampled: number
  ) {
    if (this.options.format === "pretty") {
      return `${prettyRequestLine(level, { requestId, method, url, status }, round1(durationMs), sampled, new Date())}\n`
    }
    const annotations: Record<string, unknown> = { requestId, method, url, status, durationMs: round1(durationMs), pid: this.pid }
    if (sampled > 0) annotations.sampled = sampled
    return `${JSON.stringify({ message: "request", logLevel: level, timestamp: new Date().toISOString(), annotations })}\n`
  }

  private line(level: string, message: string, annotations: Record<string, unknown>) {
    if (this.options.format === "pretty") return `${prettyLine(level, message, annotations, new Date())}\n`
    return `${JSON.stringify({ message, logLevel: level, timestamp: new Date().toISOString(), annotations: { ...annotations, pid: this.pid } })}\n`
  }

  private percentile(p: number) {
    const target = Math.ceil(this.requests * p)
    let seen = 0
    for (let bucket = 0; bucket < bucketCount; bucket++) {
      seen += this.histogram[bucket]!
      if (seen >= target) return Math.min(bucketUpper(bucket), round1(this.maxMs))
    }
    return round1(this.maxMs)
  }

  /** Writes the period's summary if some successes were not logged, and starts a new period. */
  summarize(): void {
    const now = performance.now()
    if (this.notLogged > 0 && this.infoEnabled) {
      this.push(this.line("INFO", "requests", {
        periodMs: Math.round(now - this.periodStart),
        requests: this.requests,
        logged: this.logged,
        notLogged: this.notLogged,
        status: { "2xx": this.byClass[2], "3xx": this.byClass[3], "4xx": this.byClass[4], "5xx": this.byClass[5] },
        p50Ms: this.percentile(0.5),
        p90Ms: this.percentile(0.9),
        p99Ms: this.percentile(0.99),
        maxMs: round1(this.maxMs)
      }))
    }
    this.periodStart = now
    this.requests = this.logged = this.notLogged = this.maxMs = 0
    this.byClass.fill(0)
    this.histogram.fill(0)
  }

  private push(line: string) {
    if (this.closed) {
      this.options.sink.write(line, () => {})
      return
    }
    if (this.bytes + line.length > this.options.maxBufferBytes) {
      this.dropped++
      return
    }
    this.lines.push(line)
    this.bytes += line.length
    if (this.writing) return
    if (this.bytes >= this.options.flushBytes) {
      if (this.flushTimer !== undefined) clearTimeout(this.flushTimer)
      this.flushTimer = setTimeout(() => this.flush(), 0)
    } else if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => this.flush(), this.options.flushMs)
    }
    this.flushTimer.unref()
  }

  /** Hands the waiting lines to the sink; one chunk is in flight at a time. */
  private flush(): void {
    this.flushTimer = undefined
    if (this.writing) return
    if (this.lines.length === 0 && this.dropped === 0) {
      for (const resolve of this.idle.splice(0)) resolve()
      return
    }
    let chunk = this.lines.join("")
    if (this.dropped > 0 && this.warnEnabled) {
      chunk = this.line("WARN", `request log: ${this.dropped} lines dropped (stdout did not keep up)`, { dropped: this.dropped }) + chunk
    }
    this.dropped = 0
    this.lines = []
    this.bytes = 0
    if (chunk === "") {
      this.flush()
      return
    }
    this.writing = true
    this.options.sink.write(chunk, () => {
      this.writing = false
      if (this.lines.length > 0 || this.dropped > 0) {
        if (this.closing || this.bytes >= this.options.flushBytes) this.flush()
        else if (this.flushTimer === undefined) {
          this.flushTimer = setTimeout(() => this.flush(), this.options.flushMs)
          this.flushTimer.unref()
        }
      } else {
        for (const resolve of this.idle.splice(0)) resolve()
      }
    })
  }

  /** Writes the last summary and every waiting line; later lines are written at once. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve()
    clearInterval(this.summaryTimer)
    this.summarize()
    this.closing = true
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer)
    this.flushTimer = undefined
    return new Promise<void>((resolve) => {
      this.idle.push(() => {
        this.closed = true
        resolve()
      })
      this.flush()
    })
  }
}

export class RequestLog extends Context.Tag("billing/RequestLog")<RequestLog, RequestLogger>() {}

/** `BILLING_LOG_SAMPLE` and `BILLING_LOG_SAMPLE_EVERY` (see the module comment). */
export const RequestLogConfig = Config.all({
  sampleRate: Config.integer("BILLING_LOG_SAMPLE").pipe(
    Config.withDefault(defaultOptions.sampleRate),
    Config.validate({ message: "BILLING_LOG_SAMPLE must be 0 or more", validation: (n) => n >= 0 })
  ),
  sampleEvery: Config.integer("BILLING_LOG_SAMPLE_EVERY").pipe(
    Config.withDefault(defaultOptions.sampleEvery),
    Config.validate({ message: "BILLING_LOG_SAMPLE_EVERY must be 1 or more", validation: (n) => n >= 1 })
  )
})

/**
 * The request log for as long as the layer lives, on stdout unless `options.sink`
 * says otherwise; sampling from the environment unless `options` sets it.
 */
export const layer = (options: Partial<RequestLogOptions> = {}) =>
  Layer.scoped(
    RequestLog,
    Effect.gen(function*() {
      const config = yield* RequestLogConfig
      const minimumLevel = yield* FiberRef.get(FiberRef.currentMinimumLogLevel)
      const logger = new RequestLogger({ ...defaultOptions, minimumLevel, sink: stdoutSink(), ...config, ...options })
      // A stdout nobody reads any more must not hold the shutdown up for ever.
      yield* Effect.addFinalizer(() => Effect.promise(() => logger.close()).pipe(Effect.timeout("5 seconds"), Effect.ignore))
      return logger
    })
  )
