/**
 * The command commander is running now, so that an error found deep inside
 * its effect can be told in the words of that command's flags.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import type { Command } from "commander"

interface Slot {
  command?: Command
  /** `--json` runs: what commander writes on stderr is held here, to be told as one JSON document. */
  commanderErrors?: Array<string>
}

const storage = new AsyncLocalStorage<Slot>()

export const withActiveCommandSlot = <A>(f: () => A, options: { readonly holdCommanderErrors?: boolean } = {}): A =>
  storage.run(options.holdCommanderErrors === true ? { commanderErrors: [] } : {}, f)

/** Holds `text` when the run holds commander's errors; false when the caller should write it. */
export const holdCommanderError = (text: string): boolean => {
  const held = storage.getStore()?.commanderErrors
  if (held === undefined) return false
  held.push(text)
  return true
}

/** What commander wrote on stderr in a run that holds its errors. */
export const heldCommanderErrors = (): ReadonlyArray<string> | undefined => storage.getStore()?.commanderErrors

export const setActiveCommand = (command: Command): void => {
  const slot = storage.getStore()
  if (slot) slot.command = command
}

export const activeCommand = (): Command | undefined => storage.getStore()?.command
