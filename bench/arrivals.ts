/**
 * Open-loop arrivals and their freshness, shared by bench/freshness.ts and
 * bench/tenants.ts: signals sent at a fixed rate (signal i at i/rate s, never
 * waiting for earlier answers), and when each was first seen priced by an
 * observer outside the service's processes.
 */
import pg from "pg"
import type { apiClient } from "./support.ts"
import { percentile } from "./support.ts"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits

/** n, p50, p99 and max of a list of milliseconds. */
export const latencyStats = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return { n: sorted.length, p50Ms: round(percentile(sorted, 0.5)), p99Ms: round(percentile(sorted, 0.99)), maxMs: round(sorted.at(-1) ?? NaN) }
}

/** One signal sent: its group (the caller's label, e.g. "hot"), when it was sent and answered, its status, when seen priced. */
export interface Arrival {
  readonly group: string
  readonly sentAt: number
  readonly acceptedAt: number
  readonly status: number
  readonly seenAt: number | undefined
}

export interface ArrivalsOptions {
  readonly client: ReturnType<typeof apiClient>
  /** A connection to the bench's database, for the observer (one statement every 5 ms). */
  readonly observer: pg.Client
  readonly organizationId: string
  /** Signals a second, and for how long. */
  readonly rate: number
  readonly seconds: number
  /** Signal i's route (e.g. "/signal/credit"), body and group. */
  readonly signal: (index: number) => { readonly path: string; readonly body: unknown; readonly group: string }
  readonly headers?: Record<string, string>
  /**
   * How the observer learns that a signal was priced. "poll" (the default):
   * the signals accepted and not yet seen priced, looked up by primary key
   * every 5 ms. "listen": a connection of its own listening on
   * `billing_signals_priced`, where the worker announces the rawIds each batch
   * ended once it has committed (what a `Prefer: wait` request waits for);
   * an announcement too long for a notification says only `*`, and then the
   * unseen are looked up once. The poll's cost grows with the signals in
   * flight (at 700 in flight, 140,000 look-ups a second: a share of the
   * PostgreSQL core it measures, and more of it the later signals are
   * priced); the listener's costs the database nothing the service does not
   * already send. A look-up every 500 ms of the unseen older than a second
   * guards against a lost notification.
   */
  readonly watch?: "poll" | "listen"
  /** The connection string, for the listener's own connection ("listen"). */
  readonly databaseUrl?: string
}

/**
 * Sends `rate × seconds` signals open-loop and watches the inbox for their
 * end: the signals accepted and not yet seen priced are looked up every 5 ms
 * (by primary key, one look-up an id: `id = ANY($2)` and a join were planned
 * as scans of the organisation's rows while statistics were young, 6-20 ms of
 * a PostgreSQL core every 5 ms: a load on the machine it measured, and a late
 * stamp; docs/benchmarks.md "The observer"). A connection reset is sent again
 * once: the idempotency key makes the repeat answer the original.
 */
export const openLoopArrivals = async (options: ArrivalsOptions) => {
  const { client, observer, organizationId, rate, seconds, signal, headers = {}, watch = "poll" } = options
  const count = Math.round(rate * seconds)
  const arrivals = new Array<{ group: string; sentAt: number; acceptedAt: number; status: number; rawId: string }>(count)
  const seenAt = new Map<string, number>()
  const unseen = new Set<string>()
  /** Announced before its 202 came back: the moment it was announced. */
  const announced = new Map<string, number>()
  const lookUp = async (ids: ReadonlyArray<string>) => {
    if (ids.length === 0) return
    const { rows } = await observer.query(
      `SELECT u.id FROM unnest($2::text[]) AS u(id)
       CROSS JOIN LATERAL (SELECT 1 FROM signals s
                           WHERE s.organization_id = $1 AND s.id = u.id AND s.status <> 'QUEUED' LIMIT 1) priced`,
      [organizationId, ids]
    )
    const now = performance.now()
    for (const row of rows) {
      seenAt.set(row.id, now)
      unseen.delete(row.id)
    }
  }
  const listener = watch === "listen" ? new pg.Client({ connectionString: options.databaseUrl }) : undefined
  if (listener !== undefined) {
    await listener.connect()
    listener.on("notification", (message) => {
      const now = performance.now()
      if (message.payload === "*") {
        void lookUp([...unseen])
        return
      }
      for (const id of (message.payload ?? "").split(",")) {
        if (unseen.delete(id)) seenAt.set(id, now)
        else if (!seenAt.has(id)) announced.set(id, now)
      }
    })
    await listener.query("LISTEN billing_signals_priced")
  }
  let sending = true
  const watching = (async () => {
    while (sending || unseen.size > 0) {
      if (listener === undefined) {
        await lookUp([...unseen])
        await sleep(5)
      } else {
        const before = performance.now() - 1000
        await lookUp(arrivals.flatMap((a) => a !== undefined && unseen.has(a.rawId) && a.acceptedAt < before ? [a.rawId] : []))
        await sleep(500)
      }
    }
  })()
  const started = performance.now()
  const requests: Array<Promise<void>> = []
  for (let i = 0; i < count; i++) {
    const wait = started + (i * 1000) / rate - performance.now()
    if (wait > 1) await sleep(wait)
    const { body, group, path } = signal(i)
    requests.push((async () => {
      const sentAt = performance.now()
      const answer = await client.request("POST", path, body, headers).catch(() => client.request("POST", path, body, headers))
      const acceptedAt = performance.now()
      const rawId: string = answer.json.result?.rawId ?? answer.json.result?.usageLog?.rawId
      arrivals[i] = { group, sentAt, acceptedAt, status: answer.status, rawId }
      const early = announced.get(rawId)
      if (answer.status !== 202) seenAt.set(rawId, acceptedAt)
      // Priced before its answer came back: priced when its answer came.
      else if (early !== undefined) seenAt.set(rawId, Math.max(early, acceptedAt))
      else unseen.add(rawId)
    })())
  }
  const sendSeconds = (performance.now() - started) / 1000
  await Promise.all(requests)
  const deadline = performance.now() + 60_000
  while (unseen.size > 0 && performance.now() < deadline) await sleep(10)
  sending = false
  await watching
  await listener?.end()
  return {
    achievedRate: Math.round(count / sendSeconds),
    neverSeen: unseen.size,
    arrivals: arrivals.map((a): Arrival => ({ group: a.group, sentAt: a.sentAt, acceptedAt: a.acceptedAt, status: a.status, seenAt: seenAt.get(a.rawId) }))
  }
}

/** The freshness figures of some arrivals: 202 -> seen priced, sent -> seen priced, and the answer's time. */
export const freshnessOf = (arrivals: ReadonlyArray<Arrival>) => {
  const byStatus: Record<string, number> = {}
  for (const arrival of arrivals) byStatus[arrival.status] = (byStatus[arrival.status] ?? 0) + 1
  return {
    signals: arrivals.length,
    byStatus,
    acceptedToPriced: latencyStats(arrivals.flatMap((a) => a.status === 202 && a.seenAt !== undefined ? [a.seenAt - a.acceptedAt] : [])),
    sentToPriced: latencyStats(arrivals.flatMap((a) => a.seenAt !== undefined ? [a.seenAt - a.sentAt] : [])),
    answerMs: latencyStats(arrivals.map((a) => a.acceptedAt - a.sentAt))
  }
}
