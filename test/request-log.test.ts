/**
 * The request log (src/http/RequestLog.ts): error responses are always logged,
 * a burst of successes is sampled and summed up in a summary line, the buffer
 * is bounded (dropped lines are counted), and closing writes everything.
 * First on the logger alone with a sink that records chunks, then through the
 * real server, in-process, on the test database.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { SqlClient } from "@effect/sql"
import { Cause, Effect, HashMap, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MigrationsLive } from "../src/db/Migrations.ts"
import { type LogSink, RequestLogger, type RequestLogOptions } from "../src/http/RequestLog.ts"
import { makeHttpServer } from "../src/app/Server.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { ServicesLive } from "../src/app/Services.ts"
import { eventually } from "./support/Eventually.ts"
import { TestDatabaseLive } from "./support/TestDatabase.ts"

interface Line {
  readonly message: string
  readonly logLevel: string
  readonly annotations: Record<string, any>
}

/** A sink that keeps every chunk; `hold` keeps writes from completing until `release`. */
const recordingSink = () => {
  const chunks: Array<string> = []
  const waiting: Array<() => void> = []
  let hold = false
  const sink: LogSink = {
    write: (chunk, done) => {
      chunks.push(chunk)
      if (hold) waiting.push(done)
      else setImmediate(done)
    }
  }
  return {
    sink,
    lines: (): Array<Line> => chunks.join("").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line)),
    writes: () => chunks.length,
    hold: () => {
      hold = true
    },
    release: () => {
      hold = false
      for (const done of waiting.splice(0)) done()
    }
  }
}

const options = (sink: LogSink, overrides: Partial<RequestLogOptions> = {}): RequestLogOptions => ({
  sampleRate: 10,
  sampleEvery: 10,
  flushMs: 10,
  flushBytes: 64 * 1024,
  maxBufferBytes: 1024 * 1024,
  summaryMs: 60_000,
  minimumLevel: LogLevel.Info,
  sink,
  ...overrides
})

const requests = (lines: ReadonlyArray<Line>) => lines.filter((line) => line.message === "request")

describe("the request logger", () => {
  it("logs every error response, however high the rate, and a 5xx at ERROR", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink, { sampleRate: 0, sampleEvery: 1000 }))
    const now = performance.now()
    for (let i = 0; i < 50; i++) log.record(`ok-${i}`, "GET", "/api/v1/customers", 200, 1, now)
    for (let i = 0; i < 20; i++) log.record(`nf-${i}`, "GET", "/api/v1/nope", 404, 1, now)
    for (let i = 0; i < 5; i++) log.record(`err-${i}`, "POST", "/api/v1/signal/credit", 500, 2, now)
    await log.close()
    const lines = requests(out.lines())
    expect(lines.filter((line) => line.annotations.status === 404).map((line) => line.annotations.requestId))
      .toEqual(Array.from({ length: 20 }, (_, i) => `nf-${i}`))
    const errors = lines.filter((line) => line.annotations.status === 500)
    expect(errors).toHaveLength(5)
    expect(errors.every((line) => line.logLevel === "ERROR")).toBe(true)
    expect(lines.filter((line) => line.annotations.status === 200)).toHaveLength(0)
  })

  it("samples a burst of successes above the rate and sums them up", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink))
    const now = performance.now()
    for (let i = 0; i < 200; i++) log.record(`r-${i}`, "POST", "/api/v1/signal/credit", 202, i < 100 ? 2 : 40, now)
    log.record("bad", "POST", "/api/v1/signal/credit", 400, 1, now)
    await log.close()
    const lines = out.lines()
    const successes = requests(lines).filter((line) => line.annotations.status === 202)
    // The first 10 of the second in full, then 1 in 10 of the other 190, marked.
    expect(successes.filter((line) => line.annotations.sampled === undefined)).toHaveLength(10)
    expect(successes.filter((line) => line.annotations.sampled === 10)).toHaveLength(19)
    expect(requests(lines).filter((line) => line.annotations.status === 400)).toHaveLength(1)
    const summaries = lines.filter((line) => line.message === "requests")
    expect(summaries).toHaveLength(1)
    expect(summaries[0]!.annotations).toMatchObject({
      requests: 201,
      logged: 30,
      notLogged: 171,
      status: { "2xx": 200, "3xx": 0, "4xx": 1, "5xx": 0 },
      p50Ms: 3,
      p99Ms: 40,
      maxMs: 40,
      pid: process.pid
    })
  })

  it("writes no summary when every request was logged", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink))
    for (let i = 0; i < 5; i++) log.record(`r-${i}`, "GET", "/api/v1/customers", 200, 1, performance.now())
    await log.close()
    expect(out.lines().map((line) => line.message)).toEqual(["request", "request", "request", "request", "request"])
  })

  it("writes in chunks, not a write per line", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink, { sampleRate: 1000, flushMs: 50 }))
    for (let i = 0; i < 200; i++) log.record(`r-${i}`, "GET", "/api/v1/customers", 200, 1, performance.now())
    expect(out.writes()).toBe(0)
    // The timer's flush, whenever the host gets to it: one write, holding every line.
    await eventually(() => expect(out.writes()).toBeGreaterThan(0), { intervalMs: 5 })
    expect(out.writes()).toBe(1)
    expect(requests(out.lines())).toHaveLength(200)
    await log.close()
  })

  it("drops lines beyond its bound while a write is stuck, and says how many", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink, { sampleRate: 100_000, maxBufferBytes: 4096, flushMs: 1 }))
    out.hold()
    log.record("first", "GET", "/api/v1/customers", 200, 1, performance.now())
    await eventually(() => expect(out.writes()).toBe(1), { intervalMs: 2 })
    // The first chunk is in flight and does not complete: lines pile up to 4 KB.
    for (let i = 0; i < 200; i++) log.record(`r-${i}`, "GET", "/api/v1/customers", 200, 1, performance.now())
    out.release()
    await log.close()
    const lines = out.lines()
    const dropped = lines.find((line) => line.message.includes("lines dropped"))
    expect(dropped?.logLevel).toBe("WARN")
    const written = requests(lines).length
    expect(written).toBeLessThan(201)
    expect(written + dropped!.annotations.dropped).toBe(201)
  })

  it("honours the minimum log level: only 5xx lines below WARN", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink, { minimumLevel: LogLevel.Warning }))
    log.record("ok", "GET", "/api/v1/customers", 200, 1, performance.now())
    log.record("nf", "GET", "/api/v1/customers/x", 404, 1, performance.now())
    log.record("boom", "GET", "/api/v1/customers", 500, 1, performance.now())
    await log.close()
    expect(requests(out.lines()).map((line) => line.annotations.requestId)).toEqual(["boom"])
  })

  it("writes lines recorded after closing at once", async () => {
    const out = recordingSink()
    const log = new RequestLogger(options(out.sink))
    await log.close()
    log.record("late", "GET", "/api/v1/customers", 200, 1, performance.now())
    expect(requests(out.lines()).map((line) => line.annotations.requestId)).toEqual(["late"])
  })
})

describe("the request log of the real server", () => {
  const out = recordingSink()
  // What the Effect logger writes (the cause of a 5xx), with its annotations.
  const effectLog: Array<{ level: string; message: unknown; cause: string; annotations: Record<string, unknown> }> = []
  const capture = Logger.make(({ annotations, cause, logLevel, message }) => {
    effectLog.push({
      level: logLevel.label,
      message,
      cause: Cause.pretty(cause),
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  })
  const makeLayer = () => {
    const database = Layer.provideMerge(MigrationsLive, TestDatabaseLive)
    const services = ServicesLive.pipe(Layer.provideMerge(database))
    return makeHttpServer({
      port: 0,
      host: "127.0.0.1",
      // No summary of a period while the test runs, however long the machine makes it: the one written
      // at shutdown then counts every request.
      requestLog: { sink: out.sink, sampleRate: 5, sampleEvery: 10, flushMs: 10, summaryMs: 3_600_000, minimumLevel: LogLevel.Info }
    }).pipe(
      Layer.provideMerge(services),
      Layer.provide(Logger.replace(Logger.defaultLogger, capture)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  }
  let runtime: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof makeLayer>>, unknown>
  let baseUrl: string
  let apiKey: string

  beforeAll(async () => {
    runtime = ManagedRuntime.make(makeLayer())
    const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (server) => server.address))
    if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
    baseUrl = `http://127.0.0.1:${address.port}/api/v1`
    apiKey = (await runtime.runPromise(Effect.flatMap(Organizations, (orgs) => orgs.create({ name: "Log Org" })))).apiKey
  })

  afterAll(() => runtime?.dispose())

  it("logs every error response with its request id, samples successes, and sums up on shutdown", async () => {
    const get = (path: string, key: string, requestId?: string) =>
      fetch(`${baseUrl}${path}`, {
        headers: { authorization: `Bearer ${key}`, ...(requestId ? { "x-request-id": requestId } : {}) }
      }).then(async (response) => ({ status: response.status, requestId: response.headers.get("x-request-id"), body: await response.text() }))

    const errors = await Promise.all([
      get("/customers", "sk_nope", "unauthorized-1"),
      get("/customers", "sk_nope"),
      get("/no-such-route", apiKey, "missing-route-1"),
      get("/customers/cus_missing", apiKey)
    ])
    expect(errors.map((answer) => answer.status)).toEqual([401, 401, 404, 404])
    const successes: Array<{ status: number }> = []
    const successesStarted = performance.now()
    for (let round = 0; round < 4; round++) {
      successes.push(...await Promise.all(Array.from({ length: 10 }, () => get("/customers", apiKey))))
    }
    const successesMs = performance.now() - successesStarted
    expect(successes.every((answer) => answer.status === 200)).toBe(true)

    // The intake lane answers signals itself (src/signals/IntakeLane.ts): its answers have their lines too.
    const signal = (requestId: string) =>
      fetch(`${baseUrl}/signal/credit`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "x-request-id": requestId },
        body: JSON.stringify({ customerId: "cus_missing", agentKey: "chat", usage: { model: "gpt-4o", inputTokens: 1 } })
      }).then((response) => response.status)
    expect(await signal("lane-404-1")).toBe(404)

    // A failure of ours: the table is gone. The 500 has its line, and its cause is logged under the same id.
    const rename = (from: string, to: string) =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`ALTER TABLE ${from} RENAME TO ${to}`)))
    await rename("customers", "customers_away")
    const failed = await get("/customers", apiKey, "broken-1").finally(() => rename("customers_away", "customers"))
    expect(failed.status).toBe(500)
    const cause = effectLog.find((entry) => entry.annotations.requestId === "broken-1")
    expect(cause?.level).toBe("ERROR")
    expect(cause?.message).toEqual(["Unhandled failure"])
    expect(cause?.cause).toContain("SqlError")

    await runtime.dispose()
    const lines = out.lines()
    const logged = requests(lines)
    // Every error answer has its line, under the id the caller sent or the one it was given.
    for (const answer of errors) {
      const line = logged.find((candidate) => candidate.annotations.requestId === answer.requestId)
      expect(line?.annotations.status).toBe(answer.status)
    }
    expect(logged.find((line) => line.annotations.requestId === "lane-404-1")?.annotations).toMatchObject({
      method: "POST",
      url: "/api/v1/signal/credit",
      status: 404,
      pid: process.pid
    })
    expect(logged.find((line) => line.annotations.requestId === "unauthorized-1")?.annotations).toMatchObject({
      method: "GET",
      url: "/api/v1/customers",
      status: 401,
      pid: process.pid
    })
    // 40 successes: at most 5 in full in each second they spanned (the log's windows, on the clock the
    // server read; a loaded machine spreads them over more), and 1 in 10 of the rest.
    const okLines = logged.filter((line) => line.annotations.status === 200)
    expect(okLines.length).toBeGreaterThanOrEqual(5)
    expect(okLines.length).toBeLessThanOrEqual(Math.min(40, 5 * (Math.floor(successesMs / 1000) + 1) + 4))
    expect(logged.find((line) => line.annotations.requestId === "broken-1")).toMatchObject({
      logLevel: "ERROR",
      annotations: { status: 500 }
    })
    const summary = lines.find((line) => line.message === "requests")
    expect(summary?.annotations).toMatchObject({ requests: 46, status: { "2xx": 40, "4xx": 5, "5xx": 1 } })
    expect(summary!.annotations.logged + summary!.annotations.notLogged).toBe(46)
    expect(summary!.annotations.p99Ms).toBeGreaterThan(0)
  })
})
