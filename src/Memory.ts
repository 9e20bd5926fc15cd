/**
 * Keeps a long-running worker's resident memory flat. A batch's rows live for
 * the whole batch, so they outlive young-generation collections and are
 * promoted; V8 then lets the old generation grow to several times the live
 * heap before it collects it, and resident memory climbs in a sawtooth. A full
 * collection between batches, every `everyItems` items, bounds it at a small
 * cost (the live heap is tens of MB: a collection takes tens of ms).
 *
 * Where the runtime does not let us reach the collector (Deno's node:v8 may
 * refuse the flag), this does nothing.
 *
 * The collector is the process's, not the worker's: the signal processor
 * collects between batches, `serve` once at start (src/HeapGrowth.ts).
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"

const collector = (() => {
  try {
    v8.setFlagsFromString("--expose-gc")
    const gc: unknown = vm.runInNewContext("gc")
    return typeof gc === "function" ? (gc as () => void) : undefined
  } catch {
    return undefined
  }
})()

/** Counts handled items and collects once `everyItems` have passed since the last collection. */
export const periodicCollection = (everyItems: number) => {
  let sinceLast = 0
  return (handled: number): void => {
    sinceLast += handled
    if (sinceLast < everyItems || collector === undefined) return
    sinceLast = 0
    collector()
  }
}

/** One full collection now, where the runtime lets us reach the collector. */
export const collectGarbage = (): void => collector?.()
