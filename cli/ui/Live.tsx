/** What a person sees while something runs: progress bars and live, refreshed views. */
import { Effect } from "effect"
import { Box, render, Text } from "ink"
import type { ReactElement } from "react"

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

/** A live Ink progress bar for a person, shown from the first step; nothing at all under --json. */
export const progressReporter = (quiet: boolean | undefined, label: string) => {
  let instance: ReturnType<typeof render> | undefined
  return {
    update: (done: number, total: number) => {
      if (quiet) return
      const bar = <ProgressBar done={done} total={total} label={label} />
      if (instance) instance.rerender(bar)
      else instance = render(bar)
    },
    stop: () => instance?.unmount()
  }
}

/** Resolves on Ctrl-C: SIGINT or SIGTERM, or Ink's own Ctrl-C handling when stdin is a terminal. */
const stopRequested = (instance: ReturnType<typeof render>) =>
  Effect.raceFirst(
    Effect.async<void>((resume) => {
      const stop = () => resume(Effect.void)
      process.once("SIGINT", stop)
      process.once("SIGTERM", stop)
      return Effect.sync(() => {
        process.off("SIGINT", stop)
        process.off("SIGTERM", stop)
      })
    }),
    Effect.promise(() => instance.waitUntilExit())
  )

/** A live view: `load` re-read every `seconds` and shown by `view` until the operator stops it. */
export const watch = <A, E, R>(
  load: Effect.Effect<A, E, R>,
  view: (value: A, at: Date) => ReactElement,
  seconds: number
) =>
  Effect.acquireUseRelease(
    Effect.flatMap(load, (first) => Effect.sync(() => render(view(first, new Date())))),
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

