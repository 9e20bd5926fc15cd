/**
 * Bounds how far V8 lets the old generation grow past the live heap before it
 * collects it. A serving process keeps a live heap of tens of MB, but requests
 * in flight outlive young-generation collections and are promoted, and V8's
 * default lets old space grow to several times the live heap between major
 * collections: resident memory climbs in a sawtooth to hundreds of MB.
 *
 * `--heap-growing-percent` is read by V8 at every collection, so setting it at
 * run time takes effect (unlike `--max-old-space-size`, fixed when the heap is
 * made). It sets no hard limit: a burst that needs more heap gets it, and
 * nothing dies of an out-of-memory error; collections just come sooner, and
 * V8 runs them incrementally and concurrently.
 *
 * The limit it sets is recomputed at each major collection; V8's first one
 * comes late (its initial old-space limit is generous), so one is run at once.
 *
 * `keepAllocationsYoung` turns off V8's allocation-site pretenuring for the
 * same reason: see there.
 *
 * Where the runtime refuses V8 flags (Deno's node:v8), these do nothing.
 */
import * as v8 from "node:v8"
import { collectGarbage } from "./Memory.ts"

/** The old generation may grow to (1 + percent/100) × the live heap before a major collection; 0 leaves V8's default. */
export const limitHeapGrowth = (percent: number): void => {
  if (!Number.isInteger(percent) || percent <= 0) return
  try {
    v8.setFlagsFromString(`--heap-growing-percent=${percent}`)
    collectGarbage()
  } catch {
    // a runtime without V8 flags keeps its own defaults
  }
}

/**
 * Turns off allocation-site pretenuring. V8 allocates straight into the old
 * generation at a site whose objects have often survived a young collection.
 * Under intake load the requests in flight do survive one, so their sites
 * were pretenured and every later request's objects went to the old
 * generation: far more of it filled between young collections, more
 * old-generation collections, and intake's p99 often over its target. Off,
 * little reaches the old generation and the p99 stays under it run after run
 * (docs/benchmarks.md, "Intake without fibers"). V8 reads the flag when it
 * weighs a site's feedback, at each young collection, so setting it before
 * serving takes effect.
 */
export const keepAllocationsYoung = (): void => {
  try {
    v8.setFlagsFromString("--no-allocation-site-pretenuring")
  } catch {
    // a runtime without V8 flags keeps its own defaults
  }
}
