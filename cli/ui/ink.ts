/**
 * Ink's Box and Text for the views of one-shot commands, without loading Ink
 * until something is rendered. Ink (React's reconciler, the Yoga layout engine
 * in WebAssembly) took 0.13 s of a `--json` command's start in a CPU profile
 * (docs/benchmarks.md); a `--json` run, which
 * renders nothing, should not pay it. Whatever renders (cli/ui/renderView.ts,
 * cli/ui/Live.tsx, the worker's live view) calls `loadInk` first, and these
 * components render through the Ink it loaded.
 */
import type * as Ink from "ink"
import { createElement, type ComponentProps } from "react"

let ink: typeof Ink | undefined

/** Ink itself, loaded once. */
export const loadInk = async (): Promise<typeof Ink> => (ink ??= await import("ink"))

const loaded = (): typeof Ink => {
  if (ink === undefined) throw new Error("Ink rendered before loadInk()")
  return ink
}

export const Box = (props: ComponentProps<typeof Ink.Box>) => createElement(loaded().Box, props)

export const Text = (props: ComponentProps<typeof Ink.Text>) => createElement(loaded().Text, props)
