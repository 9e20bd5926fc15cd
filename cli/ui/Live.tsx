/**
 * What a person sees while something runs: progress bars and live, refreshed
 * views. Only in a terminal (cli/Output.ts): on a pipe, with NO_COLOR or
 * --json there is no progress bar, and a watched view is printed as plain
 * snapshots one after another instead of being redrawn in place.
 */
import { Effect } from "effect"
import type { ReactElement } from "react"
import { cliIo, isInteractive, writeOut } from "../Output.ts"
import { loadInk } from "./ink.ts"
import { renderView } from "./renderView.ts"

// A live view is Ink's from its first frame: loaded with this module.
const { Box, render, Text } = await loadInk()

/** Ink on the running command's streams (not necessarily the process's). */
const renderLive = (view: ReactElement) =>
  render(view, {
    stdout: cliIo().stdout as NodeJS.WriteStream,
    stderr: cliIo().stderr as NodeJS.WriteStream,
    patchConsole: false
  })

export const ProgressBar = (props: { readonly done: number; readonly total: number; readonly label: string }) => {
  const width = 30
  const filled = props.total === 0 ? width : Math.round((props.done / props.total) * width)
  return (
    <Box>
      <Text color="green">{"█".repeat(filled)}</Text>
      <Text dimColor>{"░".repeat(width - filled)}</Text>
      <Text> {props.done}/{props.total} {props.label}</Text>
    </Box>
  )
}

/** A live Ink progress bar for a person in a terminal, shown from the first step; nothing at all otherwise. */
export const progressReporter = (options: { readonly json?: boolean | undefined }, label: string) => {
  const shown = isInteractive(options)
  let instance: ReturnType<typeof render> | undefined
  return {
    update: (done: number, total: number) => {
      if (!shown) return
      const bar = <ProgressBar done={done} total={total} label={label} />
      if (instance) instance.rerender(bar)
      else instance = renderLive(bar)
    },
    stop: () => instance?.unmount()
  }
}

const signalled = Effect.async<void>((resume) => {
  const stop = () => resume(Effect.void)
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  return Effect.sync(() => {
    process.off("SIGINT", stop)
    process.off("SIGTERM", stop)
  })
})

/** Resolves on Ctrl-C: SIGINT or SIGTERM, or Ink's own Ctrl-C handling when stdin is a terminal. */
const stopRequested = (instance: ReturnType<typeof render>) =>
  Effect.raceFirst(signalled, Effect.promise(() => instance.waitUntilExit()))

/** A live view: `load` re-read every `seconds` and shown by `view` until the operator stops it. */
export const watch = <A, E, R>(
  load: Effect.Effect<A, E, R>,
  view: (value: A, at: Date) => ReactElement,
  seconds: number
) => isInteractive({}) ? watchLive(load, view, seconds) : watchPlain(load, view, seconds)

/** Off a terminal: one plain snapshot per refresh, separated by a blank line, until stopped. */
const watchPlain = <A, E, R>(
  load: Effect.Effect<A, E, R>,
  view: (value: A, at: Date) => ReactElement,
  seconds: number
) => {
  const print = Effect.flatMap(load, (value) => Effect.sync(() => writeOut(`${renderView(view(value, new Date()))}\n\n`)))
  return Effect.raceFirst(
    Effect.zipRight(print, Effect.forever(Effect.zipRight(Effect.sleep(seconds * 1000), print))),
    signalled
  )
}

const watchLive = <A, E, R>(
  load: Effect.Effect<A, E, R>,
  view: (value: A, at: Date) => ReactElement,
  seconds: number
) =>
  Effect.acquireUseRelease(
    Effect.flatMap(load, (first) => Effect.sync(() => renderLive(view(first, new Date())))),
    (instance) =>
      Effect.raceFirst(
        Effect.forever(
          Effect.zipRight(
            Effect.sleep(seconds * 1000),
            Effect.tap(load, (value) => Effect.sync(() => instance.rerender(view(value, new Date()))))
          )
        ),
        stopRequested(instance)
      ),
    (instance) => Effect.sync(() => instance.unmount())
  )

