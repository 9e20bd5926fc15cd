/**
 * A view as text, once: what a command prints when it is done. Loaded only by
 * commands that print a view (cli/run.ts), so `--json` runs never load Ink.
 */
import { stripVTControlCharacters } from "node:util"
import type { ReactElement } from "react"
import { outputMode, terminalColumns } from "../Output.ts"
import { loadInk } from "./ink.ts"

const { renderToString } = await loadInk()

const plainAt = (view: ReactElement, columns: number) =>
  stripVTControlCharacters(renderToString(view, { columns })).split("\n").map((line) => line.trimEnd()).join("\n")

/**
 * Renders a view as text for the current output: fitted to a terminal, or
 * plain with no escape codes and no line wrapped. Ink lays text out in a grid
 * as wide as `columns` (its cost grows with the width), so a plain view is
 * rendered at a width that is then doubled: when twice the width lays out the
 * same text, nothing was wrapped.
 */
export const renderView = (view: ReactElement): string => {
  if (outputMode({}) === "tty") return renderToString(view, { columns: terminalColumns() })
  let columns = 256
  let text = plainAt(view, columns)
  for (;;) {
    const wider = plainAt(view, columns * 2)
    if (wider === text) return text
    columns *= 2
    text = wider
  }
}
