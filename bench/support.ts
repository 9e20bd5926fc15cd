/** What the benchmarks share: a bounded-concurrency load runner with latency percentiles. */

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

/** Runs `count` tasks `concurrency` at a time; the rate per second, per-task latency percentiles in ms, and the elapsed seconds. */
export const load = async (count: number, concurrency: number, task: (index: number) => Promise<void>) => {
  const latencies = new Array<number>(count)
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const index = next++
      const t0 = performance.now()
      await task(index)
      latencies[index] = performance.now() - t0
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const sorted = [...latencies].sort((a, b) => a - b)
  return { rate: Math.round(count / seconds), p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), seconds }
}
