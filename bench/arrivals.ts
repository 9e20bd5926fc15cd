/**
 * Open-loop arrivals and their freshness, shared by bench/freshness.ts and
 * bench/tenants.ts: signals sent at a fixed rate (signal i at i/rate s, never
 * waiting for earlier answers), and when each was first seen priced by an
 * observer outside the service's processes.
 */
import type pg from "pg"
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
  const { client, observer, organizationId, rate, seconds, signal, headers = {} } = options
  const count = Math.round(rate * seconds)
  const arrivals = new Array<{ group: string; sentAt: number; acceptedAt: number; status: number; rawId: string }>(count)
  const seenAt = new Map<string, number>()
  const unseen = new Set<string>()
  let sending = true
  const watching = (async () => {
    while (sending || unseen.size > 0) {
      if (unseen.size > 0) {
        const { rows } = await observer.query(
          `SELECT u.id FROM unnest($2::text[]) AS u(id)
           CROSS JOIN LATERAL (SELECT 1 FROM signals s
                               WHERE s.organization_id = $1 AND s.id = u.id AND s.status <> 'QUEUED' LIMIT 1) priced`,
          [organizationId, [...unseen]]
        )
        const now = performance.now()
        for (const row of rows) {
          seenAt.set(row.id, now)
          unseen.delete(row.id)
        }
      }
      await sleep(5)
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
      if (answer.status === 202) unseen.add(rawId)
      else seenAt.set(rawId, acceptedAt)
    })())
  }
  const sendSeconds = (performance.now() - started) / 1000
  await Promise.all(requests)
  const deadline = performance.now() + 60_000
  while (unseen.size > 0 && performance.now() < deadline) await sleep(10)
  sending = false
  await watching
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
