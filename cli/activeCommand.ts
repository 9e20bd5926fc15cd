/**
 * The command commander is running now, so that an error found deep inside
 * its effect can be told in the words of that command's flags.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import type { Command } from "commander"

const storage = new AsyncLocalStorage<{ command?: Command }>()

export const withActiveCommandSlot = <A>(f: () => A): A => storage.run({}, f)

export const setActiveCommand = (command: Command): void => {
  const slot = storage.getStore()
  if (slot) slot.command = command
}

export const activeCommand = (): Command | undefined => storage.getStore()?.command
