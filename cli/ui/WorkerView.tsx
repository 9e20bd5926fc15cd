/**
 * The worker as a person watches it: one line per job with its rates per
 * second over the last few seconds, totals, and its queue (depth and the age
 * of the oldest waiting item). Fed by the worker's batch reports.
 */
import { Box, Text, useInput } from "ink"
import { useEffect, useState } from "react"
import type { BatchReport, JobSummary, QueueState } from "../../src/worker/Stats.ts"
import { QUEUE_DEPTH_CAP } from "../../src/worker/Stats.ts"

/** The counters each job reports, in the order shown. */
export const jobCounters: Readonly<Record<string, ReadonlyArray<string>>> = {
  signals: ["priced", "failed", "pending"],
  webhooks: ["sent", "failed"],
  "billing-cycles": ["renewed"],
  history: ["archived"]
}

const WINDOW_MS = 5_000

interface JobState {
  readonly totals: Record<string, number>
  /** Recent batches: when, and what they counted (all organisations together). */
  readonly recent: Array<{ readonly at: number; readonly counts: Record<string, number> }>
  queue: QueueState | null
}

/** Batch reports kept for the view: totals, a sliding window for rates, the last queue. */
export class WorkerStatsStore {
  readonly startedAt = Date.now()
  readonly jobs = new Map<string, JobState>()

  constructor(jobs: ReadonlyArray<string>) {
    for (const job of jobs) this.jobs.set(job, { totals: {}, recent: [], queue: null })
  }

  add(report: BatchReport) {
    const state = this.jobs.get(report.job)
    if (state === undefined) return
    if (report.handled === 0) {
      // An idle poll: nothing is waiting that this worker could take.
      if (state.queue !== null) state.queue = { depth: 0, lagMs: 0 }
      return
    }
    const counts: Record<string, number> = {}
    for (const perOrganization of Object.values(report.byOrganization)) {
      for (const [counter, n] of Object.entries(perOrganization)) {
        counts[counter] = (counts[counter] ?? 0) + n
        state.totals[counter] = (state.totals[counter] ?? 0) + n
      }
    }
    state.recent.push({ at: report.at.getTime(), counts })
    if (report.queue !== null) state.queue = report.queue
  }

  /** Per-second rates over the last few seconds (or since the start, if sooner). */
  rates(job: string, now: number): Record<string, number> {
    const state = this.jobs.get(job)!
    while (state.recent.length > 0 && state.recent[0]!.at < now - WINDOW_MS) state.recent.shift()
    const seconds = Math.max(1, Math.min(WINDOW_MS, now - this.startedAt)) / 1000
    const sums: Record<string, number> = {}
    for (const { counts } of state.recent) {
      for (const [counter, n] of Object.entries(counts)) sums[counter] = (sums[counter] ?? 0) + n
    }
    return Object.fromEntries(Object.entries(sums).map(([counter, n]) => [counter, n / seconds]))
  }
}

const formatDepth = (depth: number) =>
  depth >= QUEUE_DEPTH_CAP ? `${QUEUE_DEPTH_CAP.toLocaleString("en-US")}+` : depth.toLocaleString("en-US")

const formatLag = (ms: number) =>
  ms < 1000 ? `${ms}ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms / 60_000)}m`

export const jobLine = (store: WorkerStatsStore, job: string, now: number): string => {
  const rates = store.rates(job, now)
  const state = store.jobs.get(job)!
  const counters = (jobCounters[job] ?? Object.keys(state.totals)).map((counter) =>
    `${counter} ${(rates[counter] ?? 0).toFixed(1)}/s (${(state.totals[counter] ?? 0).toLocaleString("en-US")})`
  )
  const queue = state.queue === null ? "" : `  queue ${formatDepth(state.queue.depth)}  lag ${formatLag(state.queue.lagMs)}`
  return `${job.padEnd(15)} ${counters.join("  ")}${queue}`
}

export const WorkerLiveView = (props: {
  readonly store: WorkerStatsStore
  readonly interactive: boolean
  readonly onQuit: () => void
}) => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 500)
    return () => clearInterval(timer)
  }, [])
  useInput((input, key) => {
    if (input === "q" || (key.ctrl && input === "c")) props.onQuit()
  }, { isActive: props.interactive })
  return (
    <Box flexDirection="column">
      <Text bold>billing worker <Text dimColor>({props.interactive ? "q or Ctrl-C to stop" : "Ctrl-C to stop"})</Text></Text>
      {[...props.store.jobs.keys()].map((job) => <Text key={job}>{jobLine(props.store, job, now)}</Text>)}
    </Box>
  )
}

/** `worker --once`'s closing summary: per job, per organisation. */
export const WorkerSummary = (props: { readonly summaries: ReadonlyArray<JobSummary>; readonly handled: number }) => (
  <Box flexDirection="column">
    <Text bold>Worker drained {props.handled} item(s).</Text>
    {props.summaries.map((summary) => (
      <Box key={summary.job} flexDirection="column">
        <Text>
          {summary.job}: {summary.handled === 0 ? "nothing to do" : `${summary.handled} in ${summary.batches} batch(es)`}
        </Text>
        {Object.entries(summary.byOrganization).map(([organizationId, counts]) => (
          <Text key={organizationId}>
            {"  "}{organizationId}  {Object.entries(counts).map(([counter, n]) => `${counter} ${n}`).join("  ")}
          </Text>
        ))}
      </Box>
    ))}
  </Box>
)
